package system

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/coreutils/cli"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

const darwinVersion = "Darwin Kernel Version 24.1.0: Thu Oct 10 21:02:27 PDT 2024; root:xnu-11215.41.3~2/RELEASE_ARM64_T8103"

func (m *Machine) kernelRelease() string {
	switch m.cfg.Role {
	case RoleDarwin:
		return "24.1.0"
	case RoleProxmox, RoleLXC:
		return "6.8.12-4-pve"
	}
	if strings.HasPrefix(m.cfg.Distro, "ubuntu") {
		return "6.8.0-49-generic"
	}
	return "6.1.0-28-amd64"
}

func (m *Machine) kernelVersion() string {
	switch m.cfg.Role {
	case RoleDarwin:
		return darwinVersion
	case RoleProxmox, RoleLXC:
		return "#1 SMP PREEMPT_DYNAMIC PMX 6.8.12-4 (2024-11-06T15:04Z)"
	}
	if strings.HasPrefix(m.cfg.Distro, "ubuntu") {
		return "#49-Ubuntu SMP PREEMPT_DYNAMIC Sun Nov  3 21:21:58 UTC 2024"
	}
	return "#1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22)"
}

func (m *Machine) uname(_ context.Context, inv *shell.Invocation) int {
	sys, machine := "Linux", "x86_64"
	if m.IsDarwin() {
		sys, machine = "Darwin", "arm64"
	}
	fields := map[rune]string{'s': sys, 'n': m.cfg.Hostname, 'r': m.kernelRelease(), 'v': m.kernelVersion(), 'm': machine, 'p': machine, 'i': machine, 'o': "GNU/Linux"}
	if m.IsDarwin() {
		fields['p'], fields['o'] = "arm", "Darwin"
	}
	var want []rune
	for _, a := range inv.Args[1:] {
		switch a {
		case "--kernel-name":
			want = append(want, 's')
		case "--nodename":
			want = append(want, 'n')
		case "--kernel-release":
			want = append(want, 'r')
		case "--machine":
			want = append(want, 'm')
		case "--all":
			want = append(want, 'a')
		default:
			if !strings.HasPrefix(a, "-") {
				fmt.Fprintf(inv.Stderr, "uname: extra operand '%s'\n", a)
				return 1
			}
			want = append(want, []rune(a[1:])...)
		}
	}
	if len(want) == 0 {
		want = []rune{'s'}
	}
	order := []rune{'s', 'n', 'r', 'v', 'm', 'p', 'i', 'o'}
	if m.IsDarwin() {
		order = []rune{'s', 'n', 'r', 'v', 'm'}
	}
	set := map[rune]bool{}
	for _, w := range want {
		if w == 'a' {
			for _, o := range order {
				set[o] = true
			}
			if !m.IsDarwin() {
				set['p'], set['i'] = false, false
			}
			continue
		}
		set[w] = true
	}
	var out []string
	for _, o := range order {
		if set[o] {
			out = append(out, fields[o])
		}
	}
	fmt.Fprintln(inv.Stdout, strings.Join(out, " "))
	return 0
}

