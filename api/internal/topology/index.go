// Package topology keeps the graph's current dependency edges in memory, so that a blast
// radius is a breadth-first walk over a few megabytes of adjacency in the api process
// instead of a recursive query planned and run by Postgres for every request.
//
// The index is exactly as fresh as a query would be. topology_version.changes is a
// transactional count of relationship changes kept by triggers on the relationships table
// (migration 00005), so no write path — the graph service, a bulk load, a cascade, a
// statement typed into psql — changes the topology without moving it. An answer is used only
// if the count, read after the request began, is at most the count the walked adjacency
// reflects: Dependents reads it first; the api's handler walks first (Walk) and reads it in
// the round trip that fetches the entities anyway. When the count moved, the index reads the
// relationship.created and relationship.ended events after its cursor (the outbox is commit
// ordered, ADR 0002), in the same statement as the count, and applies them when they account
// for every change; otherwise, or when there are many, it rebuilds from one snapshot.
package topology

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/readmodel"
	"github.com/oikos-hq/oikos/shared/metrics"
)

// ErrTooLarge is returned while the current dependency edges outnumber Options.MaxEdges:
// the caller walks in SQL instead. The index tries again after a minute.
var ErrTooLarge = errors.New("topology: too many dependency edges to keep in memory")

// Event types the graph service appends for every relationship row it inserts or ends; the
// payload is the relationship (id, type, source_id, target_id, ...).
const (
	EventCreated = "relationship.created"
	EventEnded   = "relationship.ended"
)

// Defaults of Options.
const (
	DefaultMaxEdges   = 1 << 20
	DefaultMaxCatchUp = 1000
	tooLargeRetry     = time.Minute
)

// Options configure an Index.
type Options struct {
	// Pool is read through api/internal/storage/readmodel.
	Pool *storage.Pool
	// Forward are edge types whose source depends on their target; Reverse those whose
	// target depends on their source. Other edges are not kept.
	Forward, Reverse []string
	Logger           zerolog.Logger
	// Metrics, when set, receives the build histogram, the edge gauge and the catch-up counter.
	Metrics prometheus.Registerer
	// MaxEdges bounds memory: with more current dependency edges the index refuses
	// (ErrTooLarge). Default DefaultMaxEdges (about 100 MB at the limit).
	MaxEdges int
	// MaxCatchUp is the most events applied incrementally at once; more and the index
	// rebuilds, which is then cheaper. Default DefaultMaxCatchUp.
	MaxCatchUp int
}

// Stats describe the index (for tests and metrics).
type Stats struct {
	// Builds counts full builds from a snapshot; Applied counts events applied incrementally.
	Builds, Applied int64
	// Edges and Nodes are the current size; Changes is the topology_version it reflects.
	Edges, Nodes int
	Changes      int64
	// LastBuild is how long the latest build took (reading the edges included).
	LastBuild time.Duration
}

// Index is the in-memory dependency adjacency. It is safe for concurrent use; it builds
// itself on first use and has no goroutines of its own.
type Index struct {
	opts Options
	dirs map[string]uint8
	// read runs the index's queries (api/internal/storage/readmodel).
	read *readmodel.Reader
	// refresh serialises builds and catch-ups (a buffered channel rather than a mutex, so a
	// request waiting for one can give up when its context ends).
	refresh chan struct{}
	visits  sync.Pool // of *visits

	builds  prometheus.Histogram // oikos_api_topology_build_duration_seconds
	edges   prometheus.Gauge     // oikos_api_topology_edges
	applied prometheus.Counter   // oikos_api_topology_events_applied_total

	mu            sync.RWMutex // guards the fields below
	adj           *adjacency   // nil until built, or after an inconsistency
	stats         Stats
	tooLargeUntil time.Time
}

