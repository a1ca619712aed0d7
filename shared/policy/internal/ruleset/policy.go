package ruleset

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/oikos-hq/oikos/shared/policy/internal/shellword"
	"go.yaml.in/yaml/v3"
)

//go:embed default_policy.yaml
var defaultPolicyYAML []byte

// ErrPolicy is wrapped by every error about a policy file: it does not parse,
// a rule is malformed, or one of its examples is classified differently from
// what the rule says.
var ErrPolicy = errors.New("policy")

// Set is a compiled rule set. It is immutable once built and safe for
// concurrent use.
type Set struct {
	rules      []*Rule
	byProgram  map[string][]*Rule
	globRules  []*Rule
	Grammars   map[string]*shellword.Grammar
	systemDirs map[string]bool
	hostOnly   map[string]bool
	// triggerPrograms are programs some destructive rule names: an unknown
	// program passing one of these as an argument is checked as if it ran it.
	triggerPrograms map[string]bool
	// CodeVars are variables whose value points at code programs load or
	// run (LD_PRELOAD, BASH_ENV …); CommandVars hold a command some program
	// runs (GIT_SSH_COMMAND, PAGER …).
	CodeVars, CommandVars map[string]bool
	// CodeVarGlobs are code_variables written with '*' (GIT_TRACE*, LD_*).
	CodeVarGlobs   []string
	SafeRedirects  []*regexp.Regexp
	DestructiveOut []*regexp.Regexp
	// protected are paths whose overwriting or truncation loses what the
	// operator cannot get back (/etc/shadow, /etc/pve/**, backups, logs,
	// databases): writing over one is destructive, writing elsewhere is not.
	Protected []*regexp.Regexp
	// runsArguments are programs (or program subcommands: docker run) that
	// pass their trailing arguments to another program, so a --help among
	// them is not theirs. An empty path stands for the whole program.
	runsArguments map[string][][]string
	// CodeDeletion finds, in an interpreter's literal code argument, a
	// call that deletes or truncates files (shutil.rmtree, unlink …).
	CodeDeletion *regexp.Regexp
	// credentials are the credential stores (shadow, private keys,
	// /etc/pve/priv, token files …): sending one off the machine is
	// destructive, because a leaked secret cannot be taken back.
	credentials []*regexp.Regexp
	// HintPrograms are the programs a destructive rule names, the wrappers
	// and the shells, sorted: a glob used as a program name (/???/rm) is
	// tried against each. HintRE finds one of them starting a command inside
	// an argument (python3 -c 'os.system("rm -rf /x")').
	HintPrograms []string
	HintRE       *regexp.Regexp
}

// DefaultSet compiles the embedded default policy. wrappers are the programs
// that run another command (the wrapper table's names), which the hints also
// try (see buildHints).
func Default(wrappers []string) (*Set, error) {
	spec, err := decodeSpec(defaultPolicyYAML, "default policy")
	if err != nil {
		return nil, err
	}
	return compile(spec, wrappers)
}

// LoadSet compiles the default policy extended by the operator policy file at
// path ("" means none). It does not verify the rules' examples: that needs
// the classifier (see Verify).
func Load(filePath string, wrappers []string) (*Set, error) {
	spec, err := decodeSpec(defaultPolicyYAML, "default policy")
	if err != nil {
		return nil, err
	}
	if filePath != "" {
		data, err := os.ReadFile(filePath)
		if err != nil {
			return nil, fmt.Errorf("%w: read operator policy: %w", ErrPolicy, err)
		}
		over, err := decodeSpec(data, filePath)
		if err != nil {
			return nil, err
		}
		if spec, err = mergeSpecs(spec, over); err != nil {
			return nil, fmt.Errorf("%w (%s)", err, filePath)
		}
	}
	return compile(spec, wrappers)
}