// strftime formats t with the common date(1) conversions.
func strftime(format string, t time.Time) string {
	return cli.Expand(format, false, func(b *strings.Builder, c byte) bool {
		switch c {
		case 'Y':
			b.WriteString(strconv.Itoa(t.Year()))
		case 'y':
			fmt.Fprintf(b, "%02d", t.Year()%100)
		case 'm':
			fmt.Fprintf(b, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(b, "%2d", t.Day())
		case 'H':
			fmt.Fprintf(b, "%02d", t.Hour())
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			fmt.Fprintf(b, "%02d", h)
		case 'M':
			fmt.Fprintf(b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(b, "%02d", t.Second())
		case 'N':
			fmt.Fprintf(b, "%09d", t.Nanosecond())
		case 's':
			b.WriteString(strconv.FormatInt(t.Unix(), 10))
		case 'F':
			b.WriteString(t.Format("2006-01-02"))
		case 'T':
			b.WriteString(t.Format("15:04:05"))
		case 'D':
			b.WriteString(t.Format("01/02/06"))
		case 'R':
			b.WriteString(t.Format("15:04"))
		case 'Z':
			b.WriteString(t.Format("MST"))
		case 'z':
			b.WriteString(t.Format("-0700"))
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'A':
			b.WriteString(t.Format("Monday"))
		case 'b', 'h':
			b.WriteString(t.Format("Jan"))
		case 'B':
			b.WriteString(t.Format("January"))
		case 'p':
			b.WriteString(t.Format("PM"))
		case 'j':
			fmt.Fprintf(b, "%03d", t.YearDay())
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			b.WriteString(strconv.Itoa(wd))
		case 'w':
			b.WriteString(strconv.Itoa(int(t.Weekday())))
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		default:
			return false
		}
		return true
	})
}

func (m *Machine) date(_ context.Context, inv *shell.Invocation) int {
	t := m.now().UTC()
	format := "%a %b %e %H:%M:%S %Z %Y"
	args := inv.Args[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case strings.HasPrefix(a, "+"):
			format = a[1:]
		case a == "-u" || a == "--utc":
		case a == "-R" || a == "--rfc-email":
			format = "%a, %d %b %Y %H:%M:%S %z"
		case a == "-I" || strings.HasPrefix(a, "--iso-8601"):
			format = "%F"
			if strings.Contains(a, "seconds") {
				format = "%FT%H:%M:%S%:z"
			}
		case a == "-d" || a == "--date" || strings.HasPrefix(a, "--date="):
			v := strings.TrimPrefix(a, "--date=")
			if a == "-d" || a == "--date" {
				if i+1 >= len(args) {
					fmt.Fprintln(inv.Stderr, "date: option requires an argument -- 'd'")
					return 1
				}
				i++
				v = args[i]
			}
			parsed, ok := parseDateArg(v, t)
			if !ok {
				fmt.Fprintf(inv.Stderr, "date: invalid date '%s'\n", v)
				return 1
			}
			t = parsed.UTC()
		case a == "-r" && m.IsDarwin() && i+1 < len(args):
			i++
			if n, err := strconv.ParseInt(args[i], 10, 64); err == nil {
				t = time.Unix(n, 0).UTC()
			}
		}
	}
	format = strings.ReplaceAll(format, "%:z", "+00:00")
	fmt.Fprintln(inv.Stdout, strftime(format, t))
	return 0
}

func parseDateArg(s string, now time.Time) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "@") {
		n, err := strconv.ParseInt(s[1:], 10, 64)
		return time.Unix(n, 0), err == nil
	}
	if s == "now" || s == "" {
		return now, true
	}
	f := strings.Fields(s)
	if len(f) >= 2 {
		if n, err := strconv.Atoi(f[0]); err == nil {
			unit := strings.TrimSuffix(f[1], "s")
			d := map[string]time.Duration{"second": time.Second, "sec": time.Second, "minute": time.Minute, "min": time.Minute, "hour": time.Hour, "day": 24 * time.Hour, "week": 7 * 24 * time.Hour}[unit]
			if d != 0 {
				if len(f) == 3 && f[2] == "ago" {
					n = -n
				}
				return now.Add(time.Duration(n) * d), true
			}
		}
	}
	for _, l := range []string{time.RFC3339, "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.Parse(l, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

func (m *Machine) id(_ context.Context, inv *shell.Invocation) int {
	uid, user := 0, m.cfg.User
	if user != "root" {
		uid = 501
		if !m.IsDarwin() {
			uid = 1000
		}
	}
	for _, a := range inv.Args[1:] {
		switch a {
		case "-u":
			fmt.Fprintln(inv.Stdout, uid)
			return 0
		case "-un", "-nu":
			fmt.Fprintln(inv.Stdout, user)
			return 0
		}
	}
	fmt.Fprintf(inv.Stdout, "uid=%d(%s) gid=%d(%s) groups=%d(%s)\n", uid, user, uid, user, uid, user)
	return 0
}

func (m *Machine) whoami(_ context.Context, inv *shell.Invocation) int {
	fmt.Fprintln(inv.Stdout, m.cfg.User)
	return 0
}

func (m *Machine) lsbRelease(_ context.Context, inv *shell.Invocation) int {
	rel := osRelease(m.cfg.Distro)
	get := func(k string) string {
		for _, l := range strings.Split(rel, "\n") {
			if v, ok := strings.CutPrefix(l, k+"="); ok {
				return strings.Trim(v, `"`)
			}
		}
		return ""
	}
	fmt.Fprintf(inv.Stdout, "Distributor ID:\t%s\nDescription:\t%s\nRelease:\t%s\nCodename:\t%s\n",
		map[string]string{"debian": "Debian", "ubuntu": "Ubuntu"}[get("ID")], get("PRETTY_NAME"), get("VERSION_ID"), get("VERSION_CODENAME"))
	return 0
}

func (m *Machine) swVers(_ context.Context, inv *shell.Invocation) int {
	fmt.Fprint(inv.Stdout, "ProductName:\t\tmacOS\nProductVersion:\t\t15.1\nBuildVersion:\t\t24B83\n")
	return 0
}

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
		upgradable := false
		for _, a := range inv.Args {
			if a == "--upgradable" || a == "--upgradeable" {
				upgradable = true
			}
		}
		fmt.Fprintln(inv.Stdout, "Listing... Done")
		if upgradable {
			m.mu.Lock()
			ups := append([]upgrade(nil), m.upgrades...)
			m.mu.Unlock()
			for _, u := range ups {
				fmt.Fprintf(inv.Stdout, "%s/%s %s amd64 [upgradable from: %s]\n", u.pkg, u.suite, u.newVer, u.oldVer)
			}
			return 0
		}
		m.mu.Lock()
		names := make([]string, 0, len(m.installed))
		for n := range m.installed {
			names = append(names, n)
		}
		m.mu.Unlock()
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(inv.Stdout, "%s/%s 1.0-1 amd64 [installed]\n", n, codename)
		}
		return 0
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

