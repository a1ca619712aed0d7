package metricsapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

const entityID = "0190a000-0000-7000-8000-000000000001"

var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func setup(t *testing.T, mod func(*Deps)) (*pgxpool.Pool, *echo.Echo) {
	t.Helper()
	db := pgtest.New(t).Pool
	ctx := context.Background()
	if _, err := db.Exec(ctx, `INSERT INTO entity_types (name) VALUES ('lxc')`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO entities (id, slug, type, name, state) VALUES ($1, 'lxc:web', 'lxc', 'web', 'active')`, entityID); err != nil {
		t.Fatal(err)
	}
	// cpu_pct: one sample a minute for two hours, rising 0.5 per minute from 10; a flat
	// mem_used_pct.
	rows := [][]any{}
	for i := 0; i < 120; i++ {
		at := now.Add(-2*time.Hour + time.Duration(i)*time.Minute)
		rows = append(rows, []any{entityID, "cpu_pct", 10 + 0.5*float64(i), at}, []any{entityID, "mem_used_pct", 40.0, at})
	}
	if _, err := db.CopyFrom(ctx, pgx.Identifier{"metric_samples"}, []string{"target_id", "name", "value", "at"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}
	d := Deps{Pool: db, Logger: zerolog.Nop(), Clock: func() time.Time { return now }, PollEvery: 20 * time.Millisecond}
	if mod != nil {
		mod(&d)
	}
	e := echo.New()
	// Every request carries a token anyone may read with: these tests are about the
	// routes, the guard is request's (and spec_test drives the real one).
	e.Pre(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.Request().Header.Set(echo.HeaderAuthorization, "Bearer reader")
			return next(c)
		}
	})
	request.Mount(e.Group("/api/v1"), anyReader{}, zerolog.Nop(), New(d).Routes()...)
	return db, e
}

// anyReader admits every token as a readonly principal.
type anyReader struct{}

func (anyReader) Verify(context.Context, string) (auth.Principal, error) {
	return auth.Principal{Name: "reader", Role: auth.RoleReadonly}, nil
}

func get(t *testing.T, e *echo.Echo, path string, out any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if out != nil && rec.Code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			t.Fatalf("%s: %v: %s", path, err, rec.Body)
		}
	}
	if rec.Code != http.StatusOK {
		t.Logf("%s → %d %s", path, rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	return rec.Code
}

func TestMetricsDownsampled(t *testing.T) {
	t.Parallel()
	_, e := setup(t, nil)
	var s Series
	if code := get(t, e, "/api/v1/entities/lxc:web/metrics?name=cpu_pct&since=1h&step=10m", &s); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	if s.Entity != "lxc:web" || s.StepSeconds != 600 || len(s.Points) != 6 {
		t.Fatalf("series %+v", s)
	}
	// The last hour holds samples 60..119; the first bucket 60..69: avg 10+0.5*64.5.
	p := s.Points[0]
	if p.Count != 10 || p.Min != 40 || p.Max != 44.5 || p.Avg != 42.25 || !p.At.Equal(now.Add(-time.Hour)) {
		t.Errorf("first bucket %+v", p)
	}
	// By id, with an RFC 3339 since and the automatic step.
	if code := get(t, e, "/api/v1/entities/"+entityID+"/metrics?name=mem_used_pct&since="+now.Add(-2*time.Hour).Format(time.RFC3339), &s); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	var total int64
	for _, p := range s.Points {
		total += p.Count
		if p.Avg != 40 {
			t.Errorf("bucket %+v", p)
		}
	}
	if total != 120 || s.StepSeconds < 10 || len(s.Points) > defaultPoints+1 {
		t.Errorf("auto step %v, %d points, %d samples", s.StepSeconds, len(s.Points), total)
	}
}

func TestMetricsErrors(t *testing.T) {
	t.Parallel()
	_, e := setup(t, func(d *Deps) { d.MaxPoints = 100 })
	tests := []struct {
		path string
		code int
		body string
	}{
		{"/api/v1/entities/lxc:nope/metrics?name=cpu_pct", http.StatusNotFound, `entity \"lxc:nope\"`},
		{"/api/v1/entities/lxc:web/metrics", http.StatusBadRequest, "cpu_pct, mem_used_pct"},
		{"/api/v1/entities/lxc:web/metrics?name=cpu_pct&since=yesterday", http.StatusBadRequest, "since"},
		{"/api/v1/entities/lxc:web/metrics?name=cpu_pct&step=0s", http.StatusBadRequest, "step"},
		{"/api/v1/entities/lxc:web/metrics?name=cpu_pct&since=7d&step=1m", http.StatusBadRequest, "at most 100"},
		{"/api/v1/entities/lxc:web/trend?name=cpu_pct&window=-1h", http.StatusBadRequest, "window"},
		// Without a step the automatic one keeps within MaxPoints, even when that is below
		// the usual 300 buckets.
		{"/api/v1/entities/lxc:web/metrics?name=cpu_pct&since=7d", http.StatusOK, `"points"`},
	}
	for _, tc := range tests {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("%s: %d %s; want %d containing %q", tc.path, rec.Code, rec.Body, tc.code, tc.body)
		}
	}
}

