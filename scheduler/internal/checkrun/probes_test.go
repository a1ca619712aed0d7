package checkrun

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/results"
	"github.com/oikos-hq/oikos/shared/metrics"
)

func httpDef(url string, expect int, match string, timeout time.Duration) *checkDef {
	return &checkDef{ID: "h", Slug: "check:ingress-route.x.http", Kind: "http", Interval: time.Minute, Timeout: timeout,
		spec: httpSpec{URL: url, ExpectStatus: expect, BodyMatch: match}}
}

// HTTP checks map names through NameMap, reuse one connection, and judge status, body and
// latency; a name outside the map is a configuration problem, not a down target.
func TestHTTPProbe(t *testing.T) {
	t.Parallel()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			_, _ = w.Write([]byte("status: ok, host " + r.Host))
		case "/slow":
			<-time.After(300 * time.Millisecond)
			_, _ = w.Write([]byte("late"))
		default:
			http.Error(w, "nope", http.StatusServiceUnavailable)
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	r := newRunner(Options{Fleet: machineResolver{}, Logger: zerolog.Nop(), NameMap: map[string]string{"svc.lab.example": "127.0.0.1"}},
		&blockingExec{})
	base := "http://svc.lab.example:" + port
	ctx := context.Background()

	for i := 0; i < 20; i++ {
		res, err := r.runProbe(ctx, httpDef(base+"/health", 200, "status: ok", 5*time.Second), nil)
		if err != nil || res.Health != results.HealthUp || !res.Observed {
			t.Fatalf("run %d: %+v %v", i, res, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d TCP connections for 20 checks; the transport must reuse one", n)
	}
	tests := []struct {
		name, url, match string
		expect           int
		timeout          time.Duration
		health, class    string
		reason           string
	}{
		{"wrong status", base + "/missing", "", 200, 5 * time.Second, results.HealthDown, "", "HTTP 503"},
		{"expected status", base + "/missing", "", 503, 5 * time.Second, results.HealthUp, "", "HTTP 503"},
		{"body mismatch", base + "/health", "healthy", 200, 5 * time.Second, results.HealthDown, "", "does not contain"},
		{"slow is degraded", base + "/slow", "", 200, 500 * time.Millisecond, results.HealthDegraded, "", "slower"},
		{"timeout is down", base + "/slow", "", 200, 100 * time.Millisecond, results.HealthDown, results.ClassTimeout, "no answer"},
		{"name not mapped", "http://other.lab.example:" + port + "/", "", 200, time.Second, results.HealthUnknown, results.ClassConfig, "name map"},
		{"non-loopback refused", "http://192.0.2.1/", "", 200, time.Second, results.HealthUnknown, results.ClassConfig, "not a loopback"},
	}
	for _, tc := range tests {
		// As run does: the check's timeout bounds the probe.
		pctx, cancel := context.WithTimeout(ctx, tc.timeout)
		res, err := r.runProbe(pctx, httpDef(tc.url, tc.expect, tc.match, tc.timeout), nil)
		cancel()
		if err != nil || res.Health != tc.health || res.Class != tc.class || !strings.Contains(res.Reason, tc.reason) {
			t.Errorf("%s: %s [%s] %q, %v; want %s [%s] containing %q", tc.name, res.Health, res.Class, res.Reason, err, tc.health, tc.class, tc.reason)
		}
	}
}

func TestTCPProbe(t *testing.T) {
	t.Parallel()
	host, port := tcpListener(t)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := closed.Addr().(*net.TCPAddr).Port
	_ = closed.Close()
	r := newRunner(Options{Fleet: machineResolver{}, Logger: zerolog.Nop()}, &blockingExec{})
	def := func(h string, p int) *checkDef {
		return &checkDef{Slug: "check:nfs-export.media.tcp", Kind: "tcp", Interval: time.Minute, Timeout: time.Second, spec: tcpSpec{Host: h, Port: p}}
	}
	if res, _ := r.runProbe(context.Background(), def(host, port), nil); res.Health != results.HealthUp {
		t.Errorf("open port: %+v", res)
	}
	if res, _ := r.runProbe(context.Background(), def("127.0.0.1", closedPort), nil); res.Health != results.HealthDown || !strings.Contains(res.Reason, "refused") {
		t.Errorf("closed port: %+v", res)
	}
	if res, _ := r.runProbe(context.Background(), def("198.51.100.4", 2049), nil); res.Health != results.HealthUnknown || res.Class != results.ClassConfig {
		t.Errorf("non-loopback: %+v", res)
	}
}

// A config the runner cannot use is reported on every run as such.
func TestUnusableConfigIsReported(t *testing.T) {
	t.Parallel()
	r := newRunner(Options{Fleet: machineResolver{}, Logger: zerolog.Nop()}, &blockingExec{})
	spec, err := parseSpec("ssh-script", map[string]any{"script": "process", "os": "linux"})
	d := &checkDef{Slug: "check:service.x.ssh-script.process", Kind: "ssh-script", spec: spec, specErr: err, Timeout: time.Second}
	res, perr := r.runProbe(context.Background(), d, &runState{})
	if perr != nil || res.Health != results.HealthUnknown || res.Class != results.ClassConfig || !strings.Contains(res.Reason, "no unit") {
		t.Errorf("%+v %v", res, perr)
	}
}

// The status endpoint reports the runner's self-observation as JSON.
func TestStatusHandler(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	r := newRunner(Options{Fleet: machineResolver{}, Logger: zerolog.Nop(), Concurrency: 7, Metrics: reg}, &blockingExec{})
	r.recordLag(250 * time.Millisecond)
	r.m.failure(results.ClassUnreachable, 2)
	rec := httptest.NewRecorder()
	r.StatusHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil))
	var st Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("%d %s %v", rec.Code, rec.Body, err)
	}
	if st.Concurrency != 7 || st.LagP99Seconds != 0.25 || st.FailuresByReason[results.ClassUnreachable] != 2 || st.SSHConnections != 1 {
		t.Errorf("status %+v", st)
	}
	rec = httptest.NewRecorder()
	r.StatusHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/status", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", rec.Code)
	}
	if v := reg.Value("oikos_scheduler_lag_p99_seconds"); v != 0.25 {
		t.Errorf("lag p99 gauge %v", v)
	}
	if v := reg.Value("oikos_scheduler_check_failures_total", "reason", results.ClassUnreachable); v != 2 {
		t.Errorf("failures counter %v", v)
	}
}
