package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/shared/duration"
)

// discovery is POST /api/v1/entities/{ref}/discover/services's answer; acceptedServices is
// POST /api/v1/entities/{ref}/services's.
type (
	discovery        = apiclient.ServiceDiscovery
	acceptedServices = apiclient.AcceptedServices
)

// acceptService is one service of an accept's body.
type acceptService struct {
	Name string `json:"name"`
	Unit string `json:"unit,omitempty"`
	Port *int   `json:"port,omitempty"`
}

const discoverUsage = "usage: oikos discover services SLUG [--accept all|NAME,NAME] [--timeout 60s] [--json]"

// runDiscover is `oikos discover services SLUG`: the api runs two read-only commands on the
// machine or guest through the gate (running units, listening ports) and proposes a service
// entity per unit; the command prints them, and with --accept creates the ones named (all: every
// proposal not in the graph yet) with their runs-on edges.
func runDiscover(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 || args[0] != "services" {
		fmt.Fprintln(env.Stderr, discoverUsage)
		return 2
	}
	fs := flag.NewFlagSet("oikos discover services", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	accept := fs.String("accept", "", "create these proposals: all (every one not in the graph yet) or NAME,NAME")
	timeout := duration.Flag(fs, "timeout", 60*time.Second, "how long the api waits for the two commands (1s to 10m)")
	asJSON := fs.Bool("json", false, "print the api's answers as JSON")
	fs.Usage = func() {
		fmt.Fprintln(env.Stderr, discoverUsage)
		fs.PrintDefaults()
	}
	// Flags may come before or after the slug.
	var pos []string
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(pos) != 1 || *timeout <= 0 {
		fs.Usage()
		return 2
	}
	slug := pos[0]
	// The api waits up to timeout for the scheduler; give the request a little more.
	env = withTimeout(env, *timeout, 30*time.Second)

	var raw json.RawMessage
	if err := env.do(func(c *apiclient.Client) (*http.Response, error) {
		return c.DiscoverServices(ctx, slug, &apiclient.DiscoverServicesParams{Timeout: apiclient.Ptr(timeout.String())})
	}, &raw); err != nil {
		fmt.Fprintf(env.Stderr, "oikos discover: %v\n", err)
		return 1
	}
	var d discovery
	if err := json.Unmarshal(raw, &d); err != nil {
		fmt.Fprintf(env.Stderr, "oikos discover: unexpected answer: %v\n", err)
		return 1
	}
	if *accept == "" {
		if *asJSON {
			return printIndented(env, "oikos discover", raw)
		}
		printDiscovery(env.Stdout, slug, d)
		return 0
	}

	var services []acceptService
	if *accept == "all" {
		for _, p := range d.Proposals {
			if !p.Exists {
				services = append(services, acceptService{Name: p.Name, Unit: p.Unit, Port: p.Port})
			}
		}
	} else {
		byName := map[string]int{}
		for i, p := range d.Proposals {
			byName[p.Name] = i
		}
		for _, n := range strings.Split(*accept, ",") {
			n = strings.TrimSpace(n)
			if n == "" {
				continue
			}
			i, ok := byName[n]
			if !ok {
				fmt.Fprintf(env.Stderr, "oikos discover: no proposal is named %q on %s (proposed: %s)\n", n, slug, proposalNames(d))
				return 1
			}
			p := d.Proposals[i]
			services = append(services, acceptService{Name: p.Name, Unit: p.Unit, Port: p.Port})
		}
	}
	if len(services) == 0 {
		if *asJSON {
			return printIndented(env, "oikos discover", raw)
		}
		printDiscovery(env.Stdout, slug, d)
		fmt.Fprintln(env.Stdout, "\nnothing to accept: every proposal is in the graph already")
		return 0
	}
	var a acceptedServices
	var araw json.RawMessage
	if err := env.do(func(c *apiclient.Client) (*http.Response, error) {
		return c.AcceptServicesWithBody(ctx, slug, apiclient.ContentJSON, apiclient.JSONBody(map[string]any{"services": services}))
	}, &araw); err != nil {
		fmt.Fprintf(env.Stderr, "oikos discover: accept: %v\n", err)
		return 1
	}
	if err := json.Unmarshal(araw, &a); err != nil {
		fmt.Fprintf(env.Stderr, "oikos discover: unexpected answer: %v\n", err)
		return 1
	}
	if *asJSON {
		both, err := json.Marshal(map[string]json.RawMessage{"discovery": raw, "accepted": araw})
		if err != nil {
			fmt.Fprintf(env.Stderr, "oikos discover: %v\n", err)
			return 1
		}
		return printIndented(env, "oikos discover", both)
	}
	for _, c := range a.Created {
		fmt.Fprintf(env.Stdout, "created %s%s -runs-on-> %s\n", c.Slug, serviceDetail(deref(c.Unit), c.Port), c.RunsOn)
	}
	for _, s := range a.Skipped {
		fmt.Fprintf(env.Stdout, "skipped %s: %s\n", s.Name, s.Reason)
	}
	fmt.Fprintf(env.Stdout, "%d created, %d skipped, %d checks derived\n", len(a.Created), len(a.Skipped), a.ChecksChanged)
	return 0
}

func serviceDetail(unit string, port *int) string {
	var parts []string
	if unit != "" {
		parts = append(parts, unit)
	}
	if port != nil {
		parts = append(parts, "port "+strconv.Itoa(*port))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func proposalNames(d discovery) string {
	var n []string
	for _, p := range d.Proposals {
		n = append(n, p.Name)
	}
	if len(n) == 0 {
		return "none"
	}
	return strings.Join(n, ", ")
}

// printDiscovery prints the proposals as a table and ends with the command that accepts the
// new ones.
func printDiscovery(w io.Writer, slug string, d discovery) {
	var ids []string
	for _, x := range d.Executions {
		ids = append(ids, x.Id.String())
	}
	fmt.Fprintf(w, "services running on %s (executions %s)\n", d.Target, strings.Join(ids, ", "))
	if len(d.Proposals) == 0 {
		fmt.Fprintln(w, "no running service units beyond the base system")
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tUNIT\tPORTS\tEXISTS")
		for _, p := range d.Proposals {
			ports := make([]string, 0, len(p.Ports))
			for _, n := range p.Ports {
				ports = append(ports, strconv.Itoa(n))
			}
			if len(ports) == 0 {
				ports = []string{"-"}
			}
			exists := "no"
			if p.Exists {
				exists = "yes (" + deref(p.Entity) + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, p.Unit, strings.Join(ports, ","), exists)
		}
		tw.Flush()
	}
	for _, p := range d.Proposals {
		if p.Note != nil && *p.Note != "" {
			fmt.Fprintf(w, "note: %s: %s\n", p.Unit, *p.Note)
		}
	}
	if len(d.Plumbing) > 0 {
		fmt.Fprintf(w, "left out as base-system plumbing: %s\n", strings.Join(d.Plumbing, ", "))
	}
	if len(d.UnmatchedListeners) > 0 {
		var l []string
		for _, u := range d.UnmatchedListeners {
			p := u.Process
			if p == "" {
				p = "unknown process"
			}
			l = append(l, fmt.Sprintf("%s:%d (%s)", u.Address, u.Port, p))
		}
		fmt.Fprintf(w, "listening, but matching no unit: %s\n", strings.Join(l, ", "))
	}
	var fresh []string
	for _, p := range d.Proposals {
		if !p.Exists {
			fresh = append(fresh, p.Name)
		}
	}
	if len(fresh) == 0 {
		fmt.Fprintln(w, "\nnothing new: every running service is in the graph")
		return
	}
	fmt.Fprintf(w, "\naccept them with:\n  oikos discover services %s --accept %s\n", shellWord(slug), shellWord(strings.Join(fresh, ",")))
}

var plainWord = regexp.MustCompile(`^[A-Za-z0-9@%+=:,./_-]+$`)

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	if plainWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
