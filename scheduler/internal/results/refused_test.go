package results

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// A batch the database refuses (here a check id that is not a uuid: an error of the data,
// not of the database being away) is tried writeTries times, then given up and reported as
// unrecorded with the results that shared its batch; it does not hold back the results after
// it, and the runner is never told the database is away.
func TestWriterGivesUpARefusedBatch(t *testing.T) {
	t.Parallel()
	lab, defs := routeChecks(t, "refused")
	d := defs[0]
	w := NewWriter(WriterOptions{Pool: lab.DB, Logger: zerolog.Nop(), FlushEvery: 20 * time.Millisecond, MaxRetryDelay: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	t0 := time.Now().Truncate(time.Microsecond)
	bad := sampleRec(d, 1, t0)
	bad.CheckID = "not-a-uuid" // refused by the database's uuid input (22P02)
	w.Submit(ctx, bad)
	deadline := time.Now().Add(30 * time.Second)
	for n := 2; ; n++ {
		if w.Failing() {
			t.Fatal("a refused batch made the writer report the database away")
		}
		w.Submit(ctx, sampleRec(d, n, t0.Add(time.Duration(n)*time.Millisecond)))
		var events int
		if err := lab.DB.QueryRow(ctx, `SELECT count(*) FROM events WHERE type = $1 AND payload->>'reason' LIKE '%the database refused them: %'`,
			EventResultsUnrecorded).Scan(&events); err != nil {
			t.Fatal(err)
		}
		if got := samplesOf(t, lab.DB, d); events >= 1 && len(got) > 0 {
			break
		}
		if time.Now().After(deadline) {
			var rs []string
			rows, _ := lab.DB.Query(ctx, `SELECT payload::text FROM events WHERE type = $1`, EventResultsUnrecorded)
			for rows.Next() {
				var r string
				_ = rows.Scan(&r)
				rs = append(rs, r)
			}
			rows.Close()
			t.Fatalf("after %d results: %d unrecorded events, %d samples: %v", n, events, len(samplesOf(t, lab.DB, d)), rs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var count int
	var reason string
	// The results that shared the refused batch are reported with it (one event per check).
	if err := lab.DB.QueryRow(ctx, `SELECT (payload->>'count')::int, payload->>'reason' FROM events WHERE type = $1 AND payload->>'check_id' = 'not-a-uuid'`, EventResultsUnrecorded).
		Scan(&count, &reason); err != nil {
		t.Fatal(err)
	}
	if count != 1 || !strings.Contains(reason, "uuid") {
		t.Errorf("unrecorded event: count %d, reason %q", count, reason)
	}
}
