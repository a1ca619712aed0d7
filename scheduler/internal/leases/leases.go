// Package leases lets several schedulers share one fleet with Postgres as the only
// coordinator (docs/architecture.md, "Growing past one scheduler"; S9). The work is cut into
// units — every SSH host ("host:<slug>", everything that goes through that machine: its
// checks, its guests' checks, its executions, its one SSH connection) and the HTTP/TCP check
// set ("net") — and each unit is leased to one scheduler in scheduler_leases.
//
//   - Membership: each scheduler renews its scheduler_members row with its leases; members
//     whose row lapsed are gone.
//   - Assignment: rendezvous hashing over the live members, so every member computes the same
//     owner for a unit and a join or a leave moves only the units that must move.
//   - Acquire: one conditional statement takes a unit whose lease lapsed (or was released);
//     a live lease is never taken. The generation grows with each new holder.
//   - Hand-over: a holder that is no longer a unit's owner stops the unit's work, then
//     releases the lease; the new owner takes it on its next tick. Never two holders.
//   - Fencing: Owns is true only until the last renewal's expiry minus a margin, measured on
//     this process's monotonic clock from before the renewal was sent, so a paused or
//     partitioned scheduler stops by itself before another can take its units; writes check
//     the lease in the statement itself (results.Record.Unit).
package leases

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/signals"
	"github.com/oikos-hq/oikos/shared/startstop"
)

// Defaults for Options.
const (
	DefaultRenew  = 5 * time.Second
	DefaultExpiry = 15 * time.Second
)

// NetUnit is the unit of the HTTP and TCP checks.
const NetUnit = "net"

// HostUnit is the unit of everything that goes through the machine slug.
func HostUnit(slug string) string { return "host:" + slug }

// Signal identity of a unit nobody holds.
const (
	SignalKind = "unit_unheld"
	unheldLock = 0x6f696b6f7320
)

// Options configure a Manager. Pool is required.
type Options struct {
	Pool *pgxpool.Pool
	// ID names this scheduler (default "<hostname>:<pid>"); it is the holder of its leases
	// and the claimed_by of its executions.
	ID     string
	Logger zerolog.Logger
	// Renew is the heartbeat (default 5 s); Expiry how long a lease lasts unrenewed (15 s).
	Renew, Expiry time.Duration
	// Margin is how long before its expiry a lease stops counting as owned here
	// (default Renew/2, at most Expiry/4).
	Margin time.Duration
	// OnChange is called after a tick that changed the units held.
	OnChange func(Change)
	// Busy, when set, says whether a unit being handed over still has work in hand here (a
	// check running, a result not yet written): its lease is released only once it has not,
	// or after Expiry at the most, so the new holder starts from everything this one did.
	Busy func(unit string) bool
	// Session, when set, is the connection configuration of the session lock this scheduler
	// holds while it runs (session.go): when it dies, the others take its units at once
	// rather than after the expiry. Nil: no lock; its leases are waited out.
	Session *pgx.ConnConfig
}

// Change is what a tick changed: the units held now, the ones just taken (their work can
// start: checks due, executions waiting), the ones whose hand-over to another scheduler just
// began (their work stopped here: what is in hand should finish and be written) and the ones
// just handed back (their SSH connection can close: the new holder has its own).
// TakenOver lists the units of Acquired whose previous holder is no longer a member (it died,
// was reaped, or stopped): nobody handed their checks' schedule over, so their work should
// resume at once rather than at the dead holder's pace (checkrun.Runner.TakenOver).
type Change struct {
	Held, Acquired, Releasing, Released, TakenOver []string
}

// Lease is one unit held.
type Lease struct {
	Unit       string    `json:"unit"`
	Generation int64     `json:"generation"`
	ValidUntil time.Time `json:"valid_until"`
	// Releasing: another scheduler owns the unit now; its work stopped here and the lease
	// is handed back at a later tick, once the work in hand is done (Options.Busy).
	Releasing bool      `json:"releasing,omitempty"`
	since     time.Time // when Releasing began
}