// Verify classifies every rule's match and not_match examples with classify,
// which returns the class and the names of every rule that applied, and
// reports each one that disagrees with its rule: a match example must be
// decided by the rule's class and the rule must apply to it; a not_match
// example must not be matched by the rule at all.
func (p *Set) Verify(classify func(command string) (Class, map[string]bool)) error {
	var errs []error
	for _, r := range p.rules {
		for _, ex := range r.match {
			class, matched := classify(ex)
			switch {
			case !matched[r.Name]:
				errs = append(errs, fmt.Errorf("%w: rule %q: example %q must match the rule, but it does not (classified %s)", ErrPolicy, r.Name, ex, class))
			case class != r.Class:
				errs = append(errs, fmt.Errorf("%w: rule %q: example %q matches the rule but classifies as %s, not %s", ErrPolicy, r.Name, ex, class, r.Class))
			}
		}
		for _, ex := range r.notMatch {
			if _, matched := classify(ex); matched[r.Name] {
				errs = append(errs, fmt.Errorf("%w: rule %q: example %q must not match the rule, but it does", ErrPolicy, r.Name, ex))
			}
		}
	}
	return errors.Join(errs...)
}

// fileSpec is the YAML form of a policy file; docs/policy.md documents it.
type fileSpec struct {
	Version                 int                     `yaml:"version"`
	Patterns                map[string]string       `yaml:"patterns"`
	SystemDirs              []string                `yaml:"system_dirs"`
	HostOnly                []string                `yaml:"host_only"`
	CodeVariables           []string                `yaml:"code_variables"`
	CommandVariables        []string                `yaml:"command_variables"`
	SafeRedirectTargets     []string                `yaml:"safe_redirect_targets"`
	DestructiveWriteTargets []string                `yaml:"destructive_write_targets"`
	ProtectedPaths          []string                `yaml:"protected_paths"`
	RunsArguments           []string                `yaml:"runs_arguments"`
	CodeDeletions           []string                `yaml:"code_deletions"`
	CredentialPaths         []string                `yaml:"credential_paths"`
	Programs                map[string]*programSpec `yaml:"programs"`
	Rules                   []*ruleSpec             `yaml:"rules"`
	Disable                 []string                `yaml:"disable"`
}

type programSpec struct {
	Style       string              `yaml:"style"`
	ValueFlags  []string            `yaml:"value_flags"`
	Subcommands map[string][]string `yaml:"subcommands"`
}

type ruleSpec struct {
	Name              string              `yaml:"name"`
	Class             string              `yaml:"class"`
	Principle         string              `yaml:"principle"`
	Reason            string              `yaml:"reason"`
	Program           string              `yaml:"program"`
	Programs          []string            `yaml:"programs"`
	Subcommands       []string            `yaml:"subcommands"`
	DenyFlags         []string            `yaml:"deny_flags"`
	AllowFlags        []string            `yaml:"allow_flags"`
	RequireFlags      []string            `yaml:"require_flags"`
	FlagValues        map[string][]string `yaml:"flag_values"`
	DenyFlagValues    map[string][]string `yaml:"deny_flag_values"`
	RequireFlagValues map[string][]string `yaml:"require_flag_values"`
	MinArgs           *int                `yaml:"min_args"`
	MaxArgs           *int                `yaml:"max_args"`
	FirstArg          []string            `yaml:"first_arg"`
	Args              []string            `yaml:"args"`
	RequireArgs       []string            `yaml:"require_args"`
	DenyArgs          []string            `yaml:"deny_args"`
	LastArg           []string            `yaml:"last_arg"`
	EndOfOptions      bool                `yaml:"require_end_of_options"`
	SQLReadOnly       []string            `yaml:"sql_read_only"`
	Match             []string            `yaml:"match"`
	NotMatch          []string            `yaml:"not_match"`
}

func decodeSpec(data []byte, name string) (*fileSpec, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s fileSpec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: parse %s: %w", ErrPolicy, name, err)
	}
	if s.Version != 1 {
		return nil, fmt.Errorf("%w: %s: version must be 1, got %d", ErrPolicy, name, s.Version)
	}
	return &s, nil
}

