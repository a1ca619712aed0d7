package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/shared/duration"
)

// driftReport is the part of GET /api/v1/audit/drift the command prints.
type driftReport struct {
	ID         string  `json:"id"`
	Status     string  `json:"status"`
	Trigger    string  `json:"trigger"`
	FinishedAt string  `json:"finished_at"`
	AgeSeconds float64 `json:"age_seconds"`
	Hosts      []struct {
		Host      string `json:"host"`
		Reachable bool   `json:"reachable"`
		Error     string `json:"error"`
		LXC       int    `json:"lxc"`
		VM        int    `json:"vm"`
	} `json:"hosts"`
	// Clusters are the Proxmox clusters the report asked (each once, through a live member):
	// nil from a scheduler that lists each host apart.
	Clusters []struct {
		Name  string `json:"name"`
		Nodes []struct {
			Node    string `json:"node"`
			Address string `json:"address"`
			Online  bool   `json:"online"`
			Host    string `json:"host"`
		} `json:"nodes"`
	} `json:"clusters"`
	Missing []struct {
		Host string `json:"host"`
		// Node and Cluster place a guest on a cluster node the graph lacks (Host "").
		Node    string `json:"node"`
		Cluster string `json:"cluster"`
		Kind    string `json:"kind"`
		VMID    int    `json:"vmid"`
		Name    string `json:"name"`
		Status  string `json:"status"`
		Hint    string `json:"hint"`
	} `json:"missing"`
	Ghost []struct {
		Entity string `json:"entity"`
		Host   string `json:"host"`
		Kind   string `json:"kind"`
		VMID   int    `json:"vmid"`
		State  string `json:"state"`
		Hint   string `json:"hint"`
	} `json:"ghost"`
	Unchecked []struct {
		Entity string `json:"entity"`
		Reason string `json:"reason"`
	} `json:"unchecked"`
}

// runDrift prints the latest drift report (guests the Proxmox hosts run that the graph lacks,
// and entities whose guest is gone); --refresh asks the scheduler for a new one first.
func runDrift(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) > 0 && args[0] == "adopt" {
		return runDriftAdopt(ctx, env, args[1:])
	}
	fs := flag.NewFlagSet("drift", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	refresh := fs.Bool("refresh", false, "run pct list / qm list on every Proxmox host now and wait for the result")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	timeout := duration.Flag(fs, "timeout", 60*time.Second, "with --refresh: how long to wait for the scheduler")
	fs.Usage = func() {
		fmt.Fprintln(env.Stderr, "usage: oikos drift [--refresh] [--timeout 60s] [--json]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	var q apiclient.DriftReportParams
	if *refresh {
		q = apiclient.DriftReportParams{Refresh: refresh, Timeout: apiclient.Ptr(timeout.String())}
		// The api waits up to timeout for the scheduler; give the request a little more.
		env = withTimeout(env, *timeout, 10*time.Second)
	}
	var raw json.RawMessage
	if err := env.do(func(c *apiclient.Client) (*http.Response, error) { return c.DriftReport(ctx, &q) }, &raw); err != nil {
		fmt.Fprintf(env.Stderr, "oikos drift: %v\n", err)
		return 1
	}
	if *asJSON {
		return printIndented(env, "oikos drift", raw)
	}
	var rep driftReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		fmt.Fprintf(env.Stderr, "oikos drift: unexpected answer: %v\n", err)
		return 1
	}
	printDrift(env.Stdout, rep)
	if len(rep.Clusters) == 0 {
		// The report asked no cluster (none is in the graph yet): the adds found them.
		var cs struct {
			Items []clusterView `json:"items"`
		}
		if err := env.do(func(c *apiclient.Client) (*http.Response, error) { return c.ListClusters(ctx) }, &cs); err != nil {
			fmt.Fprintf(env.Stderr, "oikos drift: %v\n", err)
			return 1
		}
		printStoredClusters(env.Stdout, cs.Items)
	}
	return 0
}

// printStoredClusters lists the clusters the adds found, and which of their nodes the graph
// lacks (drift adopt --all adopts them).
func printStoredClusters(w io.Writer, cs []clusterView) {
	for _, c := range cs {
		in := "in the graph"
		if !c.InGraph {
			in = "not in the graph"
		}
		fmt.Fprintf(w, "\ncluster %s (%s, found through %s):\n", c.Entity, in, c.VouchedBy)
		for _, n := range c.Nodes {
			host := n.Host
			if host == "" {
				host = "not in the graph (drift adopt --all adopts it and its guests)"
			}
			fmt.Fprintf(w, "  %-16s %-21s %s\n", n.Node, n.Address, host)
		}
	}
}

func printDrift(w io.Writer, rep driftReport) {
	age := ""
	if rep.AgeSeconds > 0 {
		age = fmt.Sprintf(", %s ago", (time.Duration(rep.AgeSeconds) * time.Second).String())
	}
	fmt.Fprintf(w, "drift report %s (%s, finished %s%s)\n", rep.ID, rep.Trigger, rep.FinishedAt, age)
	var down []string
	for _, h := range rep.Hosts {
		if !h.Reachable {
			down = append(down, fmt.Sprintf("%s (%s)", h.Host, h.Error))
		}
	}
	fmt.Fprintf(w, "%d Proxmox host(s) listed, %d unreachable; %d missing, %d ghost, %d unchecked\n",
		len(rep.Hosts), len(down), len(rep.Missing), len(rep.Ghost), len(rep.Unchecked))
	for _, c := range rep.Clusters {
		fmt.Fprintf(w, "\ncluster %s:\n", c.Name)
		for _, n := range c.Nodes {
			state, host := "online", n.Host
			if !n.Online {
				state = "offline"
			}
			if host == "" {
				host = "not in the graph (drift adopt --all adopts it and its guests)"
			}
			fmt.Fprintf(w, "  %-16s %-21s %-7s %s\n", n.Node, n.Address, state, host)
		}
	}
	if len(rep.Missing) > 0 {
		fmt.Fprintln(w, "\nmissing (running on a host, no entity in the graph):")
		for _, m := range rep.Missing {
			where := m.Host
			if where == "" {
				where = "node " + m.Node
			}
			fmt.Fprintf(w, "  %-24s %-3s %-6d %-24s %s", where, m.Kind, m.VMID, m.Name, m.Status)
			if m.Hint != "" {
				fmt.Fprintf(w, "  (%s)", m.Hint)
			}
			fmt.Fprintln(w)
		}
	}
	if len(rep.Ghost) > 0 {
		fmt.Fprintln(w, "\nghost (an entity in the graph, not on its host):")
		for _, g := range rep.Ghost {
			fmt.Fprintf(w, "  %-32s %-3s %-6d on %s [%s]", g.Entity, g.Kind, g.VMID, g.Host, g.State)
			if g.Hint != "" {
				fmt.Fprintf(w, "  (%s)", g.Hint)
			}
			fmt.Fprintln(w)
		}
	}
	if len(rep.Unchecked) > 0 {
		fmt.Fprintln(w, "\nunchecked (could not be compared):")
		for _, u := range rep.Unchecked {
			fmt.Fprintf(w, "  %-32s %s\n", u.Entity, u.Reason)
		}
	}
	if len(down) > 0 {
		fmt.Fprintln(w, "\nunreachable hosts:")
		fmt.Fprintln(w, "  "+strings.Join(down, "\n  "))
	}
}