func (m *Machine) docker(ctx context.Context, inv *shell.Invocation) int {
	args := inv.Args[1:]
	if len(args) == 0 {
		fmt.Fprintln(inv.Stdout, "Usage:  docker [OPTIONS] COMMAND")
		return 0
	}
	verb, rest := args[0], args[1:]
	if verb == "container" && len(rest) > 0 {
		verb, rest = rest[0], rest[1:]
		if verb == "ls" {
			verb = "ps"
		}
	}
	now := m.now()
	get := func(name string) (*container, bool) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if c, ok := m.containers[name]; ok {
			return c, true
		}
		for _, c := range m.containers {
			if strings.HasPrefix(c.id, name) && len(name) >= 3 {
				return c, true
			}
		}
		return nil, false
	}
	switch verb {
	case "ps":
		all, format := false, ""
		for i := 0; i < len(rest); i++ {
			switch rest[i] {
			case "-a", "--all":
				all = true
			case "--format", "-f":
				if i+1 < len(rest) {
					i++
					format = rest[i]
				}
			default:
				if v, ok := strings.CutPrefix(rest[i], "--format="); ok {
					format = v
				}
			}
		}
		m.mu.Lock()
		var cs []container
		for _, c := range m.containers {
			if c.running || all {
				cs = append(cs, *c)
			}
		}
		m.mu.Unlock()
		sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
		status := func(c container) string {
			if c.running {
				return "Up " + humanAgo(now.Sub(c.since))
			}
			return "Exited (0) " + humanAgo(now.Sub(c.since)) + " ago"
		}
		if format != "" {
			table := strings.HasPrefix(format, "table")
			format = strings.TrimSpace(strings.TrimPrefix(format, "table"))
			tw := tabwriter.NewWriter(inv.Stdout, 0, 8, 3, ' ', 0)
			render := func(c container) string {
				r := strings.NewReplacer("{{.Names}}", c.name, "{{.Name}}", c.name, "{{.ID}}", c.id, "{{.Image}}", c.image,
					"{{.Status}}", status(c), "{{.State}}", map[bool]string{true: "running", false: "exited"}[c.running], "\\t", "\t")
				return r.Replace(format)
			}
			if table {
				hdr := strings.NewReplacer("{{.Names}}", "NAMES", "{{.Name}}", "NAME", "{{.ID}}", "CONTAINER ID", "{{.Image}}", "IMAGE",
					"{{.Status}}", "STATUS", "{{.State}}", "STATE", "\\t", "\t").Replace(format)
				fmt.Fprintln(tw, hdr)
			}
			for _, c := range cs {
				fmt.Fprintln(tw, render(c))
			}
			tw.Flush()
			return 0
		}
		tw := tabwriter.NewWriter(inv.Stdout, 0, 8, 3, ' ', 0)
		fmt.Fprintln(tw, "CONTAINER ID\tIMAGE\tCOMMAND\tCREATED\tSTATUS\tPORTS\tNAMES")
		for _, c := range cs {
			fmt.Fprintf(tw, "%s\t%s\t%q\t%s ago\t%s\t\t%s\n", c.id, c.image, "/init", humanAgo(now.Sub(c.created)), status(c), c.name)
		}
		tw.Flush()
		return 0
	case "restart", "start", "stop", "kill":
		code := 0
		for _, name := range rest {
			if strings.HasPrefix(name, "-") {
				continue
			}
			c, ok := get(name)
			if !ok {
				fmt.Fprintf(inv.Stderr, "Error response from daemon: No such container: %s\n", name)
				code = 1
				continue
			}
			m.mu.Lock()
			c.running = verb != "stop" && verb != "kill"
			c.since = now
			m.mu.Unlock()
			fmt.Fprintln(inv.Stdout, name)
		}
		return code
	case "exec":
		// The lab's containers have no filesystem of their own: a command runs in the
		// machine's sandboxed shell, which is as harmless as any other guest command.
		i := 0
		for i < len(rest) && strings.HasPrefix(rest[i], "-") {
			switch rest[i] {
			case "-u", "--user", "-w", "--workdir", "-e", "--env":
				i++ // the option's value
			}
			i++
		}
		if i+1 >= len(rest) {
			fmt.Fprintln(inv.Stderr, `"docker exec" requires at least 2 arguments.`)
			return 1
		}
		c, ok := get(rest[i])
		if !ok {
			fmt.Fprintf(inv.Stderr, "Error response from daemon: No such container: %s\n", rest[i])
			return 1
		}
		m.mu.Lock()
		running := c.running
		m.mu.Unlock()
		if !running {
			fmt.Fprintf(inv.Stderr, "Error response from daemon: container %s is not running\n", c.id)
			return 1
		}
		return inv.Exec(ctx, rest[i+1:], shell.Stdio{Stdin: inv.Stdin, Stdout: inv.Stdout, Stderr: inv.Stderr})
	case "logs":
		tail := -1
		var name string
		for i := 0; i < len(rest); i++ {
			switch a := rest[i]; {
			case a == "--tail" || a == "-n":
				if i+1 < len(rest) {
					i++
					tail, _ = strconv.Atoi(rest[i])
				}
			case strings.HasPrefix(a, "--tail="):
				tail, _ = strconv.Atoi(strings.TrimPrefix(a, "--tail="))
			case strings.HasPrefix(a, "-"):
			default:
				name = a
			}
		}
		c, ok := get(name)
		if !ok {
			fmt.Fprintf(inv.Stderr, "Error response from daemon: No such container: %s\n", name)
			return 1
		}
		lines := []string{
			fmt.Sprintf("%s [INF] Starting %s", c.since.UTC().Format("2006-01-02 15:04:05.000"), c.name),
			fmt.Sprintf("%s [INF] Listening for connections", c.since.Add(2*time.Second).UTC().Format("2006-01-02 15:04:05.000")),
			fmt.Sprintf("%s [INF] Startup complete", c.since.Add(3*time.Second).UTC().Format("2006-01-02 15:04:05.000")),
		}
		if tail >= 0 && tail < len(lines) {
			lines = lines[len(lines)-tail:]
		}
		for _, l := range lines {
			fmt.Fprintln(inv.Stdout, l)
		}
		return 0
	case "inspect":
		format := ""
		var names []string
		for i := 0; i < len(rest); i++ {
			if rest[i] == "-f" || rest[i] == "--format" {
				if i+1 < len(rest) {
					i++
					format = rest[i]
				}
				continue
			}
			names = append(names, rest[i])
		}
		for _, n := range names {
			c, ok := get(n)
			if !ok {
				fmt.Fprintf(inv.Stderr, "Error: No such object: %s\n", n)
				return 1
			}
			state := map[bool]string{true: "running", false: "exited"}[c.running]
			if format != "" {
				fmt.Fprintln(inv.Stdout, strings.NewReplacer("{{.State.Status}}", state, "{{.State.Running}}", strconv.FormatBool(c.running), "{{.Name}}", "/"+c.name, "{{.Config.Image}}", c.image).Replace(format))
				continue
			}
			fmt.Fprintf(inv.Stdout, "[\n    {\n        \"Id\": %q,\n        \"Name\": %q,\n        \"State\": {\n            \"Status\": %q,\n            \"Running\": %t\n        }\n    }\n]\n", c.id, "/"+c.name, state, c.running)
		}
		return 0
	case "version", "--version", "-v":
		fmt.Fprintln(inv.Stdout, "Docker version 27.3.1, build ce12230")
		return 0
	}
	fmt.Fprintf(inv.Stderr, "docker: '%s' is not a docker command.\nSee 'docker --help'\n", verb)
	return 1
}

// humanAgo renders docker's "3 days" / "About an hour" durations.
func humanAgo(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d seconds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d minutes", int(d.Minutes()))
	case d < 2*time.Hour:
		return "About an hour"
	case d < 48*time.Hour:
		return fmt.Sprintf("%d hours", int(d.Hours()))
	case d < 14*24*time.Hour:
		return fmt.Sprintf("%d days", int(d.Hours()/24))
	}
	return fmt.Sprintf("%d weeks", int(d.Hours()/24/7))
}
