package metrics_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/metrics/metricstest"
)

const count = metrics.HTTPRequestDuration + "_count"

func series(method, route, code string) string {
	return fmt.Sprintf(`%s{code=%q,method=%q,route=%q}`, count, code, method, route)
}

// newEcho is an echo server recording into reg, with /metrics and a few routes.
func newEcho(reg *metrics.Registry) *echo.Echo {
	e := echo.New()
	e.Use(reg.EchoMiddleware())
	e.GET("/metrics", echo.WrapHandler(reg.Handler()))
	e.GET("/api/v1/entities/:ref", func(c echo.Context) error { return c.String(http.StatusOK, c.Param("ref")) })
	e.POST("/api/v1/entities/:ref/state", func(c echo.Context) error {
		return echo.NewHTTPError(http.StatusConflict, "no")
	})
	e.GET("/files/*", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	return e
}

func do(t *testing.T, h http.Handler, method, path string) int {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Code
}

// A scrape has the Go runtime and process collectors and, after a request, the HTTP
// histogram (buckets, sum and count) of that request's route.
func TestScrapeHasRuntimeProcessAndHTTP(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	srv := httptest.NewServer(newEcho(reg))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/api/v1/entities/host:a")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s := metricstest.Scrape(t, srv.URL+"/metrics")
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "process_resident_memory_bytes"} {
		if _, ok := s[name]; !ok {
			t.Errorf("no %s in the scrape", name)
		}
	}
	if got := s[series("GET", "/api/v1/entities/:ref", "200")]; got != 1 {
		t.Errorf("request count %v, want 1; HTTP series: %v", got, s.Names(count))
	}
	bucket := fmt.Sprintf(`%s_bucket{code="200",method="GET",route="/api/v1/entities/:ref",le="+Inf"}`, metrics.HTTPRequestDuration)
	if s[bucket] != 1 {
		t.Errorf("no +Inf bucket %s", bucket)
	}
	if _, ok := s[`oikos_http_request_duration_seconds_sum{code="200",method="GET",route="/api/v1/entities/:ref"}`]; !ok {
		t.Error("no _sum")
	}
}

