package eventbus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/testkit/pgcluster"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

type seqPayload struct {
	Seq int `json:"seq"`
}

// daemon is one process's view: a notifier, a bus and two subscribers recording seqs.
type daemon struct {
	notifier *eventbus.Notifier
	bus      *eventbus.Bus
	got      [][]int
	ids      [][]int64
	wg       sync.WaitGroup
}

func startDaemon(t *testing.T, ctx context.Context, url string, pool *pgxpool.Pool, want int, appName string) *daemon {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = appName
	d := &daemon{}
	d.notifier = eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: cfg, Logger: zerolog.Nop(), MaxBackoff: 200 * time.Millisecond})
	from := int64(0)
	d.bus = eventbus.NewBus(eventbus.BusOptions{Pool: pool, Notifier: d.notifier, Logger: zerolog.Nop(), From: &from, Poll: 500 * time.Millisecond})
	d.got = make([][]int, 2)
	d.ids = make([][]int64, 2)
	for i := range 2 {
		sub := d.bus.Subscribe(64, "test.")
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			defer sub.Close()
			for len(d.got[i]) < want {
				select {
				case e := <-sub.C:
					var p seqPayload
					if err := json.Unmarshal(e.Payload, &p); err != nil {
						t.Errorf("payload: %v", err)
						return
					}
					d.got[i] = append(d.got[i], p.Seq)
					d.ids[i] = append(d.ids[i], e.ID)
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	if err := d.bus.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.notifier.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *daemon) stop() {
	d.notifier.Stop()
	d.bus.Stop()
}

// writer appends seq 0..n-1 in small transactions, retrying a failed transaction; before a
// retry it checks whether the ambiguous commit landed, so each seq is written exactly once.
func writer(ctx context.Context, pool *pgxpool.Pool, n, perTx int, progress *atomic.Int64) error {
	for start := 0; start < n; start += perTx {
		for {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			err := pg.InTx(ctx, pool, func(tx pgx.Tx) error {
				for s := start; s < min(start+perTx, n); s++ {
					if _, err := eventbus.Append(ctx, tx, eventbus.Event{Type: "test.seq", Actor: "test"}, seqPayload{Seq: s}); err != nil {
						return err
					}
				}
				return nil
			})
			if err == nil {
				break
			}
			var landed bool
			for ctx.Err() == nil {
				qerr := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE type = 'test.seq' AND (payload->>'seq')::int = $1)`, start).Scan(&landed)
				if qerr == nil {
					break
				}
				time.Sleep(50 * time.Millisecond) // the server is restarting; poll until it answers
			}
			if landed {
				break
			}
		}
		progress.Store(int64(min(start+perTx, n)))
	}
	return nil
}

func checkExactlyOnceInOrder(t *testing.T, name string, d *daemon, n int) {
	t.Helper()
	for i, seqs := range d.got {
		if len(seqs) != n {
			t.Fatalf("%s subscriber %d: got %d events, want %d", name, i, len(seqs), n)
		}
		for j, s := range seqs {
			if s != j {
				t.Fatalf("%s subscriber %d: position %d has seq %d (duplicate, loss or reorder)", name, i, j, s)
			}
		}
		if !sort.SliceIsSorted(d.ids[i], func(a, b int) bool { return d.ids[i][a] < d.ids[i][b] }) {
			t.Fatalf("%s subscriber %d: ids out of order", name, i)
		}
	}
}

func TestBusSurvivesBackendTermination(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 10000
	a := startDaemon(t, ctx, db.URL, db.Pool, n, "bus-test-a")
	defer a.stop()
	b := startDaemon(t, ctx, db.URL, db.Pool, n, "bus-test-b")
	defer b.stop()

	var progress atomic.Int64
	errc := make(chan error, 1)
	go func() { errc <- writer(ctx, db.Pool, n, 20, &progress) }()

	// Terminate both listeners' backends while the stream is in flight.
	for progress.Load() < n/3 {
		if ctx.Err() != nil {
			t.Fatal("timed out before a third of the events were written")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var killed int
	if err := db.Pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name IN ('bus-test-a', 'bus-test-b')`).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 2 {
		t.Fatalf("terminated %d listener backends, want 2", killed)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	a.wg.Wait()
	b.wg.Wait()
	checkExactlyOnceInOrder(t, "a", a, n)
	checkExactlyOnceInOrder(t, "b", b, n)
}

func TestBusSurvivesServerRestart(t *testing.T) {
	t.Parallel()
	// This test restarts the server, so it always runs its own private cluster.
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: dir, Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Stop()
	url := cluster.URL("postgres")
	pool, err := pg.Connect(ctx, url, 10, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pg.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	const n = 10000
	a := startDaemon(t, ctx, url, pool, n, "restart-a")
	defer a.stop()

	var progress atomic.Int64
	errc := make(chan error, 1)
	go func() { errc <- writer(ctx, pool, n, 20, &progress) }()
	for progress.Load() < n/3 {
		if ctx.Err() != nil {
			t.Fatal("timed out before a third of the events were written")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cluster.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	a.wg.Wait()
	checkExactlyOnceInOrder(t, "restart", a, n)
}

func TestAppendRequiresType(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	_, err := eventbus.Append(context.Background(), db.Pool, eventbus.Event{}, nil)
	if err == nil {
		t.Fatal("append without a type succeeded")
	}
	var count int
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM events`).Scan(&count); err != nil || count != 0 {
		t.Fatalf("count=%d err=%v", count, err)
	}
}

// BenchmarkDelivery measures appended-and-delivered events per second and the
// commit→delivery latency (reported as p50/p99 metrics), with 4 writers committing 1, 10 or
// 50 events per transaction.
func BenchmarkDelivery(b *testing.B) {
	for _, perTx := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("perTx=%d", perTx), func(b *testing.B) { benchDelivery(b, perTx) })
	}
}

func benchDelivery(b *testing.B, perTx int) {
	db := pgtest.New(b)
	ctx := context.Background()
	cfg, _ := pgx.ParseConfig(db.URL)
	notifier := eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: cfg, Logger: zerolog.Nop()})
	bus := eventbus.NewBus(eventbus.BusOptions{Pool: db.Pool, Notifier: notifier, Logger: zerolog.Nop()})
	sub := bus.Subscribe(4096, "bench.")
	if err := bus.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if err := notifier.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer notifier.Stop()
	defer bus.Stop()
	for !notifier.Connected() {
		time.Sleep(time.Millisecond)
	}
	type stamp struct {
		T int64 `json:"t"`
	}
	lat := make([]time.Duration, 0, b.N)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range b.N {
			e := <-sub.C
			var s stamp
			_ = json.Unmarshal(e.Payload, &s)
			lat = append(lat, time.Since(time.Unix(0, s.T)))
		}
	}()
	b.ResetTimer()
	start := time.Now()
	const writers = 4
	var wg sync.WaitGroup
	per := (b.N + writers - 1) / writers
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w * per; i < min((w+1)*per, b.N); i += perTx {
				_ = pg.InTx(ctx, db.Pool, func(tx pgx.Tx) error {
					for j := i; j < min(i+perTx, (w+1)*per, b.N); j++ {
						if _, err := eventbus.Append(ctx, tx, eventbus.Event{Type: "bench.e"}, stamp{T: time.Now().UnixNano()}); err != nil {
							return err
						}
					}
					return nil
				})
			}
		}()
	}
	wg.Wait()
	<-done
	elapsed := time.Since(start)
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}
