// Package readmodel holds the api's read queries: entity lists and filters, relations, the
// graph, blast radius, event timelines, the audit log, knowledge search, the health summary,
// signals and the graph audit. Each is a named method with parameterised SQL and explicit
// columns, so every read the REST handlers (and later the agent's tools) make is in one place.
//
// Writes of the graph (entities, relationships, knowledge) are not here: they belong to
// api/internal/graph, which validates, audits and emits events in one transaction. The one
// write in this package is the operator's decision on a signal (signals.go): the scheduler
// raises signals, the api only decides them.
//
// Lists page by keyset on a unique key (slug for entities, id for everything else), never by
// offset and never on a non-unique column: a non-unique sort key drops and repeats rows at
// page boundaries (the original's ListExecutions did exactly that).
package readmodel

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/pg"
)

// ErrNotFound is returned when the entity, document or signal asked for does not exist.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned when a signal is not in a state the decision applies to.
var ErrConflict = errors.New("conflict")

// FieldError says which request parameter is wrong and why; handlers answer 422 (or 400)
// naming Field.
type FieldError struct {
	Field  string
	Reason string
}

// Error implements error.
func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Reader runs the read queries.
type Reader struct {
	db      pg.Querier
	ontFunc func() *ontology.Ontology
}

// New returns a Reader over db (normally the pool). ont returns the current ontology, which
// resolves type filters through is-a; it is a function because the graph service may swap
// the ontology after a seed ingest.
func New(db pg.Querier, ont func() *ontology.Ontology) *Reader { return &Reader{db: db, ontFunc: ont} }

func (r *Reader) ont() *ontology.Ontology { return r.ontFunc() }

// Page is one page of a keyset-paginated list. Next is the sort key of the last item when
// more items follow, "" on the last page.
type Page[T any] struct {
	Items []T
	Next  string
}

// Entity is an entity as the api shows it: its row with its health from entity_status.
type Entity struct {
	ID         string         `json:"id"`
	Slug       string         `json:"slug"`
	Type       string         `json:"type"`
	Name       string         `json:"name"`
	State      string         `json:"state"`
	Attributes map[string]any `json:"attributes"`
	Version    int64          `json:"version"`
	CreatedAt  time.Time      `json:"created_at"`
	UpdatedAt  time.Time      `json:"updated_at"`
	// Health is from entity_status; "" when the entity has no status row (not monitored).
	Health       string     `json:"health"`
	HealthReason string     `json:"health_reason"`
	LastCheckAt  *time.Time `json:"last_check_at"`
}

// entityColumns matches scanEntity; e is entities, s is the LEFT JOINed entity_status.
const entityColumns = `e.id::text, e.slug, e.type, e.name, e.state, e.attributes, e.version, e.created_at, e.updated_at,
	coalesce(s.health, ''), coalesce(s.reason, ''), s.last_check_at`

func scanEntity(row pgx.Row) (Entity, error) {
	var e Entity
	err := row.Scan(&e.ID, &e.Slug, &e.Type, &e.Name, &e.State, &e.Attributes, &e.Version, &e.CreatedAt, &e.UpdatedAt,
		&e.Health, &e.HealthReason, &e.LastCheckAt)
	if e.Attributes == nil {
		e.Attributes = map[string]any{}
	}
	return e, err
}

var uuidRe = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// IsUUID reports whether ref is a uuid (an entity id) rather than a slug.
func IsUUID(ref string) bool { return uuidRe.MatchString(ref) }

// refCondition returns a WHERE fragment matching an entity by id or slug, with $n bound.
func refCondition(alias string, n int, ref string) string {
	if IsUUID(ref) {
		return fmt.Sprintf("%s.id = $%d::uuid", alias, n)
	}
	return fmt.Sprintf("%s.slug = $%d", alias, n)
}

// ResolveID returns the id of the entity ref names (slug or id).
func (r *Reader) ResolveID(ctx context.Context, ref string) (string, error) {
	var id string
	err := r.db.QueryRow(ctx, `SELECT e.id::text FROM entities e WHERE `+refCondition("e", 1, ref), ref).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("%w: entity %q", ErrNotFound, ref)
	}
	if err != nil {
		return "", fmt.Errorf("resolve entity %q: %w", ref, err)
	}
	return id, nil
}

// ExpandTypes resolves each named type to itself and its subtypes, so a filter on "guest"
// matches lxc and vm. An unknown type is a FieldError on field.
func (r *Reader) ExpandTypes(field string, names []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		d := r.ont().Descendants(n)
		if d == nil {
			return nil, &FieldError{Field: field, Reason: fmt.Sprintf("unknown entity type %q", n)}
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
