// Package docker simulates the docker CLI (Docker Engine 27, Compose v2) of a guest that
// runs containers: ps, images, inspect, logs, stats, info, version, compose ls/ps and the
// container verbs (start, stop, restart, kill, exec), over the machine's containers
// (labsim/system/state). Formats follow the Docker CLI reference (docs.docker.com/reference/cli/docker);
// a verb or flag the lab does not model is refused with the CLI's own messages and exit codes.
package docker

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
	"github.com/oikos-hq/oikos/testkit/labsim/system/state"
)

// Version is the Docker Engine version on Debian 12 (docker-ce's apt repository);
// ComposeVersion the Compose plugin's. Debian 13 guests run the 28.x series.
const (
	Version        = "27.3.1"
	ComposeVersion = "v2.29.7"
)

func (t Tool) version() string {
	if t.M.Distro() == "debian-13" {
		return "28.5.1"
	}
	return Version
}

func (t Tool) composeVersion() string {
	if t.M.Distro() == "debian-13" {
		return "v2.40.0"
	}
	return ComposeVersion
}

// Tool is the docker program bound to one machine.
type Tool struct{ M state.Machine }

// Program is the docker command.
func (t Tool) Program() shell.Program { return t.docker }

// flagSet is what one docker sub-command accepts: flags with a value and boolean flags.
type flagSet struct {
	vals, bools []string
}

type parsed struct {
	vals  map[string]string
	bools map[string]bool
	args  []string
}

// parseFlags parses cobra-style; an unknown flag answers as the CLI does (exit 125).
func parseFlags(inv *shell.Invocation, cmd string, fs flagSet, args []string) (parsed, bool) {
	p := parsed{vals: map[string]string{}, bools: map[string]bool{}}
	in := func(list []string, f string) bool {
		for _, x := range list {
			if x == f {
				return true
			}
		}
		return false
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			p.args = append(p.args, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			p.args = append(p.args, a)
			continue
		}
		name, v, hasV := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case in(fs.vals, name):
			if !hasV {
				if i+1 >= len(args) {
					fmt.Fprintf(inv.Stderr, "flag needs an argument: %s\nSee 'docker %s --help'.\n", a, cmd)
					return p, false
				}
				i++
				v = args[i]
			}
			p.vals[name] = v
		case in(fs.bools, name):
			p.bools[name] = true
		case !strings.HasPrefix(a, "--") && len(name) > 1 && allIn(fs.bools, name):
			for _, c := range name {
				p.bools[string(c)] = true
			}
		default:
			if strings.HasPrefix(a, "--") {
				fmt.Fprintf(inv.Stderr, "unknown flag: --%s\nSee 'docker %s --help'.\n", name, cmd)
			} else {
				fmt.Fprintf(inv.Stderr, "unknown shorthand flag: '%c' in %s\nSee 'docker %s --help'.\n", name[0], a, cmd)
			}
			return p, false
		}
	}
	return p, true
}

