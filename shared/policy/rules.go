package policy

import (
	"regexp"
	"strings"
)

// rule is one compiled policy rule. A read_only rule is a permission: it
// applies only when every condition is shown to hold, so anything the
// classifier cannot see (an expansion, a glob that could be an option) makes
// it not apply. A config_mutation or destructive rule is a trigger: it applies
// unless a condition is shown to fail, so anything unknown makes it apply.
type rule struct {
	name, reason string
	class        Class

	programs  []string
	progGlobs []string
	// subcommands are alternative leading positional paths; each element is a
	// list of alternatives, each possibly with '*' wildcards.
	subcommands [][][]string

	denyOpts, allowOpts, requireOpts           []string
	optValues, denyOptValues, requireOptValues []optValues
	minArgs, maxArgs                           int
	firstArg, args, requireArgs, denyArgs      []*regexp.Regexp
	conditional                                bool
	match, notMatch                            []string
}

type optValues struct {
	name string
	res  []*regexp.Regexp
}

// glob matches s against a pattern whose only special character is '*'.
func glob(pattern, s string) bool {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return pattern == s
	}
	if !strings.HasPrefix(s, pattern[:star]) {
		return false
	}
	s, pattern = s[len(pattern[:star]):], pattern[star+1:]
	for {
		star = strings.IndexByte(pattern, '*')
		if star < 0 {
			return strings.HasSuffix(s, pattern)
		}
		j := strings.Index(s, pattern[:star])
		if j < 0 {
			return false
		}
		s, pattern = s[j+star:], pattern[star+1:]
	}
}

func matchAlt(alts []string, s string) bool {
	for _, a := range alts {
		if glob(a, s) {
			return true
		}
	}
	return false
}

func anyRE(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// applies reports whether the rule applies to the parsed command line.
func (r *rule) applies(c *cmdline) bool {
	if r.class == ReadOnly {
		return r.permits(c)
	}
	return r.triggers(c)
}

// permits: every condition must be shown to hold.
func (r *rule) permits(c *cmdline) bool {
	if !r.conditional {
		return true
	}
	if c.dyn || c.flagLike {
		return false
	}
	rest, ok := r.matchSubcommand(c.pos, false)
	if !ok {
		return false
	}
	for _, o := range c.opts {
		for _, d := range r.denyOpts {
			if optionMatches(o.name, d) {
				return false
			}
		}
		if len(r.allowOpts) > 0 && !containsExact(r.allowOpts, o.name) {
			return false
		}
		for _, ov := range r.optValues {
			if optionMatches(o.name, ov.name) && (!o.hasValue || o.valueDyn || !anyRE(ov.res, o.value)) {
				return false
			}
		}
		for _, ov := range r.denyOptValues {
			if optionMatches(o.name, ov.name) && (o.valueDyn || anyRE(ov.res, o.value)) {
				return false
			}
		}
	}
	if len(r.requireOpts) > 0 && !hasOpt(c.opts, r.requireOpts) {
		return false
	}
	if len(r.requireOptValues) > 0 && !hasOptValue(c.opts, r.requireOptValues) {
		return false
	}
	if r.minArgs >= 0 && len(rest) < r.minArgs {
		return false
	}
	if r.maxArgs >= 0 && len(rest) > r.maxArgs {
		return false
	}
	if len(r.firstArg) > 0 && (len(rest) == 0 || !anyRE(r.firstArg, rest[0].val)) {
		return false
	}
	for _, w := range rest {
		if len(r.args) > 0 && !anyRE(r.args, w.val) {
			return false
		}
		if anyRE(r.denyArgs, w.val) {
			return false
		}
	}
	if len(r.requireArgs) > 0 {
		found := false
		for _, w := range rest {
			if anyRE(r.requireArgs, w.val) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// triggers: the rule applies unless a condition is shown to fail. An argument
// only known at run time may be any option or path, so it satisfies every
// requirement; only literal text can rule the trigger out.
func (r *rule) triggers(c *cmdline) bool {
	rest, ok := r.matchSubcommand(c.pos, true)
	if !ok {
		return false
	}
	for _, o := range c.opts {
		for _, d := range r.denyOpts {
			if optionMatches(o.name, d) {
				return false
			}
		}
		if len(r.allowOpts) > 0 && !containsExact(r.allowOpts, o.name) {
			return false
		}
		for _, ov := range r.optValues {
			if optionMatches(o.name, ov.name) && o.hasValue && !o.valueDyn && !anyRE(ov.res, o.value) {
				return false
			}
		}
		for _, ov := range r.denyOptValues {
			if optionMatches(o.name, ov.name) && o.hasValue && !o.valueDyn && anyRE(ov.res, o.value) {
				return false
			}
		}
	}
	if len(r.requireOpts) > 0 && !c.flagLike && !hasOpt(c.opts, r.requireOpts) {
		return false
	}
	if len(r.requireOptValues) > 0 && !c.dyn && !hasOptValue(c.opts, r.requireOptValues) {
		return false
	}
	if r.minArgs >= 0 && len(rest) < r.minArgs && !c.dyn {
		return false
	}
	if r.maxArgs >= 0 && len(rest) > r.maxArgs {
		return false
	}
	if len(r.firstArg) > 0 {
		if len(rest) == 0 && !c.dyn {
			return false
		}
		if len(rest) > 0 && !rest[0].dyn && !anyRE(r.firstArg, rest[0].val) {
			return false
		}
	}
	for _, w := range rest {
		if w.dyn {
			continue
		}
		if len(r.args) > 0 && !anyRE(r.args, w.val) {
			return false
		}
		if anyRE(r.denyArgs, w.val) {
			return false
		}
	}
	if len(r.requireArgs) > 0 && !c.dyn {
		found := false
		for _, w := range rest {
			if anyRE(r.requireArgs, w.val) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// matchSubcommand matches the leading positional words against the rule's
// subcommand paths and returns the words after the path. For a trigger, a word
// only known at run time matches any element.
func (r *rule) matchSubcommand(pos []word, trigger bool) ([]word, bool) {
	if len(r.subcommands) == 0 {
		return pos, true
	}
	for _, path := range r.subcommands {
		if len(pos) < len(path) {
			continue
		}
		ok := true
		for i, alts := range path {
			w := pos[i]
			if w.dyn && trigger {
				continue
			}
			if w.dyn || !matchAlt(alts, w.val) {
				ok = false
				break
			}
		}
		if ok {
			return pos[len(path):], true
		}
	}
	return nil, false
}

func containsExact(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

func hasOpt(opts []option, want []string) bool {
	for _, o := range opts {
		for _, w := range want {
			if optionMatches(o.name, w) {
				return true
			}
		}
	}
	return false
}

func hasOptValue(opts []option, want []optValues) bool {
	for _, o := range opts {
		for _, ov := range want {
			if optionMatches(o.name, ov.name) && o.hasValue && (o.valueDyn || anyRE(ov.res, o.value)) {
				return true
			}
		}
	}
	return false
}
