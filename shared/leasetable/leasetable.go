// Package leasetable reads the schedulers' shared table of members and leases
// (scheduler/internal/leases writes it): the scheduler's /status and the api's
// GET /api/v1/schedulers show the same rows.
package leasetable

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/pg"
)

// Lease is one unit's lease.
type Lease struct {
	Unit       string    `json:"unit"`
	Holder     string    `json:"holder"`
	Generation int64     `json:"generation"`
	AcquiredAt time.Time `json:"acquired_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	Live       bool      `json:"live"`
}

// Member is one scheduler.
type Member struct {
	ID          string    `json:"id"`
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	ExpiresAt   time.Time `json:"expires_at"`
	Live        bool      `json:"live"`
}

// Read returns the members (live first) and the leases (by unit).
func Read(ctx context.Context, q pg.Querier) ([]Member, []Lease, error) {
	rows, err := q.Query(ctx, `SELECT id, started_at, heartbeat_at, expires_at, expires_at > now() FROM scheduler_members
ORDER BY expires_at > now() DESC, id`)
	if err != nil {
		return nil, nil, err
	}
	members, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Member, error) {
		var m Member
		err := r.Scan(&m.ID, &m.StartedAt, &m.HeartbeatAt, &m.ExpiresAt, &m.Live)
		return m, err
	})
	if err != nil {
		return nil, nil, err
	}
	rows, err = q.Query(ctx, `SELECT resource, holder, generation, acquired_at, expires_at, expires_at > now()
FROM scheduler_leases ORDER BY resource`)
	if err != nil {
		return nil, nil, err
	}
	leases, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Lease, error) {
		var l Lease
		err := r.Scan(&l.Unit, &l.Holder, &l.Generation, &l.AcquiredAt, &l.ExpiresAt, &l.Live)
		return l, err
	})
	return members, leases, err
}
