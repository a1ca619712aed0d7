package fleetstore

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// GuestRow is an entity that has a vmid (a guest, or what claims to be one), not destroyed:
// its slug and type, the vmid as stored (decoded JSON), its host attribute ("" when none)
// and the slug of the source of its oldest live hosts edge ("" when none).
type GuestRow struct {
	Slug, Type         string
	VMID               any
	HostAttr, HostEdge string
}

// Guests lists every entity that is not destroyed and has a vmid attribute.
func (s *Store) Guests(ctx context.Context) ([]GuestRow, error) {
	rows, err := s.db.Query(ctx, qGuests)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (GuestRow, error) {
		var g GuestRow
		err := r.Scan(&g.Slug, &g.Type, &g.VMID, &g.HostAttr, &g.HostEdge)
		return g, err
	})
}

const qGuests = `
SELECT e.slug, e.type, e.attributes->'vmid', coalesce(e.attributes->>'host', ''),
       coalesce((SELECT h.slug FROM relationships r JOIN entities h ON h.id = r.source_id
                 WHERE r.target_id = e.id AND r.type = 'hosts' AND r.valid_to IS NULL ORDER BY r.valid_from LIMIT 1), '')
FROM entities e WHERE e.state <> 'destroyed' AND e.attributes ? 'vmid'`

// GuestSlugs are the slugs of the lxc and vm entities, in any state (a destroyed entity keeps
// its slug).
func (s *Store) GuestSlugs(ctx context.Context) ([]string, error) {
	rows, err := s.db.Query(ctx, qGuestSlugs)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

const qGuestSlugs = `SELECT slug FROM entities WHERE type IN ('lxc', 'vm')`

// adoptLock serialises adopts.
const adoptLock = 0x6f696b6f73_ad07

// LockAdopt makes adopts run one at a time, until the transaction ends: what the graph has
// is read under the lock, so two adopts at once never both create a guest.
func (s *Store) LockAdopt(ctx context.Context) error {
	_, err := s.db.Exec(ctx, qLockAdopt, int64(adoptLock))
	return err
}

const qLockAdopt = `SELECT pg_advisory_xact_lock($1)`
