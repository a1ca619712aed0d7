// Package metricsapi serves what the scheduler measures to readers: an entity's metric
// samples downsampled into buckets (date_bin + avg/min/max), a trend over a window (slope,
// min/max/avg, first and last), and the stored drift report (GET /audit/drift), which a
// reader may ask to refresh: the api sends NOTIFY oikos_drift with a request id and waits,
// up to a timeout, for the scheduler's report answering it.
//
// The routes are a request.Route table (Routes) the composition root mounts with the api's
// others, behind the same guard and error handling. The queries are readmodel's (no SQL
// here); durations are read as everywhere else (request.DurationParam, "7d", "90m"), and
// errors are api/internal/request errors naming the query parameter at fault.
package metricsapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/readmodel"
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
	Pool   *storage.Pool
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

// API is the metrics surface.
type API struct {
	d      Deps
	reader *readmodel.Reader
	log    zerolog.Logger
}

// New builds the surface with Deps' defaults filled in.
func New(d Deps) *API {
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
	return &API{d: d, reader: readmodel.New(d.Pool, nil), log: d.Logger.With().Str("component", "metricsapi").Logger()}
}

// Routes is GET /entities/:ref/metrics, /entities/:ref/metric-names, /entities/:ref/trend and /audit/drift
// (under /api/v1), for any reading token.
func (h *API) Routes() []request.Route {
	return []request.Route{
		request.GET("/entities/:ref/metrics", auth.PermRead, h.metrics),
		request.GET("/entities/:ref/metric-names", auth.PermRead, h.names),
		request.GET("/entities/:ref/trend", auth.PermRead, h.trend),
		request.GET("/audit/drift", auth.PermRead, h.drift),
	}
}

// Problem kinds of a drift refresh the scheduler did not answer with a report.
const (
	kindDriftFailed  = "drift-failed"
	kindDriftTimeout = "drift-timeout"
)

// metricNames lists the metrics an entity has samples of in the last week, to say what
// name= may be; nil when the list cannot be read.
func (h *API) metricNames(ctx context.Context, id string) []string {
	names, err := h.reader.MetricNames(ctx, id, h.d.Clock().Add(-7*24*time.Hour))
	if err != nil {
		h.log.Warn().Err(err).Msg("list metric names")
		return nil
	}
	return names
}

// NameList is the answer of GET /entities/{ref}/metric-names.
type NameList struct {
	Entity string   `json:"entity"`
	Names  []string `json:"names"`
}

// names lists the metrics an entity has samples of in the last 7 days (what a chart can
// offer; the dashboard's metric picker).
func (h *API) names(c echo.Context) error {
	ref, err := request.Param(c, "ref")
	if err != nil {
		return err
	}
	e, err := h.reader.ResolveEntity(c.Request().Context(), ref)
	if err != nil {
		return err
	}
	names, err := h.reader.MetricNames(c.Request().Context(), e.ID, h.d.Clock().Add(-7*24*time.Hour))
	if err != nil {
		return err
	}
	if names == nil {
		names = []string{}
	}
	return c.JSON(http.StatusOK, NameList{Entity: e.Slug, Names: names})
}

// series reads what both the metrics and the trend of an entity are about: the entity of the
// :ref path parameter and the metric name= (a 400 listing the names it has when missing).
func (h *API) series(c echo.Context) (storage.EntityRef, string, error) {
	ref, err := request.Param(c, "ref")
	if err != nil {
		return storage.EntityRef{}, "", err
	}
	e, err := h.reader.ResolveEntity(c.Request().Context(), ref)
	if err != nil {
		return e, "", err
	}
	name, err := h.requireName(c, e)
	return e, name, err
}

func (h *API) requireName(c echo.Context, e storage.EntityRef) (string, error) {
	name := strings.TrimSpace(c.QueryParam("name"))
	if name != "" {
		return name, nil
	}
	names := h.metricNames(c.Request().Context(), e.ID)
	if len(names) == 0 {
		return "", request.BadRequest("name", "name is required; %s has no metric samples in the last 7 days", e.Slug)
	}
	return "", request.BadRequest("name", "name is required; %s has: %s", e.Slug, strings.Join(names, ", "))
}

// Point is one bucket of samples.
type Point = readmodel.MetricPoint

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

