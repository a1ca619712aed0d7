package checkrun

// BenchmarkHTTPTotalCost (issue 32 item 6; figures in docs/benchmarks.md): the whole CPU an
// http check costs — the scheduler's own plus every Postgres process of the private cluster,
// net of what that cluster spends idle — on 100 URLs at 10 and 100 checks/s, the figure the
// issue compares with Gatus's 1.26 ms per check at 10/s on the same machine.
//
// 100 ingress routes, each on a name of its own, against the HTTP server of a child process
// (this test binary re-executed, so /proc/self/stat is the scheduler's alone). Postgres's idle
// rate is measured first over two windows with no runner; then, each with a fresh runner
// after a warm-up in which every check has run once: the 100 routes every 10 s (10 checks/s,
// two windows long) and every 1 s (100 checks/s). Windows: OIKOS_BENCH_SECONDS (default 30 s);
// OIKOS_BENCH_ONLY picks phases by substring.
//
//	bin/oikos-local test -- go test -run '^$' -bench BenchmarkHTTPTotalCost -benchtime 1x ./scheduler/internal/checkrun/

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/remote"
)

// gatusMsPerCheck is the reference the issue measured on this machine: Gatus's CPU per http
// check at 10 checks/s on the same 100 URLs (its module is not served by the Go proxy here,
// so it cannot be built beside this benchmark).
const gatusMsPerCheck = 1.26

func BenchmarkHTTPTotalCost(b *testing.B) {
	if testing.Short() {
		b.Skip("minutes long")
	}
	window := benchSeconds()
	var info connsChildInfo
	startBenchChild(b, benchConnsChildEnv+"=1", &info)
	accepted := childAccepted(b, info.Control)
	_, port, _ := net.SplitHostPort(info.HTTP)
	const urls = 100
	var inv strings.Builder
	inv.WriteString("entities:\n")
	names := map[string]string{}
	for i := 0; i < urls; i++ {
		host := fmt.Sprintf("url%03d.lab.example", i)
		names[host] = "127.0.0.1"
		fmt.Fprintf(&inv, "  - {type: ingress-route, name: %s, attributes: {url: \"http://%s:%s/health\"}}\n", host, host, port)
	}
	lab := labtest.New(b, labtest.Options{Inventory: []byte(inv.String()), NoSim: true})
	ssh := remote.NewPool(remote.PoolOptions{Signer: labtest.Signer(b), HostKeys: remote.NewMemoryHostKeys(), Logger: zerolog.Nop()})
	defer ssh.Close()
	lab.DeriveChecks(b, func(t checks.Target, d *checks.Def) bool { return t.Type == "ingress-route" && d.Kind == "http" })
	meter := newPGMeter(b, lab.DB)
	base := Options{Pool: lab.DB, SSH: ssh, Fleet: lab.Fleet, NameMap: names, Concurrency: DefaultConcurrency}
	b.ResetTimer()

	p0 := meter.sample()
	t0 := time.Now()
	// As long as the 10/s window: autovacuum visits each database once a minute and the
	// checkpointer wakes every few minutes, so a shorter idle window misses them.
	idle := time.NewTimer(2 * window)
	<-idle.C
	idleWin := time.Since(t0)
	idleCPU := meter.sample().sub(p0)
	idleRate := idleCPU.total().Seconds() / idleWin.Seconds() // CPU seconds per second
	b.Logf("postgres idle: %.2f ms CPU per second (backends %s, other %s over %s)  load %s",
		1000*idleRate, idleCPU.backends, idleCPU.other, idleWin.Round(time.Second), loadAvg())

	var phases []pgPhase
	for _, ph := range []struct {
		name     string
		interval time.Duration
		warm     time.Duration
		window   time.Duration
	}{
		{"10 checks/s", 10 * time.Second, 12 * time.Second, 2 * window},
		{"100 checks/s", time.Second, 3 * time.Second, window},
	} {
		if !benchWants(ph.name) {
			continue
		}
		setIntervals(b, lab, "http", ph.interval)
		o := base
		o.InitialSpread = ph.interval
		phases = append(phases, measurePG(b, ph.name, o, meter, accepted, ph.warm, ph.window))
	}
	b.StopTimer()
	for _, p := range phases {
		pgNet := (p.pg.total().Seconds() - idleRate*p.window.Seconds()) * 1000 / float64(max(p.runs, 1))
		total := p.ms(p.self) + pgNet
		b.Logf("%-14s TOTAL %.3f ms/check = scheduler %.3f + postgres net of idle %.3f (gross %.3f); %.2f of Gatus's %.2f ms at 10/s",
			p.name, total, p.ms(p.self), pgNet, p.ms(p.pg.total()), total/gatusMsPerCheck, gatusMsPerCheck)
		unit := strings.Fields(p.name)[0] + "/s"
		b.ReportMetric(total, "total-ms/check@"+unit)
		b.ReportMetric(p.ms(p.self), "sched-ms/check@"+unit)
		b.ReportMetric(pgNet, "pgnet-ms/check@"+unit)
	}
}
