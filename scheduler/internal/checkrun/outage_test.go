package checkrun

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// Postgres stopped for 5 s under a running runner whose lease cannot be renewed meanwhile
// (issue 32): the check keeps running under the lease it held, and its results of the outage
// are stored once Postgres is back, with the times they ran.
func TestRunnerChecksThroughOutage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("stops a private Postgres for 5 s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, db := pgtest.Private(t, 8)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	inv := fmt.Sprintf("entities:\n  - {type: ingress-route, name: svc.lab.example, attributes: {url: \"http://svc.lab.example:%s/\"}}\n", port)
	lab := labtest.New(t, labtest.Options{Inventory: []byte(inv), NoSim: true, DB: db})
	defs := lab.DeriveChecks(t, func(_ checks.Target, d *checks.Def) bool {
		d.Interval, d.Timeout = time.Second, time.Second
		return d.Kind == "http"
	})
	if len(defs) != 1 {
		t.Fatalf("%d http checks derived, want 1", len(defs))
	}
	d := defs[0]
	if _, err := db.Exec(ctx, `INSERT INTO scheduler_leases (resource, holder, expires_at, generation) VALUES ('net', 's1', now() + interval '1 hour', 1)`); err != nil {
		t.Fatal(err)
	}
	var held atomic.Bool // the lease manager's answer: no renewal while Postgres is down
	held.Store(true)
	startRunner(t, lab, func(o *Options) {
		o.Holder = "s1"
		o.Lease = func(string) (int64, bool) { return 1, held.Load() }
		o.NameMap = map[string]string{"svc.lab.example": "127.0.0.1"}
		o.SSH = remote.NewPool(remote.PoolOptions{Signer: labtest.Signer(t), HostKeys: remote.NewMemoryHostKeys(), Logger: zerolog.Nop()})
		t.Cleanup(func() { o.SSH.Close() })
	})
	runs := func() int64 {
		var n int64
		if err := db.QueryRow(ctx, `SELECT coalesce((SELECT runs FROM check_results WHERE check_id = $1), 0)`, d.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFor(t, 10*time.Second, "the check's first results", func() (bool, string) {
		n := runs()
		return n >= 2, fmt.Sprintf("%d runs", n)
	})

	if err := cluster.Halt(); err != nil {
		t.Fatal(err)
	}
	held.Store(false)
	from, hits0 := time.Now(), hits.Load()
	time.Sleep(5 * time.Second) // the outage itself
	during := hits.Load() - hits0
	if err := cluster.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	to := time.Now()
	held.Store(true)
	if during < 3 {
		t.Fatalf("the check ran %d times during the 5 s outage, want about 5 (it must keep running)", during)
	}
	stored := func() int64 {
		var n int64
		if err := db.QueryRow(ctx, `SELECT count(DISTINCT at) FROM metric_samples WHERE check_id = $1 AND at > $2 AND at < $3`,
			d.ID, from, to).Scan(&n); err != nil {
			return -1 // the pool reconnecting
		}
		return n
	}
	waitFor(t, 30*time.Second, "the outage's results stored", func() (bool, string) {
		n := stored()
		return n >= during-1, fmt.Sprintf("%d of %d stored", n, during)
	})
	t.Logf("%d runs during the outage, %d stored with times inside it", during, stored())
}