// mergeSpecs extends base by over: patterns and programs merge key by key,
// lists are extended, a rule with the name of an existing rule replaces it,
// and `disable` removes rules by name.
func mergeSpecs(base, over *fileSpec) (*fileSpec, error) {
	out := *base
	out.Patterns = map[string]string{}
	for k, v := range base.Patterns {
		out.Patterns[k] = v
	}
	for k, v := range over.Patterns {
		out.Patterns[k] = v
	}
	out.SystemDirs = appendNew(slices.Clone(base.SystemDirs), over.SystemDirs)
	out.HostOnly = appendNew(slices.Clone(base.HostOnly), over.HostOnly)
	out.CodeVariables = appendNew(slices.Clone(base.CodeVariables), over.CodeVariables)
	out.CommandVariables = appendNew(slices.Clone(base.CommandVariables), over.CommandVariables)
	out.SafeRedirectTargets = appendNew(slices.Clone(base.SafeRedirectTargets), over.SafeRedirectTargets)
	out.DestructiveWriteTargets = appendNew(slices.Clone(base.DestructiveWriteTargets), over.DestructiveWriteTargets)
	out.ProtectedPaths = appendNew(slices.Clone(base.ProtectedPaths), over.ProtectedPaths)
	out.RunsArguments = appendNew(slices.Clone(base.RunsArguments), over.RunsArguments)
	out.CodeDeletions = appendNew(slices.Clone(base.CodeDeletions), over.CodeDeletions)
	out.CredentialPaths = appendNew(slices.Clone(base.CredentialPaths), over.CredentialPaths)

	out.Programs = map[string]*programSpec{}
	for k, v := range base.Programs {
		cp := *v
		cp.Subcommands = map[string][]string{}
		for sk, sv := range v.Subcommands {
			cp.Subcommands[sk] = sv
		}
		out.Programs[k] = &cp
	}
	for k, v := range over.Programs {
		if v == nil {
			continue
		}
		cur, ok := out.Programs[k]
		if !ok {
			out.Programs[k] = v
			continue
		}
		if v.Style != "" {
			cur.Style = v.Style
		}
		cur.ValueFlags = appendNew(slices.Clone(cur.ValueFlags), v.ValueFlags)
		for sk, sv := range v.Subcommands {
			cur.Subcommands[sk] = appendNew(slices.Clone(cur.Subcommands[sk]), sv)
		}
	}

	out.Rules = slices.Clone(base.Rules)
	for _, r := range over.Rules {
		if r == nil {
			continue
		}
		i := slices.IndexFunc(out.Rules, func(b *ruleSpec) bool { return b.Name == r.Name })
		if i >= 0 {
			out.Rules[i] = r
		} else {
			out.Rules = append(out.Rules, r)
		}
	}
	for _, name := range over.Disable {
		i := slices.IndexFunc(out.Rules, func(b *ruleSpec) bool { return b.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("%w: disable: no rule named %q", ErrPolicy, name)
		}
		out.Rules = slices.Delete(out.Rules, i, i+1)
	}
	out.Disable = nil
	return &out, nil
}

func appendNew(dst, src []string) []string {
	for _, s := range src {
		if !slices.Contains(dst, s) {
			dst = append(dst, s)
		}
	}
	return dst
}

var placeholderRE = regexp.MustCompile(`\{\{([a-z0-9_]+)\}\}`)

// expandPatterns replaces {{name}} with the named pattern. A pattern may
// itself use other patterns, a few levels deep.
func expandPatterns(s string, patterns map[string]string) (string, error) {
	var missing string
	out := s
	for range 8 {
		if !placeholderRE.MatchString(out) {
			return out, nil
		}
		out = placeholderRE.ReplaceAllStringFunc(out, func(m string) string {
			name := m[2 : len(m)-2]
			v, ok := patterns[name]
			if !ok {
				missing = name
				return m
			}
			return v
		})
		if missing != "" {
			return "", fmt.Errorf("unknown pattern {{%s}}", missing)
		}
	}
	return "", fmt.Errorf("patterns in %q nest too deeply (or refer to each other)", s)
}

func compileRE(expr string, patterns map[string]string) (*regexp.Regexp, error) {
	e, err := expandPatterns(expr, patterns)
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(`^(?:` + e + `)$`)
	if err != nil {
		return nil, fmt.Errorf("regexp %q: %w", expr, err)
	}
	return re, nil
}

func compileREs(exprs []string, patterns map[string]string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for _, e := range exprs {
		re, err := compileRE(e, patterns)
		if err != nil {
			return nil, err
		}
		out = append(out, re)
	}
	return out, nil
}

// reList is a list of regular expressions in a policy file: its key, its
// source, and where it goes compiled.
type reList struct {
	key string
	dst *[]*regexp.Regexp
	src []string
}

// compileLists compiles each list in order; the error names the key of the
// first that fails.
func compileLists(lists []reList, patterns map[string]string) error {
	for _, l := range lists {
		var err error
		if *l.dst, err = compileREs(l.src, patterns); err != nil {
			return fmt.Errorf("%s: %w", l.key, err)
		}
	}
	return nil
}

func compileOptValues(m map[string][]string, patterns map[string]string) ([]optValues, error) {
	var out []optValues
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		res, err := compileREs(m[k], patterns)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out = append(out, optValues{name: k, res: res})
	}
	return out, nil
}

