package app

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"

	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/metrics/metricstest"
	"github.com/oikos-hq/oikos/shared/safego"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// The scheduler's /metrics has the Go runtime and process collectors, its parts' metrics
// and the HTTP histogram of the requests it served, labelled by the mux's patterns.
func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(key, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(func(k string) string {
		return map[string]string{"OIKOS_DATABASE_URL": db.URL, "OIKOS_SSH_KEY_FILE": key,
			"OIKOS_SCHEDULER_ADDR": "127.0.0.1:0", "OIKOS_SCHEMA_WAIT": "10s"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	base := serve(t, func(ctx context.Context, ready func(net.Addr)) error { return run(ctx, cfg, zerolog.Nop(), ready) })

	for path, want := range map[string]int{"/healthz": http.StatusOK, "/status": http.StatusOK, "/no/such/route-4711": http.StatusNotFound} {
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
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total",
		"oikos_scheduler_executions_running", "oikos_scheduler_ssh_connections", "oikos_scheduler_checks_loaded"} {
		if _, ok := s[name]; !ok {
			t.Errorf("no %s", name)
		}
	}
	count := metrics.HTTPRequestDuration + "_count"
	for _, series := range []string{
		fmt.Sprintf(`%s{code="200",method="GET",route="/healthz"}`, count),
		fmt.Sprintf(`%s{code="200",method="GET",route="/status"}`, count),
		fmt.Sprintf(`%s{code="404",method="GET",route=%q}`, count, metrics.RouteUnmatched),
	} {
		if s[series] != 1 {
			t.Errorf("%s = %v; HTTP series: %v", series, s[series], s.Names(count))
		}
	}
	// /status: this scheduler's id and leases beside the fleet's members and lease table.
	resp, err := http.Get(base + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Scheduler  string            `json:"scheduler"`
		Owned      []string          `json:"owned"`
		Members    []json.RawMessage `json:"members"`
		LeaseTable []struct {
			Unit, Holder string
		} `json:"lease_table"`
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || st.Scheduler != cfg.ID || !slices.Contains(st.Owned, "net") || len(st.Members) != 1 ||
		len(st.LeaseTable) == 0 || st.LeaseTable[0].Holder != cfg.ID {
		t.Fatalf("GET /status: %+v (%v)", st, err)
	}
}

// serve runs a daemon's run function until the test ends and returns its base URL once it
// listens.
func serve(t *testing.T, run func(ctx context.Context, ready func(net.Addr)) error) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan net.Addr, 1)
	done := make(chan error, 1)
	safego.Go(zerolog.Nop(), "test-daemon", func() { done <- run(ctx, func(a net.Addr) { listening <- a }) })
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	select {
	case a := <-listening:
		return "http://" + a.String()
	case err := <-done:
		t.Fatalf("run ended before listening: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("not listening after 60 s")
	}
	return ""
}