// Manager holds this scheduler's leases. Start once; Stop releases them.
type Manager struct {
	opts Options
	log  zerolog.Logger
	life startstop.Lifecycle

	mu      sync.Mutex
	held    map[string]Lease // by unit
	members []string
	unheld  map[string]time.Time // unit → when first seen without a live holder
	wake    chan struct{}
	// takeAt is when a unit this scheduler owns but could not take yet (another's live
	// lease) expires: the loop ticks then, not up to a renew interval later.
	takeAt time.Time
	// watchSince is when this scheduler began watching for unheld units (as net's holder).
	watchSince time.Time
	// The session lock (session.go): whether it is held now; fenced while its connection
	// was lost and no tick has renewed since (lossSeq counts the losses).
	sessHeld   bool
	fenced     bool
	twin       bool               // another process holds this id's lock: fenced until it is ours
	suspects   map[string]suspect // members whose lock was free at the last look
	lossSeq    uint64
	sessCancel context.CancelFunc
	sessDone   chan struct{}
	// After an outage of this scheduler's own (no tick reached the database for longer than
	// the leases can outlive a missed renewal), every other member's row and lease may have
	// lapsed too, though they are only as cut off as this one was. Until graceUntil, the
	// members of the last tick before the outage (graceMembers) still count for the hashing
	// while their rows exist, so the first scheduler back does not take every unit: each
	// renews its own lease, generation unchanged, and the results it held write under it.
	// lastOK is when the last successful tick was sent, okMembers its member list; failing
	// says a tick failed since (a gap of ticks not tried is no outage: a test's, or a pause).
	lastOK       time.Time
	failing      bool
	okMembers    []string
	graceUntil   time.Time
	graceMembers []string
	// lostHook, when set (tests, before Start), runs as the session watcher has fenced this
	// scheduler after losing its connection and before it wakes the tick that unfences it:
	// the one moment the fence can be seen without racing that tick.
	lostHook func()
}

// New builds a manager.
func New(opts Options) (*Manager, error) {
	if opts.Pool == nil {
		return nil, errors.New("leases: Pool is required")
	}
	if opts.ID == "" {
		h, _ := os.Hostname()
		opts.ID = h + ":" + strconv.Itoa(os.Getpid())
	}
	if opts.Renew <= 0 {
		opts.Renew = DefaultRenew
	}
	if opts.Expiry <= 0 {
		opts.Expiry = DefaultExpiry
	}
	if opts.Expiry < 2*opts.Renew {
		return nil, fmt.Errorf("leases: expiry %s must be at least twice the renew interval %s", opts.Expiry, opts.Renew)
	}
	if opts.Margin <= 0 {
		opts.Margin = min(opts.Renew/2, opts.Expiry/4)
	}
	return &Manager{opts: opts, log: opts.Logger.With().Str("component", "leases").Logger(), held: map[string]Lease{},
		unheld: map[string]time.Time{}, wake: make(chan struct{}, 1)}, nil
}

// ID is this scheduler's id.
func (m *Manager) ID() string { return m.opts.ID }

// Start joins the members and takes this scheduler's share before returning, so the parts
// that ask Owns start with their units; then it renews every Renew.
func (m *Manager) Start(ctx context.Context) error {
	if err := m.startSession(ctx); err != nil {
		return err
	}
	if err := m.Tick(ctx); err != nil {
		m.stopSession()
		return fmt.Errorf("leases: first tick: %w", err)
	}
	// A restart under the same id (a crash, a supervisor) is a new start.
	if _, err := m.opts.Pool.Exec(ctx, `UPDATE scheduler_members SET started_at = now() WHERE id = $1`, m.opts.ID); err != nil {
		m.stopSession()
		return fmt.Errorf("leases: %w", err)
	}
	if err := m.life.Start(ctx, m.log, "leases", m.loop); err != nil {
		m.stopSession()
		return err
	}
	return nil
}

