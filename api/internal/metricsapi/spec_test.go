package metricsapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/apitest"
	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/httpapi"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

// specServer mounts the metrics routes into the real HTTP surface the way the composition
// root does (behind the read guard), so errors are rendered by the api's problem handler,
// and returns the server, its database and a readonly token.
func specServer(t *testing.T, mod func(*Deps)) (*httptest.Server, *pgxpool.Pool, string) {
	t.Helper()
	var d *Deps
	db, _ := setup(t, func(dd *Deps) {
		if mod != nil {
			mod(dd)
		}
		d = dd
	})
	store := auth.NewStore(db)
	h := httpapi.New(httpapi.Deps{Pool: db, Auth: store, Logger: zerolog.Nop(), Routes: New(*d).Routes()})
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		ts.Close()
		h.Stop()
	})
	tok, err := store.Create(context.Background(), "viewer", auth.RoleReadonly)
	if err != nil {
		t.Fatal(err)
	}
	return ts, db, tok
}

// specGet sends GET path and fails the test unless the answer has the status and matches
// api/openapi.yaml (status, content type, body schema).
func specGet(t *testing.T, ts *httptest.Server, token, path string, status int) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer hr.Body.Close()
	body, err := io.ReadAll(hr.Body)
	if err != nil {
		t.Fatal(err)
	}
	if hr.StatusCode != status {
		t.Fatalf("GET %s: %d, want %d: %s", path, hr.StatusCode, status, body)
	}
	if status >= 400 && !strings.HasPrefix(hr.Header.Get("Content-Type"), "application/problem+json") {
		t.Errorf("GET %s: error %d is %q, not problem JSON", path, status, hr.Header.Get("Content-Type"))
	}
	if err := apitest.Validate(req, hr, body); err != nil {
		t.Errorf("GET %s -> %d does not match openapi.yaml:\n  %v\n  body: %.600s", path, status, err, body)
	}
	return body
}

// TestResponsesMatchSpec drives every metrics route through the api's HTTP surface, for
// answers and for each kind of error, and validates each response against openapi.yaml.
func TestResponsesMatchSpec(t *testing.T) {
	t.Parallel()
	ts, _, tok := specServer(t, nil)
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/api/v1/entities/lxc:web/metrics?name=cpu_pct&since=1h&step=10m", http.StatusOK},
		{"/api/v1/entities/" + entityID + "/metrics?name=mem_used_pct&since=" + now.Add(-2*time.Hour).Format(time.RFC3339), http.StatusOK},
		{"/api/v1/entities/lxc:web/metrics?name=nothing", http.StatusOK},
		{"/api/v1/entities/lxc:web/metrics", http.StatusBadRequest},
		{"/api/v1/entities/lxc:web/metrics?name=cpu_pct&since=yesterday", http.StatusBadRequest},
		{"/api/v1/entities/lxc:web/metrics?name=cpu_pct&since=7d&step=1m", http.StatusBadRequest},
		{"/api/v1/entities/lxc:nope/metrics?name=cpu_pct", http.StatusNotFound},
		{"/api/v1/entities/lxc:web/metric-names", http.StatusOK},
		{"/api/v1/entities/lxc:nope/metric-names", http.StatusNotFound},
		{"/api/v1/entities/lxc:web/trend?name=cpu_pct&window=1h", http.StatusOK},
		{"/api/v1/entities/lxc:web/trend?name=disk_used_pct", http.StatusOK}, // no samples: null figures
		{"/api/v1/entities/lxc:web/trend?name=cpu_pct&window=-1h", http.StatusBadRequest},
		{"/api/v1/entities/lxc:nope/trend?name=cpu_pct", http.StatusNotFound},
		{"/api/v1/audit/drift", http.StatusNotFound}, // no report stored yet
		{"/api/v1/audit/drift?refresh=maybe", http.StatusBadRequest},
		{"/api/v1/audit/drift?refresh=true&timeout=200ms", http.StatusGatewayTimeout},
	} {
		specGet(t, ts, tok, tc.path, tc.status)
	}
	specGet(t, ts, "", "/api/v1/entities/lxc:web/metrics?name=cpu_pct", http.StatusUnauthorized)
	specGet(t, ts, "", "/api/v1/audit/drift", http.StatusUnauthorized)

	var s Series
	if err := json.Unmarshal(specGet(t, ts, tok, "/api/v1/entities/lxc:web/metrics?name=cpu_pct&since=1h&step=10m", http.StatusOK), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Points) != 6 {
		t.Errorf("%d points through the api, want 6", len(s.Points))
	}
	var names NameList
	if err := json.Unmarshal(specGet(t, ts, tok, "/api/v1/entities/lxc:web/metric-names", http.StatusOK), &names); err != nil {
		t.Fatal(err)
	}
	if names.Entity != "lxc:web" || !slices.Contains(names.Names, "cpu_pct") || !slices.Contains(names.Names, "mem_used_pct") {
		t.Errorf("metric names %+v, want lxc:web with cpu_pct and mem_used_pct", names)
	}
}

