// Package fleet reads the entity graph that the api maintains (entities, relationships and
// the is-a tree in entity_types) so the scheduler can find where a command or a check runs.
// It implements remote.Graph over Postgres and wraps remote.Resolver, so the executor and the
// check runner resolve targets the same way, live on every call: an edited address, user or
// `hosts` edge takes effect without a restart.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/remote"
)

// DefaultTypeTTL is how long the is-a tree read from entity_types is reused. Types change
// only when the ontology is re-ingested, and the tree is read on the hot path of every
// execution, so a short cache saves a query without letting a change go unnoticed for long.
const DefaultTypeTTL = 30 * time.Second

// Options configure a Graph.
type Options struct {
	Logger zerolog.Logger
	// GuestExecTimeout is what `qm guest exec --timeout` waits by default; zero means
	// remote.DefaultGuestExecTimeout. Callers with their own deadline re-wrap VM targets.
	GuestExecTimeout time.Duration
	// TypeTTL overrides DefaultTypeTTL.
	TypeTTL time.Duration
}

// Graph is a remote.Graph over the Oikos schema. Safe for concurrent use.
type Graph struct {
	db   *storage.Store
	opts Options

	mu       sync.Mutex
	parents  map[string]string
	loadedAt time.Time
}

var _ remote.Graph = (*Graph)(nil)

// New builds a Graph on pool.
func New(pool *storage.Pool, opts Options) *Graph {
	if opts.TypeTTL <= 0 {
		opts.TypeTTL = DefaultTypeTTL
	}
	return &Graph{db: storage.New(pool), opts: opts}
}

func notFound(err error, format string, args ...any) error {
	if errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), remote.ErrNotFound)
	}
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), err)
}

// EntityBySlug returns the entity with that slug ("lxc:jellyfin").
func (g *Graph) EntityBySlug(ctx context.Context, slug string) (remote.Entity, error) {
	e, err := g.db.EntityBySlug(ctx, slug)
	if err != nil {
		return remote.Entity{}, notFound(err, "entity %s", slug)
	}
	return e, nil
}

// EntityByID returns the entity with that id.
func (g *Graph) EntityByID(ctx context.Context, id string) (remote.Entity, error) {
	if _, err := uuid.Parse(id); err != nil {
		return remote.Entity{}, fmt.Errorf("entity %q: not an id: %w", id, remote.ErrNotFound)
	}
	e, err := g.db.EntityByID(ctx, id)
	if err != nil {
		return remote.Entity{}, notFound(err, "entity %s", id)
	}
	return e, nil
}

// EntityByName finds the entity called name whose type is one of types or descends from
// one of them. A destroyed entity is returned only when no live one has that name; two
// live ones of different types are ambiguous and refused rather than guessed.
func (g *Graph) EntityByName(ctx context.Context, types []string, name string) (remote.Entity, error) {
	found, err := g.db.EntitiesByName(ctx, types, name)
	if err != nil {
		return remote.Entity{}, fmt.Errorf("entity named %q (%v): %w", name, types, err)
	}
	return pickNamed(types, name, found)
}

// hit is a candidate entity and whether it is destroyed.
type hit = storage.Hit

// pickNamed chooses among up to two candidates ordered live first: none is not found, a
// second live one is ambiguous.
func pickNamed(types []string, name string, found []hit) (remote.Entity, error) {
	switch {
	case len(found) == 0:
		return remote.Entity{}, fmt.Errorf("entity named %q of type %v: %w", name, types, remote.ErrNotFound)
	case len(found) > 1 && !found[1].Destroyed:
		return remote.Entity{}, fmt.Errorf("entity named %q of type %v is ambiguous (%s, %s): name it by its full slug",
			name, types, found[0].Entity.Slug, found[1].Entity.Slug)
	}
	return found[0].Entity, nil
}