// Stop ends the loop and hands every lease back at once (a graceful stop need not make the
// others wait an expiry). Safe twice.
func (m *Manager) Stop() {
	m.life.Stop()
	defer m.stopSession() // after the release below: the others need not reap this one
	m.mu.Lock()
	m.held = map[string]Lease{}
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := m.opts.Pool.Exec(ctx, `WITH l AS (UPDATE scheduler_leases SET expires_at = now() - interval '1 millisecond'
WHERE holder = $1 AND expires_at > now())
DELETE FROM scheduler_members WHERE id = $1`, m.opts.ID); err != nil {
		m.log.Warn().Err(err).Msg("release leases at stop")
	}
}

// Wake makes the loop tick now (the fleet changed).
func (m *Manager) Wake() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *Manager) loop(ctx context.Context) {
	t := time.NewTicker(m.opts.Renew)
	defer t.Stop()
	take := time.NewTimer(time.Hour)
	defer take.Stop()
	reap := time.NewTicker(min(reapEvery, m.opts.Renew))
	defer reap.Stop()
	for {
		m.mu.Lock()
		at := m.takeAt
		m.mu.Unlock()
		if !at.IsZero() {
			take.Reset(max(time.Until(at), 10*time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-take.C:
		case <-m.wake:
		case <-reap.C:
			// Between ticks, only look for members that died; tick when one did.
			n, err := m.reap(ctx)
			if err != nil && ctx.Err() == nil {
				m.log.Warn().Err(err).Msg("look for schedulers that died")
			}
			if n == 0 {
				continue
			}
		}
		if err := m.Tick(ctx); err != nil && ctx.Err() == nil {
			m.log.Error().Err(err).Msg("lease tick failed; units stop counting as owned when their leases run out")
		}
	}
}

// Owns reports whether this scheduler holds unit now, with margin to spare.
func (m *Manager) Owns(unit string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.held[unit]
	return ok && !m.fenced && !l.Releasing && time.Now().Before(l.ValidUntil)
}

// Held lists the leases held now, by unit.
func (m *Manager) Held() []Lease {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Lease, 0, len(m.held))
	for _, l := range m.held {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Unit < out[j].Unit })
	return out
}

// Owned lists the units owned now (Owns true), sorted.
func (m *Manager) Owned() []string {
	m.mu.Lock()
	fenced := m.fenced
	m.mu.Unlock()
	if fenced {
		return nil
	}
	var out []string
	for _, l := range m.Held() {
		if !l.Releasing && time.Now().Before(l.ValidUntil) {
			out = append(out, l.Unit)
		}
	}
	return out
}

// Members lists the live schedulers as of the last tick.
func (m *Manager) Members() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.members)
}

// Owner is the rendezvous owner of unit among members: the member with the highest
// hash(member, unit). Every member computes the same answer from the same list.
func Owner(unit string, members []string) string {
	best, bestScore := "", uint64(0)
	for _, id := range members {
		h := sha256.Sum256([]byte(id + "\x00" + unit))
		if s := binary.BigEndian.Uint64(h[:8]); best == "" || s > bestScore || (s == bestScore && id < best) {
			best, bestScore = id, s
		}
	}
	return best
}

// unitsSQL lists the units: every machine that is not destroyed (a planned one's guests are
// checked too, and refused by the onboarding key gate until the operator confirms its key),
// and the net unit.
const unitsSQL = `
WITH RECURSIVE t(name) AS (
    SELECT 'machine'::text UNION SELECT et.name FROM entity_types et JOIN t ON et.parent = t.name
)
SELECT 'host:' || e.slug FROM entities e JOIN t ON t.name = e.type
WHERE e.state <> 'destroyed'
UNION ALL SELECT 'net'`

// Tick renews membership and leases, releases what this scheduler no longer owns, takes what
// it now owns and can, and reports units nobody holds.
func (m *Manager) Tick(ctx context.Context) error {
	err := m.tick(ctx)
	if err != nil && ctx.Err() == nil {
		m.mu.Lock()
		m.failing = true
		m.mu.Unlock()
	}
	return err
}