// Requests are labelled with the route pattern, never the raw path; every path no route
// matches shares one label, and unknown methods another, so no client can grow the series.
func TestEchoRouteLabels(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	e := newEcho(reg)
	for i := range 50 {
		do(t, e, "GET", fmt.Sprintf("/api/v1/entities/host:%d", i))
		do(t, e, "GET", fmt.Sprintf("/no/such/path/%d?x=%d", i, i))
		do(t, e, "GET", fmt.Sprintf("/files/a/%d/b", i))
	}
	if c := do(t, e, "POST", "/api/v1/entities/host:1/state"); c != http.StatusConflict {
		t.Fatalf("POST state: %d", c)
	}
	do(t, e, "DELETE", "/api/v1/entities/host:1") // no DELETE route: 405 on the pattern
	do(t, e, "BREW", "/api/v1/entities/host:1")
	got := scrape(t, reg)
	want := map[string]float64{
		series("GET", "/api/v1/entities/:ref", "200"):               50,
		series("GET", metrics.RouteUnmatched, "404"):                50,
		series("GET", "/files/*", "204"):                            50,
		series("POST", "/api/v1/entities/:ref/state", "409"):        1,
		series("DELETE", "/api/v1/entities/:ref", "405"):            1,
		series(metrics.MethodOther, "/api/v1/entities/:ref", "405"): 1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if n := len(got.Names(count)); n != len(want) {
		t.Errorf("%d series, want %d: %v", n, len(want), got.Names(count))
	}
	for k := range got {
		if strings.Contains(k, "host:") || strings.Contains(k, "/no/such") || strings.Contains(k, "BREW") {
			t.Errorf("raw request data in a label: %s", k)
		}
	}
}

// The net/http middleware labels with the ServeMux pattern's path, records the status the
// handler sent, and passes Flush on.
func TestInstrumentHandlerRouteLabels(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("POST /items/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) })
	mux.HandleFunc("GET /stream", func(w http.ResponseWriter, _ *http.Request) { w.(http.Flusher).Flush() })
	mux.HandleFunc("GET /empty", func(http.ResponseWriter, *http.Request) {})
	h := reg.InstrumentHandler(mux)
	do(t, h, "GET", "/healthz")
	for i := range 20 {
		do(t, h, "POST", fmt.Sprintf("/items/%d", i))
		do(t, h, "GET", fmt.Sprintf("/random/%d", i))
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/stream", nil))
	if !rec.Flushed {
		t.Error("Flush did not reach the connection")
	}
	do(t, h, "GET", "/empty")
	got := scrape(t, reg)
	want := map[string]float64{
		series("GET", "/healthz", "200"):             1,
		series("POST", "/items/{id}", "201"):         20,
		series("GET", metrics.RouteUnmatched, "404"): 20,
		series("GET", "/stream", "200"):              1,
		series("GET", "/empty", "200"):               1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if n := len(got.Names(count)); n != len(want) {
		t.Errorf("%d series, want %d: %v", n, len(want), got.Names(count))
	}
}

func scrape(t *testing.T, reg *metrics.Registry) metricstest.Series {
	t.Helper()
	rec := httptest.NewRecorder()
	reg.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	s, err := metricstest.Parse(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Register tolerates a nil registerer and a part built twice, and refuses a name clash.
func TestRegister(t *testing.T) {
	t.Parallel()
	opts := prometheus.CounterOpts{Name: "oikos_test_runs_total", Help: "Runs."}
	c := metrics.Register(nil, prometheus.NewCounter(opts))
	c.Inc() // records, unregistered
	var nilReg *metrics.Registry
	metrics.Register(nilReg, prometheus.NewCounter(opts)).Inc()

	reg := metrics.NewRegistry()
	a := metrics.Register(reg, prometheus.NewCounter(opts))
	b := metrics.Register(reg, prometheus.NewCounter(opts))
	a.Inc()
	b.Inc()
	if a != b || testutil.ToFloat64(a) != 2 {
		t.Errorf("a part built twice does not share its counter: %v", testutil.ToFloat64(a))
	}
	defer func() {
		if recover() == nil {
			t.Error("a clash (same name, other help) did not panic")
		}
	}()
	metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: opts.Name, Help: "Other."}))
}

// Registries are per daemon: two never share a series, and the global default registry is
// left alone.
func TestRegistriesAreSeparate(t *testing.T) {
	t.Parallel()
	a, b := metrics.NewRegistry(), metrics.NewRegistry()
	do(t, newEcho(a), "GET", "/api/v1/entities/x")
	if got := scrape(t, b)[series("GET", "/api/v1/entities/:ref", "200")]; got != 0 {
		t.Errorf("b saw a's request: %v", got)
	}
	fams, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "oikos_") {
			t.Errorf("%s in the global default registry", f.GetName())
		}
	}
}

// Value reads a series of the registry by name and labels: a counter's value, a gauge's, a
// histogram's count; 0 for a series that does not exist.
func TestValue(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	c := metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "oikos_test_runs_total", Help: "Runs."}, []string{"reason"}))
	c.WithLabelValues("x").Add(3)
	metrics.Register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "oikos_test_conns", Help: "Conns."}, func() float64 { return 5 }))
	if v := reg.Value("oikos_test_runs_total", "reason", "x"); v != 3 {
		t.Errorf("counter %v", v)
	}
	if v := reg.Value("oikos_test_runs_total", "reason", "nope"); v != 0 {
		t.Errorf("absent series %v", v)
	}
	if v := reg.Value("oikos_test_runs_total"); v != 0 {
		t.Errorf("series without its label %v", v)
	}
	if v := reg.Value("oikos_test_conns"); v != 5 {
		t.Errorf("gauge func %v", v)
	}
	do(t, newEcho(reg), "GET", "/api/v1/entities/x")
	if v := reg.Value(metrics.HTTPRequestDuration, "method", "GET", "route", "/api/v1/entities/:ref", "code", "200"); v != 1 {
		t.Errorf("Value of a histogram (its count): %v", v)
	}
}
