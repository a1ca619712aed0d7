// Package placementstore holds the SQL of the graph following guests that moved between the
// nodes of a Proxmox cluster (api/internal/placement): the moves a stored drift report lists,
// the guest and hosts it names, the guest's current hosts edges, and the locks that make each
// move one serialised transaction. The graph's own writes stay the graph service's: a move
// runs in one InTx, whose transaction the graph service's ...Tx methods join.
//
// Every SQL string is a named package-level constant registered in Queries; store_test.go
// prepares each against the migrated schema and fails on a constant that is not registered.
package placementstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
)

// Queries names every SQL constant of the package.
var Queries = map[string]string{
	"qLockMoves":       qLockMoves,
	"qMovedOf":         qMovedOf,
	"qReportsToFollow": qReportsToFollow,
	"qGuest":           qGuest,
	"qHost":            qHost,
	"qResolveHost":     qResolveHost,
	"qHostsEdges":      qHostsEdges,
	"qLockEntities":    qLockEntities,
}

// Store runs the placement's queries on one DB (the pool or a transaction).
type Store struct {
	db storage.DB
}

// New returns a Store on the pool.
func New(pool *storage.Pool) *Store { return &Store{db: pool} }

// InTx runs fn on one transaction (pg.InTx): st runs this package's queries on it, and tx is
// handed to the graph service's ...Tx methods so a move commits whole or not at all.
func (s *Store) InTx(ctx context.Context, fn func(st *Store, tx storage.DB) error) error {
	return pg.InTx(ctx, s.db, func(tx pgx.Tx) error { return fn(&Store{db: tx}, tx) })
}

// AppendEvent appends e to the outbox (eventbus.Append) in the Store's transaction.
func (s *Store) AppendEvent(ctx context.Context, e eventbus.Event, payload any) (int64, error) {
	return storage.AppendEvent(ctx, s.db, e, payload)
}

// WriteAudit writes one audit row (audit.Write) in the Store's transaction.
func (s *Store) WriteAudit(ctx context.Context, r audit.Row) error {
	return storage.WriteAudit(ctx, s.db, r)
}

// lockMovesKey serialises moves across api replicas (and a move with its own re-application).
const lockMovesKey = 0x6f696b6f7330

const qLockMoves = `SELECT pg_advisory_xact_lock($1)`

// LockMoves takes the transaction-level lock every move holds.
func (s *Store) LockMoves(ctx context.Context) error {
	_, err := s.db.Exec(ctx, qLockMoves, int64(lockMovesKey))
	return err
}

// Move is one entry of a drift report's `moved` (scheduler/internal/drift.Moved).
type Move struct {
	Slug string `json:"slug"`
	VMID int    `json:"vmid"`
	Kind string `json:"kind"`
	From string `json:"from"`
	To   string `json:"to"`
	Node string `json:"node"`
}

const qMovedOf = `SELECT coalesce(report->'moved', '[]'::jsonb) FROM drift_reports WHERE id = $1 AND status = 'completed'`

// MovedOf reads the moves of the completed report id; apierr.ErrNotFound when there is none.
func (s *Store) MovedOf(ctx context.Context, id string) ([]Move, error) {
	var raw []byte
	if err := s.db.QueryRow(ctx, qMovedOf, id).Scan(&raw); err != nil {
		if storage.IsNoRows(err) {
			return nil, fmt.Errorf("%w: completed drift report %s", apierr.ErrNotFound, id)
		}
		return nil, err
	}
	var out []Move
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("drift report %s: moved: %w", id, err)
	}
	return out, nil
}

const qReportsToFollow = `SELECT id::text FROM drift_reports
WHERE status = 'completed' AND finished_at > $1 AND jsonb_array_length(coalesce(report->'moved', '[]'::jsonb)) > 0
ORDER BY finished_at, id`

// ReportsToFollow lists the completed reports finished after since that list moves, oldest
// first.
func (s *Store) ReportsToFollow(ctx context.Context, since time.Time) ([]string, error) {
	rows, err := s.db.Query(ctx, qReportsToFollow, since)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Entity is what a move reads of an entity.
type Entity struct {
	ID, Slug, Type, Name string
	HostAttr             string // attributes.host, "" when unset
}

const qGuest = `SELECT id::text, slug, type, name, coalesce(attributes->>'host', '') FROM entities
WHERE slug = $1 AND state <> 'destroyed'`

// Guest reads the live entity slug; apierr.ErrNotFound when there is none.
func (s *Store) Guest(ctx context.Context, slug string) (Entity, error) {
	return s.entity(ctx, qGuest, slug)
}

const qHost = `SELECT id::text, slug, type, name, '' FROM entities WHERE slug = $1 AND state <> 'destroyed'`

// Host reads the live entity slug (a host: no host attribute read); apierr.ErrNotFound when
// there is none.
func (s *Store) Host(ctx context.Context, slug string) (Entity, error) {
	return s.entity(ctx, qHost, slug)
}

func (s *Store) entity(ctx context.Context, q, slug string) (Entity, error) {
	var e Entity
	err := s.db.QueryRow(ctx, q, slug).Scan(&e.ID, &e.Slug, &e.Type, &e.Name, &e.HostAttr)
	if storage.IsNoRows(err) {
		return Entity{}, fmt.Errorf("%w: entity %s", apierr.ErrNotFound, slug)
	}
	return e, err
}

const qResolveHost = `SELECT slug FROM entities
WHERE state <> 'destroyed' AND (slug = $1 OR (name = $1 AND type = ANY($2::text[])))
ORDER BY slug = $1 DESC, slug LIMIT 1`

// ResolveHost is the live host a host attribute names (its slug, or the name of an entity
// of one of types); "" when none.
func (s *Store) ResolveHost(ctx context.Context, attr string, types []string) (string, error) {
	var slug string
	err := s.db.QueryRow(ctx, qResolveHost, attr, types).Scan(&slug)
	if storage.IsNoRows(err) {
		return "", nil
	}
	return slug, err
}

// Edge is a current hosts edge to a guest.
type Edge struct {
	ID, Source string // relationship id, source slug
}

const qHostsEdges = `SELECT r.id::text, e.slug FROM relationships r JOIN entities e ON e.id = r.source_id
WHERE r.type = 'hosts' AND r.valid_to IS NULL AND r.target_id = $1 AND e.state <> 'destroyed'
ORDER BY r.valid_from, r.id`

// HostsEdges lists the current hosts edges to guest id from live hosts, oldest first.
func (s *Store) HostsEdges(ctx context.Context, guestID string) ([]Edge, error) {
	rows, err := s.db.Query(ctx, qHostsEdges, guestID)
	if err != nil {
		return nil, err
	}
	var out []Edge
	var e Edge
	_, err = pgx.ForEachRow(rows, []any{&e.ID, &e.Source}, func() error { out = append(out, e); return nil })
	return out, err
}

const qLockEntities = `SELECT id FROM entities WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE`

// LockEntities locks the entities ids in id order, before the move's first event (an event
// append holds the outbox lock until commit; the graph service locks the same rows in the
// same order, so no two writers wait on each other crosswise).
func (s *Store) LockEntities(ctx context.Context, ids ...string) error {
	_, err := s.db.Exec(ctx, qLockEntities, ids)
	return err
}
