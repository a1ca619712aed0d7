package tools

import (
	"context"
	"strings"
	"unicode"

	"github.com/google/jsonschema-go/jsonschema"

	api "github.com/oikos-hq/oikos/shared/apiclient"
)

type searchIn struct {
	Query string `json:"query" jsonschema:"words to search for"`
	Kind  string `json:"kind,omitempty" jsonschema:"document, investigation or runbook"`
}

type slugIn struct {
	Slug string `json:"slug" jsonschema:"knowledge slug, e.g. runbook:restart-jellyfin"`
}

type upsertIn struct {
	Title   string   `json:"title"`
	Content string   `json:"content" jsonschema:"markdown"`
	About   string   `json:"about,omitempty" jsonschema:"slug of the entity it is about"`
	Kind    string   `json:"kind,omitempty" jsonschema:"document (default), investigation or runbook"`
	Tags    []string `json:"tags,omitempty"`
}

type auditIn struct {
	StuckAfter string `json:"stuck_after,omitempty" jsonschema:"how long a probe may be silent, e.g. 2h or 7d"`
}

type driftIn struct {
	Refresh bool `json:"refresh,omitempty" jsonschema:"run discovery now instead of reading the latest report"`
}

func knowledgeTools() []*Tool {
	return []*Tool{
		def("search_knowledge", "Search the knowledge base (documents, investigations, runbooks) by full text.",
			Hints{ReadOnly: true, Idempotent: true}, "knowledge_list",
			func(s *jsonschema.Schema) {
				maxLen(s, "query", 500)
				enum(s, "kind", "document", "investigation", "runbook")
			},
			func(ctx context.Context, c *Call, in searchIn) Result {
				return pass(c)(c.api().SearchKnowledge(ctx, &api.SearchKnowledgeParams{Q: in.Query, Kind: api.Opt(in.Kind), Limit: api.Ptr(10)}, c.as()...))
			}),
		def("get_entity_knowledge", "List the knowledge entries about an entity (linked by about edges).",
			Hints{ReadOnly: true, Idempotent: true}, "knowledge_list", nil,
			func(ctx context.Context, c *Call, in refIn) Result {
				return pass(c)(c.api().EntityKnowledge(ctx, in.Ref, nil, c.as()...))
			}),
		def("get_knowledge_content", "Read one knowledge entry's full markdown by its slug.",
			Hints{ReadOnly: true, Idempotent: true}, "knowledge", nil,
			func(ctx context.Context, c *Call, in slugIn) Result {
				return pass(c)(c.api().GetKnowledge(ctx, in.Slug, c.as()...))
			}),
		def("upsert_knowledge", "Write back what you learned as a knowledge entry, linked to the entity it is about.",
			Hints{Idempotent: true}, "knowledge",
			func(s *jsonschema.Schema) {
				enum(s, "kind", "document", "investigation", "runbook")
				maxLen(s, "title", 200)
				maxLen(s, "content", 48<<10)
			},
			func(ctx context.Context, c *Call, in upsertIn) Result {
				kind := in.Kind
				if kind == "" {
					kind = "document"
				}
				name := slugify(in.Title)
				if name == "" {
					return Errorf("upsert_knowledge: the title needs letters or digits")
				}
				body := map[string]any{"kind": kind, "title": in.Title, "body": in.Content}
				if in.About != "" {
					body["about"] = in.About
				}
				if len(in.Tags) > 0 {
					body["tags"] = in.Tags
				}
				r := pass(c)(c.api().UpsertKnowledgeWithBody(ctx, kind+":"+name, api.ContentJSON, api.JSONBody(body), c.as()...))
				r.Entity = in.About
				return r
			}),
		def("audit_knowledge_graph", "Audit the graph for orphans, stale probes, unmonitored types and dangling edges.",
			Hints{ReadOnly: true, Idempotent: true}, "graph_audit", nil,
			func(ctx context.Context, c *Call, in auditIn) Result {
				return pass(c)(c.api().GraphAudit(ctx, &api.GraphAuditParams{StuckAfter: api.Opt(in.StuckAfter)}, c.as()...))
			}),
		def("discover_infra_drift", "Compare the Proxmox hosts' real guests (pct list, qm list) with the graph.",
			Hints{ReadOnly: true, Idempotent: true, OpenWorld: true}, "drift", nil,
			func(ctx context.Context, c *Call, in driftIn) Result {
				return pass(c)(c.api().DriftReport(ctx, &api.DriftReportParams{Refresh: api.Opt(in.Refresh)}, c.as()...))
			}),
	}
}

// slugify makes a knowledge name from a title: lower case, words joined by dashes, at most
// 80 characters; re-using a title updates its entry in place.
func slugify(title string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(title) {
		switch {
		case r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			b.WriteRune(r)
			dash = false
		case b.Len() > 0 && !dash:
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 80 {
			break
		}
	}
	return strings.Trim(b.String(), "-")
}
