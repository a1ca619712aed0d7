package tools

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/oikos-hq/oikos/agent/internal/apiclient"

	api "github.com/oikos-hq/oikos/shared/apiclient"
)

type refIn struct {
	Ref string `json:"ref" jsonschema:"entity slug or id, e.g. lxc:jellyfin"`
}

type listEntitiesIn struct {
	Type   string `json:"type,omitempty" jsonschema:"entity types, comma-separated"`
	State  string `json:"state,omitempty"`
	Health string `json:"health,omitempty" jsonschema:"up, degraded, down, unknown; comma-separated"`
	Q      string `json:"q,omitempty" jsonschema:"text in slug or name"`
	Limit  int    `json:"limit,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

type createEntityIn struct {
	Type       string         `json:"type"`
	Name       string         `json:"name"`
	State      string         `json:"state,omitempty"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

type attrsIn struct {
	Ref        string         `json:"ref" jsonschema:"entity slug or id"`
	Attributes map[string]any `json:"attributes" jsonschema:"facts to merge; null removes one"`
}

type stateIn struct {
	Ref   string `json:"ref"`
	State string `json:"state" jsonschema:"a lifecycle state of the entity's type"`
}

type relIn struct {
	Source string `json:"source" jsonschema:"entity slug"`
	Target string `json:"target" jsonschema:"entity slug"`
	Type   string `json:"type" jsonschema:"depends-on, hosts, provides, runs-on, ... (see the ontology)"`
}

type endRelIn struct {
	ID string `json:"id" jsonschema:"relationship id"`
}

type relationsIn struct {
	Ref       string `json:"ref"`
	Types     string `json:"types,omitempty" jsonschema:"relationship types to keep, comma-separated"`
	Direction string `json:"direction,omitempty"`
}

type blastIn struct {
	Ref   string `json:"ref"`
	Depth int    `json:"depth,omitempty"`
}

type listLXCsIn struct {
	Health string `json:"health,omitempty" jsonschema:"up, degraded, down, unknown; comma-separated"`
	Q      string `json:"q,omitempty"`
}

// get is a read tool that passes the api's answer on.
func get(ctx context.Context, c *Call, path string, q map[string]string) Result {
	v := query()
	for k, val := range q {
		if val != "" {
			v.Set(k, val)
		}
	}
	raw, err := c.deps.API.Get(ctx, c.Token, c.Session.ID, path, v, nil)
	if err != nil {
		return apiError(err)
	}
	return Result{Data: raw}
}

// pass is a tool that passes the api's answer to one call of the generated client on:
// pass(c)(c.api().Op(ctx, ..., c.as()...)).
func pass(c *Call) func(*http.Response, error) Result {
	return func(resp *http.Response, err error) Result {
		raw, err := apiclient.Raw(resp, err)
		if err != nil {
			return apiError(err)
		}
		return Result{Data: raw}
	}
}

// api is the generated client of the api; give each call c.as().
func (c *Call) api() *api.Client { return c.deps.API.API() }

func itoa(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func graphTools() []*Tool {
	write := Hints{Idempotent: true}
	return []*Tool{
		def("get_entity", "Get one entity of the graph: type, state, attributes and current health.",
			Hints{ReadOnly: true, Idempotent: true}, "entity", nil,
			func(ctx context.Context, c *Call, in refIn) Result {
				return pass(c)(c.api().GetEntity(ctx, in.Ref, c.as()...))
			}),
		def("list_entities", "List graph entities filtered by type, state, health or text, paginated.",
			Hints{ReadOnly: true, Idempotent: true}, "entity_list",
			func(s *jsonschema.Schema) { bounds(s, "limit", 1, 500) },
			func(ctx context.Context, c *Call, in listEntitiesIn) Result {
				return pass(c)(c.api().ListEntities(ctx, &api.ListEntitiesParams{Type: api.Opt(in.Type), State: api.Opt(in.State),
					Health: api.Opt(in.Health), Q: api.Opt(in.Q), Limit: api.Opt(in.Limit), Cursor: api.Opt(in.Cursor)}, c.as()...))
			}),
		def("list_lxcs", "List every LXC with its health and when it was last audited.",
			Hints{ReadOnly: true, Idempotent: true}, "entity_list", nil,
			func(ctx context.Context, c *Call, in listLXCsIn) Result {
				return pass(c)(c.api().ListEntities(ctx, &api.ListEntitiesParams{Type: api.Ptr("lxc"), With: api.Ptr("last_audited"),
					Health: api.Opt(in.Health), Q: api.Opt(in.Q), Limit: api.Ptr(500)}, c.as()...))
			}),
		def("create_entity", "Create a graph entity (a discovered service, host or guest) of an ontology type.",
			Hints{}, "entity", nil,
			func(ctx context.Context, c *Call, in createEntityIn) Result {
				r := pass(c)(c.api().CreateEntityWithBody(ctx, nil, api.ContentJSON, api.JSONBody(in), c.as()...))
				r.Entity = slugOf(r)
				return r
			}),
		def("update_entity_attributes", "Merge discovered facts into an entity's attributes (an IP, a version, a port).",
			write, "entity", nil,
			func(ctx context.Context, c *Call, in attrsIn) Result {
				return pass(c)(c.api().PatchEntityWithBody(ctx, in.Ref, nil, api.ContentJSON, api.JSONBody(map[string]any{"attributes": in.Attributes}), c.as()...))
			}),
		def("set_entity_state", "Set an entity's lifecycle state (e.g. running, stopped, retired) by the ontology's transitions.",
			write, "entity", nil,
			func(ctx context.Context, c *Call, in stateIn) Result {
				return pass(c)(c.api().SetEntityState(ctx, in.Ref, nil, api.SetState{State: in.State}, c.as()...))
			}),
		def("create_relationship", "Record an edge between two entities (depends-on, hosts, provides, ...); idempotent.",
			write, "relationship", nil,
			func(ctx context.Context, c *Call, in relIn) Result {
				return pass(c)(c.api().CreateRelationshipWithBody(ctx, api.ContentJSON, api.JSONBody(in), c.as()...))
			}),
		def("end_relationship", "End a relationship that no longer holds, by its id; history is kept.",
			write, "relationship", nil,
			func(ctx context.Context, c *Call, in endRelIn) Result {
				return pass(c)(c.api().EndRelationship(ctx, in.ID, c.as()...))
			}),
		def("get_relations", "Get an entity's relationships, optionally only some types (types=hosts,depends-on).",
			Hints{ReadOnly: true, Idempotent: true}, "relations",
			func(s *jsonschema.Schema) { enum(s, "direction", "out", "in", "both") },
			func(ctx context.Context, c *Call, in relationsIn) Result {
				return pass(c)(c.api().ListRelations(ctx, in.Ref, &api.ListRelationsParams{Types: api.Opt(in.Types),
					Direction: api.Opt(api.ListRelationsParamsDirection(in.Direction))}, c.as()...))
			}),
		def("get_blast_radius", "Get what breaks if an entity fails: its dependents, transitively.",
			Hints{ReadOnly: true, Idempotent: true}, "blast_radius",
			func(s *jsonschema.Schema) { bounds(s, "depth", 1, 10) },
			func(ctx context.Context, c *Call, in blastIn) Result {
				return pass(c)(c.api().BlastRadius(ctx, in.Ref, &api.BlastRadiusParams{Depth: api.Opt(in.Depth)}, c.as()...))
			}),
	}
}

// slugOf reads the slug of an entity answer (for the activity row).
func slugOf(r Result) string {
	raw, ok := r.Data.(json.RawMessage)
	if !ok || r.IsError {
		return ""
	}
	var e struct {
		Slug string `json:"slug"`
	}
	_ = json.Unmarshal(raw, &e)
	return e.Slug
}
