// Package readmodel holds the api's read queries, below the storage layer's root
// (api/internal/storage): entity lists and filters, relations, the graph, blast radius and
// the topology index's reads, event timelines, the audit log, knowledge search, the health
// summary, signals, the graph audit, metric series and trends, drift reports, the fleet
// export and the seed's comparison. Each is a named method over registered statements
// (queries.go; its test prepares each against the migrated schema), so every read the HTTP
// handlers and the agent's tools make is in one place; entities, relationships and knowledge
// are read with api/internal/storage's columns and scanners, the ones the graph's mutation
// path uses too (docs/adr/0007-store-layer.md).
//
// Errors are the api's sentinels (api/internal/apierr): an unknown entity is ErrNotFound, a
// bad filter value an *apierr.FieldError naming the parameter.
//
// Nothing here writes. Writes of the graph (entities, relationships, knowledge) belong to
// api/internal/graph (its SQL in api/internal/storage/graphstore), and signal changes (the scheduler's raises and resolutions, an
// operator's decisions) to shared/signals; each validates, audits and emits its events in one
// transaction.
//
// Lists page by keyset on a unique key (slug for entities, id for everything else), never by
// offset and never on a non-unique column: a non-unique sort key drops and repeats rows at
// page boundaries (the original's ListExecutions did exactly that).
package readmodel

import (
	"context"
	"fmt"
	"strings"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/pg"
)

// Reader runs the read queries.
type Reader struct {
	db      pg.Querier
	ontFunc func() *ontology.Ontology
}

// New returns a Reader over db (normally the pool). ont returns the current ontology, which
// resolves type filters through is-a; it is a function because the graph service may swap
// the ontology after a seed ingest. It may be nil for a reader that never filters by type
// (the metrics routes').
func New(db pg.Querier, ont func() *ontology.Ontology) *Reader { return &Reader{db: db, ontFunc: ont} }

func (r *Reader) ont() *ontology.Ontology { return r.ontFunc() }

// Page is one page of a keyset-paginated list. Next is the sort key of the last item when
// more items follow, "" on the last page.
type Page[T any] struct {
	Items []T
	Next  string
}

// ResolveID returns the id of the entity ref names (slug or id).
func (r *Reader) ResolveID(ctx context.Context, ref string) (string, error) {
	e, err := storage.ResolveEntity(ctx, r.db, ref)
	return e.ID, err
}

// ResolveEntity returns the id and slug of the entity ref names (slug or id).
func (r *Reader) ResolveEntity(ctx context.Context, ref string) (storage.EntityRef, error) {
	return storage.ResolveEntity(ctx, r.db, ref)
}

// ExpandTypes resolves each named type to itself and its subtypes, so a filter on "guest"
// matches lxc and vm. An unknown type is an *apierr.FieldError on field.
func (r *Reader) ExpandTypes(field string, names []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		d := r.ont().Descendants(n)
		if d == nil {
			return nil, &apierr.FieldError{Field: field, Reason: fmt.Sprintf("unknown entity type %q", n)}
		}
		for _, t := range d {
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	return out, nil
}

// checkTypes is the check type and its subtypes: health rollups and the audit leave a
// check's own bookkeeping entity out, since health lands on what it monitors.
func (r *Reader) checkTypes() []string {
	if d := r.ont().Descendants("check"); d != nil {
		return d
	}
	return []string{"check"}
}

// Health states of entity_status.
var HealthStates = []string{"up", "degraded", "down", "unknown", "stale"}

// likePattern escapes LIKE wildcards so a text filter matches literally.
func likePattern(q string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(strings.ToLower(q)) + "%"
}

// args collects positional parameters while a query is built.
type args []any

// add appends v and returns its placeholder.
func (a *args) add(v any) string {
	*a = append(*a, v)
	return fmt.Sprintf("$%d", len(*a))
}
