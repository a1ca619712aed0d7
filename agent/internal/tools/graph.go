package tools

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/oikos-hq/oikos/agent/internal/apiclient"
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

func entityPath(ref string, rest ...string) string {
	p := "/api/v1/entities/" + apiclient.PathEscape(ref)
	for _, r := range rest {
		p += "/" + r
	}
	return p
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

// send is a write tool that passes the api's answer on.
func send(ctx context.Context, c *Call, method, path string, body any) Result {
	raw, err := c.deps.API.Send(ctx, method, c.Token, c.Session.ID, path, body, nil)
	if err != nil {
		return apiError(err)
	}
	return Result{Data: raw}
}

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
			func(ctx context.Context, c *Call, in refIn) Result { return get(ctx, c, entityPath(in.Ref), nil) }),
		def("list_entities", "List graph entities filtered by type, state, health or text, paginated.",
			Hints{ReadOnly: true, Idempotent: true}, "entity_list",
			func(s *jsonschema.Schema) { bounds(s, "limit", 1, 500) },
			func(ctx context.Context, c *Call, in listEntitiesIn) Result {
				return get(ctx, c, "/api/v1/entities", map[string]string{"type": in.Type, "state": in.State, "health": in.Health,
					"q": in.Q, "limit": itoa(in.Limit), "cursor": in.Cursor})
			}),
		def("list_lxcs", "List every LXC with its health and when it was last audited.",
			Hints{ReadOnly: true, Idempotent: true}, "entity_list", nil,
			func(ctx context.Context, c *Call, in listLXCsIn) Result {
				return get(ctx, c, "/api/v1/entities", map[string]string{"type": "lxc", "with": "last_audited", "health": in.Health,
					"q": in.Q, "limit": "500"})
			}),
		def("create_entity", "Create a graph entity (a discovered service, host or guest) of an ontology type.",
			Hints{}, "entity", nil,
			func(ctx context.Context, c *Call, in createEntityIn) Result {
				r := send(ctx, c, http.MethodPost, "/api/v1/entities", in)
				r.Entity = slugOf(r)
				return r
			}),
		def("update_entity_attributes", "Merge discovered facts into an entity's attributes (an IP, a version, a port).",
			write, "entity", nil,
			func(ctx context.Context, c *Call, in attrsIn) Result {
				return send(ctx, c, http.MethodPatch, entityPath(in.Ref), map[string]any{"attributes": in.Attributes})
			}),
		def("set_entity_state", "Set an entity's lifecycle state (e.g. running, stopped, retired) by the ontology's transitions.",
			write, "entity", nil,
			func(ctx context.Context, c *Call, in stateIn) Result {
				return send(ctx, c, http.MethodPost, entityPath(in.Ref, "state"), map[string]any{"state": in.State})
			}),
		def("create_relationship", "Record an edge between two entities (depends-on, hosts, provides, ...); idempotent.",
			write, "relationship", nil,
			func(ctx context.Context, c *Call, in relIn) Result {
				return send(ctx, c, http.MethodPost, "/api/v1/relationships", in)
			}),
		def("end_relationship", "End a relationship that no longer holds, by its id; history is kept.",
			write, "relationship", nil,
			func(ctx context.Context, c *Call, in endRelIn) Result {
				return send(ctx, c, http.MethodPost, "/api/v1/relationships/"+apiclient.PathEscape(in.ID)+"/end", map[string]any{})
			}),
		def("get_relations", "Get an entity's relationships, optionally only some types (types=hosts,depends-on).",
			Hints{ReadOnly: true, Idempotent: true}, "relations",
			func(s *jsonschema.Schema) { enum(s, "direction", "out", "in", "both") },
			func(ctx context.Context, c *Call, in relationsIn) Result {
				return get(ctx, c, entityPath(in.Ref, "relations"), map[string]string{"types": in.Types, "direction": in.Direction})
			}),
		def("get_blast_radius", "Get what breaks if an entity fails: its dependents, transitively.",
			Hints{ReadOnly: true, Idempotent: true}, "blast_radius",
			func(s *jsonschema.Schema) { bounds(s, "depth", 1, 10) },
			func(ctx context.Context, c *Call, in blastIn) Result {
				return get(ctx, c, entityPath(in.Ref, "blast-radius"), map[string]string{"depth": itoa(in.Depth)})
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