func (m *Manager) tick(ctx context.Context) error {
	m.mu.Lock()
	m.takeAt = time.Time{} // set again below when a unit waits; a failed tick must not spin
	losses := m.lossSeq
	m.mu.Unlock()
	sent := time.Now()
	grace := m.rejoinGrace(sent)
	expiry := m.opts.Expiry.String()
	if _, err := m.opts.Pool.Exec(ctx, `INSERT INTO scheduler_members (id, expires_at, session_lock) VALUES ($1, now() + $2::interval, $3)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), expires_at = EXCLUDED.expires_at, session_lock = EXCLUDED.session_lock`,
		m.opts.ID, expiry, m.sessionLock()); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	if _, err := m.reap(ctx); err != nil {
		return err
	}
	rows, err := m.opts.Pool.Query(ctx, `SELECT id FROM scheduler_members WHERE expires_at > now() OR id = ANY($1) ORDER BY id`, grace)
	if err != nil {
		return err
	}
	members, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	rows, err = m.opts.Pool.Query(ctx, unitsSQL)
	if err != nil {
		return err
	}
	units, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, u := range units {
		if Owner(u, members) == m.opts.ID {
			want[u] = true
		}
	}

	m.mu.Lock()
	before := len(m.held)
	var release, renew, releasing, draining []string
	for u, l := range m.held {
		switch {
		case want[u] && !l.Releasing:
			renew = append(renew, u)
		case want[u]:
			// Ours again before it was handed over: keep it.
			l.Releasing = false
			m.held[u] = l
			renew = append(renew, u)
		case !l.Releasing:
			// Another scheduler owns it now. Hand-over in two steps: stop its work here
			// (Owns is false from now on) but keep the lease while the runs in flight end and
			// their results are written under it; release it at a later tick.
			l.Releasing, l.since = true, sent
			m.held[u] = l
			renew = append(renew, u)
			releasing = append(releasing, u)
		default:
			draining = append(draining, u)
		}
	}
	m.members = members
	m.mu.Unlock()
	// Outside the lock: Busy asks the runner and the writer.
	for _, u := range draining {
		m.mu.Lock()
		since := m.held[u].since
		m.mu.Unlock()
		if m.opts.Busy != nil && m.opts.Busy(u) && sent.Sub(since) < m.opts.Expiry {
			renew = append(renew, u)
			continue
		}
		release = append(release, u)
		m.mu.Lock()
		delete(m.held, u)
		m.mu.Unlock()
	}

	if len(release) > 0 {
		// The row stays, expired, so the next holder's generation is higher than any before.
		sort.Strings(release)
		if _, err := m.opts.Pool.Exec(ctx, `UPDATE scheduler_leases SET expires_at = now() - interval '1 millisecond'
WHERE holder = $1 AND resource = ANY($2)`, m.opts.ID, release); err != nil {
			return fmt.Errorf("release: %w", err)
		}
	}
	var take []string
	for u := range want {
		if !slices.Contains(renew, u) {
			take = append(take, u)
		}
	}
	got := map[string]int64{}
	prev := map[string]string{} // the holder before this statement, of each unit got
	// Rows are locked in one order everywhere (here, storage.qFenceLeases): no deadlock
	// between a tick and a flush, or between two schedulers' ticks.
	both := append(slices.Clone(renew), take...)
	sort.Strings(both)
	if len(both) > 0 {
		// Renewing and taking in one statement: a unit is renewed only while we still hold
		// it, and taken only when its lease lapsed or was released. The CTE reads the rows as
		// they were before the statement: who held a unit just taken.
		rows, err := m.opts.Pool.Query(ctx, `
WITH before AS (SELECT resource, holder FROM scheduler_leases WHERE resource = ANY($2))
INSERT INTO scheduler_leases (resource, holder, expires_at, generation)
SELECT r, $1, now() + $3::interval, 1 FROM unnest($2::text[]) AS r ORDER BY r
ON CONFLICT (resource) DO UPDATE SET
    holder      = EXCLUDED.holder,
    expires_at  = EXCLUDED.expires_at,
    acquired_at = CASE WHEN scheduler_leases.holder = EXCLUDED.holder THEN scheduler_leases.acquired_at ELSE now() END,
    generation  = CASE WHEN scheduler_leases.holder = EXCLUDED.holder THEN scheduler_leases.generation
                       ELSE scheduler_leases.generation + 1 END
WHERE scheduler_leases.holder = EXCLUDED.holder OR scheduler_leases.expires_at <= now()
RETURNING resource, generation, coalesce((SELECT b.holder FROM before b WHERE b.resource = scheduler_leases.resource), '')`,
			m.opts.ID, both, expiry)
		if err != nil {
			return fmt.Errorf("renew and take: %w", err)
		}
		var u, h string
		var g int64
		if _, err := pgx.ForEachRow(rows, []any{&u, &g, &h}, func() error { got[u], prev[u] = g, h; return nil }); err != nil {
			return fmt.Errorf("renew and take: %w", err)
		}
	}
	valid := sent.Add(m.opts.Expiry - m.opts.Margin)
	var waiting []string
	for _, u := range take {
		if _, ok := got[u]; !ok {
			waiting = append(waiting, u)
		}
	}
	var takeAt time.Time
	if len(waiting) > 0 {
		// Ours by the hash, still under another's lease: try again the moment it runs out.
		// The delay comes from the server's clock, which the takeover compares against.
		var secs *float64
		if err := m.opts.Pool.QueryRow(ctx, `SELECT extract(epoch FROM min(expires_at) - now())::float8 FROM scheduler_leases
WHERE resource = ANY($1) AND holder <> $2`, waiting, m.opts.ID).Scan(&secs); err != nil {
			return fmt.Errorf("leases: %w", err)
		}
		if secs != nil {
			takeAt = time.Now().Add(max(time.Duration(*secs*float64(time.Second))+20*time.Millisecond, 100*time.Millisecond))
		}
	}
	var acquired, takenOver []string
	m.mu.Lock()
	m.takeAt = takeAt
	if m.lossSeq == losses && !m.twin {
		m.fenced = false // renewed since the session connection was lost: what is held is ours
	}
	m.lastOK, m.okMembers, m.failing = sent, members, false
	for _, u := range renew {
		if _, ok := got[u]; !ok {
			delete(m.held, u) // taken from us (we were paused past the expiry)
		}
	}
	changed := len(release) > 0
	for u, g := range got {
		l, ok := m.held[u]
		if !ok || l.Generation != g {
			changed = true
			acquired = append(acquired, u)
			if h := prev[u]; h != "" && h != m.opts.ID && !slices.Contains(members, h) {
				takenOver = append(takenOver, u)
			}
			l = Lease{}
		}
		m.held[u] = Lease{Unit: u, Generation: g, ValidUntil: valid, Releasing: l.Releasing, since: l.since}
	}
	changed = changed || len(m.held) != before || len(releasing) > 0
	held := make([]string, 0, len(m.held))
	for u := range m.held {
		held = append(held, u)
	}
	m.mu.Unlock()
	sort.Strings(held)
	if changed {
		m.log.Info().Int("held", len(held)).Int("members", len(members)).Strs("released", release).Msg("leases changed")
		if m.opts.OnChange != nil {
			sort.Strings(acquired)
			sort.Strings(releasing)
			sort.Strings(takenOver)
			m.opts.OnChange(Change{Held: held, Acquired: acquired, Releasing: releasing, Released: release, TakenOver: takenOver})
		}
	}
	if !m.Owns(NetUnit) {
		// The holder of the net unit watches for units nobody holds: one watcher at a time,
		// with one view of how long a unit has gone unheld.
		m.mu.Lock()
		clear(m.unheld)
		m.watchSince = time.Time{}
		m.mu.Unlock()
		return nil
	}
	// Units that are gone (a machine destroyed) leave their expired lease behind: the
	// watcher drops it after a minute, so the table lists only the fleet.
	if _, err := m.opts.Pool.Exec(ctx, `DELETE FROM scheduler_leases
WHERE expires_at < now() - interval '1 minute' AND NOT (resource = ANY($1))`, units); err != nil {
		return fmt.Errorf("leases: drop leases of units that are gone: %w", err)
	}
	return m.reportUnheld(ctx, units)
}