// TestDriftMatchesSpec: a stored report shaped as the scheduler writes it, a refresh the
// scheduler answers with a failure (502) and one it answers with a report (200).
func TestDriftMatchesSpec(t *testing.T) {
	t.Parallel()
	ts, pool, tok := specServer(t, func(d *Deps) { d.DriftWait = 10 * time.Second })
	ctx := context.Background()
	report := `{"hosts": [{"host": "proxmox-host:atlas", "reachable": true, "lxc": 2, "vm": 1},
		{"host": "proxmox-host:zeus", "reachable": false, "error": "dial: refused", "lxc": 0, "vm": 0}],
	"missing": [{"host": "proxmox-host:atlas", "kind": "lxc", "vmid": 150, "name": "new", "status": "running", "lock": "backup"}],
	"ghost": [{"entity": "lxc:web", "entity_id": "` + entityID + `", "state": "active", "host": "proxmox-host:atlas", "kind": "lxc", "vmid": 101, "hint": "moved?"}],
	"unchecked": [{"entity": "vm:x", "reason": "no vmid"}],
	"summary": {"hosts": 2, "hosts_unreachable": 1, "live_guests": 3, "graph_guests": 3, "missing": 1, "ghost": 1, "unchecked": 1}}`
	if _, err := pool.Exec(ctx, `INSERT INTO drift_reports (id, trigger, status, started_at, finished_at, missing_count, ghost_count, report)
VALUES ('0190a000-0000-7000-8000-0000000000e1', 'scheduled', 'completed', $1, $1, 1, 1, $2)`, now.Add(-time.Hour), report); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(specGet(t, ts, tok, "/api/v1/audit/drift", http.StatusOK), &body); err != nil {
		t.Fatal(err)
	}
	if body["id"] != "0190a000-0000-7000-8000-0000000000e1" || body["age_seconds"] != float64(3600) {
		t.Errorf("stored report %v", body)
	}

	// A stand-in scheduler answers the first refresh with a failure, the second with a report.
	cfg, err := pgx.ParseConfig(pool.Config().ConnConfig.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	n := eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: cfg, Logger: zerolog.Nop()})
	requests := make(chan string, 4)
	n.Listen(eventbus.ChannelDrift, func(p string) {
		var r driftRequest
		if json.Unmarshal([]byte(p), &r) == nil {
			requests <- r.RequestID
		}
	})
	connected := make(chan struct{}, 1)
	n.OnConnect(func() {
		select {
		case connected <- struct{}{}:
		default:
		}
	})
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	select {
	case <-connected:
	case <-time.After(30 * time.Second):
		t.Fatal("the stand-in scheduler did not connect")
	}
	answered := make(chan error, 2)
	go func() {
		id := <-requests
		_, err := pool.Exec(ctx, `INSERT INTO drift_reports (id, trigger, request_ids, status, started_at, finished_at, error)
VALUES ('0190a000-0000-7000-8000-0000000000e2', 'requested', ARRAY[$1::uuid], 'failed', $2, $2, 'no host answered')`, id, now)
		answered <- err
		id = <-requests
		_, err = pool.Exec(ctx, `INSERT INTO drift_reports (id, trigger, request_ids, status, started_at, finished_at, report)
VALUES ('0190a000-0000-7000-8000-0000000000e3', 'requested', ARRAY[$1::uuid], 'completed', $2, $2, $3)`, id, now, report)
		answered <- err
	}()
	if b := specGet(t, ts, tok, "/api/v1/audit/drift?refresh=true", http.StatusBadGateway); !strings.Contains(string(b), "no host answered") {
		t.Errorf("502 does not say why: %s", b)
	}
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(specGet(t, ts, tok, "/api/v1/audit/drift?refresh=true", http.StatusOK), &body); err != nil {
		t.Fatal(err)
	}
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if body["id"] != "0190a000-0000-7000-8000-0000000000e3" || body["trigger"] != "requested" {
		t.Errorf("refreshed report %v", body)
	}
}
