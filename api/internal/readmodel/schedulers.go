package readmodel

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// SchedulerLease is one unit's lease (scheduler/internal/leases writes them).
type SchedulerLease struct {
	Unit       string    `json:"unit"`
	Holder     string    `json:"holder"`
	Generation int64     `json:"generation"`
	AcquiredAt time.Time `json:"acquired_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	Live       bool      `json:"live"`
}

// Scheduler is one scheduler of the fleet with the leases it holds.
type Scheduler struct {
	ID          string           `json:"id"`
	StartedAt   time.Time        `json:"started_at"`
	HeartbeatAt time.Time        `json:"heartbeat_at"`
	Live        bool             `json:"live"`
	Leases      []SchedulerLease `json:"leases"`
}

// Schedulers is GET /schedulers: the members (live first), their leases, and the units
// whose lease is held by no live member.
type Schedulers struct {
	Schedulers []Scheduler      `json:"schedulers"`
	Orphaned   []SchedulerLease `json:"orphaned"`
}

// Schedulers reads the members and the lease table.
func (r *Reader) Schedulers(ctx context.Context) (Schedulers, error) {
	out := Schedulers{Schedulers: []Scheduler{}, Orphaned: []SchedulerLease{}}
	rows, err := r.db.Query(ctx, `SELECT id, started_at, heartbeat_at, expires_at > now() FROM scheduler_members
ORDER BY expires_at > now() DESC, id`)
	if err != nil {
		return out, err
	}
	members, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Scheduler, error) {
		s := Scheduler{Leases: []SchedulerLease{}}
		err := row.Scan(&s.ID, &s.StartedAt, &s.HeartbeatAt, &s.Live)
		return s, err
	})
	if err != nil {
		return out, err
	}
	rows, err = r.db.Query(ctx, `SELECT resource, holder, generation, acquired_at, expires_at, expires_at > now()
FROM scheduler_leases ORDER BY resource`)
	if err != nil {
		return out, err
	}
	leases, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (SchedulerLease, error) {
		var l SchedulerLease
		err := row.Scan(&l.Unit, &l.Holder, &l.Generation, &l.AcquiredAt, &l.ExpiresAt, &l.Live)
		return l, err
	})
	if err != nil {
		return out, err
	}
	at := map[string]int{}
	for i, m := range members {
		at[m.ID] = i
	}
	for _, l := range leases {
		if i, ok := at[l.Holder]; ok && l.Live && members[i].Live {
			members[i].Leases = append(members[i].Leases, l)
		} else {
			out.Orphaned = append(out.Orphaned, l)
		}
	}
	out.Schedulers = members
	return out, nil
}
