package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

const qFailInterruptedDrift = `UPDATE drift_reports SET status = 'failed', finished_at = $1,
error = 'interrupted: the scheduler running it stopped' WHERE status = 'running' AND started_at < $2`

// FailInterruptedDrift marks failed, at at, the drift runs left running since before
// startedBefore (their scheduler died).
func (s *Store) FailInterruptedDrift(ctx context.Context, at, startedBefore time.Time) error {
	_, err := s.db.Exec(ctx, qFailInterruptedDrift, at, startedBefore)
	return err
}

const qXactLock = `SELECT pg_advisory_xact_lock($1)`

// InTxWaitLock runs fn in a transaction that first waits for the transaction-level advisory
// lock key (drift's claim lock); what fn writes commits with it, and the commit releases the
// lock.
func (s *Store) InTxWaitLock(ctx context.Context, key int64, fn func(tx *Store) error) error {
	return s.InTx(ctx, func(tx *Store) error {
		if _, err := tx.db.Exec(ctx, qXactLock, key); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		return fn(tx)
	})
}

const qTakenDriftRequests = `SELECT DISTINCT unnest(request_ids)::text FROM drift_reports WHERE request_ids && $1::uuid[]`

// TakenDriftRequests returns which of the request ids named a drift report already claims.
func (s *Store) TakenDriftRequests(ctx context.Context, named []string) ([]string, error) {
	rows, err := s.db.Query(ctx, qTakenDriftRequests, named)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

const qLastDriftReport = `SELECT max(coalesce(finished_at, started_at)) FROM drift_reports
WHERE trigger <> 'placement' AND (status = 'completed' OR (status = 'running' AND trigger = 'scheduled'))`

// LastDriftReport is when the newest completed (or running scheduled) full report finished
// or started; nil when there is none. Placement sweeps list only the clusters: they never
// stand in for the daily discovery.
func (s *Store) LastDriftReport(ctx context.Context) (*time.Time, error) {
	var last *time.Time
	err := s.db.QueryRow(ctx, qLastDriftReport).Scan(&last)
	return last, err
}

const qInsertDriftReport = `INSERT INTO drift_reports (id, trigger, request_ids, status, started_at, claimed_by)
VALUES ($1, $2, $3::uuid[], 'running', $4, $5)`

// InsertDriftReport inserts report id running, started at at by schedulerID.
func (s *Store) InsertDriftReport(ctx context.Context, id, trigger string, requestIDs []string, at time.Time, schedulerID string) error {
	_, err := s.db.Exec(ctx, qInsertDriftReport, id, trigger, requestIDs, at, schedulerID)
	return err
}

const qFailDriftReport = `UPDATE drift_reports SET status = 'failed', finished_at = $2, error = $3 WHERE id = $1`

// FailDriftReport marks report id failed at at with msg.
func (s *Store) FailDriftReport(ctx context.Context, id string, at time.Time, msg string) error {
	_, err := s.db.Exec(ctx, qFailDriftReport, id, at, msg)
	return err
}

const qCompleteDriftReport = `UPDATE drift_reports SET status = 'completed', finished_at = $2, report = $3,
missing_count = $4, ghost_count = $5 WHERE id = $1`

// CompleteDriftReport stores report id's outcome (raw: the report as JSON).
func (s *Store) CompleteDriftReport(ctx context.Context, id string, finishedAt time.Time, raw []byte, missing, ghost int) error {
	_, err := s.db.Exec(ctx, qCompleteDriftReport, id, finishedAt, raw, missing, ghost)
	return err
}

// DriftEntity is an lxc or vm entity, or a Proxmox host (Kind: the root type it descends
// from).
type DriftEntity struct {
	ID, Slug, Name, State, Kind string
	Attrs                       map[string]any
}

const qDriftEntities = `
WITH RECURSIVE t(name, root) AS (
    SELECT r, r FROM unnest(ARRAY['lxc', 'vm', 'proxmox-host']) AS r
    UNION
    SELECT et.name, t.root FROM entity_types et JOIN t ON et.parent = t.name
)
SELECT e.id::text, e.slug, e.name, e.state, t.root, e.attributes
FROM entities e JOIN t ON t.name = e.type
WHERE e.state <> 'destroyed'
ORDER BY e.slug`

// DriftEntities reads the Proxmox hosts and their guests that are not destroyed, by slug.
func (s *Store) DriftEntities(ctx context.Context) ([]DriftEntity, error) {
	rows, err := s.db.Query(ctx, qDriftEntities)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (DriftEntity, error) {
		var g DriftEntity
		err := r.Scan(&g.ID, &g.Slug, &g.Name, &g.State, &g.Kind, &g.Attrs)
		return g, err
	})
}

const qLiveHostsEdges = `SELECT r.target_id::text, e.slug FROM relationships r JOIN entities e ON e.id = r.source_id
WHERE r.type = 'hosts' AND r.valid_to IS NULL AND e.state <> 'destroyed' ORDER BY r.valid_from`

