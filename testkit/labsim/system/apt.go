package system

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
	"github.com/oikos-hq/oikos/testkit/labsim/system/state"
)

func (m *Machine) apt(ctx context.Context, inv *shell.Invocation) int {
	var verb string
	var pkgs []string
	yes, quiet, simulate := false, false, false
	args := inv.Args[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-y" || a == "--yes" || a == "--assume-yes":
			yes = true
		case a == "-q" || a == "-qq" || a == "--quiet":
			quiet = true
		case a == "-s" || a == "--simulate" || a == "--dry-run":
			simulate = true
		case a == "-o" || a == "-t":
			i++
		case strings.HasPrefix(a, "-"):
			if strings.Contains(a, "y") && !strings.HasPrefix(a, "--") {
				yes = true
			}
		case verb == "":
			verb = a
		default:
			pkgs = append(pkgs, a)
		}
	}
	if inv.Name() == "apt" {
		fmt.Fprint(inv.Stderr, "\nWARNING: apt does not have a stable CLI interface. Use with caution in scripts.\n\n")
	}
	codename := map[string]string{"debian-11": "bullseye", "debian-12": "bookworm", "debian-13": "trixie", "ubuntu-22.04": "jammy", "ubuntu-24.04": "noble"}[m.cfg.Distro]
	mirror := "http://deb.debian.org/debian"
	security := "http://security.debian.org/debian-security " + codename + "-security"
	if strings.HasPrefix(m.cfg.Distro, "ubuntu") {
		mirror = "http://archive.ubuntu.com/ubuntu"
		security = "http://security.ubuntu.com/ubuntu " + codename + "-security"
	}
	readLists := func() {
		if !quiet {
			fmt.Fprint(inv.Stdout, "Reading package lists... Done\nBuilding dependency tree... Done\nReading state information... Done\n")
		}
	}
	switch verb {
	case "update":
		if m.networkDown() {
			fmt.Fprintf(inv.Stdout, "0%% [Connecting to %s]", strings.TrimPrefix(mirror, "http://"))
			return hang(ctx)
		}
		if !quiet {
			fmt.Fprintf(inv.Stdout, "Hit:1 %s %s InRelease\nGet:2 %s %s-updates InRelease [55.4 kB]\nGet:3 %s InRelease [48.0 kB]\nFetched 103 kB in 1s (142 kB/s)\n", mirror, codename, mirror, codename, security)
			fmt.Fprint(inv.Stdout, "Reading package lists... Done\n")
			if inv.Name() == "apt" {
				m.mu.Lock()
				n := len(m.upgrades)
				m.mu.Unlock()
				fmt.Fprint(inv.Stdout, "Building dependency tree... Done\nReading state information... Done\n")
				if n == 0 {
					fmt.Fprintln(inv.Stdout, "All packages are up to date.")
				} else {
					fmt.Fprintf(inv.Stdout, "%d packages can be upgraded. Run 'apt list --upgradable' to see them.\n", n)
				}
			}
		}
		return 0
	case "list":
		return m.aptList(inv)
	case "upgrade", "dist-upgrade", "full-upgrade":
		readLists()
		if !quiet {
			fmt.Fprintln(inv.Stdout, "Calculating upgrade... Done")
		}
		m.mu.Lock()
		ups := append([]upgrade(nil), m.upgrades...)
		m.mu.Unlock()
		if len(ups) == 0 {
			fmt.Fprintln(inv.Stdout, "0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.")
			return 0
		}
		names := make([]string, len(ups))
		for i, u := range ups {
			names[i] = u.pkg
		}
		fmt.Fprintf(inv.Stdout, "The following packages will be upgraded:\n  %s\n%d upgraded, 0 newly installed, 0 to remove and 0 not upgraded.\n", strings.Join(names, " "), len(ups))
		if !yes && !simulate {
			fmt.Fprintln(inv.Stdout, "Do you want to continue? [Y/n] Abort.")
			return 1
		}
		if simulate {
			for _, u := range ups {
				fmt.Fprintf(inv.Stdout, "Inst %s [%s] (%s Debian:%s [amd64])\n", u.pkg, u.oldVer, u.newVer, u.suite)
			}
			return 0
		}
		if m.networkDown() {
			return hang(ctx)
		}
		for i, u := range ups {
			fmt.Fprintf(inv.Stdout, "Get:%d %s %s %s amd64 %s [1,024 kB]\n", i+1, mirror, u.suite, u.pkg, u.newVer)
		}
		for _, u := range ups {
			fmt.Fprintf(inv.Stdout, "Preparing to unpack .../%s_%s_amd64.deb ...\nUnpacking %s (%s) over (%s) ...\nSetting up %s (%s) ...\n", u.pkg, u.newVer, u.pkg, u.newVer, u.oldVer, u.pkg, u.newVer)
		}
		fmt.Fprintln(inv.Stdout, "Processing triggers for libc-bin (2.36-9+deb12u9) ...")
		m.mu.Lock()
		for _, u := range m.upgrades {
			m.installed[u.pkg] = u.newVer
		}
		m.upgrades = nil
		m.mu.Unlock()
		return 0
	case "install", "reinstall":
		readLists()
		if len(pkgs) == 0 {
			fmt.Fprintln(inv.Stdout, "0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.")
			return 0
		}
		fmt.Fprintf(inv.Stdout, "The following NEW packages will be installed:\n  %s\n0 upgraded, %d newly installed, 0 to remove and 0 not upgraded.\n", strings.Join(pkgs, " "), len(pkgs))
		if !yes && !simulate {
			fmt.Fprintln(inv.Stdout, "Do you want to continue? [Y/n] Abort.")
			return 1
		}
		if simulate {
			return 0
		}
		if m.networkDown() {
			return hang(ctx)
		}
		for _, p := range pkgs {
			fmt.Fprintf(inv.Stdout, "Selecting previously unselected package %s.\nUnpacking %s (1.0-1) ...\nSetting up %s (1.0-1) ...\n", p, p, p)
		}
		m.mu.Lock()
		for _, p := range pkgs {
			m.installed[p] = "1.0-1"
		}
		m.mu.Unlock()
		return 0
	case "remove", "purge", "autoremove", "clean", "autoclean":
		readLists()
		m.mu.Lock()
		for _, p := range pkgs {
			delete(m.installed, p)
		}
		m.mu.Unlock()
		fmt.Fprintf(inv.Stdout, "0 upgraded, 0 newly installed, %d to remove and 0 not upgraded.\n", len(pkgs))
		return 0
	case "":
		fmt.Fprintf(inv.Stdout, "%s 2.6.1 (amd64)\nUsage: %s [options] command\n", inv.Name(), inv.Name())
		return 1
	}
	fmt.Fprintf(inv.Stderr, "E: Invalid operation %s\n", verb)
	return 100
}