// HostOf follows the current `hosts` edge backwards from a guest to its Proxmox host.
func (g *Graph) HostOf(ctx context.Context, guestID string) (remote.Entity, error) {
	e, err := g.db.HostOf(ctx, guestID)
	if err != nil {
		return remote.Entity{}, notFound(err, "hosts edge into %s", guestID)
	}
	return e, nil
}

// Lookup returns the entity named by a slug or an id.
func (g *Graph) Lookup(ctx context.Context, slugOrID string) (remote.Entity, error) {
	if _, err := uuid.Parse(slugOrID); err == nil {
		return g.EntityByID(ctx, slugOrID)
	}
	return g.EntityBySlug(ctx, slugOrID)
}

// Resolve looks up the entity named by slugOrID and turns it into a Target (docs/behaviours.md S2).
// A missing entity or a missing fact is a *remote.ResolutionError (errors.Is
// remote.ErrResolution), logged as a configuration problem; a failed query is returned as
// is, so a broken config is never mistaken for an outage (S8).
//
// The entity and every candidate owning host (by `host` attribute, as slug or as name, and
// by `hosts` edge) are read in one query, so resolving a guest costs one round trip; the
// rules that choose among them stay in remote.Resolver.
func (g *Graph) Resolve(ctx context.Context, slugOrID string) (remote.Target, remote.Entity, error) {
	view, err := g.prefetch(ctx, slugOrID)
	if errors.Is(err, remote.ErrNotFound) {
		rerr := &remote.ResolutionError{Entity: slugOrID, Reason: "no such entity in the graph", Err: remote.ErrNotFound}
		g.opts.Logger.Warn().Err(rerr).Str("entity", slugOrID).
			Msg("target resolution failed: the graph is missing a fact (configuration problem, not an outage)")
		return remote.Target{}, remote.Entity{}, rerr
	}
	if err != nil {
		return remote.Target{}, remote.Entity{}, fmt.Errorf("resolve %s: %w", slugOrID, err)
	}
	e := view.self
	isA, err := g.isA(ctx)
	if err != nil {
		return remote.Target{}, e, fmt.Errorf("resolve %s: read entity types: %w", e.Slug, err)
	}
	r := remote.Resolver{Graph: view, IsA: isA, Logger: g.opts.Logger, GuestExecTimeout: g.opts.GuestExecTimeout}
	t, err := r.Resolve(ctx, e)
	if err != nil {
		return remote.Target{}, e, err
	}
	return t, e, nil
}

// RunsOn lists what the entity with id runs on, following current runs-on edges
// transitively (at most eight hops), nearest first; destroyed entities are skipped.
func (g *Graph) RunsOn(ctx context.Context, id string) ([]string, error) {
	return g.db.RunsOn(ctx, id)
}

// ResolveRunsOn finds where a command about the entity slugOrID runs: on the entity itself
// when it is a machine or a guest, else on the nearest entity it runs on (a service on an
// LXC, a container on a docker host on an LXC) that is — the host fallback through the
// graph of S1. Errors are Resolve's; when nothing along the runs-on edges can run a
// command either, the resolution error says what was tried.
func (g *Graph) ResolveRunsOn(ctx context.Context, slugOrID string) (remote.Target, error) {
	t, e, err := g.Resolve(ctx, slugOrID)
	if err == nil || !errors.Is(err, remote.ErrResolution) || e.ID == "" {
		return t, err
	}
	chain, qerr := g.RunsOn(ctx, e.ID)
	if qerr != nil {
		return remote.Target{}, fmt.Errorf("%w; and following its runs-on edges failed: %w", err, qerr)
	}
	if len(chain) == 0 {
		return remote.Target{}, err
	}
	for _, slug := range chain {
		t, _, err = g.Resolve(ctx, slug)
		if err == nil || !errors.Is(err, remote.ErrResolution) {
			return t, err
		}
	}
	return remote.Target{}, fmt.Errorf("%s runs on %s, none of which can run a command: %w", e.Slug, strings.Join(chain, " → "), err)
}