// HostSlugByGuest maps every guest id with a current hosts edge from a live host to that
// host's slug (the newest edge wins).
func (s *Store) HostSlugByGuest(ctx context.Context) (map[string]string, error) {
	rows, err := s.db.Query(ctx, qLiveHostsEdges)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var gid, hslug string
	if _, err := pgx.ForEachRow(rows, []any{&gid, &hslug}, func() error { out[gid] = hslug; return nil }); err != nil {
		return nil, err
	}
	return out, nil
}

// DriftListing is a host's stored listing for a report.
type DriftListing struct {
	Host, Scheduler string
	Listing         []byte // JSON
}

const qDriftListings = `SELECT host_slug, scheduler_id, listing FROM drift_listings WHERE report_id = $1`

// DriftListings reads the listings stored for report reportID.
func (s *Store) DriftListings(ctx context.Context, reportID string) ([]DriftListing, error) {
	rows, err := s.db.Query(ctx, qDriftListings, reportID)
	if err != nil {
		return nil, err
	}
	var out []DriftListing
	var l DriftListing
	_, err = pgx.ForEachRow(rows, []any{&l.Host, &l.Scheduler, &l.Listing}, func() error {
		out = append(out, l)
		l = DriftListing{}
		return nil
	})
	return out, err
}

const qHostLeaseHolders = `SELECT substr(resource, 6), holder FROM scheduler_leases
WHERE resource = ANY($1) AND expires_at > now()`

// HostLeaseHolders maps the host of each live lease of units ("host:<slug>") to its holder.
func (s *Store) HostLeaseHolders(ctx context.Context, units []string) (map[string]string, error) {
	rows, err := s.db.Query(ctx, qHostLeaseHolders, units)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var h, by string
	if _, err := pgx.ForEachRow(rows, []any{&h, &by}, func() error { out[h] = by; return nil }); err != nil {
		return nil, err
	}
	return out, nil
}

const qDriftReportRunning = `SELECT status = 'running', trigger FROM drift_reports WHERE id = $1`

// DriftReportRunning says whether report id is running, and its trigger (a placement sweep
// lists only the clusters); ErrNotFound when there is none.
func (s *Store) DriftReportRunning(ctx context.Context, id string) (bool, string, error) {
	var running bool
	var trigger string
	err := s.db.QueryRow(ctx, qDriftReportRunning, id).Scan(&running, &trigger)
	return running, trigger, notFound(err)
}

const qLastPlacement = `SELECT max(started_at) FROM drift_reports WHERE trigger = 'placement'`

// LastPlacement is when the newest placement sweep started; nil when there is none.
func (s *Store) LastPlacement(ctx context.Context) (*time.Time, error) {
	var last *time.Time
	err := s.db.QueryRow(ctx, qLastPlacement).Scan(&last)
	return last, err
}

const qPrunePlacements = `DELETE FROM drift_reports WHERE trigger = 'placement' AND status <> 'running' AND started_at < $1`

// PrunePlacements deletes the placement sweeps started before before (their listings go
// with them): one a minute is kept only long enough for the api to follow its moves.
func (s *Store) PrunePlacements(ctx context.Context, before time.Time) error {
	_, err := s.db.Exec(ctx, qPrunePlacements, before)
	return err
}

// ClusterMember is a Proxmox host's current member-of edge to a cluster entity.
type ClusterMember struct {
	Host, Cluster string // slugs
}

const qClusterMembers = `SELECT h.slug, c.slug FROM relationships r
JOIN entities h ON h.id = r.source_id
JOIN entities c ON c.id = r.target_id
WHERE r.type = 'member-of' AND r.valid_to IS NULL AND c.type = 'cluster'
  AND h.state <> 'destroyed' AND c.state <> 'destroyed'
ORDER BY c.slug, h.slug`

// ClusterMembers lists every live host's membership of a cluster entity, by cluster and host.
func (s *Store) ClusterMembers(ctx context.Context) ([]ClusterMember, error) {
	rows, err := s.db.Query(ctx, qClusterMembers)
	if err != nil {
		return nil, err
	}
	var out []ClusterMember
	var m ClusterMember
	_, err = pgx.ForEachRow(rows, []any{&m.Host, &m.Cluster}, func() error { out = append(out, m); return nil })
	return out, err
}

const qStoreDriftListing = `INSERT INTO drift_listings (report_id, host_slug, scheduler_id, listing)
SELECT $1, $2, $3, $4 WHERE $5::bigint IS NULL OR EXISTS (
    SELECT 1 FROM scheduler_leases WHERE resource = $6 AND holder = $3 AND generation = $5 AND expires_at > clock_timestamp())
ON CONFLICT (report_id, host_slug) DO NOTHING`

// StoreDriftListing writes a host's listing once per report, only while schedulerID still
// holds unit at generation gen (gen nil: no leases). It returns the rows written (0 or 1).
func (s *Store) StoreDriftListing(ctx context.Context, reportID, slug, schedulerID string, raw []byte, gen *int64, unit string) (int64, error) {
	tag, err := s.db.Exec(ctx, qStoreDriftListing, reportID, slug, schedulerID, raw, gen, unit)
	return tag.RowsAffected(), err
}
