// Package metricsapi serves what the scheduler measures to readers: an entity's metric
// samples downsampled into buckets (date_bin + avg/min/max), a trend over a window (slope,
// min/max/avg, first and last), and the stored drift report (GET /audit/drift), which a
// reader may ask to refresh: the api sends NOTIFY oikos_drift with a request id and waits,
// up to a timeout, for the scheduler's report answering it.
//
// Handlers are echo handlers mounted by the composition root on the /api/v1 group (behind
// its authentication). Errors are api/internal/request errors naming the query parameter at
// fault; each route renders them as problem JSON itself (request.Catch), so the routes answer
// the same on the api's server and on a bare echo.
package metricsapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

// Defaults for Deps.
const (
	DefaultDriftWait = 60 * time.Second
	MaxDriftWait     = 5 * time.Minute
	DefaultMaxPoints = 2000
	// defaultPoints is how many buckets an automatic step aims for.
	defaultPoints = 300
	defaultSince  = time.Hour
	defaultWindow = 24 * time.Hour
)

// Deps are what the handlers need.
type Deps struct {
	Pool   *pgxpool.Pool
	Logger zerolog.Logger
	// DriftWait is how long ?refresh=true waits for the scheduler (default 60 s).
	DriftWait time.Duration
	// MaxPoints caps the buckets of one metrics answer (default 2000).
	MaxPoints int
	// Clock is "now" (default time.Now).
	Clock func() time.Time
	// PollEvery is how often a refresh looks for its report (default 100 ms).
	PollEvery time.Duration
}

type handlers struct{ d Deps }

// Register mounts GET /entities/:ref/metrics, GET /entities/:ref/trend and GET /audit/drift
// on g (the /api/v1 group).
func Register(g *echo.Group, d Deps) {
	if d.DriftWait <= 0 {
		d.DriftWait = DefaultDriftWait
	}
	if d.MaxPoints <= 0 {
		d.MaxPoints = DefaultMaxPoints
	}
	if d.Clock == nil {
		d.Clock = time.Now
	}
	if d.PollEvery <= 0 {
		d.PollEvery = 100 * time.Millisecond
	}
	h := &handlers{d: d}
	catch := request.Catch(d.Logger.With().Str("component", "metricsapi").Logger())
	g.GET("/entities/:ref/metrics", h.metrics, catch)
	g.GET("/entities/:ref/trend", h.trend, catch)
	g.GET("/audit/drift", h.drift, catch)
}

// Problem kinds of a drift refresh the scheduler did not answer with a report.
const (
	kindDriftFailed  = "drift-failed"
	kindDriftTimeout = "drift-timeout"
)

// parseDuration accepts Go durations ("90m", "6h") and whole days ("7d").
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%q is not a number of days", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (such as 90s, 15m, 6h, 7d)", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q is not positive", s)
	}
	return d, nil
}

// parseSince reads `since` as a duration back from now or an RFC 3339 time.
func parseSince(s string, now time.Time, def time.Duration) (time.Time, error) {
	if s == "" {
		return now.Add(-def), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := parseDuration(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w, nor an RFC 3339 time", err)
	}
	return now.Add(-d), nil
}

type entityRef struct{ id, slug string }

func (h *handlers) entity(ctx context.Context, ref string) (entityRef, error) {
	var e entityRef
	q := `SELECT id::text, slug FROM entities WHERE slug = $1`
	if _, err := uuid.Parse(ref); err == nil {
		q = `SELECT id::text, slug FROM entities WHERE id = $1::uuid`
	}
	err := h.d.Pool.QueryRow(ctx, q, ref).Scan(&e.id, &e.slug)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, request.NotFound("no entity %q", ref)
	}
	if err != nil {
		return e, fmt.Errorf("look up entity %q: %w", ref, err)
	}
	return e, nil
}

// metricNames lists the metrics an entity has samples of, to say what name= may be.
func (h *handlers) metricNames(ctx context.Context, id string) []string {
	rows, err := h.d.Pool.Query(ctx, `SELECT DISTINCT name FROM metric_samples WHERE target_id = $1 AND at > $2 ORDER BY name`,
		id, h.d.Clock().Add(-7*24*time.Hour))
	if err != nil {
		h.d.Logger.Warn().Err(err).Msg("list metric names")
		return nil
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		h.d.Logger.Warn().Err(err).Msg("list metric names")
		return nil
	}
	return names
}

// series reads what both the metrics and the trend of an entity are about: the entity of the
// :ref path parameter and the metric name= (a 400 listing the names it has when missing).
func (h *handlers) series(c echo.Context) (entityRef, string, error) {
	e, err := h.entity(c.Request().Context(), c.Param("ref"))
	if err != nil {
		return e, "", err
	}
	name, err := h.requireName(c, e)
	return e, name, err
}

