package leases

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
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
// Safety rests on these rules:
//   - A member is reaped only when its lock was free on two looks at least a second apart,
//     with no heartbeat in between. A scheduler whose session connection Postgres closed
//     (restarted, or the backend was terminated) stops counting any unit as its own the
//     moment it notices, and within that second it has its lock back or has heartbeat
//     without it (session_lock NULL), which cancels the reap.
//   - Nobody is reaped while Postgres (or, after a crash restart, its checkpointer) has been
//     up for less than one expiry: after a restart every lock is free until the members
//     reconnect.
//   - The session asks the server for TCP keepalives that give up no sooner than one expiry
//     after a client goes silent, so a scheduler cut off by the network has stopped by
//     itself (its own validity ran out) before its lock is freed; and a host that lost power
//     does not leave its lock held for the kernel's default two hours.
//   - While another process holds this id's lock, this one owns nothing: two processes under
//     one id would both renew as the same holder. A start finding the lock held by a live
//     member fails; one held by a member that stopped heartbeating (a dead process's backend
//     the server has not noticed yet) terminates that backend.
//
// A paused process (SIGSTOP) keeps its sockets and its lock: it is waited out by its
// expiry, as before. The session needs a direct connection to Postgres: behind a
// transaction-pooling proxy the lock would not follow the process.

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

// suspect is a member whose lock was free when last looked at.
type suspect struct {
	heartbeat, since time.Time
}

// sqlReap looks for members without a live session (their lock can be taken) and drops
// those that were found so in an earlier look ($3, $4: ids and the heartbeats seen then) and
// have not heartbeat since, expiring their leases. The lock attempt is transaction-scoped:
// it ends with the statement. The heartbeat comparisons keep a member that heartbeat
// meanwhile (its lock back, or written NULL).
const sqlReap = `
WITH free AS (
    SELECT id, heartbeat_at FROM scheduler_members
    WHERE id <> $1 AND session_lock IS NOT NULL AND expires_at > now()
      AND greatest(pg_postmaster_start_time(),
                   coalesce((SELECT max(backend_start) FROM pg_stat_activity WHERE backend_type = 'checkpointer'),
                            '-infinity')) < now() - $2::interval
      AND pg_try_advisory_xact_lock(session_lock)
), confirmed AS (
    SELECT f.id, f.heartbeat_at FROM free f
    JOIN unnest($3::text[], $4::timestamptz[]) AS s(id, heartbeat_at) ON s.id = f.id AND s.heartbeat_at = f.heartbeat_at
), gone AS (
    DELETE FROM scheduler_members m USING confirmed c
    WHERE m.id = c.id AND m.heartbeat_at = c.heartbeat_at AND m.session_lock IS NOT NULL
    RETURNING m.id
), expired AS (
    UPDATE scheduler_leases SET expires_at = now() - interval '1 millisecond'
    WHERE holder IN (SELECT id FROM gone) AND expires_at > now()
    RETURNING resource
)
SELECT (SELECT array_agg(id ORDER BY id) FROM free), (SELECT array_agg(heartbeat_at ORDER BY id) FROM free),
    (SELECT array_agg(id) FROM gone), (SELECT count(*) FROM expired)`

