package fleetstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/hostconnect"
)

// Connect is a connection request (host_connects) as the api answers it.
type Connect struct {
	ID          string            `json:"id"`
	EntityID    string            `json:"-"`
	Entity      string            `json:"entity"`
	Status      string            `json:"status"`
	Address     string            `json:"address"`
	User        string            `json:"user"`
	Fingerprint string            `json:"fingerprint,omitempty"`
	KeyType     string            `json:"key_type,omitempty"`
	Error       string            `json:"error,omitempty"`
	Facts       hostconnect.Facts `json:"facts"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
	Finalized   bool              `json:"finalized"`
}

const connectColumns = `h.id::text, h.entity_id::text, e.slug, h.status, h.address, h.ssh_user, h.offered_fingerprint,
h.offered_key_type, h.error, h.facts, h.created_at, h.updated_at, h.finalized_at IS NOT NULL`

const connectFrom = ` FROM host_connects h JOIN entities e ON e.id = h.entity_id`

func scanConnect(row pgx.Row, extra ...any) (Connect, error) {
	var c Connect
	err := row.Scan(append([]any{&c.ID, &c.EntityID, &c.Entity, &c.Status, &c.Address, &c.User, &c.Fingerprint, &c.KeyType,
		&c.Error, &c.Facts, &c.CreatedAt, &c.UpdatedAt, &c.Finalized}, extra...)...)
	return c, err
}

// LatestConnect is the newest connection request for the entity ref (slug or id); lock
// takes its row FOR UPDATE. None is apierr.ErrNotFound.
func (s *Store) LatestConnect(ctx context.Context, ref string, lock bool) (Connect, error) {
	sql := qLatestConnect
	if lock {
		sql = qLatestConnectForUpdate
	}
	c, err := scanConnect(s.db.QueryRow(ctx, sql, ref))
	return c, notFound(err, "connection request for "+ref)
}

const (
	qLatestConnect = `SELECT ` + connectColumns + connectFrom + `
WHERE e.slug = $1 OR e.id::text = $1 ORDER BY h.created_at DESC LIMIT 1`
	qLatestConnectForUpdate = qLatestConnect + ` FOR UPDATE OF h`
)

// ConnectByID reads the connection request id. None is apierr.ErrNotFound.
func (s *Store) ConnectByID(ctx context.Context, id string) (Connect, error) {
	c, err := scanConnect(s.db.QueryRow(ctx, qConnectByID, id))
	return c, notFound(err, "connection request "+id)
}

const qConnectByID = `SELECT ` + connectColumns + connectFrom + `
WHERE h.id = $1`

// ConnectToFinalize reads the connection request id with who asked for it, its row locked
// FOR UPDATE so that one request applies its outcome once. None is apierr.ErrNotFound.
func (s *Store) ConnectToFinalize(ctx context.Context, id string) (c Connect, requestedBy string, err error) {
	c, err = scanConnect(s.db.QueryRow(ctx, qConnectToFinalize, id), &requestedBy)
	return c, requestedBy, notFound(err, "connection request "+id)
}

const qConnectToFinalize = `SELECT ` + connectColumns + `, h.requested_by` + connectFrom + `
WHERE h.id = $1 FOR UPDATE OF h`

// MarkFinalized records that the outcome of the connection request id was applied.
func (s *Store) MarkFinalized(ctx context.Context, id string) error {
	_, err := s.db.Exec(ctx, qMarkFinalized, id)
	return err
}

const qMarkFinalized = `UPDATE host_connects SET finalized_at = now() WHERE id = $1`

// SetNotConnected records on the entity's status why it could not be connected (health
// unknown, the reason).
func (s *Store) SetNotConnected(ctx context.Context, entityID, reason string) error {
	_, err := s.db.Exec(ctx, qSetNotConnected, entityID, reason)
	return err
}

const qSetNotConnected = `INSERT INTO entity_status (entity_id, health, reason) VALUES ($1, 'unknown', $2)
ON CONFLICT (entity_id) DO UPDATE SET health = 'unknown', reason = EXCLUDED.reason`

// EntityState is an entity's id, type and state.
type EntityState struct {
	ID, Type, State string
}

// EntityForUpdate reads the entity slug names, its row locked FOR UPDATE. None is
// apierr.ErrNotFound.
func (s *Store) EntityForUpdate(ctx context.Context, slug string) (EntityState, error) {
	var e EntityState
	err := s.db.QueryRow(ctx, qEntityForUpdate, slug).Scan(&e.ID, &e.Type, &e.State)
	return e, notFound(err, "entity "+slug)
}

const qEntityForUpdate = `SELECT id::text, type, state FROM entities WHERE slug = $1 FOR UPDATE`

// LockAddressBusy serialises the connection requests for addr ("ip:port") until the
// transaction ends, and returns the slug of the machine whose request for addr is still
// unanswered (pending or connecting), "" when none.
func (s *Store) LockAddressBusy(ctx context.Context, addr string) (string, error) {
	if err := s.lockKey(ctx, "host_connects:"+addr); err != nil {
		return "", err
	}
	var busy string
	err := s.db.QueryRow(ctx, qBusyConnect, addr).Scan(&busy)
	if err != nil && !isNoRows(err) {
		return "", err
	}
	return busy, nil
}

const qBusyConnect = `SELECT e.slug FROM host_connects h JOIN entities e ON e.id = h.entity_id
WHERE h.address = $1 AND h.status IN ('pending', 'connecting') LIMIT 1`

// NewConnect is a connection request to write.
type NewConnect struct {
	ID, EntityID, Address, User, ExpectFingerprint, RequestedBy string
}

// InsertConnect writes a connection request (status pending).
func (s *Store) InsertConnect(ctx context.Context, c NewConnect) error {
	if _, err := s.db.Exec(ctx, qInsertConnect, c.ID, c.EntityID, c.Address, c.User, c.ExpectFingerprint, c.RequestedBy); err != nil {
		return fmt.Errorf("request a connection: %w", err)
	}
	return nil
}

const qInsertConnect = `INSERT INTO host_connects (id, entity_id, address, ssh_user, expect_fingerprint, requested_by)
VALUES ($1, $2, $3, $4, $5, $6)`

// SchedulerKey is a public key a scheduler connects with (scheduler_keys).
type SchedulerKey struct {
	AuthorizedKey string    `json:"authorized_key"`
	Fingerprint   string    `json:"fingerprint"`
	KeyType       string    `json:"key_type"`
	SchedulerID   string    `json:"scheduler_id"`
	LastSeen      time.Time `json:"last_seen"`
}

// SchedulerKeys lists the schedulers' public keys, the most recently seen first.
func (s *Store) SchedulerKeys(ctx context.Context) ([]SchedulerKey, error) {
	rows, err := s.db.Query(ctx, qSchedulerKeys)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (SchedulerKey, error) {
		var k SchedulerKey
		err := r.Scan(&k.AuthorizedKey, &k.Fingerprint, &k.KeyType, &k.SchedulerID, &k.LastSeen)
		return k, err
	})
}

const qSchedulerKeys = `SELECT authorized_key, fingerprint, key_type, scheduler_id, last_seen
FROM scheduler_keys ORDER BY last_seen DESC`
