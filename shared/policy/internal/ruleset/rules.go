package ruleset

import (
	"github.com/oikos-hq/oikos/shared/policy/internal/shellword"
	"path"
	"regexp"
	"slices"
	"strings"
)

// Rule is one compiled policy rule. A read_only rule is a permission: it
// applies only when every condition is shown to hold, so anything the
// classifier cannot see (an expansion, a glob that could be an option) makes
// it not apply. A config_mutation or destructive rule is a trigger: it applies
// unless a condition is shown to fail, so anything unknown makes it apply.
type Rule struct {
	Name, Reason string
	Class        Class
	// principle names the principle the rule belongs to ("storage",
	// "retention", "exfiltration"; "" for the rest): explanations lead
	// with it, so an operator reading an approval sees why.
	principle string

	programs  []string
	progGlobs []string
	// subcommands are alternative leading positional paths; each element is a
	// list of alternatives, each possibly with '*' wildcards.
	subcommands [][][]string

	denyOpts, allowOpts, requireOpts           []string
	optValues, denyOptValues, requireOptValues []optValues
	minArgs, maxArgs                           int
	firstArg, args, requireArgs, denyArgs      []*regexp.Regexp
	// lastArg: the last positional word must match (a destination: cp a
	// /etc/passwd writes over passwd, cp /etc/passwd /tmp reads it).
	lastArg []*regexp.Regexp
	// endOfOptions: the command line must contain `--` (git checkout --
	// file discards changes; git checkout main switches branches).
	endOfOptions bool
	// sqlOpts: options whose values are SQL; a read_only rule with them
	// applies only when one is present and every one is read-only SQL.
	sqlOpts         []string
	conditional     bool
	match, notMatch []string
	// known holds every option name the rule lists. A program takes an
	// option it has by its exact name, so a name the rule knows is never
	// read as an abbreviation of a longer one (tar --list is not
	// --listed-incremental).
	known map[string]bool
}

// is reports whether the parsed option have means the listed option want,
// for this rule (see known and OptionMatches).
func (r *Rule) is(have, want string) bool {
	if have == want {
		return true
	}
	if r.known[have] {
		return false
	}
	return shellword.OptionMatches(have, want)
}

type optValues struct {
	name string
	res  []*regexp.Regexp
}

