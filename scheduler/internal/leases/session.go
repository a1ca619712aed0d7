package leases

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/safego"
)

// Crash detection. Waiting out a dead scheduler's leases costs a whole expiry (15 s) before
// its hosts are checked again. A process that dies closes its connections, and Postgres
// releases its session locks at that moment, so each scheduler holds one — keyed by its id,
// on a connection of its own — and records the key in its membership row. A member whose
// key can be locked by someone else has no live session: the others drop its membership and
// expire its leases in one statement, and take its units at their next tick.
//
// Safety rests on two rules:
//   - A scheduler that loses its session connection (Postgres closed it: restarted, or the
//     backend was terminated) stops counting any unit as its own at once, before anyone can
//     act on the free lock, until a later tick renews what it still holds.
//   - Nobody is reaped while Postgres has been up for less than one expiry: after a restart
//     every lock is free until the members reconnect.
//
// A paused process (SIGSTOP) keeps its sockets and its lock: it is waited out by its
// expiry, as before. The remaining gap is a scheduler cut off from Postgres by the network
// whose backend the server drops (server TCP keepalives shorter than the expiry): it keeps
// running its units until its own validity ends; its results are fenced regardless.

// sessionKey is the advisory lock key of scheduler id.
func sessionKey(id string) int64 {
	h := sha256.Sum256([]byte("oikos-scheduler-session\x00" + id))
	return int64(binary.BigEndian.Uint64(h[:8]))
}

// How soon the others notice a dead member, and how long a start waits for the session
// lock of a previous process under the same id.
const (
	reapEvery       = time.Second
	sessionRetryMax = 5 * time.Second
)

// sqlReap drops the members without a live session and expires their leases. The lock
// attempt is transaction-scoped: it is released when the statement ends. The heartbeat
// comparison keeps a member that heartbeat meanwhile (its lock back, or written NULL).
const sqlReap = `
WITH dead AS (
    SELECT id, heartbeat_at FROM scheduler_members
    WHERE id <> $1 AND session_lock IS NOT NULL AND expires_at > now()
      AND pg_postmaster_start_time() < now() - $2::interval
      AND pg_try_advisory_xact_lock(session_lock)
), gone AS (
    DELETE FROM scheduler_members m USING dead
    WHERE m.id = dead.id AND m.heartbeat_at = dead.heartbeat_at AND m.session_lock IS NOT NULL
    RETURNING m.id
), expired AS (
    UPDATE scheduler_leases SET expires_at = now() - interval '1 millisecond'
    WHERE holder IN (SELECT id FROM gone) AND expires_at > now()
    RETURNING resource
)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM expired), coalesce((SELECT string_agg(id, ', ') FROM gone), '')`

// reap drops the members whose session is gone; it reports how many.
func (m *Manager) reap(ctx context.Context) (int, error) {
	var members, units int
	var names string
	if err := m.opts.Pool.QueryRow(ctx, sqlReap, m.opts.ID, m.opts.Expiry.String()).Scan(&members, &units, &names); err != nil {
		return 0, fmt.Errorf("reap dead members: %w", err)
	}
	if members > 0 {
		m.log.Warn().Str("members", names).Int("leases", units).
			Msg("schedulers gone (their Postgres sessions closed): their leases are released now, not at their expiry")
	}
	return members, nil
}

// sessionLock is the key to write in the membership row: this scheduler's while it holds
// its session lock, else nil.
func (m *Manager) sessionLock() *int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.sessHeld {
		return nil
	}
	k := sessionKey(m.opts.ID)
	return &k
}

// startSession takes the session lock before the first tick. A previous process under the
// same id that just died may hold it for a moment; one that is alive keeps it, and this
// start fails: two schedulers under one id would both believe they hold its units.
func (m *Manager) startSession(ctx context.Context) error {
	if m.opts.Session == nil {
		return nil
	}
	deadline := time.Now().Add(max(m.opts.Expiry, sessionRetryMax))
	for {
		conn, ok, err := m.lockSession(ctx)
		if err != nil {
			return err
		}
		if ok {
			sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
			done := make(chan struct{})
			m.mu.Lock()
			m.sessHeld, m.sessCancel, m.sessDone = true, cancel, done
			m.mu.Unlock()
			safego.Go(m.log, "leases-session", func() {
				defer close(done)
				m.watchSession(sctx, conn)
			})
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("another scheduler with id %q is running (it holds the id's session lock): give each scheduler its own OIKOS_SCHEDULER_ID", m.opts.ID)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// lockSession opens the session connection and tries the lock; the connection is returned
// only when the lock is held.
func (m *Manager) lockSession(ctx context.Context) (*pgx.Conn, bool, error) {
	cfg := m.opts.Session.Copy()
	cfg.RuntimeParams["application_name"] = "oikos-scheduler-session:" + m.opts.ID
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, false, fmt.Errorf("leases: session connection: %w", err)
	}
	var ok bool
	if err := conn.QueryRow(cctx, `SELECT pg_try_advisory_lock($1)`, sessionKey(m.opts.ID)).Scan(&ok); err != nil || !ok {
		_ = conn.Close(context.WithoutCancel(ctx))
		if err != nil {
			return nil, false, fmt.Errorf("leases: session lock: %w", err)
		}
		return nil, false, nil
	}
	return conn, true, nil
}

// watchSession blocks on the session connection; when Postgres closes it, this scheduler
// stops owning its units at once and reconnects.
func (m *Manager) watchSession(ctx context.Context, conn *pgx.Conn) {
	backoff := 250 * time.Millisecond
	for {
		if conn != nil {
			// No LISTEN on this connection: the wait returns only when it breaks or ctx ends.
			err := conn.PgConn().WaitForNotification(ctx)
			_ = conn.Close(context.WithoutCancel(ctx))
			conn = nil
			if ctx.Err() != nil {
				return
			}
			m.mu.Lock()
			m.sessHeld = false
			m.fenced = true
			m.lossSeq++
			m.mu.Unlock()
			m.log.Warn().Err(err).Msg("lost the session connection: this scheduler's units stop here until a renewal after it is back")
			m.Wake()
			backoff = 250 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		c, ok, err := m.lockSession(ctx)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				m.log.Warn().Err(err).Msg("session connection: retrying")
			}
		case !ok:
			m.log.Error().Str("id", m.opts.ID).Msg("the session lock of this scheduler's id is held by another process; running without crash detection")
		default:
			conn = c
			m.mu.Lock()
			m.sessHeld = true
			m.mu.Unlock()
			m.Wake()
			continue
		}
		backoff = min(2*backoff, m.opts.Renew)
	}
}

// DropSession closes the session connection for good, as the process's death would (Halt
// and DropSession together are a kill -9). For tests and benchmarks.
func (m *Manager) DropSession() { m.stopSession() }

func (m *Manager) stopSession() {
	m.mu.Lock()
	cancel, done := m.sessCancel, m.sessDone
	m.sessCancel = nil
	m.sessHeld = false
	m.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
