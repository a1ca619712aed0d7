package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/shared/duration"
)

// hostAnswer is what POST /api/v1/hosts and its confirm and GET answer.
type hostAnswer struct {
	Entity struct {
		Slug  string `json:"slug"`
		Type  string `json:"type"`
		Name  string `json:"name"`
		State string `json:"state"`
	} `json:"entity"`
	Connect struct {
		ID          string `json:"id"`
		Status      string `json:"status"`
		Address     string `json:"address"`
		User        string `json:"user"`
		Fingerprint string `json:"fingerprint"`
		KeyType     string `json:"key_type"`
		Error       string `json:"error"`
		Facts       struct {
			Hostname   string `json:"hostname"`
			OS         string `json:"os"`
			Arch       string `json:"arch"`
			Kernel     string `json:"kernel"`
			Cores      int    `json:"cores"`
			MemoryMB   int    `json:"memory_mb"`
			PVEVersion string `json:"pve_version"`
		} `json:"facts"`
	} `json:"connect"`
	Discovery *struct {
		ReportID string `json:"report_id"`
		Missing  []struct {
			Kind   string `json:"kind"`
			VMID   int    `json:"vmid"`
			Name   string `json:"name"`
			Status string `json:"status"`
		} `json:"missing"`
		Error string `json:"error"`
	} `json:"discovery"`
	Cluster *clusterView `json:"cluster"`
	Next    string       `json:"next"`
}

// clusterView is a Proxmox cluster as the api shows it (GET /clusters, an add's answer).
type clusterView struct {
	Name      string `json:"name"`
	Entity    string `json:"entity"`
	InGraph   bool   `json:"in_graph"`
	Quorate   bool   `json:"quorate"`
	NodeCount int    `json:"node_count"`
	VouchedBy string `json:"vouched_by"`
	Nodes     []struct {
		Node        string `json:"node"`
		Address     string `json:"address"`
		Online      bool   `json:"online"`
		Local       bool   `json:"local"`
		Fingerprint string `json:"fingerprint"`
		KeyType     string `json:"key_type"`
		KeyStatus   string `json:"key_status"`
		KeyError    string `json:"key_error"`
		Host        string `json:"host"`
	} `json:"nodes"`
}

// printCluster prints a cluster's nodes and the key each is pinned with, and on whose word.
func printCluster(w io.Writer, c *clusterView) {
	quorum := "quorate"
	if !c.Quorate {
		quorum = "NOT quorate"
	}
	fmt.Fprintf(w, "it is a member of the Proxmox cluster %s (%d nodes, %s); the host keys of the other nodes were pinned on %s's word:\n",
		c.Name, c.NodeCount, quorum, c.VouchedBy)
	for _, n := range c.Nodes {
		state := "online"
		if !n.Online {
			state = "offline"
		}
		key := n.KeyType + " " + n.Fingerprint
		switch n.KeyStatus {
		case "connected":
			key += " (this host)"
		case "vouched":
			key += " (vouched)"
		case "pinned":
			key += " (pinned already)"
		case "conflict":
			key = "REFUSED: " + n.KeyError
		case "missing":
			key = "no key pinned: " + n.KeyError
		}
		graph := n.Host
		if graph == "" {
			graph = "not in the graph"
		}
		fmt.Fprintf(w, "  %-16s %-21s %-7s %-24s %s\n", n.Node, n.Address, state, graph, strings.TrimSpace(key))
	}
}

// withTimeout gives env's HTTP client room for a request the api holds open for wait: the
// client's timeout becomes at least wait+margin (the margin covers the api's own work around
// the wait).
func withTimeout(env *cliEnv, wait, margin time.Duration) *cliEnv {
	client := *env.HTTP
	client.Timeout = max(client.Timeout, wait+margin)
	e := *env
	e.HTTP = &client
	return &e
}

