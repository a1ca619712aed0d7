package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// labFaults are the faults `oikos lab fault` sets on a simulated host, in labsim's control
// API form (testkit/labsim Fault): down (unreachable), slow (every command 3 s late), flap
// (each probe of its guests alternates between up and down, run after run).
var labFaults = map[string]map[string]any{
	"down": {"down": true},
	"slow": {"delay": "3s"},
	"flap": {"flap": true},
}

// runLab drives the lab simulator `make up` runs (its loopback control API,
// OIKOS_LAB_URL): a newcomer takes a host down and watches an incident open, group,
// notify and resolve.
func runLab(ctx context.Context, env *cliEnv, args []string) int {
	const usage = "usage: oikos lab fault HOST down|slow|flap | oikos lab clear"
	base := strings.TrimRight(env.Getenv("OIKOS_LAB_URL"), "/")
	if base == "" {
		base = "http://127.0.0.1:7070"
	}
	var (
		method, path string
		body         any
	)
	switch {
	case len(args) == 1 && args[0] == "clear":
		method, path = http.MethodDelete, "/faults"
	case len(args) == 3 && args[0] == "fault":
		fault, ok := labFaults[args[2]]
		if !ok {
			fmt.Fprintf(env.Stderr, "oikos lab: unknown fault %q (down, slow or flap)\n%s\n", args[2], usage)
			return 2
		}
		// "atlas" or its slug "proxmox-host:atlas": labsim knows hosts by name.
		host := args[1]
		if _, name, ok := strings.Cut(host, ":"); ok {
			host = name
		}
		if host == "" || strings.ContainsAny(host, "/?#") {
			fmt.Fprintf(env.Stderr, "oikos lab: %q is not a host name\n", args[1])
			return 2
		}
		method, path, body = http.MethodPut, "/faults/hosts/"+host, fault
	default:
		fmt.Fprintln(env.Stderr, usage)
		return 2
	}
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			fmt.Fprintf(env.Stderr, "oikos lab: %v\n", err)
			return 1
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		fmt.Fprintf(env.Stderr, "oikos lab: %v\n", err)
		return 1
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := env.HTTP.Do(req)
	if err != nil {
		fmt.Fprintf(env.Stderr, "oikos lab: the lab simulator does not answer at %s (is `make up` running? OIKOS_LAB_URL): %v\n", base, err)
		return 1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		var e struct {
			Error string `json:"error"`
		}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		if json.Unmarshal(raw, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(raw))
		}
		fmt.Fprintf(env.Stderr, "oikos lab: %s: %s\n", resp.Status, e.Error)
		return 1
	}
	if method == http.MethodDelete {
		fmt.Fprintln(env.Stdout, "every simulated host and guest is healthy again")
	} else {
		fmt.Fprintf(env.Stdout, "%s is %s; watch: oikos incidents, or the dashboard's overview\n", args[1], args[2])
	}
	return 0
}
