package ruleset

import (
	_ "embed"
	"github.com/oikos-hq/oikos/shared/policy/internal/shellword"
	"path"
	"slices"
	"strings"
)

// SafePath reports whether a PATH value keeps program names resolving to the
// system directories: only system directories before the old $PATH.
func (p *Set) SafePath(value shellword.Word) bool {
	for _, dir := range strings.Split(value.Val, ":") {
		if dir == "$PATH" || dir == "${PATH}" {
			return true
		}
		if !p.systemDirs[path.Clean(dir)] {
			return false
		}
	}
	return true
}

// ResolveProgram maps a command word to the program it names: a bare name, or
// a path in one of the system directories, is that program; any other path is
// not (./cat is not the safe cat) and is returned whole, with its base name
// for the destructive checks.
func (p *Set) ResolveProgram(s string) (name, base string, system bool) {
	if s == "" {
		return "", "", false
	}
	if !strings.Contains(s, "/") {
		return s, s, true
	}
	clean := path.Clean(s)
	dir, b := path.Split(clean)
	if dir != "/" {
		dir = strings.TrimSuffix(dir, "/")
	}
	if b != "" && p.systemDirs[dir] {
		return b, b, true
	}
	return s, b, false
}

// IsInterpreter: a runs_arguments program as a whole (python3, perl …),
// whose literal code arguments are looked into.
func (p *Set) IsInterpreter(base string) bool {
	for _, sub := range p.runsArguments[base] {
		if len(sub) == 0 {
			return true
		}
	}
	return false
}

// AsksHelp reports whether a command line asks the program only for its help
// or version: --help or --version as an option (not a value, not after --)
// of a program the policy knows, which parses its options before it acts.
// Programs that hand their trailing arguments to another program
// (runs_arguments: interpreters, docker run, strace …) are excluded: their
// --help may belong to the command they run.
func (p *Set) AsksHelp(base string, cl *shellword.Cmdline) bool {
	if len(p.byProgram[base]) == 0 && p.Grammars[base] == nil && !p.hostOnly[base] {
		return false
	}
	for _, sub := range p.runsArguments[base] {
		if len(sub) <= len(cl.Pos) && slices.EqualFunc(sub, cl.Pos[:len(sub)], func(s string, w shellword.Word) bool { return !w.Dyn && s == w.Val }) {
			return false
		}
	}
	for _, o := range cl.Opts {
		if (o.Name == "--help" || o.Name == "--version") && !o.HasValue {
			return true
		}
	}
	return false
}

// Best parses args (the words after the program) by the program's grammar
// into cl and returns the highest-class rule that applies, nil when none
// does. For a program outside the system directories (system false),
// read-only rules do not apply and the destructive rules are matched against
// its base name. trace, when not nil, records every rule that applied.
func (p *Set) Best(base string, args []shellword.Word, cl *shellword.Cmdline, system bool, trace map[string]bool) *Rule {
	p.Grammars[base].Parse(args, cl)
	var best *Rule
	for _, r := range p.byProgram[base] {
		best = better(best, r, cl, system, trace)
	}
	for _, r := range p.globRules {
		if shellword.MatchAlt(r.progGlobs, base) {
			best = better(best, r, cl, system, trace)
		}
	}
	return best
}

// Raise parses args by the program's grammar into cl and returns the
// highest-class of best and the program's destructive rules that apply, and
// whether one of those replaced best.
func (p *Set) Raise(best *Rule, base string, args []shellword.Word, cl *shellword.Cmdline, system bool, trace map[string]bool) (*Rule, bool) {
	p.Grammars[base].Parse(args, cl)
	raised := false
	for _, r := range p.byProgram[base] {
		if r.Class == Destructive {
			if b := better(best, r, cl, system, trace); b != best {
				best, raised = b, true
			}
		}
	}
	return best, raised
}

// Knows reports whether some rule names the program (not by a glob) or the
// policy gives its grammar: its first word that is not an option is a
// subcommand (pct reboot 101), not a command.
func (p *Set) Knows(name string) bool {
	return len(p.byProgram[name]) > 0 || p.Grammars[name] != nil
}

// HasRules reports whether some rule names the program (not by a glob).
func (p *Set) HasRules(name string) bool { return len(p.byProgram[name]) > 0 }

// Principle is the principle the named rule belongs to, "" for none (or no
// such rule).
func (p *Set) Principle(rule string) string {
	for _, r := range p.rules {
		if r.Name == rule {
			return r.principle
		}
	}
	return ""
}

// better returns the higher-class of best and r, if r applies.
func better(best, r *Rule, cl *shellword.Cmdline, system bool, trace map[string]bool) *Rule {
	if r.Class == ReadOnly && !system {
		return best
	}
	if !r.applies(cl) {
		return best
	}
	if trace != nil {
		trace[r.Name] = true
	}
	if best == nil || r.Class.Rank() > best.Class.Rank() {
		return r
	}
	return best
}

// IsTrigger reports whether some destructive rule names the program.
func (p *Set) IsTrigger(name string) bool {
	if p.triggerPrograms[name] {
		return true
	}
	for _, r := range p.globRules {
		if r.Class == Destructive && shellword.MatchAlt(r.progGlobs, name) {
			return true
		}
	}
	return false
}

// CredentialIn reports the credential store a path is, or is a directory
// holding: "" when it is neither. A relative path is also matched by its
// last element (id_rsa, .env, server.key).
func (p *Set) CredentialIn(file string) string {
	if file == "" || len(p.credentials) == 0 {
		return ""
	}
	clean := file
	if strings.HasPrefix(file, "/") {
		clean = path.Clean(file)
	}
	if AnyRE(p.credentials, clean) || AnyRE(p.credentials, path.Base(clean)) {
		return clean
	}
	// A directory that holds credential stores sends them with it.
	dir := strings.TrimSuffix(clean, "/")
	if dir == "" || dir == "/" || dir == "/." || dir == "~" {
		return clean + " (with every credential store under it)"
	}
	for _, d := range credentialDirs {
		if strings.HasPrefix(d, dir+"/") || strings.HasPrefix(d, strings.TrimPrefix(dir, "~")+"/") && strings.HasPrefix(dir, "~") {
			return clean + " (holding " + d + ")"
		}
	}
	return ""
}

// credentialDirs are the usual homes of credential stores, for recognising a
// directory sent whole (rsync -a /etc/ remote:, tar c /root | nc).
var credentialDirs = []string{"/etc/shadow", "/etc/pve/priv", "/etc/ssh/ssh_host_ed25519_key", "/etc/ssl/private",
	"/root/.ssh/id_ed25519", "/home/user/.ssh/id_ed25519", "/etc/wireguard", "/etc/letsencrypt/live", "/etc/corosync/authkey",
	"/etc/proxmox-backup/authkey.key", "/var/lib/tailscale"}

// HostOnly reports whether a program exists only on a Proxmox host (pct, qm,
// pvesh …), as listed by the policy's host_only.
func (p *Set) HostOnly(program string) bool { return p.hostOnly[program] }
