package storage

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// CheckDefRow is an enabled check_defs row with what the runner needs of its target.
type CheckDefRow struct {
	ID, Slug, TargetID, TargetSlug, TargetType, Kind string
	Config                                           []byte // the raw JSON config
	Interval, Timeout                                int32  // seconds
	Updated                                          time.Time
	Unit                                             string // the lease unit whose holder runs it
}

const qCheckDefs = `
SELECT cd.id::text, cd.slug, cd.target_id::text, e.slug, e.type, cd.kind, cd.config,
       cd.interval_seconds, cd.timeout_seconds, cd.updated_at,
       -- The lease unit whose holder runs it (scheduler/internal/leases): net for http and
       -- tcp, else the SSH host it goes through (a backup check's holder's).
       coalesce(CASE WHEN cd.kind IN ('http', 'tcp') THEN 'net'
            WHEN cd.kind = 'backup-freshness' THEN
                 lease_unit((SELECT h.id FROM entities h WHERE h.slug = cd.config->>'holder'))
            ELSE lease_unit(cd.target_id) END, 'host:' || e.slug)
FROM check_defs cd JOIN entities e ON e.id = cd.target_id
WHERE cd.enabled AND e.state <> 'destroyed'
ORDER BY cd.slug`

// CheckDefs reads every enabled check whose target still exists and is not destroyed, by
// slug.
func (s *Store) CheckDefs(ctx context.Context) ([]CheckDefRow, error) {
	rows, err := s.db.Query(ctx, qCheckDefs)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (CheckDefRow, error) {
		var d CheckDefRow
		err := r.Scan(&d.ID, &d.Slug, &d.TargetID, &d.TargetSlug, &d.TargetType, &d.Kind, &d.Config,
			&d.Interval, &d.Timeout, &d.Updated, &d.Unit)
		return d, err
	})
}

// qLastRuns reads the time of the latest stored result of each of the checks ($1).
const qLastRuns = `SELECT check_id::text, at FROM check_results WHERE check_id = ANY($1::text[]::uuid[])`

// LastRuns puts into last the time of the latest stored result of each of the checks ids.
func (s *Store) LastRuns(ctx context.Context, ids []string, last map[string]time.Time) error {
	rows, err := s.db.Query(ctx, qLastRuns, ids)
	if err != nil {
		return err
	}
	var id string
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&id, &at}, func() error { last[id] = at; return nil })
	return err
}
