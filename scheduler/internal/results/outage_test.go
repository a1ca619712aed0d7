package results

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// sampleRec is the n-th result of d at at, with one metric sample whose value is n: the
// sample says which result it came from.
func sampleRec(d labtest.Def, n int, at time.Time) Record {
	res := Observed(HealthUp, "HTTP 200 in %d ms", n)
	res.Metrics = []Metric{{"http_latency_ms", float64(n)}}
	return Record{CheckID: d.ID, CheckSlug: d.Slug, Kind: d.Kind, TargetID: d.TargetID, TargetSlug: d.TargetSlug, At: at, Result: res}
}

// samplesOf reads d's samples: value → the times it was stored at.
func samplesOf(t *testing.T, db *storage.Pool, d labtest.Def) map[int][]time.Time {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT value, at FROM metric_samples WHERE check_id = $1 ORDER BY at`, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int][]time.Time{}
	for rows.Next() {
		var v float64
		var at time.Time
		if err := rows.Scan(&v, &at); err != nil {
			t.Fatal(err)
		}
		out[int(v)] = append(out[int(v)], at)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A batch retried after a COMMIT whose answer was lost (here: the same batch written twice)
// writes nothing the second time: no sample twice, no run counted twice.
func TestWriterRetriedBatchIsWrittenOnce(t *testing.T) {
	t.Parallel()
	lab, defs := routeChecks(t, "a")
	d := defs[0]
	w := NewWriter(WriterOptions{Pool: lab.DB, Logger: zerolog.Nop()})
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Microsecond)
	b := &batch{id: "8d6f1c36-5c1e-4a36-9d7e-2a0f6c1b9e01", recs: []Record{sampleRec(d, 1, t0), sampleRec(d, 2, t0.Add(time.Second))}}
	for i := 0; i < 2; i++ {
		if err := w.flushBatch(ctx, b); err != nil {
			t.Fatalf("attempt %d: %v", i+1, err)
		}
	}
	got := samplesOf(t, lab.DB, d)
	if len(got) != 2 || len(got[1]) != 1 || len(got[2]) != 1 {
		t.Fatalf("samples after a retried batch: %v, want results 1 and 2 once each", got)
	}
	var runs int64
	if err := lab.DB.QueryRow(ctx, `SELECT runs FROM check_results WHERE check_id = $1`, d.ID).Scan(&runs); err != nil {
		t.Fatal(err)
	}
	if runs != 1 {
		t.Errorf("runs %d after a retried batch, want 1 (one write of the check's row)", runs)
	}
	// A batch of its own is written as usual.
	if err := w.flushBatch(ctx, &batch{id: "8d6f1c36-5c1e-4a36-9d7e-2a0f6c1b9e02", recs: []Record{sampleRec(d, 3, t0.Add(2*time.Second))}}); err != nil {
		t.Fatal(err)
	}
	if got := samplesOf(t, lab.DB, d); len(got[3]) != 1 {
		t.Errorf("a later batch: samples %v, want result 3 once", got)
	}
}

// Postgres stopped for 10 s while a check keeps producing results (issue 32): every result
// made during the outage is stored once it is back, exactly once, with the time it was
// made; with a buffer too small for the outage, what did not fit is reported per check as
// check.results_unrecorded, with the count and the span, and nothing else is lost.
func TestWriterKeepsResultsThroughOutage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("stops a private Postgres for 10 s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, db := pgtest.Private(t, 8)
	inv := "entities:\n"
	for _, n := range []string{"kept", "small"} {
		inv += fmt.Sprintf("  - {type: ingress-route, name: %s.lab.example, attributes: {url: \"http://%s.lab.example/\"}}\n", n, n)
	}
	lab := labtest.New(t, labtest.Options{Inventory: []byte(inv), NoSim: true, DB: db})
	defs := lab.DeriveChecks(t, func(_ checks.Target, d *checks.Def) bool { return d.Kind == "http" })
	byTarget := map[string]labtest.Def{}
	for _, d := range defs {
		byTarget[d.TargetSlug] = d
	}
	kept, small := byTarget["ingress-route:kept.lab.example"], byTarget["ingress-route:small.lab.example"]
	if kept.ID == "" || small.ID == "" {
		t.Fatalf("checks derived: %v", byTarget)
	}

	reg := metrics.NewRegistry()
	opts := WriterOptions{Pool: lab.DB, Logger: zerolog.Nop(), FlushEvery: 50 * time.Millisecond, MaxRetryDelay: 200 * time.Millisecond}
	big := NewWriter(opts)
	opts.Buffer, opts.FlushBatch, opts.Metrics = 10, 5, reg
	tiny := NewWriter(opts) // holds 10 results
	for _, w := range []*Writer{big, tiny} {
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
	}
	made := map[*Writer]map[int]time.Time{big: {}, tiny: {}}
	n := 0
	submit := func() {
		n++
		at := time.Now().Truncate(time.Microsecond)
		big.Submit(ctx, sampleRec(kept, n, at))
		tiny.Submit(ctx, sampleRec(small, n, at))
		made[big][n], made[tiny][n] = at, at
	}
	// Before: written as usual.
	for range 3 {
		submit()
	}
	waitUntil(t, 10*time.Second, "the first results written", func() bool { return big.Pending() == 0 && tiny.Pending() == 0 })

	if err := cluster.Halt(); err != nil {
		t.Fatal(err)
	}
	outageFrom := time.Now()
	beforeOutage := n
	tick := time.NewTicker(100 * time.Millisecond)
	for time.Since(outageFrom) < 10*time.Second {
		<-tick.C
		submit()
	}
	tick.Stop()
	if !big.Failing() || !tiny.Failing() {
		t.Fatalf("writers failing during the outage: %v, %v; want both", big.Failing(), tiny.Failing())
	}
	if p := big.Pending(); p != int64(n-beforeOutage) {
		t.Errorf("%d results buffered by the writer with room, want the %d made during the outage", p, n-beforeOutage)
	}
	if err := cluster.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	waitUntil(t, 30*time.Second, "the buffered results written", func() bool {
		return big.Pending() == 0 && tiny.Pending() == 0 && !big.Failing() && !tiny.Failing()
	})
	t.Logf("outage %s, %d results per check made during it, all written %s after Postgres was back",
		back.Sub(outageFrom).Round(time.Millisecond), n-beforeOutage, time.Since(back).Round(time.Millisecond))

	// Every result of the writer with room: stored once, at the time it was made.
	got := samplesOf(t, lab.DB, kept)
	for i := 1; i <= n; i++ {
		if ats := got[i]; len(ats) != 1 || !ats[0].Equal(made[big][i]) {
			t.Errorf("kept: result %d stored at %v, want once at %v", i, ats, made[big][i])
		}
	}
	if len(got) != n {
		t.Errorf("kept: %d results stored, want %d", len(got), n)
	}
	var runs int64
	var at time.Time
	if err := lab.DB.QueryRow(ctx, `SELECT runs, at FROM check_results WHERE check_id = $1`, kept.ID).Scan(&runs, &at); err != nil {
		t.Fatal(err)
	}
	if !at.Equal(made[big][n]) {
		t.Errorf("kept: check_results at %v, want the latest result's %v", at, made[big][n])
	}

	// The small buffer: the first 10 of the outage kept, the rest reported.
	got = samplesOf(t, lab.DB, small)
	keptSmall := 0
	for i := 1; i <= n; i++ {
		switch ats := got[i]; {
		case len(ats) > 1:
			t.Errorf("small: result %d stored %d times", i, len(ats))
		case len(ats) == 1 && !ats[0].Equal(made[tiny][i]):
			t.Errorf("small: result %d stored at %v, want %v", i, ats[0], made[tiny][i])
		case len(ats) == 1 && i > beforeOutage:
			keptSmall++
		}
	}
	var events []lostRun
	rows, err := lab.DB.Query(ctx, `SELECT payload FROM events WHERE type = $1 ORDER BY id`, EventResultsUnrecorded)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var raw []byte
		var l lostRun
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &l); err != nil {
			t.Fatal(err)
		}
		events = append(events, l)
	}
	rows.Close()
	if len(events) != 1 {
		t.Fatalf("%d %s events, want 1 (the small buffer's check): %+v", len(events), EventResultsUnrecorded, events)
	}
	e := events[0]
	lost := n - beforeOutage - keptSmall
	if e.CheckID != small.ID || e.Count != lost || lost == 0 {
		t.Errorf("event %+v: want check %s, %d results (made %d during the outage, %d kept)", e, small.ID, lost, n-beforeOutage, keptSmall)
	}
	if keptSmall < 10 {
		t.Errorf("small: %d results of the outage kept, want at least the buffer's 10", keptSmall)
	}
	if e.From.Before(outageFrom) || e.To.After(back) || e.Reason == "" {
		t.Errorf("event span %v–%v, reason %q: want inside the outage %v–%v, and a reason", e.From, e.To, e.Reason, outageFrom, back)
	}
	if v := reg.Value("oikos_scheduler_results_dropped_total", "reason", "buffer_full"); int(v) != lost {
		t.Errorf("dropped{buffer_full} = %v, want %d", v, lost)
	}
	t.Logf("small buffer: %d of the outage's results kept, %d reported: %s", keptSmall, lost, e.Reason)
}
