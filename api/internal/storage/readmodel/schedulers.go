package readmodel

import (
	"context"
	"time"

	"github.com/oikos-hq/oikos/shared/leasetable"
)

// Scheduler is one scheduler of the fleet with the leases it holds.
type Scheduler struct {
	ID          string             `json:"id"`
	StartedAt   time.Time          `json:"started_at"`
	HeartbeatAt time.Time          `json:"heartbeat_at"`
	Live        bool               `json:"live"`
	Leases      []leasetable.Lease `json:"leases"`
}

// Schedulers is GET /schedulers: the members (live first), their leases, and the units
// whose lease is held by no live member.
type Schedulers struct {
	Schedulers []Scheduler        `json:"schedulers"`
	Orphaned   []leasetable.Lease `json:"orphaned"`
}

// Schedulers reads the members and the lease table (scheduler/internal/leases writes it).
func (r *Reader) Schedulers(ctx context.Context) (Schedulers, error) {
	out := Schedulers{Schedulers: []Scheduler{}, Orphaned: []leasetable.Lease{}}
	members, leases, err := leasetable.Read(ctx, r.db)
	if err != nil {
		return out, err
	}
	at := map[string]int{}
	for _, m := range members {
		at[m.ID] = len(out.Schedulers)
		out.Schedulers = append(out.Schedulers, Scheduler{ID: m.ID, StartedAt: m.StartedAt, HeartbeatAt: m.HeartbeatAt,
			Live: m.Live, Leases: []leasetable.Lease{}})
	}
	for _, l := range leases {
		if i, ok := at[l.Holder]; ok && l.Live && out.Schedulers[i].Live {
			out.Schedulers[i].Leases = append(out.Schedulers[i].Leases, l)
		} else {
			out.Orphaned = append(out.Orphaned, l)
		}
	}
	return out, nil
}