func (h *API) metrics(c echo.Context) error {
	ctx := c.Request().Context()
	e, name, err := h.series(c)
	if err != nil {
		return err
	}
	now := h.d.Clock()
	since, given, err := request.SinceParam(c, "since", now)
	if err != nil {
		return err
	}
	if !given {
		since = now.Add(-defaultSince)
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
	step, err := request.DurationParam(c, "step", 0)
	if err != nil {
		return err
	}
	if step != 0 && step < time.Second {
		return request.BadRequest("step", "must be at least 1s")
	}
	if step == 0 {
		// Whole seconds, at least 10 s, about defaultPoints buckets (fewer when MaxPoints
		// is lower: a step the caller did not choose must never be refused).
		points := time.Duration(min(defaultPoints, h.d.MaxPoints))
		step = max(10*time.Second, (span/points+time.Second-1)/time.Second*time.Second)
	}
	if n := span / step; int(n) > h.d.MaxPoints {
		return request.BadRequest("step", "step %s over %s gives %d buckets; at most %d — use a larger step", step, span, n, h.d.MaxPoints)
	}
	points, err := h.reader.MetricBuckets(ctx, e.ID, name, step, since, until)
	if err != nil {
		return fmt.Errorf("metrics of %s: %w", e.Slug, err)
	}
	return c.JSON(http.StatusOK, Series{Entity: e.Slug, EntityID: e.ID, Name: name, Since: since.UTC(), Until: until.UTC(),
		StepSeconds: step.Seconds(), Points: points})
}

// Trend is the answer of GET /entities/{ref}/trend.
type Trend struct {
	Entity        string    `json:"entity"`
	EntityID      string    `json:"entity_id"`
	Name          string    `json:"name"`
	WindowSeconds float64   `json:"window_seconds"`
	Since         time.Time `json:"since"`
	Until         time.Time `json:"until"`
	// The samples' count, range, mean, first, last and slope per hour (count … slope_per_hour).
	readmodel.MetricStats
	// Direction is rising, falling or flat (the fitted change over the window is under 5%
	// of the larger of the mean and the range), or unknown with fewer than two samples.
	Direction string `json:"direction"`
}

func (h *API) trend(c echo.Context) error {
	ctx := c.Request().Context()
	e, name, err := h.series(c)
	if err != nil {
		return err
	}
	window, err := request.DurationParam(c, "window", defaultWindow)
	if err != nil {
		return err
	}
	now := h.d.Clock()
	t := Trend{Entity: e.Slug, EntityID: e.ID, Name: name, WindowSeconds: window.Seconds(), Since: now.Add(-window).UTC(), Until: now.UTC()}
	if t.MetricStats, err = h.reader.MetricTrend(ctx, e.ID, name, t.Since, now); err != nil {
		return fmt.Errorf("trend of %s: %w", e.Slug, err)
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

// driftBody is what GET /audit/drift answers: the stored report with its status.
func driftBody(d readmodel.DriftReport, now time.Time) map[string]any {
	out := map[string]any{}
	for k, v := range d.Report {
		out[k] = v
	}
	out["id"], out["status"], out["trigger"], out["started_at"] = d.ID, d.Status, d.Trigger, d.StartedAt.UTC()
	if d.FinishedAt != nil {
		out["finished_at"] = d.FinishedAt.UTC()
		out["age_seconds"] = math.Round(now.Sub(*d.FinishedAt).Seconds())
	}
	return out
}

type driftRequest struct {
	RequestID string `json:"request_id"`
}

func (h *API) drift(c echo.Context) error {
	ctx := c.Request().Context()
	now := h.d.Clock()
	refresh, err := request.BoolParam(c, "refresh")
	if err != nil {
		return err
	}
	if !refresh {
		d, err := h.reader.LatestDrift(ctx)
		if errors.Is(err, apierr.ErrNotFound) {
			return request.NotFound("no drift report yet: GET /api/v1/audit/drift?refresh=true asks the scheduler for one")
		}
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, driftBody(d, now))
	}
	wait, err := request.DurationParam(c, "timeout", h.d.DriftWait)
	if err != nil {
		return err
	}
	wait = min(wait, MaxDriftWait)
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
		d, found, err := h.reader.DriftAnswering(ctx, id.String())
		switch {
		case err != nil:
			return err
		case found && d.Status == "completed":
			return c.JSON(http.StatusOK, driftBody(d, h.d.Clock()))
		case found:
			return request.Errorf(http.StatusBadGateway, kindDriftFailed, "", "drift discovery failed in the scheduler: %s", d.Error)
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