func (h *handlers) requireName(c echo.Context, e entityRef) (string, error) {
	name := strings.TrimSpace(c.QueryParam("name"))
	if name != "" {
		return name, nil
	}
	names := h.metricNames(c.Request().Context(), e.id)
	if len(names) == 0 {
		return "", request.BadRequest("name", "name is required; %s has no metric samples in the last 7 days", e.slug)
	}
	return "", request.BadRequest("name", "name is required; %s has: %s", e.slug, strings.Join(names, ", "))
}

// Point is one bucket of samples.
type Point struct {
	At    time.Time `json:"at"`
	Avg   float64   `json:"avg"`
	Min   float64   `json:"min"`
	Max   float64   `json:"max"`
	Count int64     `json:"count"`
}

// Series is the answer of GET /entities/{ref}/metrics.
type Series struct {
	Entity      string    `json:"entity"`
	EntityID    string    `json:"entity_id"`
	Name        string    `json:"name"`
	Since       time.Time `json:"since"`
	Until       time.Time `json:"until"`
	StepSeconds float64   `json:"step_seconds"`
	Points      []Point   `json:"points"`
}

func (h *handlers) metrics(c echo.Context) error {
	ctx := c.Request().Context()
	e, name, err := h.series(c)
	if err != nil {
		return err
	}
	now := h.d.Clock()
	since, err := parseSince(c.QueryParam("since"), now, defaultSince)
	if err != nil {
		return request.BadRequest("since", "%v", err)
	}
	until := now
	if u := c.QueryParam("until"); u != "" {
		if until, err = time.Parse(time.RFC3339, u); err != nil {
			return request.BadRequest("until", "%q is not an RFC 3339 time", u)
		}
	}
	if !since.Before(until) {
		return request.BadRequest("since", "since (%s) must be before until (%s)", since.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	span := until.Sub(since)
	var step time.Duration
	if s := c.QueryParam("step"); s != "" {
		if step, err = parseDuration(s); err != nil {
			return request.BadRequest("step", "%v", err)
		}
		if step < time.Second {
			return request.BadRequest("step", "must be at least 1s")
		}
	} else {
		// Whole seconds, at least 10 s, about defaultPoints buckets (fewer when MaxPoints
		// is lower: a step the caller did not choose must never be refused).
		points := time.Duration(min(defaultPoints, h.d.MaxPoints))
		step = max(10*time.Second, (span/points+time.Second-1)/time.Second*time.Second)
	}
	if n := span / step; int(n) > h.d.MaxPoints {
		return request.BadRequest("step", "step %s over %s gives %d buckets; at most %d — use a larger step", step, span, n, h.d.MaxPoints)
	}
	rows, err := h.d.Pool.Query(ctx, `
SELECT date_bin(make_interval(secs => $3), at, '2000-01-01 00:00:00+00'::timestamptz) AS bucket,
       avg(value), min(value), max(value), count(*)
FROM metric_samples
WHERE target_id = $1 AND name = $2 AND at >= $4 AND at < $5
GROUP BY bucket ORDER BY bucket`, e.id, name, step.Seconds(), since, until)
	if err != nil {
		return fmt.Errorf("read metric %s of %s: %w", name, e.slug, err)
	}
	points, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Point, error) {
		var p Point
		err := r.Scan(&p.At, &p.Avg, &p.Min, &p.Max, &p.Count)
		p.At = p.At.UTC()
		return p, err
	})
	if err != nil {
		return fmt.Errorf("read metric %s of %s: %w", name, e.slug, err)
	}
	if points == nil {
		points = []Point{}
	}
	return c.JSON(http.StatusOK, Series{Entity: e.slug, EntityID: e.id, Name: name, Since: since.UTC(), Until: until.UTC(),
		StepSeconds: step.Seconds(), Points: points})
}

// Trend is the answer of GET /entities/{ref}/trend.
type Trend struct {
	Entity        string     `json:"entity"`
	EntityID      string     `json:"entity_id"`
	Name          string     `json:"name"`
	WindowSeconds float64    `json:"window_seconds"`
	Since         time.Time  `json:"since"`
	Until         time.Time  `json:"until"`
	Count         int64      `json:"count"`
	Min           *float64   `json:"min"`
	Max           *float64   `json:"max"`
	Avg           *float64   `json:"avg"`
	First         *float64   `json:"first"`
	FirstAt       *time.Time `json:"first_at"`
	Last          *float64   `json:"last"`
	LastAt        *time.Time `json:"last_at"`
	// SlopePerHour is the least-squares slope of value over time, per hour.
	SlopePerHour *float64 `json:"slope_per_hour"`
	// Direction is rising, falling or flat (the fitted change over the window is under 5%
	// of the larger of the mean and the range), or unknown with fewer than two samples.
	Direction string `json:"direction"`
}

