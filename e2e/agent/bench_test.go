package agent_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
	"github.com/oikos-hq/oikos/shared/apiclient"
)

// Round trips over MCP and, beside each, the api's own latency for the same work: what an
// external agent pays for going through the agent (its session, tool-call record, gates and
// the api call the tool makes) over calling the api directly.
//
//	go test -run '^$' -bench . ./e2e/agent/

// BenchmarkGetEntity: tools/call get_entity, and GET /api/v1/entities/{ref}.
func BenchmarkGetEntity(b *testing.B) {
	s := lab(b)
	b.Run("mcp", func(b *testing.B) {
		cs := s.connect(b, s.mcpAgent)
		args := map[string]any{"ref": "lxc:jellyfin"}
		mustCall(b, cs, "get_entity", args)
		percentiles(b, func() {
			if r := call(b, cs, "get_entity", args); r.IsError {
				b.Fatal(r.Text)
			}
		})
	})
	b.Run("api", func(b *testing.B) {
		c := s.client.API(b, s.mcpAgent)
		percentiles(b, func() {
			e2estack.OK(b, nil)(c.GetEntity(b.Context(), "lxc:jellyfin"))
		})
	})
}

// BenchmarkRunReadOnly: tools/call run of `hostname` on an LXC (labsim, through the Proxmox
// host-hop), and POST /api/v1/executions followed by its log stream to the end.
func BenchmarkRunReadOnly(b *testing.B) {
	s := lab(b)
	b.Run("mcp", func(b *testing.B) {
		cs := s.connect(b, s.mcpAgent)
		args := map[string]any{"target": "lxc:jellyfin", "command": "hostname", "purpose": "e2e: benchmark"}
		mustCall(b, cs, "run", args)
		percentiles(b, func() {
			var e execution
			mustCall(b, cs, "run", args).JSON(b, &e)
			if e.Output != "jellyfin\n" {
				b.Fatalf("run answered %+v", e)
			}
		})
	})
	b.Run("api", func(b *testing.B) {
		body := apiclient.RunRequest{Target: "lxc:jellyfin", Command: "hostname", Purpose: "e2e: benchmark"}
		c := s.client.API(b, s.mcpAgent)
		percentiles(b, func() {
			var e execution
			e2estack.OK(b, &e)(c.RequestExecution(b.Context(), body))
			s.waitEnd(b, s.mcpAgent, e.ID)
		})
	})
}

// BenchmarkToolSchemas reports what the tool definitions cost a client's context.
func BenchmarkToolSchemas(b *testing.B) {
	s := lab(b)
	cs := s.connect(b, s.mcpAgent)
	var tokens int
	for b.Loop() {
		tokens, _ = schemaTokens(b, listTools(b, cs))
	}
	b.ReportMetric(float64(tokens), "schema-tokens")
	if tokens > schemaTokenBudget {
		b.Errorf("the tool schemas cost about %d tokens; the budget is %d", tokens, schemaTokenBudget)
	}
}

// BenchmarkStateSnapshot reports get_state_snapshot's size with at least 100 entities.
func BenchmarkStateSnapshot(b *testing.B) {
	s := lab(b)
	listed, _ := s.fleetAtLeast(b, snapshotMinEntities)
	cs := s.connect(b, s.readonly)
	var n int
	for b.Loop() {
		r := mustCall(b, cs, "get_state_snapshot", nil)
		var v map[string]any
		if err := json.Unmarshal([]byte(r.Text), &v); err != nil {
			b.Fatal(err)
		}
		n = len(r.Text)
	}
	b.ReportMetric(float64(n), "snapshot-bytes")
	b.ReportMetric(float64(listed), "entities")
	if n > snapshotByteBudget {
		b.Errorf("get_state_snapshot is %d bytes at %d entities; the budget is %d", n, listed, snapshotByteBudget)
	}
}

// percentiles times each iteration of op and reports p50 and p99 in milliseconds.
func percentiles(b *testing.B, op func()) {
	b.Helper()
	var ds []time.Duration
	for b.Loop() {
		t0 := time.Now()
		op()
		ds = append(ds, time.Since(t0))
	}
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	at := func(p int) time.Duration { return ds[min(len(ds)-1, len(ds)*p/100)] }
	b.ReportMetric(float64(at(50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(at(99).Microseconds())/1000, "p99-ms")
}