// runAdd adds a machine: oikos add proxmox-host|host|workstation NAME --address ADDR.
func runAdd(ctx context.Context, env *cliEnv, args []string) int {
	const use = "usage: oikos add proxmox-host|host|workstation|nas|sbc|vps NAME --address IP [--user root] [--port 22] [--fingerprint SHA256:…] [--yes] [--timeout 60s]"
	if len(args) < 2 || strings.HasPrefix(args[0], "-") || strings.HasPrefix(args[1], "-") {
		fmt.Fprintln(env.Stderr, use)
		return 2
	}
	typ, name := args[0], args[1]
	fs := flag.NewFlagSet("oikos add", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	address := fs.String("address", "", "the machine's IP address (names are not resolved)")
	user := fs.String("user", "root", "the SSH login user whose authorized_keys holds the scheduler's key")
	port := fs.Int("port", 22, "the SSH port")
	fingerprint := fs.String("fingerprint", "", "the host key fingerprint you checked on the machine (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub); pins it without asking")
	yes := fs.Bool("yes", false, "trust the key the machine offers without asking (only on a network you trust)")
	timeout := duration.Flag(fs, "timeout", 60*time.Second, "how long to wait for the scheduler")
	asJSON := fs.Bool("json", false, "print the api's JSON")
	if err := fs.Parse(args[2:]); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *address == "" {
		fmt.Fprintln(env.Stderr, use)
		return 2
	}
	env = withTimeout(env, *timeout, 15*time.Second)
	body := apiclient.AddHostJSONRequestBody{Type: &typ, Name: name, Address: *address, User: user, Port: port,
		Fingerprint: apiclient.Opt(*fingerprint), Wait: apiclient.Ptr(timeout.String())}
	var ans hostAnswer
	var raw json.RawMessage
	if err := env.do(func(c *apiclient.Client) (*http.Response, error) { return c.AddHost(ctx, body) }, &raw); err != nil {
		fmt.Fprintf(env.Stderr, "oikos add: %v\n", err)
		return 1
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		fmt.Fprintf(env.Stderr, "oikos add: unexpected answer: %v\n", err)
		return 1
	}
	if ans.Connect.Status == "awaiting_confirmation" {
		fmt.Fprintf(env.Stdout, "%s at %s offered this host key:\n\n  %s %s\n\n", ans.Entity.Slug, ans.Connect.Address,
			ans.Connect.KeyType, ans.Connect.Fingerprint)
		fmt.Fprintln(env.Stdout, "Compare it with what the machine itself says (on its console, not over this network):")
		fmt.Fprintln(env.Stdout, "  ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub")
		if !*yes {
			fmt.Fprint(env.Stdout, "Trust this key? [y/N] ")
			if !confirmed(env.Stdin) {
				fmt.Fprintf(env.Stdout, "\nnot trusted; nothing was pinned and %s stays planned. To pin the key without a prompt:\n  %s\n",
					ans.Entity.Slug, ans.Next)
				return 1
			}
		} else {
			fmt.Fprintln(env.Stdout, "trusting it (--yes)")
		}
		confirm := apiclient.ConfirmHostKeyJSONRequestBody{Fingerprint: ans.Connect.Fingerprint, Wait: apiclient.Ptr(timeout.String())}
		if err := env.do(func(c *apiclient.Client) (*http.Response, error) {
			return c.ConfirmHostKey(ctx, ans.Entity.Slug, confirm)
		}, &raw); err != nil {
			fmt.Fprintf(env.Stderr, "oikos add: %v\n", err)
			return 1
		}
		ans = hostAnswer{}
		if err := json.Unmarshal(raw, &ans); err != nil {
			fmt.Fprintf(env.Stderr, "oikos add: unexpected answer: %v\n", err)
			return 1
		}
	}
	if *asJSON {
		return printIndented(env, "oikos add", raw)
	}
	return printHost(env.Stdout, env.Stderr, ans)
}

// confirmed reads one answer line: y or yes (any case) confirms; anything else, or nothing
// to read (stdin closed, not a terminal), declines.
func confirmed(in io.Reader) bool {
	if in == nil {
		return false
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && line == "" {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// printHost prints a host answer and returns the exit code: 0 connected, 1 failed, 3 still
// waiting for the scheduler.
func printHost(w, errw io.Writer, a hostAnswer) int {
	c := a.Connect
	switch c.Status {
	case "connected":
		f := c.Facts
		fmt.Fprintf(w, "%s is %s: connected to %s as %s", a.Entity.Slug, a.Entity.State, c.Address, c.User)
		if c.Fingerprint != "" {
			fmt.Fprintf(w, " (host key %s pinned)", c.Fingerprint)
		}
		fmt.Fprintln(w)
		parts := []string{}
		for _, p := range []struct{ k, v string }{{"hostname", f.Hostname}, {"os", f.OS}, {"arch", f.Arch}, {"kernel", f.Kernel},
			{"pve", f.PVEVersion}} {
			if p.v != "" {
				parts = append(parts, p.k+" "+p.v)
			}
		}
		if f.Cores > 0 {
			parts = append(parts, strconv.Itoa(f.Cores)+" cores")
		}
		if f.MemoryMB > 0 {
			parts = append(parts, strconv.Itoa(f.MemoryMB)+" MiB")
		}
		if len(parts) > 0 {
			fmt.Fprintln(w, "  "+strings.Join(parts, ", "))
		}
		if a.Cluster != nil {
			printCluster(w, a.Cluster)
		}
		if d := a.Discovery; d != nil {
			if d.Error != "" {
				fmt.Fprintf(w, "discovery: %s\n", d.Error)
			}
			if len(d.Missing) == 0 && d.Error == "" {
				fmt.Fprintln(w, "it runs no guest the graph lacks")
			} else if len(d.Missing) > 0 {
				fmt.Fprintf(w, "it runs %d guest(s) the graph does not know:\n", len(d.Missing))
				for _, m := range d.Missing {
					fmt.Fprintf(w, "  %-3s %-6d %-28s %s\n", m.Kind, m.VMID, m.Name, m.Status)
				}
			}
		}
		if a.Next != "" {
			fmt.Fprintf(w, "next: %s\n", a.Next)
		}
		return 0
	case "failed":
		fmt.Fprintf(errw, "oikos add: %s: %s\n", a.Entity.Slug, c.Error)
		fmt.Fprintf(errw, "%s stays planned; fix the cause and run the same command again\n", a.Entity.Slug)
		return 1
	case "awaiting_confirmation":
		fmt.Fprintf(w, "%s offered %s %s; confirm with:\n  %s\n", c.Address, c.KeyType, c.Fingerprint, a.Next)
		return 1
	default:
		fmt.Fprintf(w, "%s: the scheduler has not answered yet (%s); see it with:\n  %s\n", a.Entity.Slug, c.Status, a.Next)
		return 3
	}
}

// printIndented prints the api's JSON answer indented (--json).
func printIndented(env *cliEnv, cmd string, raw json.RawMessage) int {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		fmt.Fprintf(env.Stderr, "%s: %v\n", cmd, err)
		return 1
	}
	enc := json.NewEncoder(env.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(env.Stderr, "%s: %v\n", cmd, err)
		return 1
	}
	return 0
}

// runHosts shows a machine being added: oikos hosts show SLUG.
func runHosts(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) != 2 || args[0] != "show" {
		fmt.Fprintln(env.Stderr, "usage: oikos hosts show SLUG")
		return 2
	}
	var ans hostAnswer
	if err := env.do(func(c *apiclient.Client) (*http.Response, error) { return c.GetHost(ctx, args[1]) }, &ans); err != nil {
		fmt.Fprintf(env.Stderr, "oikos hosts: %v\n", err)
		return 1
	}
	return printHost(env.Stdout, env.Stderr, ans)
}

// runSSHKey prints the scheduler's public key and how a machine comes to trust it.
func runSSHKey(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) > 0 {
		fmt.Fprintln(env.Stderr, "usage: oikos ssh-key")
		return 2
	}
	var ans struct {
		Keys []struct {
			AuthorizedKey string `json:"authorized_key"`
			Fingerprint   string `json:"fingerprint"`
			SchedulerID   string `json:"scheduler_id"`
		} `json:"keys"`
	}
	if err := env.do(func(c *apiclient.Client) (*http.Response, error) { return c.SshKey(ctx) }, &ans); err != nil {
		fmt.Fprintf(env.Stderr, "oikos ssh-key: %v\n", err)
		return 1
	}
	k := ans.Keys[0]
	w := env.Stdout
	fmt.Fprintf(w, "# The scheduler's public key (%s). Every machine Oikos manages must trust it.\n", k.Fingerprint)
	fmt.Fprintln(w, k.AuthorizedKey)
	fmt.Fprintln(w, "\n# On a Proxmox host (as root; its guests need nothing, they are reached through pct/qm):")
	fmt.Fprintf(w, "mkdir -p ~/.ssh && echo '%s' >> ~/.ssh/authorized_keys\n", k.AuthorizedKey)
	fmt.Fprintln(w, "\n# For the cautious: accept the key only from the Oikos host (put its address in from=), without")
	fmt.Fprintln(w, "# forwarding or a pty, and log every command it runs through a wrapper (command=):")
	fmt.Fprintf(w, "restrict,from=\"192.0.2.10\",command=\"/usr/local/sbin/oikos-ssh\" %s\n", k.AuthorizedKey)
	fmt.Fprintln(w, "# where /usr/local/sbin/oikos-ssh (mode 0755) is:")
	fmt.Fprintln(w, "#   #!/bin/sh")
	fmt.Fprintln(w, "#   logger -t oikos -- \"$SSH_ORIGINAL_COMMAND\"")
	fmt.Fprintln(w, "#   exec /bin/sh -c \"$SSH_ORIGINAL_COMMAND\"")
	if len(ans.Keys) > 1 {
		fmt.Fprintf(w, "\n# %d schedulers have published keys; trust each of them:\n", len(ans.Keys))
		for _, k := range ans.Keys[1:] {
			fmt.Fprintln(w, k.AuthorizedKey)
		}
	}
	fmt.Fprintln(w, "\n# Then: oikos add proxmox-host NAME --address IP")
	return 0
}

// runDriftAdopt adopts missing guests: oikos drift adopt [--all | VMID…] [--host H].
func runDriftAdopt(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("oikos drift adopt", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	all := fs.Bool("all", false, "adopt every missing guest of the latest drift report")
	host := fs.String("host", "", "only guests of this Proxmox host (name or slug)")
	asJSON := fs.Bool("json", false, "print the api's JSON")
	const use = "usage: oikos drift adopt [--host HOST] --all | VMID…"
	// Flags may come after the vmids (oikos drift adopt 101 102 --host pve): the flag package
	// stops at the first argument, so parse again after each run of them.
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return 2
		}
		args = fs.Args()
		for len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			positional, args = append(positional, args[0]), args[1:]
		}
		if len(args) == 0 {
			break
		}
	}
	var vmids []int
	for _, a := range positional {
		v, err := strconv.Atoi(a)
		if err != nil || v <= 0 {
			fmt.Fprintf(env.Stderr, "oikos drift adopt: %q is not a vmid\n%s\n", a, use)
			return 2
		}
		vmids = append(vmids, v)
	}
	if *all == (len(vmids) > 0) {
		fmt.Fprintln(env.Stderr, use)
		return 2
	}
	var raw json.RawMessage
	adopt := apiclient.AdoptDriftJSONRequestBody{All: all, Host: apiclient.Opt(*host)}
	if vmids != nil {
		adopt.Vmids = &vmids
	}
	if err := env.do(func(c *apiclient.Client) (*http.Response, error) { return c.AdoptDrift(ctx, adopt) }, &raw); err != nil {
		fmt.Fprintf(env.Stderr, "oikos drift adopt: %v\n", err)
		return 1
	}
	if *asJSON {
		return printIndented(env, "oikos drift adopt", raw)
	}
	var ans struct {
		Adopted []struct {
			Entity           string `json:"entity"`
			Host             string `json:"host"`
			VMID             int    `json:"vmid"`
			StoppedOnPurpose bool   `json:"stopped_on_purpose"`
		} `json:"adopted"`
		Skipped []struct {
			Host   string `json:"host"`
			VMID   int    `json:"vmid"`
			Reason string `json:"reason"`
		} `json:"skipped"`
		Clusters []struct {
			Entity  string `json:"entity"`
			Created bool   `json:"created"`
			Nodes   []struct {
				Node    string `json:"node"`
				Entity  string `json:"entity"`
				Address string `json:"address"`
				Created bool   `json:"created"`
				Skipped string `json:"skipped"`
			} `json:"nodes"`
		} `json:"clusters"`
		EdgesCreated int    `json:"edges_created"`
		Note         string `json:"note"`
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		fmt.Fprintf(env.Stderr, "oikos drift adopt: unexpected answer: %v\n", err)
		return 1
	}
	w := env.Stdout
	newNodes, clusterCreated := 0, false
	for _, c := range ans.Clusters {
		verb := "in the graph already"
		if c.Created {
			verb, clusterCreated = "adopted", true
		}
		fmt.Fprintf(w, "cluster %s: %s\n", c.Entity, verb)
		for _, n := range c.Nodes {
			switch {
			case n.Skipped != "":
				fmt.Fprintf(w, "  node %-16s not adopted: %s\n", n.Node, n.Skipped)
			case n.Created:
				newNodes++
				fmt.Fprintf(w, "  node %-16s adopted as %s at %s\n", n.Node, n.Entity, n.Address)
			default:
				fmt.Fprintf(w, "  node %-16s is %s\n", n.Node, n.Entity)
			}
		}
	}
	if ans.EdgesCreated > 0 {
		fmt.Fprintf(w, "%d member-of edge(s) made\n", ans.EdgesCreated)
	}
	if len(ans.Adopted) == 0 && newNodes == 0 && ans.EdgesCreated == 0 && !clusterCreated {
		fmt.Fprintln(w, "nothing to adopt")
	} else if len(ans.Adopted) == 0 {
		fmt.Fprintln(w, "adopted 0 guest(s)")
	} else {
		fmt.Fprintf(w, "adopted %d guest(s):\n", len(ans.Adopted))
		for _, a := range ans.Adopted {
			note := ""
			if a.StoppedOnPurpose {
				note = "  (stopped now: recorded as expected_status stopped)"
			}
			fmt.Fprintf(w, "  %-32s vmid %-6d on %s%s\n", a.Entity, a.VMID, a.Host, note)
		}
	}
	for _, s := range ans.Skipped {
		fmt.Fprintf(w, "  skipped %s vmid %d: %s\n", s.Host, s.VMID, s.Reason)
	}
	if ans.Note != "" {
		fmt.Fprintln(w, "note: "+ans.Note)
	}
	return 0
}