// archive is the suite name apt list shows for the machine's distribution.
func (m *Machine) archive() string {
	switch m.cfg.Distro {
	case "debian-11":
		return "oldoldstable"
	case "ubuntu-22.04":
		return "jammy"
	case "ubuntu-24.04":
		return "noble"
	}
	return "stable"
}

// aptList is apt list [--installed|--upgradable] [PATTERN…] (apt(8)): "name/suite[,now]
// version arch [state]" after "Listing... Done".
func (m *Machine) aptList(inv *shell.Invocation) int {
	installed, upgradable := false, false
	var patterns []string
	for _, a := range inv.Args[2:] {
		switch a {
		case "--installed", "-i":
			installed = true
		case "--upgradable", "--upgradeable", "-u":
			upgradable = true
		case "-a", "--all-versions", "--manual-installed", "-q":
		default:
			if strings.HasPrefix(a, "-") {
				fmt.Fprintf(inv.Stderr, "E: Command line option '%s' [from %s] is not understood in combination with the other options.\n", a, a)
				return 100
			}
			patterns = append(patterns, a)
		}
	}
	match := func(name string) bool {
		if len(patterns) == 0 {
			return true
		}
		for _, p := range patterns {
			if ok, _ := path.Match(p, name); ok {
				return true
			}
		}
		return false
	}
	fmt.Fprintln(inv.Stdout, "Listing... Done")
	ups := map[string]state.Upgrade{}
	for _, u := range m.Upgrades() {
		ups[u.Pkg] = u
	}
	if upgradable {
		for _, u := range m.Upgrades() {
			if match(u.Pkg) {
				fmt.Fprintf(inv.Stdout, "%s/%s %s amd64 [upgradable from: %s]\n", u.Pkg, u.Suite, u.NewVer, u.OldVer)
			}
		}
		return 0
	}
	for _, p := range m.Packages() {
		if !match(p.Name) {
			continue
		}
		if u, ok := ups[p.Name]; ok {
			fmt.Fprintf(inv.Stdout, "%s/%s,now %s %s [installed,upgradable to: %s]\n", p.Name, u.Suite, p.Version, p.Arch, u.NewVer)
			continue
		}
		fmt.Fprintf(inv.Stdout, "%s/%s,now %s %s [installed]\n", p.Name, m.archive(), p.Version, p.Arch)
	}
	_ = installed // the lab lists installed packages only, as --installed does
	return 0
}