// prefetch reads the entity and its host candidates; ErrNotFound when there is no entity.
func (g *Graph) prefetch(ctx context.Context, slugOrID string) (*view, error) {
	_, perr := uuid.Parse(slugOrID)
	rows, err := g.db.Prefetch(ctx, perr == nil, slugOrID)
	if err != nil {
		return nil, err
	}
	v := &view{g: g, bySlug: map[string]remote.Entity{}}
	found := false
	for _, h := range rows {
		switch h.Role {
		case "self":
			v.self, found = h.Entity, true
		case "edge":
			e := h.Entity
			v.edge = &e
		case "slug":
			v.bySlug[h.Entity.Slug] = h.Entity
		case "name":
			v.named = append(v.named, h.Hit)
		}
	}
	if !found {
		return nil, fmt.Errorf("entity %s: %w", slugOrID, remote.ErrNotFound)
	}
	v.hostAttr, _ = v.self.Attributes["host"].(string)
	return v, nil
}

// view is a remote.Graph that answers the resolver's questions about one entity from what
// prefetch read, and anything else from the database.
type view struct {
	g        *Graph
	self     remote.Entity
	edge     *remote.Entity
	bySlug   map[string]remote.Entity
	hostAttr string
	named    []hit
}

// EntityBySlug answers from the prefetched `host` slug, else the database.
func (v *view) EntityBySlug(ctx context.Context, slug string) (remote.Entity, error) {
	if e, ok := v.bySlug[slug]; ok {
		return e, nil
	}
	return v.g.EntityBySlug(ctx, slug)
}

// EntityByName answers the owning-host question from the prefetched candidates, else the
// database.
func (v *view) EntityByName(ctx context.Context, types []string, name string) (remote.Entity, error) {
	if v.hostAttr != "" && name == v.hostAttr && len(types) == 1 && types[0] == "proxmox-host" {
		return pickNamed(types, name, v.named)
	}
	return v.g.EntityByName(ctx, types, name)
}

// HostOf answers for the prefetched entity from its edge, else the database.
func (v *view) HostOf(ctx context.Context, guestID string) (remote.Entity, error) {
	if guestID == v.self.ID {
		if v.edge == nil {
			return remote.Entity{}, fmt.Errorf("hosts edge into %s: %w", guestID, remote.ErrNotFound)
		}
		return *v.edge, nil
	}
	return v.g.HostOf(ctx, guestID)
}

// isA returns the is-a test over the type tree, reading entity_types when the cached copy is
// older than TypeTTL.
func (g *Graph) isA(ctx context.Context) (func(typ, ancestor string) bool, error) {
	g.mu.Lock()
	parents, fresh := g.parents, time.Since(g.loadedAt) < g.opts.TypeTTL
	g.mu.Unlock()
	if parents == nil || !fresh {
		next, err := g.db.TypeParents(ctx)
		if err != nil {
			return nil, err
		}
		g.mu.Lock()
		g.parents, g.loadedAt = next, time.Now()
		g.mu.Unlock()
		parents = next
	}
	return func(typ, ancestor string) bool { return IsA(parents, typ, ancestor) }, nil
}

// IsA walks parents (type → parent type) up from typ and reports whether it meets ancestor.
// A cycle, which the ontology parser forbids, ends the walk instead of looping.
func IsA(parents map[string]string, typ, ancestor string) bool {
	for i := 0; typ != "" && i <= len(parents); i++ {
		if typ == ancestor {
			return true
		}
		typ = parents[typ]
	}
	return false
}

// Cluster is a Proxmox cluster a machine is a member of, with its live members.
type Cluster = storage.ClusterPeers

// ClustersOf reads the clusters the machine hostSlug is a member of (member-of edges to a
// cluster entity), each with its live members, the machine included; none when it is in no
// cluster. A check that finds its guest gone from its node asks these members where it went.
func (g *Graph) ClustersOf(ctx context.Context, hostSlug string) ([]Cluster, error) {
	return g.db.ClusterPeersOf(ctx, hostSlug)
}
