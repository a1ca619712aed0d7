package checkrun

// BenchmarkRunnerHTTP: the http-check path of issue 6 alone (goal: ≤ 0.4 ms of scheduler CPU
// per check at 100 checks/s). 200 ingress routes, each with one derived http check, against
// an HTTP and an HTTPS server running in a child process (this test binary re-executed), so
// the CPU read from /proc/self/stat is the scheduler's own: runner, HTTP client, result
// writer, pgx. Phases, each with a fresh runner after a warm-up:
//
//   - idle: the 200 checks loaded, each already run once and next due in an hour — the
//     runner's fixed cost (timers, the writer's ticker, the reload poll);
//   - http: every route every 2 s (100 checks/s), plain HTTP/1.1 on kept connections;
//   - https: the same through TLS, trusting the child's CA via LoadCAFile, as production does.
//
// Besides CPU per check it reports counts that do not depend on how busy the machine is:
// heap allocations, read/write system calls (/proc/self/io) and context switches
// (getrusage) per check. OIKOS_BENCH_SECONDS sets the window (default 30 s).
//
//	cd scheduler && go test -run '^$' -bench BenchmarkRunnerHTTP -benchtime 1x ./internal/checkrun/

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/httpprobe"
	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/remote"
)

// benchHTTPChildEnv makes TestMain run runHTTPBenchChild instead of the tests.
const benchHTTPChildEnv = "OIKOS_BENCH_HTTP_CHILD"

// httpChildInfo is what the HTTP bench child reports once it listens.
type httpChildInfo struct {
	HTTP  string `json:"http"`
	HTTPS string `json:"https"`
	CAPEM string `json:"ca_pem"`
}

