package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/readmodel"
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
	if err := decodeJSON(c, &b); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"type", b.Type}, {"source", b.Source}, {"target", b.Target}} {
		if f.v == "" {
			return unprocessable(f.name, "%s is required", f.name)
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
	id, err := param(c, "id")
	if err != nil {
		return err
	}
	if !readmodel.IsUUID(id) {
		return unprocessable("id", "relationship id must be a uuid")
	}
	rel, err := s.deps.Graph.EndRelationship(c.Request().Context(), meta(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rel)
}

var directions = []string{readmodel.DirectionOut, readmodel.DirectionIn, readmodel.DirectionBoth}

func (s *Server) listRelations(c echo.Context) error {
	ref, err := param(c, "ref")
	if err != nil {
		return err
	}
	limit, after, err := page(c)
	if err != nil {
		return err
	}
	f := readmodel.RelationsFilter{Types: listParam(c, "types"), Direction: c.QueryParam("direction"), Limit: limit, After: after}
	if f.Direction == "" {
		f.Direction = readmodel.DirectionBoth
	}
	if err := oneOf("direction", []string{f.Direction}, directions); err != nil {
		return err
	}
	if err := s.checkRelTypes("types", f.Types); err != nil {
		return err
	}
	if f.IncludeEnded, err = boolParam(c, "include_ended"); err != nil {
		return err
	}
	if after != "" && !readmodel.IsUUID(after) {
		return badRequest("cursor", "malformed cursor")
	}
	id, err := s.reader.ResolveID(c.Request().Context(), ref)
	if err != nil {
		return err
	}
	p, err := s.reader.Relations(c.Request().Context(), id, f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listOf(p.Items, p.Next))
}

// checkRelTypes refuses relationship type names the ontology does not declare, so a typo
// in a filter is an error rather than an empty answer.
func (s *Server) checkRelTypes(field string, names []string) error {
	o := s.ontology()
	for _, n := range names {
		if _, ok := o.RelationshipType(n); !ok {
			return unprocessable(field, "unknown relationship type %q", n)
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
	types, err := s.reader.ExpandTypes("types", listParam(c, "types"))
	if err != nil {
		return err
	}
	f := readmodel.GraphFilter{Types: types, RelTypes: listParam(c, "rel_types")}
	if err := s.checkRelTypes("rel_types", f.RelTypes); err != nil {
		return err
	}
	if f.IncludeDestroyed, err = boolParam(c, "include_destroyed"); err != nil {
		return err
	}
	n, err := intParam(c, "limit", defaultGraphNodes, 1, maxGraphNodes)
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
	Root  readmodel.Entity     `json:"root"`
	Depth int                  `json:"depth"`
	Items []readmodel.Affected `json:"items"`
	// Forward and Reverse name the edge types walked (see readmodel.BlastForward).
	Forward []string `json:"dependency_edges"`
	Reverse []string `json:"reverse_dependency_edges"`
}

func (s *Server) blastRadius(c echo.Context) error {
	ref, err := param(c, "ref")
	if err != nil {
		return err
	}
	depth, err := intParam(c, "depth", defaultBlastDepth, 1, maxBlastDepth)
	if err != nil {
		return err
	}
	root, err := s.reader.GetEntity(c.Request().Context(), ref)
	if err != nil {
		return err
	}
	items, err := s.blastItems(c.Request().Context(), root.ID, int(depth))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, blastRadiusAnswer{Root: root, Depth: int(depth), Items: items,
		Forward: readmodel.BlastForward, Reverse: readmodel.BlastReverse})
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