func (h *handlers) trend(c echo.Context) error {
	ctx := c.Request().Context()
	e, name, err := h.series(c)
	if err != nil {
		return err
	}
	window := defaultWindow
	if w := c.QueryParam("window"); w != "" {
		if window, err = parseDuration(w); err != nil {
			return request.BadRequest("window", "%v", err)
		}
	}
	now := h.d.Clock()
	t := Trend{Entity: e.slug, EntityID: e.id, Name: name, WindowSeconds: window.Seconds(), Since: now.Add(-window).UTC(), Until: now.UTC()}
	err = h.d.Pool.QueryRow(ctx, `
SELECT count(*), min(value), max(value), avg(value),
       (array_agg(value ORDER BY at))[1], min(at),
       (array_agg(value ORDER BY at DESC))[1], max(at),
       regr_slope(value, extract(epoch FROM at)) * 3600
FROM metric_samples
WHERE target_id = $1 AND name = $2 AND at >= $3 AND at <= $4`, e.id, name, t.Since, now).
		Scan(&t.Count, &t.Min, &t.Max, &t.Avg, &t.First, &t.FirstAt, &t.Last, &t.LastAt, &t.SlopePerHour)
	if err != nil {
		return fmt.Errorf("trend of %s of %s: %w", name, e.slug, err)
	}
	t.Direction = direction(t, window)
	return c.JSON(http.StatusOK, t)
}

func direction(t Trend, window time.Duration) string {
	if t.Count < 2 || t.SlopePerHour == nil || t.Avg == nil {
		return "unknown"
	}
	change := *t.SlopePerHour * window.Hours()
	scale := math.Max(math.Abs(*t.Avg), *t.Max-*t.Min)
	switch {
	case math.Abs(change) <= 0.05*scale:
		return "flat"
	case change > 0:
		return "rising"
	default:
		return "falling"
	}
}

// driftRow is a stored drift report.
type driftRow struct {
	id, status, trigger, errMsg string
	started                     time.Time
	finished                    *time.Time
	report                      map[string]any
}

const driftColumns = `id::text, status, trigger, error, started_at, finished_at, report`

func scanDrift(row pgx.Row) (driftRow, error) {
	var d driftRow
	err := row.Scan(&d.id, &d.status, &d.trigger, &d.errMsg, &d.started, &d.finished, &d.report)
	return d, err
}

// body is what GET /audit/drift answers: the stored report with its status.
func (d driftRow) body(now time.Time) map[string]any {
	out := map[string]any{}
	for k, v := range d.report {
		out[k] = v
	}
	out["id"], out["status"], out["trigger"], out["started_at"] = d.id, d.status, d.trigger, d.started.UTC()
	if d.finished != nil {
		out["finished_at"] = d.finished.UTC()
		out["age_seconds"] = math.Round(now.Sub(*d.finished).Seconds())
	}
	return out
}

type driftRequest struct {
	RequestID string `json:"request_id"`
}

func (h *handlers) drift(c echo.Context) error {
	ctx := c.Request().Context()
	now := h.d.Clock()
	refresh, err := request.BoolParam(c, "refresh")
	if err != nil {
		return err
	}
	if !refresh {
		d, err := scanDrift(h.d.Pool.QueryRow(ctx, `SELECT `+driftColumns+` FROM drift_reports WHERE status = 'completed'
ORDER BY finished_at DESC LIMIT 1`))
		if errors.Is(err, pgx.ErrNoRows) {
			return request.NotFound("no drift report yet: GET /api/v1/audit/drift?refresh=true asks the scheduler for one")
		}
		if err != nil {
			return fmt.Errorf("read the latest drift report: %w", err)
		}
		return c.JSON(http.StatusOK, d.body(now))
	}
	wait := h.d.DriftWait
	if w := c.QueryParam("timeout"); w != "" {
		if wait, err = parseDuration(w); err != nil {
			return request.BadRequest("timeout", "%v", err)
		}
		wait = min(wait, MaxDriftWait)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return fmt.Errorf("request id: %w", err)
	}
	payload, err := json.Marshal(driftRequest{RequestID: id.String()})
	if err != nil {
		return err
	}
	if err := eventbus.Notify(ctx, h.d.Pool, eventbus.ChannelDrift, string(payload)); err != nil {
		return fmt.Errorf("request drift discovery: %w", err)
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(h.d.PollEvery)
	defer tick.Stop()
	for {
		d, err := scanDrift(h.d.Pool.QueryRow(ctx, `SELECT `+driftColumns+` FROM drift_reports
WHERE $1::uuid = ANY(request_ids) AND status <> 'running'`, id.String()))
		switch {
		case err == nil && d.status == "completed":
			return c.JSON(http.StatusOK, d.body(h.d.Clock()))
		case err == nil:
			return request.Errorf(http.StatusBadGateway, kindDriftFailed, "", "drift discovery failed in the scheduler: %s", d.errMsg)
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("wait for drift report: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return request.Errorf(http.StatusGatewayTimeout, kindDriftTimeout, "",
				"no drift report for request %s within %s: is the scheduler running? The latest stored report is at GET /api/v1/audit/drift",
				id, wait)
		case <-tick.C:
		}
	}
}