// runHTTPBenchChild serves the bench's HTTP and HTTPS listeners until stdin closes.
func runHTTPBenchChild() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "http bench child:", err)
		return 1
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok "+r.Host+"\n")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fail(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "oikos http bench CA"},
		DNSNames:  []string{"*.lab.example"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fail(err)
	}
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	tsrv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}}
	go func() { _ = tsrv.ServeTLS(tln, "", "") }()
	defer tsrv.Close()

	info := httpChildInfo{HTTP: ln.Addr().String(), HTTPS: tln.Addr().String(),
		CAPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
	if err := json.NewEncoder(os.Stdout).Encode(info); err != nil {
		return 1
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// procCounters are the process's counters that the bench reports per check.
type procCounters struct {
	cpu          time.Duration
	mallocs      uint64
	allocBytes   uint64
	syscalls     int64 // read- and write-like system calls (/proc/self/io syscr+syscw)
	ctxSwitches  int64 // voluntary, all threads (getrusage): the process waited
	preemptions  int64 // involuntary: another process took the core
	loadAverage1 string
}

func readCounters(b *testing.B) procCounters {
	b.Helper()
	var c procCounters
	var err error
	if c.cpu, err = procCPU("self"); err != nil {
		b.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	c.mallocs, c.allocBytes = ms.Mallocs, ms.TotalAlloc
	c.syscalls = procFields(b, "/proc/self/io", "syscr", "syscw")
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	c.ctxSwitches, c.preemptions = ru.Nvcsw, ru.Nivcsw
	if raw, err := os.ReadFile("/proc/loadavg"); err == nil {
		c.loadAverage1 = strings.Join(strings.Fields(string(raw))[:3], " ")
	}
	return c
}

// procFields sums the named "key: value" lines of a /proc file.
func procFields(b *testing.B, file string, keys ...string) int64 {
	b.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	for _, l := range strings.Split(string(raw), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		for _, want := range keys {
			if k == want {
				n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				if err != nil {
					b.Fatalf("%s %s: %v", file, k, err)
				}
				total += n
			}
		}
	}
	return total
}

// httpPhase is one measured window of BenchmarkRunnerHTTP.
type httpPhase struct {
	name                  string
	window                time.Duration
	runs                  int64
	cpu                   time.Duration
	mallocs, bytes        uint64
	syscalls, ctxSwitches int64
	preemptions           int64
	lagP99                float64
	httpConns             float64
	failures              map[string]float64
	load                  string
}

func (p httpPhase) perCheck(v float64) float64 {
	if p.runs == 0 {
		return 0
	}
	return v / float64(p.runs)
}

func (p httpPhase) msPerCheck() float64 { return p.perCheck(float64(p.cpu.Microseconds()) / 1000) }

func (p httpPhase) String() string {
	return fmt.Sprintf("%-22s %4.0fs  runs %6d  %6.1f checks/s  cpu %5.2f%% of a core  %.3f ms/check  allocs %.0f/check (%.1f KiB)  syscalls %.1f/check  ctx switches %.1f/check (+%.1f involuntary)  lag p99 %.3fs  http conns %.0f  failures %v  load %s",
		p.name, p.window.Seconds(), p.runs, float64(p.runs)/p.window.Seconds(), 100*p.cpu.Seconds()/p.window.Seconds(),
		p.msPerCheck(), p.perCheck(float64(p.mallocs)), p.perCheck(float64(p.bytes))/1024, p.perCheck(float64(p.syscalls)),
		p.perCheck(float64(p.ctxSwitches)), p.perCheck(float64(p.preemptions)), p.lagP99, p.httpConns, p.failures, p.load)
}

// measureHTTP runs a fresh runner over the enabled definitions: warm, then one window.
func measureHTTP(b *testing.B, name string, opts Options, warm, window time.Duration) httpPhase {
	b.Helper()
	reg := metrics.NewRegistry()
	opts.Metrics = reg
	opts.Logger = zerolog.Nop()
	r, err := NewRunner(opts)
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer r.Stop()
	timer := time.NewTimer(warm)
	<-timer.C
	runs0 := r.Status().RunsTotal
	r.lagMu.Lock()
	r.lags, r.lagPos = r.lags[:0], 0
	r.lagMu.Unlock()
	c0 := readCounters(b)
	start := time.Now()
	timer.Reset(window)
	<-timer.C
	c1 := readCounters(b)
	elapsed := time.Since(start)
	st := r.Status()
	p := httpPhase{name: name, window: elapsed, runs: st.RunsTotal - runs0, cpu: c1.cpu - c0.cpu,
		mallocs: c1.mallocs - c0.mallocs, bytes: c1.allocBytes - c0.allocBytes,
		syscalls: c1.syscalls - c0.syscalls, ctxSwitches: c1.ctxSwitches - c0.ctxSwitches, preemptions: c1.preemptions - c0.preemptions,
		lagP99: st.LagP99Seconds, failures: st.FailuresByReason, load: c0.loadAverage1 + " → " + c1.loadAverage1,
		httpConns: reg.Value("oikos_scheduler_http_connections")}
	b.Log(p.String())
	return p
}

func BenchmarkRunnerHTTP(b *testing.B) {
	if testing.Short() {
		b.Skip("a minute and a half long")
	}
	window := benchSeconds()
	var info httpChildInfo
	startBenchChild(b, benchHTTPChildEnv+"=1", &info)
	caFile := filepath.Join(b.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, []byte(info.CAPEM), 0o600); err != nil {
		b.Fatal(err)
	}
	tlsConfig, err := httpprobe.LoadCAFile(caFile)
	if err != nil {
		b.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(info.HTTP)
	_, tlsPort, _ := net.SplitHostPort(info.HTTPS)

	var inv strings.Builder
	inv.WriteString("entities:\n")
	names := map[string]string{}
	for i := 0; i < benchHTTP; i++ {
		host := fmt.Sprintf("svc%03d.lab.example", i)
		names[host] = "127.0.0.1"
		fmt.Fprintf(&inv, "  - {type: ingress-route, name: %s, attributes: {url: \"http://%s:%s/health\"}}\n", host, host, port)
	}
	lab := labtest.New(b, labtest.Options{Inventory: []byte(inv.String()), NoSim: true})
	// No check here goes over SSH; the runner still takes the pool it would share.
	ssh := remote.NewPool(remote.PoolOptions{Signer: labtest.Signer(b), HostKeys: remote.NewMemoryHostKeys(), Logger: zerolog.Nop()})
	defer ssh.Close()
	defs := lab.DeriveChecks(b, func(t checks.Target, d *checks.Def) bool {
		return t.Type == "ingress-route" && d.Kind == "http"
	})
	if len(defs) != benchHTTP {
		b.Fatalf("%d http checks derived, want %d", len(defs), benchHTTP)
	}
	base := Options{Pool: lab.DB, SSH: ssh, Fleet: lab.Fleet, NameMap: names, TLSConfig: tlsConfig, Concurrency: DefaultConcurrency}
	b.Logf("%d http checks against %s (http) and %s (https)", len(defs), info.HTTP, info.HTTPS)

	b.ResetTimer()
	// Idle: every check runs once within the first second, then nothing is due for an hour.
	setIntervals(b, lab, "http", time.Hour)
	idle := base
	idle.InitialSpread = time.Second
	pIdle := measureHTTP(b, "idle (none due)", idle, 5*time.Second, window)

	setIntervals(b, lab, "http", 2*time.Second)
	busy := base
	busy.InitialSpread = 2 * time.Second
	pHTTP := measureHTTP(b, "http (100 checks/s)", busy, 5*time.Second, window)

	if _, err := lab.DB.Exec(context.Background(), `UPDATE check_defs
SET config = jsonb_set(config, '{url}', to_jsonb(replace(replace(config->>'url', 'http://', 'https://'), ':' || $1 || '/', ':' || $2 || '/'))),
    updated_at = now()
WHERE kind = 'http'`, port, tlsPort); err != nil {
		b.Fatal(err)
	}
	pHTTPS := measureHTTP(b, "https (100 checks/s)", busy, 5*time.Second, window)
	b.StopTimer()

	idleRate := pIdle.cpu.Seconds() / pIdle.window.Seconds() // CPU seconds per second with nothing due
	netOfIdle := func(p httpPhase) float64 {
		if p.runs == 0 {
			return 0
		}
		return 1000 * (p.cpu.Seconds() - idleRate*p.window.Seconds()) / float64(p.runs)
	}
	b.Logf("idle baseline %.2f%% of a core; net of it: http %.3f ms/check, https %.3f ms/check", 100*idleRate, netOfIdle(pHTTP), netOfIdle(pHTTPS))
	for _, p := range []httpPhase{pHTTP, pHTTPS} {
		if len(p.failures) > 0 {
			b.Errorf("%s: failures %v (every check should be up)", p.name, p.failures)
		}
	}
	b.ReportMetric(100*idleRate, "idle-cpu-%")
	b.ReportMetric(pHTTP.msPerCheck(), "http-cpu-ms/check")
	b.ReportMetric(pHTTPS.msPerCheck(), "https-cpu-ms/check")
	b.ReportMetric(pHTTP.perCheck(float64(pHTTP.mallocs)), "http-allocs/check")
	b.ReportMetric(pHTTP.perCheck(float64(pHTTP.syscalls)), "http-syscalls/check")
	b.ReportMetric(pHTTP.perCheck(float64(pHTTP.ctxSwitches)), "http-ctxsw/check")
}
