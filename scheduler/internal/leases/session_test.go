package leases

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
)

// sessionManager is a manager with a session lock; expiry long enough that a take before it
// can only come from the crash detection.
func sessionManager(t *testing.T, lab *labtest.Lab, id string, renew, expiry time.Duration) *Manager {
	t.Helper()
	cfg, err := pgx.ParseConfig(lab.DB.Config().ConnConfig.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{Pool: lab.DB, ID: id, Logger: zerolog.Nop(), Renew: renew, Expiry: expiry, Session: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// waitPostmasterUp waits until Postgres has been up for longer than d: crash detection is
// off for one expiry after a restart.
func waitPostmasterUp(t *testing.T, lab *labtest.Lab, d time.Duration) {
	t.Helper()
	var up float64
	if err := lab.DB.QueryRow(context.Background(), `SELECT extract(epoch FROM now() - pg_postmaster_start_time())::float8`).Scan(&up); err != nil {
		t.Fatal(err)
	}
	if wait := d - time.Duration(up*float64(time.Second)) + 100*time.Millisecond; wait > 0 {
		time.Sleep(wait)
	}
}

// A scheduler that dies (its session closes) has its units taken at the survivor's next
// tick, not after the expiry; one that is paused (its session open) is waited out.
func TestCrashedMemberTakenAtOncePausedWaitedOut(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t, labtest.Options{Inventory: fleet(10), NoSim: true})
	const units = 12
	expiry := 5 * time.Second
	waitPostmasterUp(t, lab, expiry)
	ctx := context.Background()
	a, b := sessionManager(t, lab, "crash-a", time.Second, expiry), sessionManager(t, lab, "crash-b", time.Second, expiry)
	for _, m := range []*Manager{a, b} {
		if err := m.startSession(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.stopSession)
	}
	tick(t, a, b)
	tick(t, a, b)
	tick(t, a, b)
	assertPartition(t, units, a, b)
	if len(b.Owned()) == 0 {
		t.Fatal("b owns nothing")
	}

	// Paused: b ticks no more but its session stays. a must wait out b's leases.
	tick(t, a)
	if n := len(a.Owned()); n == units {
		t.Fatalf("a took a paused scheduler's units before their expiry")
	}
	for _, m := range []*Manager{a, b} {
		var lock *int64
		if err := lab.DB.QueryRow(ctx, `SELECT session_lock FROM scheduler_members WHERE id = $1`, m.ID()).Scan(&lock); err != nil || lock == nil {
			t.Fatalf("%s's membership records no session lock (%v)", m.ID(), err)
		}
	}

	// Killed: b's session closes. a, looking twice a second apart, drops b and takes its units.
	// Judged by the database's stamps, not this process's clock: a took them (acquired_at)
	// before b's leases, renewed no more, would have expired.
	var bExpires time.Time
	if err := lab.DB.QueryRow(ctx, `SELECT min(expires_at) FROM scheduler_leases WHERE holder = 'crash-b'`).Scan(&bExpires); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	b.DropSession()
	for len(a.Owned()) != units {
		if time.Since(killed) > 6*expiry { // a bound on the wait; the assertion is below
			t.Fatalf("a owns %d of %d units %s after b died", len(a.Owned()), units, 6*expiry)
		}
		tick(t, a)
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(killed)
	var takenAt time.Time
	if err := lab.DB.QueryRow(ctx, `SELECT max(acquired_at) FROM scheduler_leases WHERE holder = 'crash-a'`).Scan(&takenAt); err != nil {
		t.Fatal(err)
	}
	if !takenAt.Before(bExpires) {
		t.Fatalf("a took b's units at %s, once b's leases had expired (%s): it waited out the expiry",
			takenAt.Format(time.StampMilli), bExpires.Format(time.StampMilli))
	}
	var members int
	if err := lab.DB.QueryRow(ctx, `SELECT count(*) FROM scheduler_members WHERE id = 'crash-b'`).Scan(&members); err != nil || members != 0 {
		t.Errorf("b is still a member (%d, %v)", members, err)
	}
	t.Logf("a took dead b's units after %s", took.Round(time.Millisecond))
}

// A scheduler whose session connection Postgres closes while it runs stops owning its units
// at once, before anyone can act on its free lock; it rejoins when the connection is back.
// At no moment do two schedulers own a unit.
func TestLostSessionStopsOwning(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t, labtest.Options{Inventory: fleet(10), NoSim: true})
	const units = 12
	expiry := 2 * time.Second
	waitPostmasterUp(t, lab, expiry)
	ctx := context.Background()
	a, b := sessionManager(t, lab, "lost-a", 200*time.Millisecond, expiry), sessionManager(t, lab, "lost-b", 200*time.Millisecond, expiry)
	ownedAtLoss := make(chan []string, 1)
	a.lostHook = func() {
		select {
		case ownedAtLoss <- a.Owned():
		default:
		}
	}
	for _, m := range []*Manager{a, b} {
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Stop)
	}
	var doubles atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			for u, by := range owners(a, b) {
				if len(by) > 1 {
					t.Errorf("%s owned by %v at once", u, by)
					doubles.Add(1)
				}
			}
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(owners(a, b)) != units || len(a.Owned()) == 0 || len(b.Owned()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("not settled: %v", owners(a, b))
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Postgres drops a's session backend (pg_terminate_backend, as a restart would).
	tag, err := lab.DB.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE application_name = 'oikos-scheduler-session:lost-a' AND datname = current_database()`)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("terminate a's session: %v %v", tag, err)
	}
	lost := time.Now()
	select {
	case owned := <-ownedAtLoss:
		// The fence lasts only until a's next tick (woken at once) has heartbeat without the
		// lock, a few milliseconds: polling from here can miss it on a loaded machine, so the
		// hook looks at the moment a noticed.
		if len(owned) != 0 {
			t.Fatalf("a still owned %v as it noticed it had lost its session", owned)
		}
		t.Logf("a noticed the lost session %s after it was ended, owning nothing", time.Since(lost).Round(time.Millisecond))
	case <-time.After(expiry):
		t.Fatalf("a had not noticed its lost session %s after it was ended (owns %v)", expiry, a.Owned())
	}
	// b takes over what was a's (a's lock was free for a moment), then a, back, gets its
	// share again.
	deadline = time.Now().Add(15 * time.Second)
	for len(owners(a, b)) != units || len(a.Owned()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a did not rejoin: %v", owners(a, b))
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	<-done
	if doubles.Load() > 0 {
		t.Fatalf("%d double ownerships", doubles.Load())
	}
}

// Two processes under one id would both believe they hold its units: the second fails to
// start, naming the id.
func TestTwinIDRefused(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t, labtest.Options{Inventory: fleet(2), NoSim: true})
	a := sessionManager(t, lab, "twin", 200*time.Millisecond, time.Second)
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	again := sessionManager(t, lab, "twin", 200*time.Millisecond, time.Second)
	err := again.Start(context.Background())
	if err == nil {
		again.Stop()
		t.Fatal("a second scheduler under the same id started")
	}
	if !strings.Contains(err.Error(), `"twin"`) || !strings.Contains(err.Error(), "OIKOS_SCHEDULER_ID") {
		t.Errorf("error %q", err)
	}
}

// A previous process's session that the server still keeps (its host lost power) does not
// keep the next process under the same id from starting: its membership has lapsed, so the
// stale backend is ended.
func TestStaleSessionEndedAtStart(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t, labtest.Options{Inventory: fleet(2), NoSim: true})
	old := sessionManager(t, lab, "stale", 200*time.Millisecond, time.Second)
	if err := old.startSession(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(old.stopSession)
	// old never heartbeats: as if its process vanished with its connection left open.
	next := sessionManager(t, lab, "stale", 200*time.Millisecond, time.Second)
	started := time.Now()
	if err := next.Start(context.Background()); err != nil {
		t.Fatalf("a start after a stale session: %v", err)
	}
	t.Cleanup(next.Stop)
	if time.Since(started) > 3*time.Second {
		t.Errorf("the start took %s", time.Since(started))
	}
}
