package proxmox

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"sort"
	"strings"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// defaultTemplates is the container template cache of every Proxmox host: two Debian
// releases and one Ubuntu, as `pveam list local` shows them.
var defaultTemplates = []template{
	{Volid: "local:vztmpl/debian-11-standard_11.7-1_amd64.tar.zst", SizeMB: 109.23},
	{Volid: "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst", SizeMB: 120.29},
	{Volid: "local:vztmpl/ubuntu-24.04-standard_24.04-2_amd64.tar.zst", SizeMB: 141.11},
}

func templateCache(extra []string) []template {
	ts := append([]template(nil), defaultTemplates...)
	seen := map[string]bool{}
	for _, t := range ts {
		seen[t.Volid] = true
	}
	for _, v := range extra {
		if seen[v] || !strings.Contains(v, ":vztmpl/") {
			continue
		}
		seen[v] = true
		h := fnv.New32a()
		h.Write([]byte(v))
		ts = append(ts, template{Volid: v, SizeMB: round2(3 + float64(h.Sum32()%20000)/100)})
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Volid < ts[j].Volid })
	return ts
}

func (pt *Tools) pveam(_ context.Context, inv *shell.Invocation, _ string) int {
	if len(inv.Args) < 2 {
		return noCommand(inv, "pveam")
	}
	switch inv.Args[1] {
	case "list":
		if len(inv.Args) < 3 {
			fmt.Fprint(inv.Stderr, "400 not enough arguments\npveam list <storage> [OPTIONS]\n")
			return exitPVE
		}
		storage := inv.Args[2]
		if !storages[storage] {
			fmt.Fprintf(inv.Stderr, "storage '%s' does not exist\n", storage)
			return exitPVE
		}
		var ts []template
		for _, t := range pt.templates {
			if strings.HasPrefix(t.Volid, storage+":") {
				ts = append(ts, t)
			}
		}
		io.WriteString(inv.Stdout, formatPveamList(ts))
		return 0
	case "update":
		fmt.Fprintln(inv.Stdout, "update successful")
		return 0
	case "available":
		fmt.Fprintf(inv.Stdout, "%-15s %s\n", "system", "debian-12-standard_12.7-1_amd64.tar.zst")
		fmt.Fprintf(inv.Stdout, "%-15s %s\n", "system", "debian-13-standard_13.1-2_amd64.tar.zst")
		fmt.Fprintf(inv.Stdout, "%-15s %s\n", "system", "ubuntu-24.04-standard_24.04-2_amd64.tar.zst")
		return 0
	}
	fmt.Fprintf(inv.Stderr, "ERROR: unknown command 'pveam %s'\n", inv.Args[1])
	return exitPVE
}
