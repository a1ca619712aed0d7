// Package dpkg simulates the read-only side of Debian's package tools: dpkg -l/-s/-L,
// dpkg-query -W and apt-cache policy/show, over the machine's installed packages and
// pending upgrades (labsim/system/state). Formats follow dpkg(1), dpkg-query(1) and
// apt-cache(8) of Debian 12/13.
package dpkg

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
	"github.com/oikos-hq/oikos/testkit/labsim/system/state"
)

// Tools are the package query programs bound to one machine.
type Tools struct{ M state.Machine }

// Programs lists dpkg, dpkg-query and apt-cache.
func (t Tools) Programs() shell.Registry {
	return shell.Registry{"dpkg": t.dpkg, "dpkg-query": t.dpkg, "apt-cache": t.aptCache}
}

func (t Tools) codename() string {
	return map[string]string{"debian-11": "bullseye", "debian-13": "trixie", "ubuntu-22.04": "jammy", "ubuntu-24.04": "noble"}[t.M.Distro()] + ""
}

func (t Tools) suite() string {
	if c := t.codename(); c != "" {
		return c
	}
	return "bookworm"
}

func (t Tools) packages(patterns []string) []state.Package {
	var out []state.Package
	for _, p := range t.M.Packages() {
		if len(patterns) == 0 {
			out = append(out, p)
			continue
		}
		for _, pat := range patterns {
			if ok, _ := path.Match(pat, p.Name); ok {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

const dpkgHelp = `
Type dpkg --help for help about installing and deinstalling packages [*];
Use 'apt' or 'aptitude' for user-friendly package management;
Type dpkg -Dhelp for a list of dpkg debug flag values;
Type dpkg --force-help for a list of forcing options;
Type dpkg-deb --help for help about manipulating *.deb files;

Options marked [*] produce a lot of output - pipe it through 'less' or 'more' !
`

func (t Tools) dpkg(_ context.Context, inv *shell.Invocation) int {
	args := inv.Args[1:]
	if len(args) == 0 {
		fmt.Fprintf(inv.Stderr, "%s: error: need an action option\n%s", inv.Name(), dpkgHelp)
		return 2
	}
	action, rest := args[0], args[1:]
	format := ""
	for i := 0; i < len(rest); i++ {
		if rest[i] == "-f" || rest[i] == "--showformat" {
			if i+1 < len(rest) {
				format = rest[i+1]
				rest = append(rest[:i], rest[i+2:]...)
			}
		} else if v, ok := strings.CutPrefix(rest[i], "--showformat="); ok || (strings.HasPrefix(rest[i], "-f") && len(rest[i]) > 2) {
			if !ok {
				v = rest[i][2:]
			}
			format = v
			rest = append(rest[:i], rest[i+1:]...)
		}
	}
	if v, ok := strings.CutPrefix(action, "--showformat="); ok && len(rest) > 0 {
		format, action, rest = v, rest[0], rest[1:]
	}
	switch action {
	case "-l", "--list":
		return t.list(inv, rest)
	case "-s", "--status":
		return t.status(inv, rest)
	case "-W", "--show":
		if format == "" {
			format = "${binary:Package}\t${Version}\n"
		}
		ps := t.packages(rest)
		if len(ps) == 0 && len(rest) > 0 {
			fmt.Fprintf(inv.Stderr, "dpkg-query: no packages found matching %s\n", rest[0])
			return 1
		}
		for _, p := range ps {
			fmt.Fprint(inv.Stdout, expand(format, p))
		}
		return 0
	case "-L", "--listfiles":
		for _, n := range rest {
			if len(t.packages([]string{n})) == 0 {
				fmt.Fprintf(inv.Stderr, "dpkg-query: package '%s' is not installed\nUse dpkg --contents (= dpkg-deb --contents) to list archive files contents.\n", n)
				return 1
			}
			fmt.Fprintf(inv.Stdout, "/.\n/usr\n/usr/share\n/usr/share/doc\n/usr/share/doc/%[1]s\n/usr/share/doc/%[1]s/changelog.Debian.gz\n/usr/share/doc/%[1]s/copyright\n", n)
		}
		return 0
	case "--get-selections":
		for _, p := range t.packages(rest) {
			fmt.Fprintf(inv.Stdout, "%s\t\t\t\t\t\tinstall\n", p.Name)
		}
		return 0
	case "--print-architecture":
		fmt.Fprintln(inv.Stdout, "amd64")
		return 0
	case "--version":
		fmt.Fprintln(inv.Stdout, "Debian 'dpkg' package management program version 1.21.22 (amd64).")
		return 0
	}
	if strings.HasPrefix(action, "-") {
		name := action
		if strings.HasPrefix(name, "--") {
			name, _, _ = strings.Cut(name, "=")
		}
		fmt.Fprintf(inv.Stderr, "%s: error: unknown option %s\n%s", inv.Name(), name, dpkgHelp)
		return 2
	}
	fmt.Fprintf(inv.Stderr, "%s: error: need an action option\n%s", inv.Name(), dpkgHelp)
	return 2
}

func expand(format string, p state.Package) string {
	r := strings.NewReplacer("${binary:Package}", p.Name, "${Package}", p.Name, "${Version}", p.Version,
		"${Architecture}", p.Arch, "${Status}", "install ok installed", "${db:Status-Abbrev}", "ii ",
		"${Installed-Size}", fmt.Sprint(p.SizeKB), "${Section}", p.Section, "${binary:Summary}", p.Description,
		`\n`, "\n", `\t`, "\t")
	return r.Replace(format)
}

func (t Tools) list(inv *shell.Invocation, patterns []string) int {
	ps := t.packages(patterns)
	if len(ps) == 0 {
		fmt.Fprintf(inv.Stderr, "dpkg-query: no packages found matching %s\n", strings.Join(patterns, " "))
		return 1
	}
	wn, wv, wa := len("Name"), len("Version"), len("Architecture")
	for _, p := range ps {
		wn, wv, wa = max(wn, len(p.Name)), max(wv, len(p.Version)), max(wa, len(p.Arch))
	}
	fmt.Fprint(inv.Stdout, "Desired=Unknown/Install/Remove/Purge/Hold\n| Status=Not/Inst/Conf-files/Unpacked/halF-conf/Half-inst/trig-aWait/Trig-pend\n|/ Err?=(none)/Reinst-required (Status,Err: uppercase=bad)\n")
	fmt.Fprintf(inv.Stdout, "||/ %-*s %-*s %-*s %s\n", wn, "Name", wv, "Version", wa, "Architecture", "Description")
	fmt.Fprintf(inv.Stdout, "+++-%s-%s-%s-%s\n", strings.Repeat("=", wn), strings.Repeat("=", wv), strings.Repeat("=", wa), strings.Repeat("=", 40))
	for _, p := range ps {
		fmt.Fprintf(inv.Stdout, "ii  %-*s %-*s %-*s %s\n", wn, p.Name, wv, p.Version, wa, p.Arch, p.Description)
	}
	return 0
}

func (t Tools) status(inv *shell.Invocation, names []string) int {
	if len(names) == 0 {
		fmt.Fprintf(inv.Stderr, "%s: error: --status needs at least one package name argument\n%s", inv.Name(), dpkgHelp)
		return 2
	}
	code := 0
	for i, n := range names {
		ps := t.packages([]string{n})
		if len(ps) == 0 || strings.ContainsAny(n, "*?[") {
			fmt.Fprintf(inv.Stderr, "dpkg-query: package '%s' is not installed and no information is available\nUse dpkg --info (= dpkg-deb --info) to examine archive files.\n", n)
			code = 1
			continue
		}
		if i > 0 {
			fmt.Fprintln(inv.Stdout)
		}
		p := ps[0]
		prio := "optional"
		if p.Section == "admin" || p.Section == "shells" || p.Section == "libs" || p.Section == "utils" {
			prio = "required"
		}
		fmt.Fprintf(inv.Stdout, "Package: %s\nStatus: install ok installed\nPriority: %s\nSection: %s\nInstalled-Size: %d\nMaintainer: Debian Maintainers <debian-devel@lists.debian.org>\nArchitecture: %s\nVersion: %s\nDescription: %s\n",
			p.Name, prio, p.Section, p.SizeKB, p.Arch, p.Version, p.Description)
	}
	return code
}

// sources are the apt sources of the distribution: URI, suite, priority and release line.
func (t Tools) sources() [][3]string {
	c := t.suite()
	v := map[string]string{"bookworm": "12", "trixie": "13", "bullseye": "11"}[c]
	return [][3]string{
		{"http://security.debian.org/debian-security", c + "-security", fmt.Sprintf("v=%s,o=Debian,a=stable-security,n=%s-security,l=Debian-Security,c=main,b=amd64", v, c)},
		{"http://deb.debian.org/debian", c + "-updates", fmt.Sprintf("v=%s-updates,o=Debian,a=stable-updates,n=%s-updates,l=Debian,c=main,b=amd64", v, c)},
		{"http://deb.debian.org/debian", c, fmt.Sprintf("v=%s,o=Debian,a=stable,n=%s,l=Debian,c=main,b=amd64", v, c)},
	}
}

func (t Tools) aptCache(_ context.Context, inv *shell.Invocation) int {
	args := inv.Args[1:]
	var verb string
	var names []string
	for _, a := range args {
		switch {
		case a == "-q" || a == "--quiet" || a == "--no-all-versions" || a == "--names-only" || a == "-n":
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(inv.Stderr, "E: Command line option '%s' [from %s] is not understood in combination with the other options.\n", strings.TrimLeft(a, "-"), a)
			return 100
		case verb == "":
			verb = a
		default:
			names = append(names, a)
		}
	}
	ups := map[string]state.Upgrade{}
	for _, u := range t.M.Upgrades() {
		ups[u.Pkg] = u
	}
	srcs := t.sources()
	switch verb {
	case "policy":
		if len(names) == 0 {
			fmt.Fprintln(inv.Stdout, "Package files:\n 100 /var/lib/dpkg/status\n     release a=now")
			for _, s := range srcs {
				host := strings.Split(strings.TrimPrefix(s[0], "http://"), "/")[0]
				fmt.Fprintf(inv.Stdout, " 500 %s %s/main amd64 Packages\n     release %s\n     origin %s\n", s[0], s[1], s[2], host)
			}
			fmt.Fprintln(inv.Stdout, "Pinned packages:")
			return 0
		}
		for _, n := range names {
			ps := t.packages([]string{n})
			if len(ps) == 0 {
				fmt.Fprintf(inv.Stderr, "N: Unable to locate package %s\n", n)
				continue
			}
			p := ps[0]
			fmt.Fprintf(inv.Stdout, "%s:\n  Installed: %s\n", p.Name, p.Version)
			if u, ok := ups[p.Name]; ok {
				src := srcs[0]
				if strings.HasSuffix(u.Suite, "updates") {
					src = srcs[1]
				}
				fmt.Fprintf(inv.Stdout, "  Candidate: %s\n  Version table:\n     %s 500\n        500 %s %s/main amd64 Packages\n *** %s 100\n        100 /var/lib/dpkg/status\n",
					u.NewVer, u.NewVer, src[0], src[1], p.Version)
				continue
			}
			fmt.Fprintf(inv.Stdout, "  Candidate: %s\n  Version table:\n *** %s 500\n        500 %s %s/main amd64 Packages\n        100 /var/lib/dpkg/status\n",
				p.Version, p.Version, srcs[2][0], srcs[2][1])
		}
		return 0
	case "show":
		code := 0
		for _, n := range names {
			ps := t.packages([]string{n})
			if len(ps) == 0 {
				fmt.Fprintf(inv.Stderr, "N: Unable to locate package %s\nE: No packages found\n", n)
				code = 100
				continue
			}
			p := ps[0]
			fmt.Fprintf(inv.Stdout, "Package: %s\nVersion: %s\nInstalled-Size: %d\nMaintainer: Debian Maintainers <debian-devel@lists.debian.org>\nArchitecture: %s\nDescription: %s\nSection: %s\nPriority: optional\nFilename: pool/main/%s/%s/%s_%s_%s.deb\n\n",
				p.Name, p.Version, p.SizeKB, p.Arch, p.Description, p.Section, p.Name[:1], p.Name, p.Name, strings.ReplaceAll(p.Version, ":", "%3a"), p.Arch)
		}
		return code
	case "search":
		for _, p := range t.M.Packages() {
			for _, n := range names {
				if strings.Contains(p.Name, n) || strings.Contains(strings.ToLower(p.Description), strings.ToLower(n)) {
					fmt.Fprintf(inv.Stdout, "%s - %s\n", p.Name, p.Description)
					break
				}
			}
		}
		return 0
	case "":
		fmt.Fprintln(inv.Stdout, "apt 2.6.1 (amd64)\nUsage: apt-cache [options] command\n       apt-cache [options] show pkg1 [pkg2 ...]")
		return 1
	}
	fmt.Fprintf(inv.Stderr, "E: Invalid operation %s\n", verb)
	return 100
}
