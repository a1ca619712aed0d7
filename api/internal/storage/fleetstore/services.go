package fleetstore

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// ServiceOn is a service entity running on a target: its slug, name and unit attribute
// ("" when none).
type ServiceOn struct {
	Slug, Name, Unit string
}

// ServicesOn lists, by slug, the entities of the given types that are not destroyed and run
// on the entity targetID (a live edge of type edge from them to it).
func (s *Store) ServicesOn(ctx context.Context, targetID, edge string, types []string) ([]ServiceOn, error) {
	rows, err := s.db.Query(ctx, qServicesOn, targetID, edge, types)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (ServiceOn, error) {
		var v ServiceOn
		err := r.Scan(&v.Slug, &v.Name, &v.Unit)
		return v, err
	})
}

const qServicesOn = `SELECT e.slug, e.name, coalesce(e.attributes->>'unit', '')
		FROM relationships r JOIN entities e ON e.id = r.source_id
		WHERE r.target_id = $1::uuid AND r.type = $2 AND r.valid_to IS NULL AND e.type = ANY($3) AND e.state <> 'destroyed'
		ORDER BY e.slug`

// WhereRun maps each of slugs that exists to where it runs: the slugs of the targets of its
// live edges of type edge, joined by ", " in order ("" for nowhere).
func (s *Store) WhereRun(ctx context.Context, slugs []string, edge string) (map[string]string, error) {
	rows, err := s.db.Query(ctx, qWhereRun, slugs, edge)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var slug, where string
	_, err = pgx.ForEachRow(rows, []any{&slug, &where}, func() error {
		out[slug] = where
		return nil
	})
	return out, err
}

const qWhereRun = `SELECT e.slug, coalesce(string_agg(m.slug, ', ' ORDER BY m.slug), '')
		FROM entities e
		LEFT JOIN relationships r ON r.source_id = e.id AND r.type = $2 AND r.valid_to IS NULL
		LEFT JOIN entities m ON m.id = r.target_id
		WHERE e.slug = ANY($1) GROUP BY e.slug`

// LockAccept serialises the accepts of discovered services on the entity targetID until the
// transaction ends, so two of them never both decide a service is missing and create it twice.
func (s *Store) LockAccept(ctx context.Context, targetID string) error {
	_, err := s.db.Exec(ctx, qLockKey, "oikos.discover.accept:"+targetID)
	return err
}