// New returns an index over opts.Pool; nothing is read until the first walk.
func New(opts Options) (*Index, error) {
	if opts.Pool == nil {
		return nil, errors.New("topology: a pool is required")
	}
	if opts.MaxEdges <= 0 {
		opts.MaxEdges = DefaultMaxEdges
	}
	if opts.MaxCatchUp <= 0 {
		opts.MaxCatchUp = DefaultMaxCatchUp
	}
	x := &Index{opts: opts, dirs: map[string]uint8{}, read: readmodel.New(opts.Pool, nil), refresh: make(chan struct{}, 1),
		builds: metrics.Register(opts.Metrics, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "oikos_api_topology_build_duration_seconds",
			Help:    "Full builds of the topology index from a snapshot of the dependency edges.",
			Buckets: metrics.FastBuckets(),
		})),
		edges: metrics.Register(opts.Metrics, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "oikos_api_topology_edges",
			Help: "Dependency edges in the topology index after its latest build.",
		})),
		applied: metrics.Register(opts.Metrics, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oikos_api_topology_events_applied_total",
			Help: "Relationship events applied to the topology index.",
		})),
	}
	for _, t := range opts.Forward {
		x.dirs[t] |= dirForward
	}
	for _, t := range opts.Reverse {
		x.dirs[t] |= dirReverse
	}
	if len(x.dirs) == 0 {
		return nil, errors.New("topology: no dependency edge types")
	}
	return x, nil
}

// Stats returns the current figures.
func (x *Index) Stats() Stats {
	x.mu.RLock()
	defer x.mu.RUnlock()
	s := x.stats
	if x.adj != nil {
		s.Edges, s.Nodes, s.Changes = len(x.adj.edges), len(x.adj.ids), x.adj.changes
	}
	return s
}

// Dependents returns everything that transitively depends on the entity with id rootID, up
// to maxDepth hops, each at its smallest depth, reflecting every relationship change
// committed before the call. ErrTooLarge means the caller should walk in SQL.
func (x *Index) Dependents(ctx context.Context, rootID string, maxDepth int) (Radius, error) {
	root, err := uuid.Parse(rootID)
	if err != nil {
		return Radius{}, fmt.Errorf("topology: root id %q: %w", rootID, err)
	}
	x.mu.RLock()
	tooLarge := time.Now().Before(x.tooLargeUntil)
	x.mu.RUnlock()
	if tooLarge {
		return Radius{}, ErrTooLarge
	}
	// The count is read after the request started, so every change committed before it
	// is included; any adjacency at that count or later reflects them all.
	changes, err := x.read.TopologyVersion(ctx)
	if err != nil {
		return Radius{}, fmt.Errorf("topology: read version: %w", err)
	}
	// One catch-up normally suffices: it reads a count at least as new as this one. The
	// bound only matters if the count went backwards (topology_version edited by hand).
	for attempt := 0; ; attempt++ {
		if r, ok := x.walk(UUID(root), maxDepth, changes); ok {
			return r, nil
		}
		if attempt == 2 {
			return Radius{}, fmt.Errorf("topology: the index cannot reach version %d (did topology_version go backwards?)", changes)
		}
		if err := x.catchUp(ctx, changes); err != nil {
			return Radius{}, err
		}
	}
}

// Walk walks the adjacency as it is, without reading the database; ok is false before the
// first build (or after an inconsistency, or while the graph is too large). The radius is
// current only if no relationship change committed before the caller's request is missing
// from it, that is if topology_version.changes, read after the request began, is at most
// Radius.Changes; otherwise call Dependents. This saves the version read when the caller
// can read the version in a round trip it makes anyway (readmodel.AffectedEntities does).
func (x *Index) Walk(rootID string, maxDepth int) (Radius, bool) {
	root, err := uuid.Parse(rootID)
	if err != nil {
		return Radius{}, false
	}
	return x.walk(UUID(root), maxDepth, 0)
}

// walk walks the adjacency if it reflects at least changes.
func (x *Index) walk(root UUID, maxDepth int, changes int64) (Radius, bool) {
	v, _ := x.visits.Get().(*visits)
	if v == nil {
		v = &visits{}
	}
	defer x.visits.Put(v)
	x.mu.RLock()
	defer x.mu.RUnlock()
	if a := x.adj; a != nil && a.changes >= changes {
		return a.walk(root, maxDepth, v), true
	}
	return Radius{}, false
}

// catchUp brings the adjacency to at least changes: by applying events when they account
// for every change since the adjacency's state, else by a rebuild.
func (x *Index) catchUp(ctx context.Context, changes int64) error {
	select {
	case x.refresh <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("topology: wait for refresh: %w", ctx.Err())
	}
	defer func() { <-x.refresh }()
	x.mu.RLock()
	a := x.adj
	fresh := a != nil && a.changes >= changes
	x.mu.RUnlock()
	if fresh {
		return nil // another request caught up meanwhile
	}
	if a != nil && a.removed <= max(x.opts.MaxCatchUp, len(a.edges)) {
		ok, err := x.applyEvents(ctx, a)
		if err != nil || ok {
			return err
		}
	}
	return x.rebuild(ctx)
}