func allIn(list []string, letters string) bool {
	for _, c := range letters {
		ok := false
		for _, x := range list {
			if x == string(c) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func (p parsed) has(names ...string) bool {
	for _, n := range names {
		if p.bools[n] {
			return true
		}
	}
	return false
}

func (p parsed) val(names ...string) string {
	for _, n := range names {
		if v, ok := p.vals[n]; ok {
			return v
		}
	}
	return ""
}

func (t Tool) docker(ctx context.Context, inv *shell.Invocation) int {
	args := inv.Args[1:]
	if len(args) == 0 {
		fmt.Fprintln(inv.Stdout, "\nUsage:  docker [OPTIONS] COMMAND\n\nA self-sufficient runtime for containers")
		return 0
	}
	verb, rest := args[0], args[1:]
	if verb == "container" && len(rest) > 0 {
		verb, rest = rest[0], rest[1:]
		if verb == "ls" || verb == "list" {
			verb = "ps"
		}
	}
	if verb == "image" && len(rest) > 0 && (rest[0] == "ls" || rest[0] == "list") {
		verb, rest = "images", rest[1:]
	}
	switch verb {
	case "ps":
		return t.ps(inv, rest)
	case "images":
		return t.images(inv, rest)
	case "inspect":
		return t.inspect(inv, rest)
	case "logs":
		return t.logs(inv, rest)
	case "stats":
		return t.stats(ctx, inv, rest)
	case "info":
		return t.info(inv, rest)
	case "compose":
		return t.compose(inv, rest)
	case "restart", "start", "stop", "kill":
		return t.control(inv, verb, rest)
	case "exec":
		return t.exec(ctx, inv, rest)
	case "--version", "-v":
		fmt.Fprintf(inv.Stdout, "Docker version %s, build ce12230\n", t.version())
		return 0
	case "version":
		fmt.Fprintf(inv.Stdout, "Client: Docker Engine - Community\n Version:           %[1]s\n API version:       1.47\n Go version:        go1.22.7\n Git commit:        ce12230\n Built:             Fri Sep 20 11:41:19 2024\n OS/Arch:           linux/amd64\n Context:           default\n\nServer: Docker Engine - Community\n Engine:\n  Version:          %[1]s\n  API version:      1.47 (minimum version 1.24)\n  Go version:       go1.22.7\n  Git commit:       41ca978\n  Built:            Fri Sep 20 11:41:19 2024\n  OS/Arch:          linux/amd64\n  Experimental:     false\n containerd:\n  Version:          1.7.22\n runc:\n  Version:          1.1.14\n docker-init:\n  Version:          0.19.0\n", t.version())
		return 0
	}
	fmt.Fprintf(inv.Stderr, "docker: '%s' is not a docker command.\nSee 'docker --help'\n", verb)
	return 1
}

// Ago renders docker's go-units HumanDuration ("3 days", "About an hour").
func Ago(d time.Duration) string {
	switch s := int(d.Seconds()); {
	case s < 1:
		return "Less than a second"
	case s == 1:
		return "1 second"
	case s < 60:
		return fmt.Sprintf("%d seconds", s)
	}
	switch m := int(d.Minutes()); {
	case m == 1:
		return "About a minute"
	case m < 60:
		return fmt.Sprintf("%d minutes", m)
	}
	switch h := int(d.Hours() + 0.5); {
	case h == 1:
		return "About an hour"
	case h < 48:
		return fmt.Sprintf("%d hours", h)
	case h < 24*7*2:
		return fmt.Sprintf("%d days", h/24)
	case h < 24*30*2:
		return fmt.Sprintf("%d weeks", h/24/7)
	case h < 24*365*2:
		return fmt.Sprintf("%d months", h/24/30)
	}
	return fmt.Sprintf("%d years", int(d.Hours())/24/365)
}

func (t Tool) status(c state.Container) string {
	if c.Running {
		return "Up " + Ago(t.M.Now().Sub(c.Since))
	}
	return "Exited (0) " + Ago(t.M.Now().Sub(c.Since)) + " ago"
}

func stateWord(c state.Container) string {
	if c.Running {
		return "running"
	}
	return "exited"
}

// port is the container's published port (from its image), "" for none.
func port(c state.Container) string {
	known := map[string]string{"jellyfin": "8096", "caddy": "80", "pihole": "53", "grafana": "3000", "postgres": "5432", "homeassistant": "8123"}
	if p, ok := known[c.Name]; ok && c.Running {
		return fmt.Sprintf("0.0.0.0:%[1]s->%[1]s/tcp, [::]:%[1]s->%[1]s/tcp", p)
	}
	return ""
}

func command(c state.Container) string { return `"/init"` }

// fields are the --format placeholders of a container.
func (t Tool) fields(c state.Container) map[string]string {
	return map[string]string{
		".ID": c.ID, ".Names": c.Name, ".Name": c.Name, ".Image": c.Image, ".Status": t.status(c), ".State": stateWord(c),
		".Ports": port(c), ".Command": command(c), ".RunningFor": Ago(t.M.Now().Sub(c.Created)) + " ago",
		".CreatedAt": c.Created.Format("2006-01-02 15:04:05 -0700 MST"), ".Size": "0B (virtual 312MB)", ".Labels": "",
		".Mounts": "", ".Networks": "bridge",
	}
}

var headers = map[string]string{
	".ID": "CONTAINER ID", ".Names": "NAMES", ".Name": "NAME", ".Image": "IMAGE", ".Status": "STATUS", ".State": "STATE",
	".Ports": "PORTS", ".Command": "COMMAND", ".RunningFor": "CREATED", ".CreatedAt": "CREATED AT", ".Size": "SIZE",
	".Repository": "REPOSITORY", ".Tag": "TAG", ".CreatedSince": "CREATED", ".Labels": "LABELS", ".Mounts": "MOUNTS",
	".Networks": "NETWORKS", ".Container": "CONTAINER", ".CPUPerc": "CPU %", ".MemUsage": "MEM USAGE / LIMIT",
	".MemPerc": "MEM %", ".NetIO": "NET I/O", ".BlockIO": "BLOCK I/O", ".PIDs": "PIDS",
}

// render fills a Go-template-like --format ({{.Field}}, "table" prefix, \t) for rows.
func render(inv *shell.Invocation, format string, rows []map[string]string, extra ...string) {
	table := strings.HasPrefix(format, "table")
	format = strings.TrimSpace(strings.TrimPrefix(format, "table"))
	format = strings.ReplaceAll(format, `\t`, "\t")
	fill := func(vals map[string]string) string {
		var b strings.Builder
		s := format
		for {
			i := strings.Index(s, "{{")
			if i < 0 {
				b.WriteString(s)
				break
			}
			j := strings.Index(s[i:], "}}")
			if j < 0 {
				b.WriteString(s)
				break
			}
			b.WriteString(s[:i])
			key := strings.TrimSpace(s[i+2 : i+j])
			b.WriteString(vals[key])
			s = s[i+j+2:]
		}
		return b.String()
	}
	if !table {
		for _, r := range rows {
			fmt.Fprintln(inv.Stdout, fill(r))
		}
		return
	}
	hdr := map[string]string{}
	for k, v := range headers {
		hdr[k] = v
	}
	for i := 0; i+1 < len(extra); i += 2 {
		hdr[extra[i]] = extra[i+1]
	}
	tw := tabwriter.NewWriter(inv.Stdout, 10, 1, 3, ' ', 0)
	fmt.Fprintln(tw, fill(hdr))
	for _, r := range rows {
		fmt.Fprintln(tw, fill(r))
	}
	tw.Flush()
}

func (t Tool) ps(inv *shell.Invocation, args []string) int {
	p, ok := parseFlags(inv, "ps", flagSet{vals: []string{"format", "filter", "f", "n", "last"}, bools: []string{"a", "all", "q", "quiet", "no-trunc", "s", "size", "l", "latest"}}, args)
	if !ok {
		return 125
	}
	var rows []map[string]string
	for _, c := range t.M.Containers() {
		if !c.Running && !p.has("a", "all") {
			continue
		}
		if f := p.val("filter", "f"); f != "" {
			k, v, _ := strings.Cut(f, "=")
			if (k == "name" && !strings.Contains(c.Name, v)) || (k == "status" && stateWord(c) != v) {
				continue
			}
		}
		rows = append(rows, t.fields(c))
	}
	if p.has("q", "quiet") {
		for _, r := range rows {
			fmt.Fprintln(inv.Stdout, r[".ID"])
		}
		return 0
	}
	format := p.val("format")
	if format == "" || format == "table" {
		format = "table {{.ID}}\t{{.Image}}\t{{.Command}}\t{{.RunningFor}}\t{{.Status}}\t{{.Ports}}\t{{.Names}}"
	}
	render(inv, format, rows)
	return 0
}

func imageRef(image string) (repo, tag string) {
	repo, tag, ok := strings.Cut(image, ":")
	if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
		repo, tag, ok = image[:i], image[i+1:], true
	}
	if !ok {
		tag = "latest"
	}
	return repo, tag
}

func imageID(image string) string {
	h := fnv.New64a()
	h.Write([]byte(image))
	return fmt.Sprintf("%012x", h.Sum64()&0xffffffffffff)
}

func imageSize(image string) string {
	h := fnv.New32a()
	h.Write([]byte(image))
	return fmt.Sprintf("%dMB", 40+h.Sum32()%900)
}

func (t Tool) images(inv *shell.Invocation, args []string) int {
	p, ok := parseFlags(inv, "images", flagSet{vals: []string{"format", "filter", "f"}, bools: []string{"a", "all", "q", "quiet", "no-trunc", "digests"}}, args)
	if !ok {
		return 125
	}
	seen := map[string]bool{}
	var rows []map[string]string
	for _, c := range t.M.Containers() {
		if seen[c.Image] {
			continue
		}
		seen[c.Image] = true
		repo, tag := imageRef(c.Image)
		rows = append(rows, map[string]string{".Repository": repo, ".Tag": tag, ".ID": imageID(c.Image),
			".CreatedSince": Ago(t.M.Now().Sub(c.Created.Add(-72*time.Hour))) + " ago", ".Size": imageSize(c.Image),
			".CreatedAt": c.Created.Add(-72 * time.Hour).Format("2006-01-02 15:04:05 -0700 MST")})
	}
	if p.has("q", "quiet") {
		for _, r := range rows {
			fmt.Fprintln(inv.Stdout, r[".ID"])
		}
		return 0
	}
	format := p.val("format")
	if format == "" {
		format = "table {{.Repository}}\t{{.Tag}}\t{{.ID}}\t{{.CreatedSince}}\t{{.Size}}"
	}
	render(inv, format, rows, ".ID", "IMAGE ID")
	return 0
}

func (t Tool) get(inv *shell.Invocation, name string) (state.Container, bool) {
	c, ok := t.M.UpdateContainer(name, func(*state.Container) {})
	if !ok {
		fmt.Fprintf(inv.Stderr, "Error response from daemon: No such container: %s\n", name)
	}
	return c, ok
}

func (t Tool) control(inv *shell.Invocation, verb string, args []string) int {
	p, ok := parseFlags(inv, verb, flagSet{vals: []string{"t", "time", "s", "signal"}, bools: []string{"a", "attach", "i", "interactive"}}, args)
	if !ok {
		return 125
	}
	if len(p.args) == 0 {
		fmt.Fprintf(inv.Stderr, "\"docker %s\" requires at least 1 argument.\nSee 'docker %s --help'.\n", verb, verb)
		return 1
	}
	code := 0
	for _, name := range p.args {
		_, ok := t.M.UpdateContainer(name, func(c *state.Container) {
			c.Running = verb != "stop" && verb != "kill"
			c.Since = t.M.Now()
		})
		if !ok {
			fmt.Fprintf(inv.Stderr, "Error response from daemon: No such container: %s\n", name)
			code = 1
			continue
		}
		fmt.Fprintln(inv.Stdout, name)
	}
	return code
}

func (t Tool) exec(ctx context.Context, inv *shell.Invocation, rest []string) int {
	// The lab's containers have no filesystem of their own: a command runs in the machine's
	// sandboxed shell, which is as harmless as any other guest command.
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
	c, ok := t.get(inv, rest[i])
	if !ok {
		return 1
	}
	if !c.Running {
		fmt.Fprintf(inv.Stderr, "Error response from daemon: container %s is not running\n", c.ID)
		return 1
	}
	return inv.Exec(ctx, rest[i+1:], shell.Stdio{Stdin: inv.Stdin, Stdout: inv.Stdout, Stderr: inv.Stderr})
}

func (t Tool) logs(inv *shell.Invocation, args []string) int {
	p, ok := parseFlags(inv, "logs", flagSet{vals: []string{"tail", "n", "since", "until"}, bools: []string{"t", "timestamps", "f", "follow", "details"}}, args)
	if !ok {
		return 125
	}
	if len(p.args) != 1 {
		fmt.Fprintln(inv.Stderr, "\"docker logs\" requires exactly 1 argument.\nSee 'docker logs --help'.")
		return 1
	}
	c, ok := t.get(inv, p.args[0])
	if !ok {
		return 1
	}
	type line struct {
		at  time.Time
		msg string
	}
	lines := []line{
		{c.Since, fmt.Sprintf("%s [INF] Starting %s", c.Since.UTC().Format("2006-01-02 15:04:05.000"), c.Name)},
		{c.Since.Add(2 * time.Second), fmt.Sprintf("%s [INF] Listening for connections", c.Since.Add(2*time.Second).UTC().Format("2006-01-02 15:04:05.000"))},
		{c.Since.Add(3 * time.Second), fmt.Sprintf("%s [INF] Startup complete", c.Since.Add(3*time.Second).UTC().Format("2006-01-02 15:04:05.000"))},
	}
	if v := p.val("tail", "n"); v != "" && v != "all" {
		n, err := strconv.Atoi(v)
		if err == nil && n >= 0 && n < len(lines) {
			lines = lines[len(lines)-n:]
		}
	}
	for _, l := range lines {
		if p.has("t", "timestamps") {
			fmt.Fprintf(inv.Stdout, "%s %s\n", l.at.UTC().Format("2006-01-02T15:04:05.000000000Z"), l.msg)
			continue
		}
		fmt.Fprintln(inv.Stdout, l.msg)
	}
	return 0
}

func (t Tool) inspect(inv *shell.Invocation, args []string) int {
	p, ok := parseFlags(inv, "inspect", flagSet{vals: []string{"f", "format", "type"}, bools: []string{"s", "size"}}, args)
	if !ok {
		return 125
	}
	if len(p.args) == 0 {
		fmt.Fprintln(inv.Stderr, "\"docker inspect\" requires at least 1 argument.\nSee 'docker inspect --help'.")
		return 1
	}
	format := p.val("f", "format")
	var objs []string
	code := 0
	for _, n := range p.args {
		c, ok := t.M.UpdateContainer(n, func(*state.Container) {})
		if !ok {
			fmt.Fprintf(inv.Stderr, "Error: No such object: %s\n", n)
			code = 1
			continue
		}
		full := fmt.Sprintf("%s%052x", c.ID, 0)
		started := c.Since.UTC().Format(time.RFC3339Nano)
		finished := "0001-01-01T00:00:00Z"
		pid := 0
		if c.Running {
			pid = 2000 + int(c.Since.Unix()%5000)
		} else {
			finished = started
		}
		if format != "" {
			vals := map[string]string{
				".State.Status": stateWord(c), ".State.Running": strconv.FormatBool(c.Running), ".Name": "/" + c.Name,
				".Config.Image": c.Image, ".Id": full, ".ID": full, ".State.StartedAt": started, ".State.FinishedAt": finished,
				".State.Pid": strconv.Itoa(pid), ".State.ExitCode": "0", ".RestartCount": "0", ".Created": c.Created.UTC().Format(time.RFC3339Nano),
				".HostConfig.RestartPolicy.Name": "unless-stopped", ".Image": "sha256:" + imageID(c.Image) + strings.Repeat("0", 52),
				".State.Health.Status": "healthy", ".Config.Hostname": c.ID,
			}
			var b strings.Builder
			s := format
			for {
				i := strings.Index(s, "{{")
				j := strings.Index(s, "}}")
				if i < 0 || j < i {
					b.WriteString(s)
					break
				}
				b.WriteString(s[:i])
				b.WriteString(vals[strings.TrimSpace(s[i+2:j])])
				s = s[j+2:]
			}
			fmt.Fprintln(inv.Stdout, b.String())
			continue
		}
		objs = append(objs, fmt.Sprintf(`    {
        "Id": %q,
        "Created": %q,
        "Path": "/init",
        "Args": [],
        "State": {
            "Status": %q,
            "Running": %t,
            "Paused": false,
            "Restarting": false,
            "OOMKilled": false,
            "Dead": false,
            "Pid": %d,
            "ExitCode": 0,
            "Error": "",
            "StartedAt": %q,
            "FinishedAt": %q
        },
        "Image": "sha256:%s%s",
        "Name": %q,
        "RestartCount": 0,
        "Driver": "overlay2",
        "Platform": "linux",
        "HostConfig": {
            "NetworkMode": "bridge",
            "RestartPolicy": {
                "Name": "unless-stopped",
                "MaximumRetryCount": 0
            }
        },
        "Config": {
            "Hostname": %q,
            "Image": %q,
            "Labels": {
                "com.docker.compose.project": %q,
                "com.docker.compose.service": %q
            }
        },
        "NetworkSettings": {
            "Networks": {
                "bridge": {
                    "Gateway": "172.17.0.1",
                    "IPAddress": "172.17.0.%d",
                    "IPPrefixLen": 16
                }
            }
        }
    }`, full, c.Created.UTC().Format(time.RFC3339Nano), stateWord(c), c.Running, pid, started, finished,
			imageID(c.Image), strings.Repeat("0", 52), "/"+c.Name, c.ID, c.Image, c.Name, c.Name, 2+len(objs)))
	}
	if format == "" {
		if len(objs) == 0 {
			fmt.Fprintln(inv.Stdout, "[]")
		} else {
			fmt.Fprintf(inv.Stdout, "[\n%s\n]\n", strings.Join(objs, ",\n"))
		}
	}
	return code
}

func (t Tool) stats(ctx context.Context, inv *shell.Invocation, args []string) int {
	p, ok := parseFlags(inv, "stats", flagSet{vals: []string{"format"}, bools: []string{"a", "all", "no-stream", "no-trunc"}}, args)
	if !ok {
		return 125
	}
	mem := t.M.Memory()
	var rows []map[string]string
	for _, c := range t.M.Containers() {
		if !c.Running && !p.has("a", "all") {
			continue
		}
		if len(p.args) > 0 && !contains(p.args, c.Name) && !contains(p.args, c.ID) {
			continue
		}
		cpu, used, pids := "0.00%", "0B", "0"
		pct := "0.00%"
		if c.Running {
			mib := t.M.Jitter(180, 0.1)
			cpu = fmt.Sprintf("%.2f%%", t.M.Jitter(0.8, 0.5))
			used = fmt.Sprintf("%.2fMiB", mib)
			pct = fmt.Sprintf("%.2f%%", mib*1024*100/float64(mem.Total))
			pids = "14"
		}
		rows = append(rows, map[string]string{".ID": c.ID, ".Container": c.ID, ".Name": c.Name, ".CPUPerc": cpu,
			".MemUsage": fmt.Sprintf("%s / %.2fGiB", used, float64(mem.Total)/1024/1024), ".MemPerc": pct,
			".NetIO": "1.21MB / 845kB", ".BlockIO": "48.1MB / 12.3MB", ".PIDs": pids})
	}
	format := p.val("format")
	if format == "" {
		format = "table {{.ID}}\t{{.Name}}\t{{.CPUPerc}}\t{{.MemUsage}}\t{{.MemPerc}}\t{{.NetIO}}\t{{.BlockIO}}\t{{.PIDs}}"
	}
	render(inv, format, rows)
	if !p.has("no-stream") {
		<-ctx.Done()
		return 130
	}
	return 0
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (t Tool) info(inv *shell.Invocation, args []string) int {
	p, ok := parseFlags(inv, "info", flagSet{vals: []string{"f", "format"}}, args)
	if !ok {
		return 125
	}
	cs := t.M.Containers()
	running := 0
	images := map[string]bool{}
	for _, c := range cs {
		if c.Running {
			running++
		}
		images[c.Image] = true
	}
	if f := p.val("f", "format"); f != "" {
		vals := map[string]string{".ServerVersion": t.version(), ".Containers": strconv.Itoa(len(cs)), ".ContainersRunning": strconv.Itoa(running),
			".Images": strconv.Itoa(len(images)), ".Driver": "overlay2", ".CgroupVersion": "2", ".Name": t.M.Hostname(), ".NCPU": strconv.Itoa(t.M.Cores())}
		render(inv, f, []map[string]string{vals})
		return 0
	}
	osName := "Debian GNU/Linux 12 (bookworm)"
	if t.M.Distro() == "debian-13" {
		osName = "Debian GNU/Linux 13 (trixie)"
	}
	kernel := t.M.Kernel()
	fmt.Fprintf(inv.Stdout, `Client: Docker Engine - Community
 Version:    %[1]s
 Context:    default
 Debug Mode: false
 Plugins:
  buildx: Docker Buildx (Docker Inc.)
    Version:  v0.17.1
    Path:     /usr/libexec/docker/cli-plugins/docker-buildx
  compose: Docker Compose (Docker Inc.)
    Version:  %[2]s
    Path:     /usr/libexec/docker/cli-plugins/docker-compose

Server:
 Containers: %[3]d
  Running: %[4]d
  Paused: 0
  Stopped: %[5]d
 Images: %[6]d
 Server Version: %[1]s
 Storage Driver: overlay2
  Backing Filesystem: extfs
  Supports d_type: true
  Using metacopy: false
  Native Overlay Diff: true
  userxattr: false
 Logging Driver: json-file
 Cgroup Driver: systemd
 Cgroup Version: 2
 Plugins:
  Volume: local
  Network: bridge host ipvlan macvlan null overlay
  Log: awslogs fluentd gcplogs gelf journald json-file local splunk syslog
 Swarm: inactive
 Runtimes: io.containerd.runc.v2 runc
 Default Runtime: runc
 Init Binary: docker-init
 containerd version: 7f7fdf5fed64eb6a7caf99b3e12efcf9d60e311c
 runc version: v1.1.14-0-g2c9f560
 init version: de40ad0
 Security Options:
  apparmor
  seccomp
   Profile: builtin
  cgroupns
 Kernel Version: %[7]s
 Operating System: %[8]s
 OSType: linux
 Architecture: x86_64
 CPUs: %[9]d
 Total Memory: %.3[10]fGiB
 Name: %[11]s
 ID: %[12]s
 Docker Root Dir: /var/lib/docker
 Debug Mode: false
 Experimental: false
 Insecure Registries:
  127.0.0.0/8
 Live Restore Enabled: false

`, t.version(), t.composeVersion(), len(cs), running, len(cs)-running, len(images), kernel, osName, t.M.Cores(),
		float64(t.M.Memory().Total)/1024/1024, t.M.Hostname(), "a1b2c3d4-"+imageID(t.M.Hostname()))
	return 0
}

// compose answers docker compose ls/ps/version; every container is the one service of a
// project of its own name, defined in /opt/NAME/compose.yaml.
func (t Tool) compose(inv *shell.Invocation, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(inv.Stdout, "\nUsage:  docker compose [OPTIONS] COMMAND\n\nDefine and run multi-container applications with Docker")
		return 0
	}
	project := ""
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch {
		case args[0] == "-p" || args[0] == "--project-name":
			if len(args) > 1 {
				project, args = args[1], args[1:]
			}
		case strings.HasPrefix(args[0], "--project-name="):
			project = strings.TrimPrefix(args[0], "--project-name=")
		case args[0] == "-f" || args[0] == "--file" || args[0] == "--project-directory":
			if len(args) > 1 {
				project, args = strings.TrimPrefix(strings.TrimSuffix(strings.TrimSuffix(args[1], "/compose.yaml"), "/docker-compose.yml"), "/opt/"), args[1:]
			}
		default:
			fmt.Fprintf(inv.Stderr, "unknown flag: %s\n", args[0])
			return 1
		}
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(inv.Stdout, "\nUsage:  docker compose [OPTIONS] COMMAND")
		return 0
	}
	cs := t.M.Containers()
	switch args[0] {
	case "version":
		fmt.Fprintf(inv.Stdout, "Docker Compose version %s\n", t.composeVersion())
		return 0
	case "ls":
		p, ok := parseFlags(inv, "compose ls", flagSet{vals: []string{"format", "filter"}, bools: []string{"a", "all", "q", "quiet"}}, args[1:])
		if !ok {
			return 1
		}
		tw := tabwriter.NewWriter(inv.Stdout, 20, 1, 3, ' ', 0)
		if !p.has("q", "quiet") {
			fmt.Fprintln(tw, "NAME\tSTATUS\tCONFIG FILES")
		}
		for _, c := range cs {
			st := "running(1)"
			if !c.Running {
				if !p.has("a", "all") {
					continue
				}
				st = "exited(1)"
			}
			if p.has("q", "quiet") {
				fmt.Fprintln(tw, c.Name)
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t/opt/%s/compose.yaml\n", c.Name, st, c.Name)
		}
		tw.Flush()
		return 0
	case "ps":
		p, ok := parseFlags(inv, "compose ps", flagSet{vals: []string{"format", "filter", "status"}, bools: []string{"a", "all", "q", "quiet", "services", "no-trunc"}}, args[1:])
		if !ok {
			return 1
		}
		if project == "" && strings.HasPrefix(inv.Dir, "/opt/") {
			project = strings.SplitN(strings.TrimPrefix(inv.Dir, "/opt/"), "/", 2)[0]
		}
		var found *state.Container
		for i := range cs {
			if cs[i].Name == project {
				found = &cs[i]
			}
		}
		if found == nil {
			if project == "" {
				fmt.Fprintln(inv.Stderr, "no configuration file provided: not found")
			} else {
				fmt.Fprintf(inv.Stderr, "no such project: %s\n", project)
			}
			return 1
		}
		c := *found
		if p.has("services") {
			fmt.Fprintln(inv.Stdout, c.Name)
			return 0
		}
		if p.has("q", "quiet") {
			fmt.Fprintln(inv.Stdout, c.ID)
			return 0
		}
		tw := tabwriter.NewWriter(inv.Stdout, 10, 1, 3, ' ', 0)
		fmt.Fprintln(tw, "NAME\tIMAGE\tCOMMAND\tSERVICE\tCREATED\tSTATUS\tPORTS")
		if c.Running || p.has("a", "all") {
			fmt.Fprintf(tw, "%s-%s-1\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Name, c.Name, c.Image, command(c), c.Name,
				Ago(t.M.Now().Sub(c.Created))+" ago", t.status(c), port(c))
		}
		tw.Flush()
		return 0
	}
	fmt.Fprintf(inv.Stderr, "unknown docker command: \"compose %s\"\n", args[0])
	return 1
}
