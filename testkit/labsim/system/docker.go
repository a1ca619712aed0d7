package system

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

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