// relEvent is the part of a relationship event's payload the index needs.
type relEvent struct {
	ID       uuid.UUID `json:"id"`
	Type     string    `json:"type"`
	SourceID uuid.UUID `json:"source_id"`
	TargetID uuid.UUID `json:"target_id"`
}

// applyEvents reads the relationship events after a's cursor together with the current
// count, in one statement (one snapshot), and applies them when they explain the whole
// increase. It returns false when they do not (a write without events, or too many): the
// caller rebuilds. Only the refresh holder mutates the adjacency, under the write lock.
func (x *Index) applyEvents(ctx context.Context, a *adjacency) (bool, error) {
	changes, read, err := x.read.TopologyEvents(ctx, a.cursor, []string{EventCreated, EventEnded}, x.opts.MaxCatchUp+1)
	if err != nil {
		return false, fmt.Errorf("topology: read events: %w", err)
	}
	type ev struct {
		id  int64
		typ string
		rel relEvent
	}
	evs := make([]ev, 0, len(read))
	for _, r := range read {
		e := ev{id: r.ID, typ: r.Type}
		if err := json.Unmarshal(r.Payload, &e.rel); err != nil {
			return false, fmt.Errorf("topology: read events: event %d: %w", r.ID, err)
		}
		evs = append(evs, e)
	}
	if len(evs) > x.opts.MaxCatchUp || a.changes+int64(len(evs)) != changes {
		if len(evs) <= x.opts.MaxCatchUp {
			x.opts.Logger.Warn().Int64("from", a.changes).Int64("to", changes).Int("events", len(evs)).
				Msg("relationships changed without matching events; rebuilding the topology index")
		}
		return false, nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, e := range evs {
		dir := x.dirs[e.rel.Type]
		var err error
		switch {
		case e.rel.Type == "" || e.rel.ID == uuid.Nil ||
			(e.typ == EventCreated && (e.rel.SourceID == uuid.Nil || e.rel.TargetID == uuid.Nil)):
			// A payload without what the index needs must not be read as "no edge".
			err = fmt.Errorf("event %d (%s): payload lacks the relationship's id, type or ends", e.id, e.typ)
		case dir == 0:
			// Not a dependency edge: counted, not kept.
		case e.typ == EventCreated:
			err = a.add(UUID(e.rel.ID), UUID(e.rel.SourceID), UUID(e.rel.TargetID), dir)
		default:
			err = a.remove(UUID(e.rel.ID))
		}
		if err != nil {
			x.adj = nil
			x.opts.Logger.Warn().Err(err).Int64("event", e.id).Msg("topology index disagrees with an event; rebuilding")
			return false, nil
		}
		a.cursor = e.id
	}
	if len(a.edges) > x.opts.MaxEdges {
		x.adj = nil // the rebuild that follows refuses and remembers it
		return false, nil
	}
	a.changes = changes
	x.stats.Applied += int64(len(evs))
	x.applied.Add(float64(len(evs)))
	return true, nil
}

// rebuild reads the current dependency edges, the count and the outbox cursor from one
// snapshot and replaces the adjacency.
func (x *Index) rebuild(ctx context.Context) error {
	t0 := time.Now()
	types := make([]string, 0, len(x.dirs))
	for t := range x.dirs {
		types = append(types, t)
	}
	a := newAdjacency(0)
	changes, cursor, err := x.read.TopologySnapshot(ctx, types, x.opts.MaxEdges+1, func(e readmodel.TopologyEdge) error {
		return a.add(e.ID, e.Source, e.Target, x.dirs[e.Type])
	})
	if err != nil {
		return fmt.Errorf("topology: %w", err)
	}
	a.changes, a.cursor = changes, cursor
	took := time.Since(t0)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.stats.Builds++
	x.stats.LastBuild = took
	x.builds.Observe(took.Seconds())
	if len(a.edges) > x.opts.MaxEdges {
		x.adj = nil
		x.tooLargeUntil = time.Now().Add(tooLargeRetry)
		x.opts.Logger.Warn().Int("max_edges", x.opts.MaxEdges).Msg("too many dependency edges for the topology index; blast radius walks in SQL")
		return ErrTooLarge
	}
	x.adj = a
	x.edges.Set(float64(len(a.edges)))
	x.opts.Logger.Info().Int("edges", len(a.edges)).Int("nodes", len(a.ids)).Dur("took", took).
		Int64("changes", changes).Msg("topology index built")
	return nil
}
