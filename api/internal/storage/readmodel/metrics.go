package readmodel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/apierr"
)

// qMetricNames lists the metric names of entity $1 with samples after $2.
const qMetricNames = `SELECT DISTINCT name FROM metric_samples WHERE target_id = $1 AND at > $2 ORDER BY name`

// MetricNames lists the metrics the entity with id entityID has samples of since then.
func (r *Reader) MetricNames(ctx context.Context, entityID string, since time.Time) ([]string, error) {
	rows, err := r.db.Query(ctx, qMetricNames,
		entityID, since)
	if err != nil {
		return nil, fmt.Errorf("list metric names: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list metric names: %w", err)
	}
	return names, nil
}

// qMetricBuckets downsamples metric $2 of entity $1 into buckets of $3 seconds over [$4, $5).
const qMetricBuckets = `
SELECT date_bin(make_interval(secs => $3), at, '2000-01-01 00:00:00+00'::timestamptz) AS bucket,
       avg(value), min(value), max(value), count(*)
FROM metric_samples
WHERE target_id = $1 AND name = $2 AND at >= $4 AND at < $5
GROUP BY bucket ORDER BY bucket`

// MetricPoint is one bucket of samples.
type MetricPoint struct {
	At    time.Time `json:"at"`
	Avg   float64   `json:"avg"`
	Min   float64   `json:"min"`
	Max   float64   `json:"max"`
	Count int64     `json:"count"`
}

// MetricBuckets downsamples one metric of an entity over [since, until) into buckets of
// step (date_bin from 2000-01-01 UTC, so buckets of a step line up across requests), in
// time order; buckets without samples are absent. Never nil.
func (r *Reader) MetricBuckets(ctx context.Context, entityID, name string, step time.Duration, since, until time.Time) ([]MetricPoint, error) {
	rows, err := r.db.Query(ctx, qMetricBuckets, entityID, name, step.Seconds(), since, until)
	if err != nil {
		return nil, fmt.Errorf("read metric %s: %w", name, err)
	}
	points, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (MetricPoint, error) {
		var p MetricPoint
		err := row.Scan(&p.At, &p.Avg, &p.Min, &p.Max, &p.Count)
		p.At = p.At.UTC()
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("read metric %s: %w", name, err)
	}
	if points == nil {
		points = []MetricPoint{}
	}
	return points, nil
}

// MetricStats summarises one metric of an entity over a window: the count, the range and the
// mean, the first and the last sample, and the least-squares slope of value over time, per
// hour. Everything but Count is nil without samples (the slope, with fewer than two).
type MetricStats struct {
	Count   int64      `json:"count"`
	Min     *float64   `json:"min"`
	Max     *float64   `json:"max"`
	Avg     *float64   `json:"avg"`
	First   *float64   `json:"first"`
	FirstAt *time.Time `json:"first_at"`
	Last    *float64   `json:"last"`
	LastAt  *time.Time `json:"last_at"`
	// SlopePerHour is the least-squares slope of value over time, per hour.
	SlopePerHour *float64 `json:"slope_per_hour"`
}

// qMetricTrend summarises metric $2 of entity $1 over [$3, $4].
const qMetricTrend = `
SELECT count(*), min(value), max(value), avg(value),
       (array_agg(value ORDER BY at))[1], min(at),
       (array_agg(value ORDER BY at DESC))[1], max(at),
       regr_slope(value, extract(epoch FROM at)) * 3600
FROM metric_samples
WHERE target_id = $1 AND name = $2 AND at >= $3 AND at <= $4`

// MetricTrend reads the MetricStats of one metric of an entity over [since, until].
func (r *Reader) MetricTrend(ctx context.Context, entityID, name string, since, until time.Time) (MetricStats, error) {
	var t MetricStats
	err := r.db.QueryRow(ctx, qMetricTrend, entityID, name, since, until).
		Scan(&t.Count, &t.Min, &t.Max, &t.Avg, &t.First, &t.FirstAt, &t.Last, &t.LastAt, &t.SlopePerHour)
	if err != nil {
		return MetricStats{}, fmt.Errorf("trend of %s: %w", name, err)
	}
	return t, nil
}

// DriftReport is a stored drift report (drift_reports), as the scheduler wrote it.
type DriftReport struct {
	ID, Status, Trigger, Error string
	StartedAt                  time.Time
	FinishedAt                 *time.Time
	// Report is the report's own body (missing, ghost, ...).
	Report map[string]any
}

const driftColumns = `id::text, status, trigger, error, started_at, finished_at, report`

// qLatestDrift reads the newest completed full drift report (a placement sweep lists only the
// clusters: it is not the fleet's report); qDriftAnswering the finished one that answers the
// refresh request $1.
const (
	qLatestDrift = `SELECT ` + driftColumns + ` FROM drift_reports WHERE status = 'completed' AND trigger <> 'placement'
ORDER BY finished_at DESC LIMIT 1`
	qDriftAnswering = `SELECT ` + driftColumns + ` FROM drift_reports
WHERE $1::uuid = ANY(request_ids) AND status <> 'running'`
)

func scanDrift(row pgx.Row) (DriftReport, error) {
	var d DriftReport
	err := row.Scan(&d.ID, &d.Status, &d.Trigger, &d.Error, &d.StartedAt, &d.FinishedAt, &d.Report)
	return d, err
}

// LatestDrift returns the newest completed drift report; ErrNotFound when there is none.
func (r *Reader) LatestDrift(ctx context.Context) (DriftReport, error) {
	d, err := scanDrift(r.db.QueryRow(ctx, qLatestDrift))
	if errors.Is(err, pgx.ErrNoRows) {
		return DriftReport{}, fmt.Errorf("%w: no drift report yet", apierr.ErrNotFound)
	}
	if err != nil {
		return DriftReport{}, fmt.Errorf("read the latest drift report: %w", err)
	}
	return d, nil
}

// DriftAnswering returns the finished (completed or failed) drift report that answers the
// refresh request requestID; found is false while there is none.
func (r *Reader) DriftAnswering(ctx context.Context, requestID string) (d DriftReport, found bool, err error) {
	d, err = scanDrift(r.db.QueryRow(ctx, qDriftAnswering, requestID))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return DriftReport{}, false, nil
	case err != nil:
		return DriftReport{}, false, fmt.Errorf("wait for drift report: %w", err)
	}
	return d, true, nil
}