// rejoinGrace returns the members that count for the hashing although their rows lapsed: the
// ones of the last tick before this scheduler's own outage (ticks failed for longer than a
// lease outlives a missed renewal), for one expiry after the first tick that succeeds. Without
// it, the first scheduler back from an outage longer than the expiry finds itself the only
// live member, takes every unit under a new generation, and the others' results, held
// through the same outage, are fenced out when they write them. A member that really died
// meanwhile loses its units one expiry later than it would otherwise; one that stopped
// deleted its row and is not waited for.
func (m *Manager) rejoinGrace(sent time.Time) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if gap := sent.Sub(m.lastOK); m.failing && !m.lastOK.IsZero() && gap > m.opts.Expiry-m.opts.Renew {
		if !sent.Before(m.graceUntil) {
			m.graceMembers = slices.DeleteFunc(slices.Clone(m.okMembers), func(id string) bool { return id == m.opts.ID })
			if len(m.graceMembers) > 0 {
				m.log.Warn().Dur("gap", gap).Strs("members", m.graceMembers).
					Msg("no lease tick reached the database for longer than a lease lasts: the units of the schedulers that were members before are left to them for one expiry")
			}
		}
		m.graceUntil = sent.Add(m.opts.Expiry)
	}
	if !sent.Before(m.graceUntil) {
		m.graceMembers = nil
	}
	return m.graceMembers
}

