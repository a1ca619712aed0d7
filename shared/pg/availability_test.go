package pg_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/testkit/pgcluster"
)

func TestIsUnavailable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("syntax"), false},
		{&pgconn.PgError{Code: "23505"}, false},
		{&pgconn.PgError{Code: "57P01"}, true},
		{&pgconn.PgError{Code: "08006"}, true},
		{context.Canceled, false},
		{pgconn.ErrConnClosed, true},
		// Another peer's network failure is not the database's (the agent behind the api,
		// a webhook): the api must not answer it as database-unavailable.
		{io.EOF, false},
		{io.ErrUnexpectedEOF, false},
		{syscall.ECONNREFUSED, false},
		{fmt.Errorf("agent: %w", refused(t)), false},
		{httpRefused(t), false},
	} {
		if got := pg.IsUnavailable(c.err); got != c.want {
			t.Errorf("IsUnavailable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// refused is the error of a TCP dial to a loopback port nothing listens on.
func refused(t *testing.T) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = net.Dial("tcp", addr)
	var ne *net.OpError
	if !errors.As(err, &ne) {
		t.Fatalf("dial %s: %v, want a *net.OpError", addr, err)
	}
	return err
}

// httpRefused is an HTTP client's error for a peer that refuses the connection.
func httpRefused(t *testing.T) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	resp, err := http.Get("http://" + addr + "/")
	if err == nil {
		resp.Body.Close()
		t.Fatal("a closed port answered")
	}
	return err
}

// A pool watched by an Availability follows a real server going away and coming back: a
// query during the outage fails fast with an error IsUnavailable accepts, the state says
// since when and why, and the first answer after the server returns clears it, with the
// outage's length.
func TestAvailabilityFollowsAnOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: t.TempDir(), Fast: true})
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	avail := pg.NewAvailability(zerolog.Nop())
	pool, err := pg.ConnectWith(ctx, c.URL("postgres"), 4, zerolog.Nop(), avail)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `SELECT 1`); err != nil || !avail.Reachable() {
		t.Fatalf("before: %v, reachable %v", err, avail.Reachable())
	}
	held, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	if err := c.Halt(); err != nil {
		t.Fatal(err)
	}
	// A connection open when the server went away fails its next statement with one of
	// pgconn's I/O errors.
	if _, err := held.Exec(ctx, `SELECT 1`); !pg.IsUnavailable(err) {
		t.Fatalf("a statement on a connection the server dropped: %v (%T), want an unavailable error", err, err)
	}
	began := time.Now()
	_, err = pool.Exec(ctx, `SELECT 1`)
	if !pg.IsUnavailable(err) {
		t.Fatalf("a query while the server is down: %v, want an unavailable error", err)
	}
	if d := time.Since(began); d > pg.DefaultConnectTimeout+time.Second {
		t.Fatalf("the failing query took %s", d)
	}
	st := avail.State()
	if st.Reachable || st.UnreachableSince == nil || st.LastError == "" {
		t.Fatalf("state during the outage: %+v", st)
	}
	if err := avail.Ping(ctx, pool, time.Second); err == nil {
		t.Fatal("ping during the outage answered")
	}
	if err := c.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := avail.Ping(ctx, pool, 5*time.Second); err != nil {
		t.Fatalf("ping after the server returned: %v", err)
	}
	st = avail.State()
	if !st.Reachable || st.RecoveredAt == nil || st.LastOutageSeconds <= 0 {
		t.Fatalf("state after the outage: %+v", st)
	}
}
