package storage

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

const qPublishKey = `INSERT INTO scheduler_keys (fingerprint, authorized_key, key_type, scheduler_id)
VALUES ($1, $2, $3, $4)
ON CONFLICT (fingerprint) DO UPDATE SET scheduler_id = EXCLUDED.scheduler_id, last_seen = now()
RETURNING xmax = 0`

// PublishKey records the scheduler's public key; inserted is false when the fingerprint was
// already there (its scheduler_id and last_seen are refreshed).
func (s *Store) PublishKey(ctx context.Context, fingerprint, authorizedKey, keyType, schedulerID string) (inserted bool, err error) {
	err = s.db.QueryRow(ctx, qPublishKey, fingerprint, authorizedKey, keyType, schedulerID).Scan(&inserted)
	return inserted, err
}

const qHostConnectStatus = `SELECT status FROM host_connects WHERE address = $1 ORDER BY created_at DESC LIMIT 1`

// HostConnectStatus is the status of the newest connection request for addr, "" when there
// is none.
func (s *Store) HostConnectStatus(ctx context.Context, addr string) (string, error) {
	var status string
	err := s.db.QueryRow(ctx, qHostConnectStatus, addr).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return status, err
}

// StaleConnect is a connection request failed by FailStaleConnects.
type StaleConnect struct{ ID, Entity, Slug, Addr, Err string }

const qFailStaleConnects = `UPDATE host_connects h SET status = 'failed', updated_at = now(),
error = 'interrupted: the scheduler connecting (' || h.claimed_by || ') stopped before it answered; run the command again'
FROM entities e
WHERE e.id = h.entity_id AND h.status = 'connecting' AND h.updated_at < now() - $1::interval
RETURNING h.id::text, h.entity_id::text, e.slug, h.address, h.error`

// FailStaleConnects fails the requests left connecting for longer than olderThan (an
// interval) and returns them.
func (s *Store) FailStaleConnects(ctx context.Context, olderThan string) ([]StaleConnect, error) {
	rows, err := s.db.Query(ctx, qFailStaleConnects, olderThan)
	if err != nil {
		return nil, err
	}
	var found []StaleConnect
	var st StaleConnect
	if _, err := pgx.ForEachRow(rows, []any{&st.ID, &st.Entity, &st.Slug, &st.Addr, &st.Err}, func() error {
		found = append(found, st)
		return nil
	}); err != nil {
		return nil, err
	}
	return found, nil
}

// ConnectRequest is a claimed host_connects row.
type ConnectRequest struct {
	ID, EntityID, Slug, Type, Addr, User, Expect string
	Proxmox                                      bool
}

const qClaimConnect = `
WITH next AS (
    SELECT id FROM host_connects p WHERE status = 'pending'
      -- One attempt per address at a time, fleet-wide: two dials of one address under two
      -- expectations must never race.
      AND NOT EXISTS (SELECT 1 FROM host_connects o WHERE o.address = p.address AND o.status = 'connecting')
      AND ($2::text[] IS NULL OR coalesce(lease_unit(p.entity_id), 'net') = ANY($2::text[]))
    ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED
)
UPDATE host_connects h SET status = 'connecting', claimed_by = $1, updated_at = now()
FROM next, entities e
WHERE h.id = next.id AND e.id = h.entity_id
RETURNING h.id::text, h.entity_id::text, e.slug, e.type, h.address, h.ssh_user, h.expect_fingerprint,
    EXISTS (WITH RECURSIVE up(name, parent) AS (
                SELECT name, parent FROM entity_types WHERE name = e.type
                UNION SELECT t.name, t.parent FROM entity_types t JOIN up ON t.name = up.parent)
            SELECT 1 FROM up WHERE name = 'proxmox-host')`

// ClaimConnect takes the oldest pending request, if any, with one conditional statement
// (several schedulers never claim the same row); with owned non-nil, only one for a machine
// whose lease unit is in owned.
func (s *Store) ClaimConnect(ctx context.Context, schedulerID string, owned []string) (ConnectRequest, bool, error) {
	var r ConnectRequest
	err := s.db.QueryRow(ctx, qClaimConnect, schedulerID, owned).
		Scan(&r.ID, &r.EntityID, &r.Slug, &r.Type, &r.Addr, &r.User, &r.Expect, &r.Proxmox)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	return r, err == nil, err
}

const qRecordConnect = `UPDATE host_connects SET status = $2, offered_fingerprint = $3, offered_key_type = $4,
error = $5, facts = $6, updated_at = now() WHERE id = $1 AND status = 'connecting'`

// RecordConnect writes an attempt's outcome to request id while it is still connecting; it
// returns the rows changed (0 or 1).
func (s *Store) RecordConnect(ctx context.Context, id, status, fingerprint, keyType, errText string, facts any) (int64, error) {
	tag, err := s.db.Exec(ctx, qRecordConnect, id, status, fingerprint, keyType, errText, facts)
	return tag.RowsAffected(), err
}
