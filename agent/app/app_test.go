package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/metrics/metricstest"
	"github.com/oikos-hq/oikos/shared/safego"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// The agent's /metrics has the Go runtime and process collectors and the HTTP histogram of
// the requests it served, labelled by the mux's patterns.
func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	cfg, err := LoadConfig(func(k string) string {
		return map[string]string{"OIKOS_DATABASE_URL": db.URL, "OIKOS_AGENT_ADDR": "127.0.0.1:0", "OIKOS_SCHEMA_WAIT": "10s"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan net.Addr, 1)
	done := make(chan error, 1)
	safego.Go(zerolog.Nop(), "test-agent", func() { done <- RunConfig(ctx, cfg, zerolog.Nop(), func(a net.Addr) { listening <- a }) })
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	var base string
	select {
	case a := <-listening:
		base = "http://" + a.String()
	case err := <-done:
		t.Fatalf("run ended before listening: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("not listening after 60 s")
	}

	// Ready once the event listener has connected, which follows listening by a moment.
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /readyz: %s after 30 s", resp.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for path, want := range map[string]int{"/healthz": http.StatusOK, "/no/such/route-4711": http.StatusNotFound} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
	}
	s := metricstest.Scrape(t, base+"/metrics")
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if _, ok := s[name]; !ok {
			t.Errorf("no %s", name)
		}
	}
	count := metrics.HTTPRequestDuration + "_count"
	for _, series := range []string{
		fmt.Sprintf(`%s{code="200",method="GET",route="/healthz"}`, count),
		fmt.Sprintf(`%s{code="200",method="GET",route="/readyz"}`, count),
		fmt.Sprintf(`%s{code="404",method="GET",route=%q}`, count, metrics.RouteUnmatched),
	} {
		if s[series] != 1 {
			t.Errorf("%s = %v; HTTP series: %v", series, s[series], s.Names(count))
		}
	}
}
