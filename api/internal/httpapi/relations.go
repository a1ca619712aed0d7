package httpapi

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/ids"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/readmodel"
	"github.com/oikos-hq/oikos/api/internal/topology"
)

// createRelationshipBody is the body of POST /relationships; source and target are slugs
// or ids.
type createRelationshipBody struct {
	Type       string         `json:"type"`
	Source     string         `json:"source"`
	Target     string         `json:"target"`
	Attributes map[string]any `json:"attributes"`
}

// createRelationship answers 201 for a new edge and 200 when the same current edge existed
// (creation is idempotent: one current edge per source, type and target).
func (s *Server) createRelationship(c echo.Context) error {
	var b createRelationshipBody
	if err := request.DecodeJSON(c, &b); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"type", b.Type}, {"source", b.Source}, {"target", b.Target}} {
		if f.v == "" {
			return request.Unprocessable(f.name, "%s is required", f.name)
		}
	}
	rel, created, err := s.deps.Graph.CreateRelationship(c.Request().Context(), meta(c), b.Type, b.Source, b.Target, b.Attributes)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, rel)
}

func (s *Server) endRelationship(c echo.Context) error {
	id, err := request.Param(c, "id")
	if err != nil {
		return err
	}
	if !ids.IsUUID(id) {
		return request.Unprocessable("id", "relationship id must be a uuid")
	}
	rel, err := s.deps.Graph.EndRelationship(c.Request().Context(), meta(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rel)
}

var directions = []string{readmodel.DirectionOut, readmodel.DirectionIn, readmodel.DirectionBoth}

func (s *Server) listRelations(c echo.Context) error {
	ref, limit, after, err := refPage(c)
	if err != nil {
		return err
	}
	f := readmodel.RelationsFilter{Types: request.ListParam(c, "types"), Direction: c.QueryParam("direction"), Limit: limit, After: after}
	if f.Direction == "" {
		f.Direction = readmodel.DirectionBoth
	}
	if err := request.OneOf("direction", []string{f.Direction}, directions); err != nil {
		return err
	}
	if err := s.checkRelTypes("types", f.Types); err != nil {
		return err
	}
	if f.IncludeEnded, err = request.BoolParam(c, "include_ended"); err != nil {
		return err
	}
	if after != "" && !ids.IsUUID(after) {
		return request.BadRequest("cursor", "malformed cursor")
	}
	id, err := s.reader.ResolveID(c.Request().Context(), ref)
	if err != nil {
		return err
	}
	p, err := s.reader.Relations(c.Request().Context(), id, f)
	return answerPage(c, p, err)
}

// checkRelTypes refuses relationship type names the ontology does not declare, so a typo
// in a filter is an error rather than an empty answer.
func (s *Server) checkRelTypes(field string, names []string) error {
	o := s.ontology()
	for _, n := range names {
		if _, ok := o.RelationshipType(n); !ok {
			return request.Unprocessable(field, "unknown relationship type %q", n)
		}
	}
	return nil
}

// Graph view bounds.
const (
	defaultGraphNodes = 2000
	maxGraphNodes     = 20000
)

func (s *Server) graphView(c echo.Context) error {
	types, err := s.reader.ExpandTypes("types", request.ListParam(c, "types"))
	if err != nil {
		return err
	}
	f := readmodel.GraphFilter{Types: types, RelTypes: request.ListParam(c, "rel_types")}
	if err := s.checkRelTypes("rel_types", f.RelTypes); err != nil {
		return err
	}
	if f.IncludeDestroyed, err = request.BoolParam(c, "include_destroyed"); err != nil {
		return err
	}
	n, err := request.IntParam(c, "limit", defaultGraphNodes, 1, maxGraphNodes)
	if err != nil {
		return err
	}
	f.Limit = int(n)
	g, err := s.reader.GraphView(c.Request().Context(), f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, g)
}

// Blast radius depth bounds.
const (
	defaultBlastDepth = 3
	maxBlastDepth     = 10
)

// blastRadiusAnswer is the answer of GET /entities/{ref}/blast-radius.
type blastRadiusAnswer struct {
	Root  storage.Entity       `json:"root"`
	Depth int                  `json:"depth"`
	Items []readmodel.Affected `json:"items"`
	// Forward and Reverse name the edge types walked (see readmodel.BlastForward).
	Forward []string `json:"dependency_edges"`
	Reverse []string `json:"reverse_dependency_edges"`
}

func (s *Server) blastRadius(c echo.Context) error {
	ref, err := request.Param(c, "ref")
	if err != nil {
		return err
	}
	depth, err := request.IntParam(c, "depth", defaultBlastDepth, 1, maxBlastDepth)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if root, items, ok, err := s.blastFast(ctx, ref, int(depth)); err != nil {
		return err
	} else if ok {
		return c.JSON(http.StatusOK, blastRadiusAnswer{Root: root, Depth: int(depth), Items: items,
			Forward: readmodel.BlastForward, Reverse: readmodel.BlastReverse})
	}
	root, err := s.reader.GetEntity(ctx, ref)
	if err != nil {
		return err
	}
	s.rootIDs.remember(ref, root)
	items, err := s.blastItems(ctx, root.ID, int(depth))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, blastRadiusAnswer{Root: root, Depth: int(depth), Items: items,
		Forward: readmodel.BlastForward, Reverse: readmodel.BlastReverse})
}