// reap drops the members whose session is gone; it reports how many.
func (m *Manager) reap(ctx context.Context) (int, error) {
	// The next look (one reap interval later) confirms; a little less, so timer jitter does
	// not postpone it by a whole interval.
	confirm := min(reapEvery, m.opts.Renew) * 3 / 4
	var ids []string
	var beats []time.Time
	m.mu.Lock()
	for id, s := range m.suspects {
		if time.Since(s.since) >= confirm {
			ids, beats = append(ids, id), append(beats, s.heartbeat)
		}
	}
	m.mu.Unlock()
	var free, gone []string
	var freeBeats []time.Time
	var units int
	if err := m.opts.Pool.QueryRow(ctx, sqlReap, m.opts.ID, m.opts.Expiry.String(), ids, beats).
		Scan(&free, &freeBeats, &gone, &units); err != nil {
		return 0, fmt.Errorf("reap dead members: %w", err)
	}
	m.mu.Lock()
	next := make(map[string]suspect, len(free))
	for i, id := range free {
		if slices.Contains(gone, id) {
			continue
		}
		if old, ok := m.suspects[id]; ok && old.heartbeat.Equal(freeBeats[i]) {
			next[id] = old
		} else {
			next[id] = suspect{heartbeat: freeBeats[i], since: time.Now()}
		}
	}
	m.suspects = next
	m.mu.Unlock()
	if len(gone) > 0 {
		m.log.Warn().Strs("members", gone).Int("leases", units).
			Msg("schedulers gone (their Postgres sessions closed): their leases are released now, not at their expiry")
	}
	return len(gone), nil
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
		if err := m.endStaleSession(ctx); err != nil {
			return err
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

// endStaleSession terminates the backend holding this id's session lock when this id's
// membership has lapsed: no live process heartbeats under it, so the holder is what a dead
// one left behind (its host lost power and the server has not noticed yet).
func (m *Manager) endStaleSession(ctx context.Context) error {
	key := uint64(sessionKey(m.opts.ID))
	tag, err := m.opts.Pool.Exec(ctx, `SELECT pg_terminate_backend(l.pid) FROM pg_locks l
JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.classid::bigint = $1 AND l.objid::bigint = $2
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND a.application_name = $3
  AND NOT EXISTS (SELECT 1 FROM scheduler_members WHERE id = $4 AND expires_at > now())`,
		int64(key>>32), int64(key&0xffffffff), sessionName(m.opts.ID), m.opts.ID)
	if err != nil {
		return fmt.Errorf("leases: end a stale session: %w", err)
	}
	if tag.RowsAffected() > 0 {
		m.log.Warn().Str("id", m.opts.ID).Msg("ended the Postgres session a previous process under this id left behind")
	}
	return nil
}

func sessionName(id string) string { return "oikos-scheduler-session:" + id }

// lockSession opens the session connection and tries the lock; the connection is returned
// only when the lock is held.
func (m *Manager) lockSession(ctx context.Context) (*pgx.Conn, bool, error) {
	cfg := m.opts.Session.Copy()
	cfg.RuntimeParams["application_name"] = sessionName(m.opts.ID)
	// The server gives up on a silent client no sooner than one expiry after the silence
	// began (probes every expiry/3, four unanswered), and never for idleness alone.
	secs := max(int(m.opts.Expiry/time.Second), 1)
	cfg.RuntimeParams["idle_session_timeout"] = "0"
	cfg.RuntimeParams["tcp_keepalives_idle"] = strconv.Itoa(secs)
	cfg.RuntimeParams["tcp_keepalives_interval"] = strconv.Itoa(max(secs/3, 1))
	cfg.RuntimeParams["tcp_keepalives_count"] = "4"
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
			if m.lostHook != nil {
				m.lostHook()
			}
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
			// Another process took this id's lock while ours was gone: it runs under our id,
			// so this one owns nothing until the lock is ours again.
			m.mu.Lock()
			first := !m.twin
			m.twin, m.fenced = true, true
			m.mu.Unlock()
			if first {
				m.log.Error().Str("id", m.opts.ID).Msg("another process holds this scheduler id's session lock: this one stops owning units until it has the lock again; give each scheduler its own OIKOS_SCHEDULER_ID")
			}
			if err := m.endStaleSession(ctx); err != nil && ctx.Err() == nil {
				m.log.Warn().Err(err).Msg("session")
			}
		default:
			conn = c
			m.mu.Lock()
			m.sessHeld, m.twin = true, false
			m.mu.Unlock()
			m.Wake()
			continue
		}
		backoff = min(2*backoff, m.opts.Renew)
	}
}

// DropSession closes the session connection for good, as the process's death would (Halt
// and DropSession together are a kill -9); nothing counts as owned here afterwards. For
// tests and benchmarks.
func (m *Manager) DropSession() {
	m.stopSession()
	m.mu.Lock()
	m.fenced = true
	m.mu.Unlock()
}

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
