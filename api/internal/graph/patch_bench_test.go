package graph

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// BenchmarkUpdateAttributes measures the PATCH mutation path (UpdateAttributes) with 8
// concurrent writers, and reports what a PATCH costs besides wall time: client/server round
// trips, CPU of this process (the service plus its trivial load loop) and CPU of the
// PostgreSQL server (every process of the cluster), per operation. On a shared 2-core machine
// the CPU and round-trip figures are the stable ones; wall time depends on the neighbours.
//
//	bin/oikos-local test -- go test -run '^$' -bench UpdateAttributes -benchtime 3000x ./api/internal/graph/
//
// Cases: a service whose patched key no check reads (the HTTP benchmark's write), a service
// whose process-check unit changes (so its check definition is rewritten every time), and an
// lxc (checks derived through the owning-host lookup) with an unread key.
func BenchmarkUpdateAttributes(b *testing.B) {
	db := pgtest.New(b)
	var trips atomic.Int64
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 20
	dialer := &net.Dialer{}
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &tripConn{Conn: c, trips: &trips}, nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	o := parseOntology(b)
	s, err := New(Options{Pool: pool, Ontology: o, Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.SyncOntology(ctx, o); err != nil {
		b.Fatal(err)
	}
	const hosts, guests, services = 8, 400, 2000
	var plan BulkPlan
	var slugs, svcSlugs, lxcSlugs []string
	for i := range hosts {
		plan.Creates = append(plan.Creates, NewEntity{Type: "proxmox-host", Name: fmt.Sprintf("pve%d", i),
			Attributes: map[string]any{"node": fmt.Sprintf("pve%d", i), "lan_ipv4": fmt.Sprintf("127.0.20.%d", i+1)}})
		slugs = append(slugs, fmt.Sprintf("proxmox-host:pve%d", i))
	}
	for i := range guests {
		plan.Creates = append(plan.Creates, NewEntity{Type: "lxc", Name: fmt.Sprintf("ct%04d", i),
			Attributes: map[string]any{"vmid": 100 + i, "host": fmt.Sprintf("pve%d", i%hosts)}})
		lxcSlugs = append(lxcSlugs, fmt.Sprintf("lxc:ct%04d", i))
	}
	for i := range services {
		plan.Creates = append(plan.Creates, NewEntity{Type: "service", Name: fmt.Sprintf("svc%04d", i),
			Attributes: map[string]any{"port": 1000 + i, "unit": fmt.Sprintf("svc%04d.service", i)}})
		svcSlugs = append(svcSlugs, fmt.Sprintf("service:svc%04d", i))
	}
	slugs = append(append(slugs, lxcSlugs...), svcSlugs...)
	tx, err := pool.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.ApplyBulk(ctx, tx, op, o, plan); err != nil {
		b.Fatal(err)
	}
	if _, err := s.SyncChecksBulk(ctx, tx, op, o, slugs); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE`); err != nil {
		b.Fatal(err)
	}
	// Open the connections the writers will use now, so their server processes are among
	// the ones whose CPU is counted (and connecting is not).
	var held []*pgxpool.Conn
	for range 12 {
		c, err := pool.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		held = append(held, c)
	}
	for _, c := range held {
		c.Release()
	}

	cases := []struct {
		name  string
		slugs []string
		patch func(n int) map[string]any
	}{
		{"service-unread-key", svcSlugs, func(n int) map[string]any { return map[string]any{"version": strconv.Itoa(n)} }},
		{"service-check-changes", svcSlugs, func(n int) map[string]any { return map[string]any{"unit": fmt.Sprintf("u%d.service", n)} }},
		{"lxc-unread-key", lxcSlugs, func(n int) map[string]any { return map[string]any{"version": strconv.Itoa(n)} }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			// Warm every connection's statement cache so preparing is not counted.
			for i := range 40 {
				if _, err := s.UpdateAttributes(ctx, op, c.slugs[i], c.patch(-i-1), nil); err != nil {
					b.Fatal(err)
				}
			}
			pgPIDs := clusterPIDs(b, pool)
			var seq atomic.Int64
			b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0))) // 8 writers
			t0, rt0 := selfCPU(), trips.Load()
			pgu0, pgs0 := processCPU(pgPIDs)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := int(seq.Add(1))
					if _, err := s.UpdateAttributes(ctx, op, c.slugs[(n*7919)%len(c.slugs)], c.patch(n), nil); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			t1, rt1 := selfCPU(), trips.Load()
			pgu1, pgs1 := processCPU(pgPIDs)
			n := float64(b.N)
			b.ReportMetric(float64(rt1-rt0)/n, "roundtrips/op")
			b.ReportMetric(float64(t1-t0)/n/1e3, "go-cpu-µs/op")
			b.ReportMetric(float64(pgu1-pgu0+pgs1-pgs0)/n/1e3, "pg-cpu-µs/op")
			b.ReportMetric(float64(pgs1-pgs0)/n/1e3, "pg-sys-µs/op")
		})
	}
}

// tripConn counts round trips: every write that follows a read (or is the first) starts one.
// A pipelined batch is one write, however many statements it carries.
type tripConn struct {
	net.Conn
	trips *atomic.Int64
	mu    sync.Mutex
	read  bool
	wrote bool
}

func (c *tripConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.read || !c.wrote {
		c.trips.Add(1)
	}
	c.read, c.wrote = false, true
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *tripConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.read = true
	c.mu.Unlock()
	return n, err
}

// selfCPU is this process's user+system CPU in nanoseconds.
func selfCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// clusterPIDs lists the PostgreSQL server's processes (backends and background workers);
// they run on this machine, so their CPU can be read from /proc.
func clusterPIDs(tb testing.TB, pool *pgxpool.Pool) []int {
	tb.Helper()
	rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			tb.Fatal(err)
		}
		out = append(out, pid)
	}
	return out
}

// processCPU sums the user and the system CPU time of pids in nanoseconds (from
// /proc/<pid>/stat, in clock ticks of 10 ms); processes that are gone count as zero.
func processCPU(pids []int) (user, sys int64) {
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command (which may contain spaces) start after the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		user += ut * 10_000_000
		sys += st * 10_000_000
	}
	return user, sys
}