// blastFast answers a blast radius in one round trip when the root's id is known (an id,
// or a slug resolved by an earlier request: entities are never renamed and ids never
// reused) and the in-memory walk is current: the root, the topology version and the
// affected rows are read together. ok is false whenever any of that does not hold, and the
// caller takes the ordinary path, which also answers 404.
func (s *Server) blastFast(ctx context.Context, ref string, depth int) (storage.Entity, []readmodel.Affected, bool, error) {
	if s.topo == nil {
		return storage.Entity{}, nil, false, nil
	}
	id, known := s.rootIDs.lookup(ref)
	if !known {
		return storage.Entity{}, nil, false, nil
	}
	r, ok := s.topo.Walk(id, depth)
	if !ok {
		return storage.Entity{}, nil, false, nil
	}
	root, found, items, version, err := s.reader.RootAndAffected(ctx, id, r.IDs, r.Depths)
	if err != nil {
		return storage.Entity{}, nil, false, err
	}
	if !found || (root.ID != ref && root.Slug != ref) || version > r.Changes {
		return storage.Entity{}, nil, false, nil
	}
	return root, items, true, nil
}

// rootIDCache remembers the ids of the slugs blast radii were asked for. It is only a
// hint: blastFast checks the row it reads against the slug, so a stale entry costs a round
// trip, never a wrong answer. Bounded: it starts over when full.
type rootIDCache struct {
	mu  sync.RWMutex
	ids map[string]string
}

// maxRootIDs bounds the cache (an entry is two short strings).
const maxRootIDs = 100_000

func (c *rootIDCache) lookup(ref string) (string, bool) {
	if ids.IsUUID(ref) {
		return ref, true
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	id, ok := c.ids[ref]
	return id, ok
}

func (c *rootIDCache) remember(ref string, e storage.Entity) {
	if ids.IsUUID(ref) || e.Slug != ref {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil || len(c.ids) >= maxRootIDs {
		c.ids = make(map[string]string)
	}
	c.ids[ref] = e.ID
}

// blastItems walks the radius in the in-memory topology index and reads the entities it
// reached in one round trip, which also reads the topology version: when that shows a
// relationship change the walk did not include, the index catches up and the walk is
// redone. Without an index, or while the graph is too large for one, the recursive query
// walks. Both answer the same items in the same order.
func (s *Server) blastItems(ctx context.Context, rootID string, depth int) ([]readmodel.Affected, error) {
	if s.topo == nil {
		return s.reader.BlastRadius(ctx, rootID, depth)
	}
	if r, ok := s.topo.Walk(rootID, depth); ok {
		items, version, err := s.reader.AffectedEntities(ctx, r.IDs, r.Depths)
		if err != nil {
			return nil, err
		}
		if version <= r.Changes {
			return items, nil
		}
	}
	r, err := s.topo.Dependents(ctx, rootID, depth)
	if errors.Is(err, topology.ErrTooLarge) {
		return s.reader.BlastRadius(ctx, rootID, depth)
	}
	if err != nil {
		return nil, err
	}
	items, _, err := s.reader.AffectedEntities(ctx, r.IDs, r.Depths)
	return items, err
}

// newTopology builds the blast-radius index over the pool (nil without one). It reads
// nothing until the first blast radius.
func newTopology(d Deps, log zerolog.Logger) *topology.Index {
	if d.Pool == nil {
		return nil
	}
	x, err := topology.New(topology.Options{Pool: d.Pool, Forward: readmodel.BlastForward, Reverse: readmodel.BlastReverse,
		Logger: log, Metrics: d.Health.Metrics})
	if err != nil {
		// Only a missing pool or empty edge lists fail, both excluded above.
		log.Error().Err(err).Msg("topology index unavailable; blast radius walks in SQL")
		return nil
	}
	return x
}