func TestTrend(t *testing.T) {
	t.Parallel()
	_, e := setup(t, nil)
	var tr Trend
	if code := get(t, e, "/api/v1/entities/lxc:web/trend?name=cpu_pct&window=1h", &tr); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	// 0.5 per minute is 30 per hour.
	if tr.Count != 60 || *tr.Min != 40 || *tr.Max != 69.5 || *tr.First != 40 || *tr.Last != 69.5 ||
		*tr.SlopePerHour < 29.99 || *tr.SlopePerHour > 30.01 || tr.Direction != "rising" {
		t.Errorf("trend %+v", tr)
	}
	if code := get(t, e, "/api/v1/entities/lxc:web/trend?name=mem_used_pct", &tr); code != http.StatusOK || tr.Direction != "flat" {
		t.Errorf("mem trend %d %+v", code, tr)
	}
	if code := get(t, e, "/api/v1/entities/lxc:web/trend?name=disk_used_pct", &tr); code != http.StatusOK ||
		tr.Count != 0 || tr.Direction != "unknown" || tr.Last != nil {
		t.Errorf("empty trend %d %+v", code, tr)
	}
}

// The latest stored report; a refresh that the scheduler answers; one that it does not.
func TestDrift(t *testing.T) {
	t.Parallel()
	db, e := setup(t, func(d *Deps) { d.DriftWait = 10 * time.Second })
	ctx := context.Background()
	if code := get(t, e, "/api/v1/audit/drift", nil); code != http.StatusNotFound {
		t.Fatalf("no report yet: %d", code)
	}
	if _, err := db.Exec(ctx, `INSERT INTO drift_reports (id, trigger, status, started_at, finished_at, missing_count, report)
VALUES ('0190a000-0000-7000-8000-0000000000d1', 'scheduled', 'completed', $1, $1, 1, '{"missing": [{"host": "proxmox-host:atlas", "vmid": 150}], "ghost": []}')`,
		now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if code := get(t, e, "/api/v1/audit/drift", &body); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	if body["status"] != "completed" || body["age_seconds"] != float64(3600) || len(body["missing"].([]any)) != 1 {
		t.Errorf("body %v", body)
	}

	// A stand-in scheduler answers requests on oikos_drift.
	cfg, err := pgx.ParseConfig(db.Config().ConnConfig.ConnString())
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
	<-connected
	go func() {
		id := <-requests
		_, _ = db.Exec(ctx, `INSERT INTO drift_reports (id, trigger, request_ids, status, started_at, finished_at, report)
VALUES ('0190a000-0000-7000-8000-0000000000d2', 'requested', ARRAY[$1::uuid], 'completed', $2, $2, '{"missing": [], "ghost": [{"entity": "lxc:db"}]}')`,
			id, now)
	}()
	if code := get(t, e, "/api/v1/audit/drift?refresh=true", &body); code != http.StatusOK {
		t.Fatalf("refresh: %d", code)
	}
	if body["id"] != "0190a000-0000-7000-8000-0000000000d2" || len(body["ghost"].([]any)) != 1 || body["trigger"] != "requested" {
		t.Errorf("refreshed body %v", body)
	}
	// Nobody answers within the timeout: 504, saying so.
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/audit/drift?refresh=true&timeout=300ms", nil))
	if rec.Code != http.StatusGatewayTimeout || !strings.Contains(rec.Body.String(), "scheduler running") {
		t.Errorf("timeout: %d %s", rec.Code, rec.Body)
	}
}
