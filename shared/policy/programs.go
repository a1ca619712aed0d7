package policy

import (
	_ "embed"
	"path"
	"slices"
	"strings"
)

// safePath reports whether a PATH value keeps program names resolving to the
// system directories: only system directories before the old $PATH.
func (p *Set) safePath(value word) bool {
	for _, dir := range strings.Split(value.val, ":") {
		if dir == "$PATH" || dir == "${PATH}" {
			return true
		}
		if !p.systemDirs[path.Clean(dir)] {
			return false
		}
	}
	return true
}

// resolveProgram maps a command word to the program it names: a bare name, or
// a path in one of the system directories, is that program; any other path is
// not (./cat is not the safe cat) and is returned whole, with its base name
// for the destructive checks.
func (p *Set) resolveProgram(s string) (name, base string, system bool) {
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

// isInterpreter: a runs_arguments program as a whole (python3, perl …),
// whose literal code arguments are looked into.
func (p *Set) isInterpreter(base string) bool {
	for _, sub := range p.runsArguments[base] {
		if len(sub) == 0 {
			return true
		}
	}
	return false
}

// asksHelp reports whether a command line asks the program only for its help
// or version: --help or --version as an option (not a value, not after --)
// of a program the policy knows, which parses its options before it acts.
// Programs that hand their trailing arguments to another program
// (runs_arguments: interpreters, docker run, strace …) are excluded: their
// --help may belong to the command they run.
func (p *Set) asksHelp(base string, cl *cmdline) bool {
	if len(p.byProgram[base]) == 0 && p.grammars[base] == nil && !p.hostOnly[base] {
		return false
	}
	for _, sub := range p.runsArguments[base] {
		if len(sub) <= len(cl.pos) && slices.EqualFunc(sub, cl.pos[:len(sub)], func(s string, w word) bool { return !w.dyn && s == w.val }) {
			return false
		}
	}
	for _, o := range cl.opts {
		if (o.name == "--help" || o.name == "--version") && !o.hasValue {
			return true
		}
	}
	return false
}

// better returns the higher-class of best and r, if r applies.
func (c *classifier) better(best, r *rule, cl *cmdline, system bool) *rule {
	if r.class == ReadOnly && !system {
		return best
	}
	if !r.applies(cl) {
		return best
	}
	if c.trace != nil {
		c.trace[r.name] = true
	}
	if best == nil || r.class.Rank() > best.class.Rank() {
		return r
	}
	return best
}

// isTrigger reports whether some destructive rule names the program.
func (p *Set) isTrigger(name string) bool {
	if p.triggerPrograms[name] {
		return true
	}
	for _, r := range p.globRules {
		if r.class == Destructive && matchAlt(r.progGlobs, name) {
			return true
		}
	}
	return false
}

// credentialIn reports the credential store a path is, or is a directory
// holding: "" when it is neither. A relative path is also matched by its
// last element (id_rsa, .env, server.key).
func (p *Set) credentialIn(file string) string {
	if file == "" || len(p.credentials) == 0 {
		return ""
	}
	clean := file
	if strings.HasPrefix(file, "/") {
		clean = path.Clean(file)
	}
	if anyRE(p.credentials, clean) || anyRE(p.credentials, path.Base(clean)) {
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