// reportUnheld raises a unit_unheld signal for each unit no live lease has covered for two
// expiries, and resolves it once one does. The advisory lock keeps a former watcher's last
// write from interleaving with the new one's.
func (m *Manager) reportUnheld(ctx context.Context, units []string) error {
	rows, err := m.opts.Pool.Query(ctx, `SELECT resource FROM scheduler_leases WHERE expires_at > now()`)
	if err != nil {
		return err
	}
	live, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	now := time.Now()
	m.mu.Lock()
	if m.watchSince.IsZero() {
		m.watchSince = now
	}
	// A new watcher has no history yet: until it has watched two expiries it neither raises
	// nor resolves, so a hand-over of net does not flap the open signals.
	settled := now.Sub(m.watchSince) > 2*m.opts.Expiry
	var want []signals.Signal
	for _, u := range units {
		if slices.Contains(live, u) {
			delete(m.unheld, u)
			continue
		}
		since, ok := m.unheld[u]
		if !ok {
			m.unheld[u] = now
			continue
		}
		if now.Sub(since) > 2*m.opts.Expiry {
			want = append(want, signals.Signal{Kind: SignalKind, DedupKey: SignalKind + ":" + u, Severity: signals.SeverityWarning,
				Summary: fmt.Sprintf("no scheduler has held %s for %s: its checks and executions do not run", u, now.Sub(since).Round(time.Second)),
				Details: map[string]any{"unit": u, "since": since.UTC()}})
		}
	}
	m.mu.Unlock()
	if !settled {
		return nil
	}
	return pg.InTx(ctx, m.opts.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(unheldLock)); err != nil {
			return err
		}
		_, _, _, err := signals.New(nil).As("scheduler").Sync(ctx, tx, SignalKind, want, "a scheduler holds it again")
		return err
	})
}

// Lease reports the generation of unit's lease when this scheduler owns it now (Owns).
func (m *Manager) Lease(unit string) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.held[unit]
	if !ok || m.fenced || l.Releasing || !time.Now().Before(l.ValidUntil) {
		return 0, false
	}
	return l.Generation, true
}

// Halt stops renewing without handing anything back, as a crash does: the leases run out
// and the other schedulers take the units after the expiry. For tests and benchmarks.
func (m *Manager) Halt() { m.life.Stop() }