func compile(s *fileSpec, wrappers []string) (*Set, error) {
	p := &Set{
		byProgram:       map[string][]*Rule{},
		Grammars:        map[string]*shellword.Grammar{},
		systemDirs:      map[string]bool{},
		hostOnly:        map[string]bool{},
		triggerPrograms: map[string]bool{},
		CodeVars:        map[string]bool{},
		CommandVars:     setOf(s.CommandVariables),
		runsArguments:   map[string][][]string{},
	}
	for _, ra := range s.RunsArguments {
		f := strings.Fields(ra)
		if len(f) == 0 {
			return nil, fmt.Errorf("%w: runs_arguments: empty entry", ErrPolicy)
		}
		p.runsArguments[f[0]] = append(p.runsArguments[f[0]], f[1:])
	}
	for _, v := range s.CodeVariables {
		if strings.IndexByte(v, '*') >= 0 {
			p.CodeVarGlobs = append(p.CodeVarGlobs, v)
		} else {
			p.CodeVars[v] = true
		}
	}
	for _, d := range s.SystemDirs {
		p.systemDirs[path.Clean(d)] = true
	}
	for _, h := range s.HostOnly {
		p.hostOnly[h] = true
	}
	// protected_paths become the pattern {{protected_path}}, so rules name
	// them (cp's destination, sort -o) and redirections check them.
	patterns := make(map[string]string, len(s.Patterns)+1)
	for k, v := range s.Patterns {
		patterns[k] = v
	}
	if _, ok := patterns["protected_path"]; ok {
		return nil, fmt.Errorf("%w: patterns: protected_path is derived from protected_paths and cannot be set", ErrPolicy)
	}
	patterns["protected_path"] = "(?:" + strings.Join(s.ProtectedPaths, ")|(?:") + ")"
	if len(s.ProtectedPaths) == 0 {
		patterns["protected_path"] = "$.^" // matches nothing
	}
	var err error
	if p.Protected, err = compileREs(s.ProtectedPaths, patterns); err != nil {
		return nil, fmt.Errorf("%w: protected_paths: %w", ErrPolicy, err)
	}
	if len(s.CodeDeletions) > 0 {
		if p.CodeDeletion, err = regexp.Compile("(?:" + strings.Join(s.CodeDeletions, ")|(?:") + ")"); err != nil {
			return nil, fmt.Errorf("%w: code_deletions: %w", ErrPolicy, err)
		}
	}
	if err := compileLists([]reList{
		{"credential_paths", &p.credentials, s.CredentialPaths},
		{"safe_redirect_targets", &p.SafeRedirects, s.SafeRedirectTargets},
		{"destructive_write_targets", &p.DestructiveOut, s.DestructiveWriteTargets},
	}, patterns); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPolicy, err)
	}
	for name, ps := range s.Programs {
		if ps == nil {
			continue
		}
		g := &shellword.Grammar{Levels: map[string]map[string]bool{"": setOf(ps.ValueFlags)}}
		switch ps.Style {
		case "", "gnu":
		case "words":
			g.Words = true
		default:
			return nil, fmt.Errorf("%w: program %q: style must be gnu or words, got %q", ErrPolicy, name, ps.Style)
		}
		for path, flags := range ps.Subcommands {
			g.Levels[strings.Join(strings.Fields(path), " ")] = setOf(flags)
		}
		p.Grammars[name] = g
	}
	seen := map[string]bool{}
	for i, rs := range s.Rules {
		if rs == nil {
			return nil, fmt.Errorf("%w: rule %d is empty", ErrPolicy, i)
		}
		r, err := compileRule(rs, patterns)
		if err != nil {
			return nil, fmt.Errorf("%w: rule %q: %w", ErrPolicy, rs.Name, err)
		}
		if seen[r.Name] {
			return nil, fmt.Errorf("%w: rule %q is defined twice", ErrPolicy, r.Name)
		}
		seen[r.Name] = true
		p.rules = append(p.rules, r)
		for _, prog := range r.programs {
			p.byProgram[prog] = append(p.byProgram[prog], r)
			if r.Class == Destructive {
				p.triggerPrograms[prog] = true
			}
		}
		if len(r.progGlobs) > 0 {
			p.globRules = append(p.globRules, r)
		}
	}
	p.buildHints(wrappers)
	return p, nil
}

