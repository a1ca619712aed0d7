package execution_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/eventbus"
)

// eventWaiter receives oikos_events notifications on its own connection.
type eventWaiter struct {
	conn *pgx.Conn
}

func newEventWaiter(tb testing.TB, l *lab) *eventWaiter {
	tb.Helper()
	conn, err := pgx.Connect(context.Background(), l.db.URL)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(context.Background(), "LISTEN oikos_events"); err != nil {
		tb.Fatal(err)
	}
	return &eventWaiter{conn: conn}
}

// next returns the next event notification of one of types.
func (w *eventWaiter) next(tb testing.TB, types ...string) (id int64, typ string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		n, err := w.conn.WaitForNotification(ctx)
		if err != nil {
			tb.Fatalf("waiting for %v: %v", types, err)
		}
		var hint struct {
			ID   int64  `json:"id"`
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(n.Payload), &hint); err != nil {
			tb.Fatal(err)
		}
		if slices.Contains(types, hint.Type) {
			return hint.ID, hint.Type
		}
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p)
	return s[i]
}

// BenchmarkRunTrueEndToEnd measures a read-only `run` of `true` on an LXC (pct exec hop on
// labsim) from the commit of the approved row and its NOTIFY to the execution.completed
// event's NOTIFY. Goals: p50 ≤ 15 ms, p99 ≤ 50 ms.
func BenchmarkRunTrueEndToEnd(b *testing.B) {
	l := newLab(b, labOptions{})
	// First contact dials and pins the host key; it is not what is measured.
	if _, r := l.runOnce(execSpec{target: "lxc:jellyfin", command: "true"}, 30*time.Second); r.Status != "completed" {
		b.Fatalf("warm-up: %+v", r)
	}
	w := newEventWaiter(b, l)
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		id := l.submit(execSpec{target: "lxc:jellyfin", command: "true"})
		evID, typ := w.next(b, "execution.completed", "execution.failed", "execution.timed_out", "execution.interrupted")
		lat = append(lat, time.Since(start))
		b.StopTimer()
		var execID string
		if err := l.db.Pool.QueryRow(context.Background(), `SELECT payload->>'execution_id' FROM events WHERE id = $1`, evID).
			Scan(&execID); err != nil || execID != id || typ != "execution.completed" {
			b.Fatalf("event %d %s for %s, want execution.completed for %s (%v)", evID, typ, execID, id, err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(percentile(lat, 0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
	if n := l.sim.TotalConnections("atlas"); n != 1 {
		b.Errorf("atlas accepted %d SSH connections, want 1", n)
	}
}

// BenchmarkThroughput1000 submits 1,000 read-only executions at once across the three
// Proxmox hosts and runs them 16 in flight; it reports executions per second and asserts
// that each host saw exactly one SSH connection. Goal: ≥ 200 executions/s.
func BenchmarkThroughput1000(b *testing.B) {
	const total = 1000
	targets := []string{"lxc:jellyfin", "lxc:sonarr", "lxc:nextcloud", "lxc:postgres", "lxc:unbound", "lxc:homepage"}
	hosts := []string{"atlas", "boreas", "ceres"}
	l := newLab(b, labOptions{concurrent: 16})
	for _, t := range []string{"lxc:jellyfin", "lxc:nextcloud", "lxc:unbound"} {
		if _, r := l.runOnce(execSpec{target: t, command: "true"}, 30*time.Second); r.Status != "completed" {
			b.Fatalf("warm-up on %s: %+v", t, r)
		}
	}
	w := newEventWaiter(b, l)
	var rates []float64
	for b.Loop() {
		ctx := context.Background()
		ids := make([]string, total)
		start := time.Now()
		if err := pgx.BeginFunc(ctx, l.db.Pool, func(tx pgx.Tx) error {
			for i := range ids {
				ids[i] = uuid.Must(uuid.NewV7()).String()
				if err := insertExecution(ctx, tx, l.ids, ids[i], execSpec{target: targets[i%len(targets)], command: "true"}); err != nil {
					return err
				}
				if err := eventbus.Notify(ctx, tx, eventbus.ChannelExec, ids[i]); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		maxConns := map[string]int{}
		for done := 0; done < total; {
			w.next(b, "execution.completed", "execution.failed", "execution.timed_out", "execution.interrupted")
			done++
			if done%50 == 0 {
				for _, h := range hosts {
					maxConns[h] = max(maxConns[h], l.sim.Connections(h))
				}
			}
		}
		elapsed := time.Since(start)
		b.StopTimer()
		rates = append(rates, float64(total)/elapsed.Seconds())
		var completed int
		if err := l.db.Pool.QueryRow(ctx, `SELECT count(*) FROM executions WHERE id = ANY($1) AND status = 'completed'`, ids).
			Scan(&completed); err != nil || completed != total {
			rows, _ := l.db.Pool.Query(ctx, `SELECT status, error, count(*) FROM executions WHERE id = ANY($1) GROUP BY 1, 2`, ids)
			for rows.Next() {
				var st, e string
				var n int
				_ = rows.Scan(&st, &e, &n)
				b.Logf("%d × %s %s", n, st, e)
			}
			rows.Close()
			b.Fatalf("%d of %d completed after %s (%v)", completed, total, elapsed, err)
		}
		var runMS, queueMS float64
		if err := l.db.Pool.QueryRow(ctx, `SELECT avg(extract(epoch FROM finished_at - started_at)) * 1000,
			avg(extract(epoch FROM started_at - created_at)) * 1000 FROM executions WHERE id = ANY($1)`, ids).
			Scan(&runMS, &queueMS); err != nil {
			b.Fatal(err)
		}
		b.Logf("%d executions in %s: %.1f/s; mean claim→end %.1f ms, mean queued %.0f ms", total, elapsed,
			float64(total)/elapsed.Seconds(), runMS, queueMS)
		for _, h := range hosts {
			if n, open := l.sim.TotalConnections(h), l.sim.Connections(h); n != 1 || open != 1 || maxConns[h] != 1 {
				b.Errorf("%s: %d SSH connections accepted, %d open, at most %d open during the run; want 1", h, n, open, maxConns[h])
			}
		}
		b.StartTimer()
	}
	slices.Sort(rates)
	b.ReportMetric(rates[len(rates)/2], "executions/s")
}
