package drift

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
	"github.com/oikos-hq/oikos/seeds"
)

// perHost turns an inventory's clusters into standalone nodes (no member-of edge to a
// cluster: neither the graph nor the lab groups them), which is how drift listed every
// node before it asked the clusters: pct list and qm list on each.
var clusterEdge = regexp.MustCompile(`(?m)^.*type: member-of.*target: "cluster:.*\n`)

func perHost(inv []byte) []byte {
	out := clusterEdge.ReplaceAll(inv, nil)
	if s := strings.TrimRight(string(out), "\n"); strings.HasSuffix(s, "relationships:") {
		out = []byte(s + " []\n") // no edge left
	}
	return out
}

// syntheticClusters is an inventory of clusters clusters of nodes nodes each, every node
// running guests containers.
func syntheticClusters(clusters, nodes, guests int) []byte {
	var b strings.Builder
	b.WriteString("entities:\n")
	n, vmid := 0, 100
	var edges []string
	for c := 1; c <= clusters; c++ {
		fmt.Fprintf(&b, "  - {type: cluster, name: c%d}\n", c)
		for i := 0; i < nodes; i++ {
			n++
			fmt.Fprintf(&b, "  - {type: proxmox-host, name: n%02d, attributes: {lan_ipv4: 127.0.20.%d, ssh_port: 2222, user: root, node: n%02d, os: linux}}\n", n, n, n)
			edges = append(edges, fmt.Sprintf(`  - {type: member-of, source: "proxmox-host:n%02d", target: "cluster:c%d"}`, n, c))
			for g := 0; g < guests; g++ {
				vmid++
				fmt.Fprintf(&b, "  - {type: lxc, name: g%d, attributes: {vmid: %d, host: n%02d, hostname: g%d}}\n", vmid, vmid, n, vmid)
			}
		}
	}
	b.WriteString("relationships:\n" + strings.Join(edges, "\n") + "\n")
	return []byte(b.String())
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDriftSweep measures one drift sweep, before (per-host: every node listed with
// pct list and qm list) and after (cluster: one pvesh get /cluster/resources per cluster),
// and a placement sweep (the clusters alone, every OIKOS_PLACEMENT_INTERVAL), on the demo
// fleet (one cluster of 3 nodes) and on a synthetic 40-node lab of 4 clusters (200 guests).
// commands/sweep are the SSH round trips sent; cpu-ms/sweep is the process's CPU, the
// in-process lab simulator answering them included (an upper bound of the scheduler's).
func BenchmarkDriftSweep(b *testing.B) {
	fleets := []struct {
		name string
		inv  []byte
	}{{"demo", seeds.Inventory()}, {"40-nodes-4-clusters", syntheticClusters(4, 10, 5)}}
	for _, f := range fleets {
		for _, mode := range []string{"per-host", "cluster", "placement"} {
			b.Run(f.name+"/"+mode, func(b *testing.B) {
				inv := f.inv
				if mode == "per-host" {
					inv = perHost(inv)
				}
				lab := labtest.New(b, labtest.Options{Inventory: inv})
				log := newCmdLog(lab.SSH)
				s, err := New(Options{Pool: lab.DB, SSH: log, Fleet: lab.Fleet, HostTimeout: 30 * time.Second})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				sweep := s.RunNow
				if mode == "placement" {
					sweep = s.RunPlacementNow
				}
				if _, err := sweep(ctx); err != nil { // connections opened, host keys pinned
					b.Fatal(err)
				}
				log.take()
				b.ResetTimer()
				cpu0 := cpuTime(b)
				for i := 0; i < b.N; i++ {
					rep, err := sweep(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if len(rep.Missing)+len(rep.Ghost)+len(rep.Moved) != 0 {
						b.Fatalf("a fleet in step: missing %d ghost %d moved %d", len(rep.Missing), len(rep.Ghost), len(rep.Moved))
					}
				}
				cpu := cpuTime(b) - cpu0
				b.StopTimer()
				b.ReportMetric(float64(total(log.take()))/float64(b.N), "commands/sweep")
				b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/sweep")
			})
		}
	}
}