// AnyRE reports whether one of res matches s.
func AnyRE(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// applies reports whether the rule applies to the parsed command line.
func (r *Rule) applies(c *shellword.Cmdline) bool {
	if r.Class == ReadOnly {
		return r.permits(c)
	}
	return r.triggers(c)
}

// permits: every condition must be shown to hold.
func (r *Rule) permits(c *shellword.Cmdline) bool {
	if !r.conditional {
		return true
	}
	if c.Dyn || c.FlagLike {
		return false
	}
	rest, ok := r.matchSubcommand(c.Pos, false)
	if !ok {
		return false
	}
	if r.optionsRuleOut(c.Opts, false) {
		return false
	}
	if len(r.requireOpts) > 0 && !r.hasOpt(c.Opts, r.requireOpts) {
		return false
	}
	if len(r.requireOptValues) > 0 && !r.hasOptValue(c.Opts, r.requireOptValues) {
		return false
	}
	if r.minArgs >= 0 && len(rest) < r.minArgs {
		return false
	}
	if r.maxArgs >= 0 && len(rest) > r.maxArgs {
		return false
	}
	if len(r.firstArg) > 0 && (len(rest) == 0 || !AnyRE(r.firstArg, rest[0].Val)) {
		return false
	}
	for _, w := range rest {
		if len(r.args) > 0 && !AnyRE(r.args, w.Val) {
			return false
		}
		if AnyRE(r.denyArgs, w.Val) {
			return false
		}
	}
	if len(r.requireArgs) > 0 {
		found := false
		for _, w := range rest {
			if AnyRE(r.requireArgs, w.Val) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if len(r.lastArg) > 0 && (len(rest) == 0 || !AnyRE(r.lastArg, rest[len(rest)-1].Val)) {
		return false
	}
	if r.endOfOptions && !c.EndOpts {
		return false
	}
	if len(r.sqlOpts) > 0 {
		found := false
		for _, o := range c.Opts {
			if !r.isAny(o.Name, r.sqlOpts) {
				continue
			}
			if !o.HasValue || o.ValueDyn || !ReadOnlySQL(o.Value) {
				return false
			}
			found = true
		}
		if !found {
			return false
		}
	}
	return true
}

// optionsRuleOut reports whether an option of the line shows the rule not to
// apply (see ruledOutBy).
func (r *Rule) optionsRuleOut(opts []shellword.Option, trigger bool) bool {
	for _, o := range opts {
		if r.ruledOutBy(o, trigger) {
			return true
		}
	}
	return false
}

// ruledOutBy reports whether one option shows the rule not to apply: it is
// denied, outside allow_flags, or its value is outside flag_values or inside
// deny_flag_values. For a permission (trigger false) every condition must be
// shown to hold, so a value that is missing or only known at run time rules
// the option out of flag_values, and one only known at run time may be in
// deny_flag_values; for a trigger only a literal value can rule it out.
func (r *Rule) ruledOutBy(o shellword.Option, trigger bool) bool {
	for _, d := range r.denyOpts {
		if r.is(o.Name, d) {
			return true
		}
	}
	if len(r.allowOpts) > 0 && !slices.Contains(r.allowOpts, o.Name) {
		return true
	}
	literal := o.HasValue && !o.ValueDyn
	for _, ov := range r.optValues {
		if r.is(o.Name, ov.name) && (literal && !AnyRE(ov.res, o.Value) || !literal && !trigger) {
			return true
		}
	}
	for _, ov := range r.denyOptValues {
		if !r.is(o.Name, ov.name) {
			continue
		}
		if trigger && literal && AnyRE(ov.res, o.Value) || !trigger && (o.ValueDyn || AnyRE(ov.res, o.Value)) {
			return true
		}
	}
	return false
}

// isAny reports whether the parsed option have is one of the listed options.
func (r *Rule) isAny(have string, want []string) bool {
	for _, w := range want {
		if r.is(have, w) {
			return true
		}
	}
	return false
}

// triggers: the rule applies unless a condition is shown to fail. An argument
// only known at run time may be any option or path, so it satisfies every
// requirement; only literal text can rule the trigger out.
func (r *Rule) triggers(c *shellword.Cmdline) bool {
	rest, ok := r.matchSubcommand(c.Pos, true)
	if !ok {
		return false
	}
	if r.optionsRuleOut(c.Opts, true) {
		return false
	}
	if len(r.requireOpts) > 0 && !c.FlagLike && !r.hasOpt(c.Opts, r.requireOpts) {
		return false
	}
	if len(r.requireOptValues) > 0 && !c.Dyn && !r.hasOptValue(c.Opts, r.requireOptValues) {
		return false
	}
	if r.minArgs >= 0 && len(rest) < r.minArgs && !c.Dyn {
		return false
	}
	if r.maxArgs >= 0 && len(rest) > r.maxArgs {
		return false
	}
	if len(r.firstArg) > 0 {
		if len(rest) == 0 && !c.Dyn {
			return false
		}
		if len(rest) > 0 && !rest[0].Dyn && !ArgMatches(r.firstArg, rest[0]) {
			return false
		}
	}
	for _, w := range rest {
		if w.Dyn {
			continue
		}
		if len(r.args) > 0 && !ArgMatches(r.args, w) {
			return false
		}
		if AnyRE(r.denyArgs, w.Val) {
			return false
		}
	}
	if len(r.requireArgs) > 0 && !c.Dyn {
		found := false
		for _, w := range rest {
			if ArgMatches(r.requireArgs, w) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if len(r.lastArg) > 0 && !c.Dyn {
		if len(rest) == 0 {
			return false
		}
		if last := rest[len(rest)-1]; !last.Dyn && !ArgMatches(r.lastArg, last) {
			return false
		}
	}
	if r.endOfOptions && !c.EndOpts && !c.Dyn {
		return false
	}
	return true
}

// anyPathRE is AnyRE for a trigger's positive conditions: an absolute path
// also matches in its cleaned form, so `chmod -R 777 /srv/../etc` or `/./`
// is recognised as /etc or /. A trigger may only match more, never less.
func anyPathRE(res []*regexp.Regexp, s string) bool {
	if AnyRE(res, s) {
		return true
	}
	if strings.HasPrefix(s, "/") {
		if clean := path.Clean(s); clean != s {
			return AnyRE(res, clean)
		}
	}
	return false
}

// globSamples are paths a trigger's glob argument is tried against: a glob
// such as /dev/sd? or /e* expands to whatever matches it on the machine, so
// it matches a destructive condition when it could name one of these.
var globSamples = []string{"/", "/etc", "/usr", "/var", "/home", "/root", "/boot", "/bin", "/sbin", "/lib",
	"/srv", "/opt", "/var/lib", "/usr/lib", "/dev/sda", "/dev/sda1", "/dev/vda", "/dev/vda1", "/dev/xvda",
	"/dev/nvme0n1", "/dev/nvme0n1p1", "/dev/mmcblk0", "/dev/mmcblk0p1", "/dev/md0", "/dev/dm-0", "/dev/zd0",
	"/dev/mapper/pve-root", "/dev/pve/vm-100-disk-0", "/dev/mem", "/proc/sysrq-trigger"}

// ArgMatches is anyPathRE for a word: a glob matches when one of the
// globSamples it could expand to does.
func ArgMatches(res []*regexp.Regexp, w shellword.Word) bool {
	if anyPathRE(res, w.Val) {
		return true
	}
	if w.Glob {
		for _, sample := range globSamples {
			if ok, _ := path.Match(w.Val, sample); ok && AnyRE(res, sample) {
				return true
			}
		}
	}
	return false
}

// matchSubcommand matches the leading positional words against the rule's
// subcommand paths and returns the words after the path. For a trigger, a word
// only known at run time matches any element.
func (r *Rule) matchSubcommand(pos []shellword.Word, trigger bool) ([]shellword.Word, bool) {
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
			if w.Dyn && trigger {
				continue
			}
			if w.Dyn || !shellword.MatchAlt(alts, w.Val) {
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

func (r *Rule) hasOpt(opts []shellword.Option, want []string) bool {
	for _, o := range opts {
		for _, w := range want {
			if r.is(o.Name, w) {
				return true
			}
		}
	}
	return false
}

func (r *Rule) hasOptValue(opts []shellword.Option, want []optValues) bool {
	for _, o := range opts {
		for _, ov := range want {
			if r.is(o.Name, ov.name) && o.HasValue && (o.ValueDyn || AnyRE(ov.res, o.Value)) {
				return true
			}
		}
	}
	return false
}

// Explain is the rule's part of an explanation: its principle and the
// program with the subcommand it matched ("storage: zpool create"), or the
// rule's name for a rule of no principle.
func (r *Rule) Explain(program string, c *shellword.Cmdline) string {
	if r.principle == "" {
		return "rule " + r.Name + ": " + program + " " + r.Reason
	}
	out := r.principle + ": " + program
	if len(r.subcommands) > 0 {
		if rest, ok := r.matchSubcommand(c.Pos, r.Class != ReadOnly); ok {
			for _, w := range c.Pos[:len(c.Pos)-len(rest)] {
				out += " " + w.Val
			}
		}
	}
	return out + " (" + r.Reason + ")"
}
