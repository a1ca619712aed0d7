package tools

import (
	"cmp"
	"context"
	"encoding/json"
	"sort"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/oikos-hq/oikos/agent/internal/apiclient"

	api "github.com/oikos-hq/oikos/shared/apiclient"
)

type healthIn struct {
	Health string `json:"health,omitempty" jsonschema:"only these health states, comma-separated (down,degraded)"`
}

type metricsIn struct {
	Ref   string `json:"ref"`
	Name  string `json:"name,omitempty" jsonschema:"metric, e.g. cpu_pct, mem_pct, disk_pct, latency_ms"`
	Since string `json:"since,omitempty" jsonschema:"how far back: 90m, 6h, 7d (default 1h)"`
	Step  string `json:"step,omitempty" jsonschema:"bucket width, e.g. 5m"`
}

type trendIn struct {
	Ref    string `json:"ref"`
	Name   string `json:"name" jsonschema:"metric, e.g. disk_pct"`
	Window string `json:"window,omitempty" jsonschema:"90m, 6h, 7d (default 24h)"`
}

type timelineIn struct {
	Ref   string `json:"ref,omitempty" jsonschema:"entity slug; omit for the whole fleet"`
	Types string `json:"types,omitempty" jsonschema:"event types, comma-separated"`
	Since string `json:"since,omitempty" jsonschema:"7d, 12h or RFC 3339 (whole fleet only)"`
	Limit int    `json:"limit,omitempty"`
}

type checksIn struct {
	Target string `json:"target,omitempty"`
	Kind   string `json:"kind,omitempty" jsonschema:"ssh-script, http, tcp, backup-freshness, proxmox-guest; comma-separated"`
	Health string `json:"health,omitempty"`
}

type noArgs struct{}

func observeTools() []*Tool {
	ro := Hints{ReadOnly: true, Idempotent: true}
	return []*Tool{
		def("get_health_summary", "Get fleet health: counts and each entity's health, optionally only some states.",
			ro, "health", nil,
			func(ctx context.Context, c *Call, in healthIn) Result {
				return pass(c)(c.api().HealthSummary(ctx, &api.HealthSummaryParams{Health: api.Opt(in.Health)}, c.as()...))
			}),
		def("get_state_snapshot", "Get a compact fleet snapshot: health counts and what needs attention.",
			ro, "snapshot", nil,
			func(ctx context.Context, c *Call, _ noArgs) Result {
				h, err := apiclient.Decode[HealthSummary](c.deps.API.API().HealthSummary(ctx, nil, c.as()...))
				if err != nil {
					return apiError(err)
				}
				return Result{Data: Snapshot(h)}
			}),
		def("query_metrics", "Query an entity's metric samples over a time range, bucketed.",
			ro, "metrics", nil,
			func(ctx context.Context, c *Call, in metricsIn) Result {
				return pass(c)(c.api().EntityMetrics(ctx, in.Ref, &api.EntityMetricsParams{Name: in.Name, Since: api.Opt(in.Since), Step: api.Opt(in.Step)}, c.as()...))
			}),
		def("get_trend", "Get a metric's trend for an entity: slope, min, max and a forecast.",
			ro, "trend", nil,
			func(ctx context.Context, c *Call, in trendIn) Result {
				return pass(c)(c.api().EntityTrend(ctx, in.Ref, &api.EntityTrendParams{Name: in.Name, Window: api.Opt(in.Window)}, c.as()...))
			}),
		def("get_event_timeline", "Get recent events for an entity or the fleet (state changes, executions, approvals).",
			ro, "timeline",
			func(s *jsonschema.Schema) { bounds(s, "limit", 1, 200) },
			func(ctx context.Context, c *Call, in timelineIn) Result {
				limit := itoa(in.Limit)
				if limit == "" {
					limit = "50"
				}
				if in.Ref != "" {
					return pass(c)(c.api().EntityTimeline(ctx, in.Ref, &api.EntityTimelineParams{Types: api.Opt(in.Types), Limit: api.Ptr(cmp.Or(in.Limit, 50))}, c.as()...))
				}
				// GET /events stays a passed-on request: its since (a sequence number or a
				// time) is a union the generated parameters cannot be given from outside.
				return get(ctx, c, "/api/v1/events", map[string]string{"types": in.Types, "since": in.Since, "limit": limit})
			}),
		def("list_checks", "List health checks with their latest result, by target, kind or health.",
			ro, "checks", nil,
			func(ctx context.Context, c *Call, in checksIn) Result {
				return pass(c)(c.api().ListChecks(ctx, &api.ListChecksParams{Target: api.Opt(in.Target), Kind: api.Opt(in.Kind),
					Health: api.Opt(in.Health), Limit: api.Ptr(200)}, c.as()...))
			}),
	}
}

// HealthSummary is the api's GET /api/v1/health/summary.
type HealthSummary struct {
	Counts   map[string]int `json:"counts"`
	Entities []struct {
		Slug   string `json:"slug"`
		Type   string `json:"type"`
		Health string `json:"health"`
		Reason string `json:"reason"`
	} `json:"entities"`
}

// snapshotAttention bounds how many entities a snapshot lists.
const snapshotAttention = 12

// Snapshot is the compact fleet state (get_state_snapshot; later the loop's system prompt):
// counts by health and the entities that are down, degraded or unknown, worst first, reasons
// cut short. It stays under 2 KB at a hundred entities.
func Snapshot(h HealthSummary) json.RawMessage {
	type item struct {
		E string `json:"e"`
		H string `json:"h"`
		R string `json:"r,omitempty"`
	}
	rank := map[string]int{"down": 0, "degraded": 1, "unknown": 2}
	var att []item
	for _, e := range h.Entities {
		if _, bad := rank[e.Health]; bad {
			att = append(att, item{E: e.Slug, H: e.Health, R: cut(e.Reason, 60)})
		}
	}
	sort.SliceStable(att, func(i, j int) bool { return rank[att[i].H] < rank[att[j].H] })
	more := 0
	if len(att) > snapshotAttention {
		more = len(att) - snapshotAttention
		att = att[:snapshotAttention]
	}
	out := map[string]any{"counts": h.Counts, "attention": att}
	if att == nil {
		out["attention"] = []item{}
	}
	if more > 0 {
		out["more"] = more
	}
	b, _ := json.Marshal(out)
	return b
}

func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
