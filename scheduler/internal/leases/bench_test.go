package leases

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
)

// statementCount counts the statements a pool sends.
type statementCount struct{ n atomic.Int64 }

func (c *statementCount) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *statementCount) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// backendCPU is the CPU time the Postgres backend pid has used (utime + stime, from /proc:
// the test cluster runs on this machine).
func backendCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Skipf("backend CPU: %v", err)
	}
	// The command name (field 2) is in parentheses and may hold spaces; count after it.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	ut, _ := strconv.ParseInt(fields[11], 10, 64)
	st, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100) // USER_HZ
}

// The lease traffic of one scheduler of two on the 40-host fleet (41 units): a renewal tick
// (heartbeat, crash look-up, members, units, renew-and-take) and the crash look-up alone,
// which runs every second between ticks. pg-µs/op is the Postgres backend's CPU per
// operation; statements/op how many it sends.
func BenchmarkLeaseTraffic(b *testing.B) {
	lab := labtest.New(b, labtest.Options{Inventory: fleet(40), NoSim: true})
	cfg := lab.DB.Config().Copy()
	cfg.MaxConns, cfg.MinConns = 1, 1
	var sent statementCount
	cfg.ConnConfig.Tracer = &sent
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	var pid int
	if err := pool.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		b.Fatal(err)
	}
	other := newManager(b, lab, "other")
	m, err := New(Options{Pool: pool, ID: "this", Logger: zerolog.Nop(), Renew: time.Hour, Expiry: 2 * time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for range 3 {
		if err := other.Tick(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.Tick(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("this holds %d of 42 units", len(m.Owned()))
	for _, bc := range []struct {
		name string
		op   func() error
	}{
		{"tick", func() error { return m.Tick(ctx) }},
		{"reap", func() error { _, err := m.reap(ctx); return err }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c0, s0 := backendCPU(b, pid), sent.n.Load()
			b.ResetTimer()
			for range b.N {
				if err := bc.op(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((backendCPU(b, pid)-c0).Microseconds())/float64(b.N), "pg-µs/op")
			b.ReportMetric(float64(sent.n.Load()-s0)/float64(b.N), "statements/op")
		})
	}
}