// buildHints derives HintPrograms and HintRE from the compiled rules and the
// wrappers.
func (p *Set) buildHints(wrappers []string) {
	names := map[string]bool{}
	for n := range p.triggerPrograms {
		names[n] = true
	}
	for _, n := range wrappers {
		names[n] = true
	}
	var alts []string
	for n := range names {
		p.HintPrograms = append(p.HintPrograms, n)
		alts = append(alts, regexp.QuoteMeta(n))
	}
	for _, r := range p.globRules {
		if r.Class != Destructive {
			continue
		}
		for _, g := range r.progGlobs {
			alts = append(alts, strings.ReplaceAll(regexp.QuoteMeta(g), `\*`, `[^\s;|&'"()`+"`"+`]*`))
		}
	}
	slices.Sort(p.HintPrograms)
	// Longer names first, so that `mkfs.ext4` is not cut to `mkfs`.
	slices.SortFunc(alts, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	if len(alts) == 0 {
		return
	}
	p.HintRE, _ = regexp.Compile("(?:^|[\\s=!|&;({'\"`:])(?:/(?:usr/)?s?bin/)?(" + strings.Join(alts, "|") + ")(?:[\\s;|&)'\"`]|$)")
	// A name is quoted, so compiling cannot fail; were it to, hints are
	// only lost, never a class lowered.
}

func setOf(ss []string) map[string]bool {
	m := make(map[string]bool, len(ss))
	for _, s := range ss {
		m[s] = true
	}
	return m
}

func compileRule(rs *ruleSpec, patterns map[string]string) (*Rule, error) {
	if rs.Name == "" {
		return nil, errors.New("a rule needs a name")
	}
	r := &Rule{Name: rs.Name, Reason: rs.Reason, minArgs: -1, maxArgs: -1,
		match: rs.Match, notMatch: rs.NotMatch, principle: rs.Principle}
	switch rs.Principle {
	case "", "storage", "retention", "exfiltration":
	default:
		return nil, fmt.Errorf("principle must be storage, retention or exfiltration, got %q", rs.Principle)
	}
	switch c := Class(rs.Class); c {
	case ReadOnly, ConfigMutation, Destructive:
		r.Class = c
	default:
		return nil, fmt.Errorf("class must be read_only, config_mutation or destructive, got %q", rs.Class)
	}
	if r.Reason == "" {
		r.Reason = "matches rule " + rs.Name
	}
	progs := rs.Programs
	if rs.Program != "" {
		progs = append([]string{rs.Program}, progs...)
	}
	if len(progs) == 0 {
		return nil, errors.New("a rule needs program or programs")
	}
	for _, pr := range progs {
		if strings.ContainsAny(pr, "/ \t") || pr == "" {
			return nil, fmt.Errorf("program %q must be a bare name", pr)
		}
		if strings.Contains(pr, "*") {
			r.progGlobs = append(r.progGlobs, pr)
		} else {
			r.programs = append(r.programs, pr)
		}
	}
	for _, sc := range rs.Subcommands {
		e, err := expandPatterns(sc, patterns)
		if err != nil {
			return nil, fmt.Errorf("subcommand %q: %w", sc, err)
		}
		elems := strings.Fields(e)
		if len(elems) == 0 {
			return nil, errors.New("empty subcommand")
		}
		path := make([][]string, len(elems))
		for i, el := range elems {
			path[i] = strings.Split(el, "|")
		}
		r.subcommands = append(r.subcommands, path)
	}
	r.denyOpts, r.allowOpts, r.requireOpts = rs.DenyFlags, rs.AllowFlags, rs.RequireFlags
	var err error
	for _, v := range []struct {
		key string
		dst *[]optValues
		src map[string][]string
	}{
		{"flag_values", &r.optValues, rs.FlagValues},
		{"deny_flag_values", &r.denyOptValues, rs.DenyFlagValues},
		{"require_flag_values", &r.requireOptValues, rs.RequireFlagValues},
	} {
		if *v.dst, err = compileOptValues(v.src, patterns); err != nil {
			return nil, fmt.Errorf("%s: %w", v.key, err)
		}
	}
	if rs.MinArgs != nil {
		r.minArgs = *rs.MinArgs
	}
	if rs.MaxArgs != nil {
		r.maxArgs = *rs.MaxArgs
	}
	if err := compileLists([]reList{
		{"first_arg", &r.firstArg, rs.FirstArg},
		{"args", &r.args, rs.Args},
		{"require_args", &r.requireArgs, rs.RequireArgs},
		{"deny_args", &r.denyArgs, rs.DenyArgs},
		{"last_arg", &r.lastArg, rs.LastArg},
	}, patterns); err != nil {
		return nil, err
	}
	r.endOfOptions = rs.EndOfOptions
	if len(rs.SQLReadOnly) > 0 && r.Class != ReadOnly {
		return nil, errors.New("sql_read_only is a condition of read_only rules only")
	}
	r.sqlOpts = rs.SQLReadOnly
	r.known = map[string]bool{}
	for _, list := range [][]string{r.denyOpts, r.allowOpts, r.requireOpts, r.sqlOpts} {
		for _, o := range list {
			if strings.IndexByte(o, '*') < 0 {
				r.known[o] = true
			}
		}
	}
	for _, list := range [][]optValues{r.optValues, r.denyOptValues, r.requireOptValues} {
		for _, ov := range list {
			r.known[ov.name] = true
		}
	}
	r.conditional = len(r.subcommands) > 0 || len(r.denyOpts) > 0 || len(r.allowOpts) > 0 ||
		len(r.requireOpts) > 0 || len(r.optValues) > 0 || len(r.denyOptValues) > 0 ||
		len(r.requireOptValues) > 0 || r.minArgs >= 0 || r.maxArgs >= 0 ||
		len(r.firstArg) > 0 || len(r.args) > 0 || len(r.requireArgs) > 0 || len(r.denyArgs) > 0 ||
		len(r.lastArg) > 0 || r.endOfOptions || len(r.sqlOpts) > 0
	return r, nil
}
