package app_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/app"
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/metrics/metricstest"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// The api's /metrics has the Go runtime and process collectors and the HTTP histogram of
// the requests it served, labelled by route pattern.
func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	srv, err := app.Start(context.Background(), app.Config{DatabaseURL: db.URL, Addr: "127.0.0.1:0"}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	base := "http://" + srv.Addr().String()
	// Any other path is the dashboard's (the SPA fallback answers it); under /api/ an unknown
	// path is the api's 404.
	// (503 when this api was compiled without the built app: the page says how to build it).
	for path, want := range map[string]int{"/healthz": http.StatusOK, "/no/such/route-4711": http.StatusOK,
		"/api/v1/no/such/route-4711": http.StatusNotFound} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want && !(path == "/no/such/route-4711" && resp.StatusCode == http.StatusServiceUnavailable) {
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
		fmt.Sprintf(`%s{code="404",method="GET",route=%q}`, count, metrics.RouteUnmatched),
	} {
		if s[series] != 1 {
			t.Errorf("%s = %v; HTTP series: %v", series, s[series], s.Names(count))
		}
	}
}

// OIKOS_INVENTORY seeds the operator's own fleet file at start (the embedded knowledge base's
// links to the demo fleet dropped); a bad file stops the api naming it, having written nothing.
func TestStartSeedsInventoryFile(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t)
	file := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(file, []byte(`entities:
  - {type: proxmox-host, name: pve, attributes: {lan_ipv4: 192.168.1.10, node: pve}}
  - {type: lxc, name: web, attributes: {vmid: 101, host: pve}}
relationships:
  - {type: hosts, source: "proxmox-host:pve", target: "lxc:web"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := app.Start(ctx, app.Config{DatabaseURL: db.URL, Addr: "127.0.0.1:0", SeedOnStart: true, InventoryFile: file}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	var fleet int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM entities WHERE slug IN ('proxmox-host:pve', 'lxc:web')`).Scan(&fleet); err != nil || fleet != 2 {
		t.Fatalf("seeded %d of the file's 2 entities (%v)", fleet, err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("entities:\n  - {type: spaceship, name: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Start(ctx, app.Config{DatabaseURL: pgtest.New(t).URL, Addr: "127.0.0.1:0", SeedOnStart: true, InventoryFile: bad},
		zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "bad.yaml") {
		t.Fatalf("a bad inventory: %v", err)
	}
}
