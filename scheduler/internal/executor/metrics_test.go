package executor

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/fleet/fleettest"
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/metrics/metricstest"
)

// Every run is observed by action and outcome, an action the executor does not know under
// "unknown"; executions interrupted without a run are counted by reason.
func TestMetrics(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	ctx := context.Background()
	p := v.db.Pool
	reg := metrics.NewRegistry()
	host := fleettest.InsertEntity(t, p, "host", "hermes", "", map[string]any{"lan_ipv4": "127.0.11.1", "ssh_port": 2222})
	lxc := fleettest.InsertEntity(t, p, "lxc", "orphan", "", map[string]any{"vmid": 150})
	orphan := insertExecution(t, p, host, "host:hermes", "run", "sleep 100", "pending_approval", nil)
	stuck := insertExecution(t, p, host, "host:hermes", "run", "sleep 100", "pending_approval", nil)
	if _, err := p.Exec(ctx, `UPDATE executions SET status = 'running', claimed_by = 'gone', started_at = now() WHERE id = $1`, orphan); err != nil {
		t.Fatal(err)
	}
	e := New(Options{Pool: p, SSH: v.ssh, Fleet: v.g, SchedulerID: "s1", Poll: 50 * time.Millisecond,
		StuckAfter: time.Minute, Logger: zerolog.Nop(), Metrics: reg})
	t.Cleanup(e.Stop)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	unknown := insertExecution(t, p, host, "host:hermes", "reboot_everything", "reboot", "approved", nil)
	unresolved := insertExecution(t, p, lxc, "lxc:orphan", "run", "uptime", "approved", nil)
	waitStatus(t, v.db, unknown, StatusFailed, 10*time.Second)
	waitStatus(t, v.db, unresolved, StatusFailed, 10*time.Second)
	// Claimed by a scheduler with a live lease (so not an orphan), past its timeout.
	if _, err := p.Exec(ctx, `INSERT INTO scheduler_leases (resource, holder, expires_at) VALUES ('host:x', 'other', now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, `UPDATE executions SET status = 'running', claimed_by = 'other', started_at = now() - interval '1 hour' WHERE id = $1`, stuck); err != nil {
		t.Fatal(err)
	}
	if n, err := e.SweepStuck(ctx); err != nil || n != 1 {
		t.Fatalf("SweepStuck = %d, %v", n, err)
	}

	rec := httptest.NewRecorder()
	reg.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	s, err := metricstest.Parse(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	for series, want := range map[string]float64{
		`oikos_scheduler_execution_duration_seconds_count{action="unknown",outcome="failed"}`: 1,
		`oikos_scheduler_execution_duration_seconds_count{action="run",outcome="failed"}`:     1,
		`oikos_scheduler_executions_swept_total{reason="orphaned"}`:                           1,
		`oikos_scheduler_executions_swept_total{reason="stuck"}`:                              1,
	} {
		if s[series] != want {
			t.Errorf("%s = %v, want %v", series, s[series], want)
		}
	}
	if _, ok := s["oikos_scheduler_executions_running"]; !ok {
		t.Error("no oikos_scheduler_executions_running")
	}
	if n := len(s.Names("oikos_scheduler_execution_duration_seconds_count")); n != 2 {
		t.Errorf("%d execution series, want 2: %v", n, s.Names("oikos_scheduler_execution_duration_seconds_count"))
	}
}
