package execapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/shared/sse"
)

// Commands of each class under the default policy; %d keeps every request distinct (no
// dedup between matrix cells).
const (
	roCmd = "cat /etc/matrix-%d"
	cmCmd = "touch /srv/matrix-%d"
	deCmd = "rm -rf /var/lib/matrix-%d"
)

var rank = map[string]int{"": 0, "read_only": 0, "reversible_low": 1, "config_mutation": 2, "destructive": 3}

// TestGateMatrix runs every combination of command class × declared risk × open window ×
// requesting session × target through HTTP and checks the outcome against the rules of
// docs/policy.md: read_only and reversible_low run at once; config_mutation runs inside the
// requesting session's assent window; destructive runs only inside the window for that
// target and session; everything else waits for an approval; the declared class only
// escalates. Session A's windows never serve session B, a destructive window only serves
// its target, and no session means no window.
func TestGateMatrix(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Open the windows: an assent window for "s-assent" (approving a config_mutation), a
	// destructive window for ("s-destr", lxc:web) (typed confirmation of a destructive step).
	var q executionJSON
	e.agent.run("lxc:web", "touch /srv/open-assent", "s-assent").expect(t, http.StatusCreated).json(t, &q)
	var d decisionJSON
	e.operator.decide(*q.ApprovalID, "approve", "button").expect(t, http.StatusOK).json(t, &d)
	if d.Window == nil || d.Window.Kind != "assent" || d.Window.SessionID != "s-assent" {
		t.Fatalf("approving a config_mutation opened %+v", d.Window)
	}
	e.agent.run("lxc:web", "rm -rf /var/lib/open-destr", "s-destr").expect(t, http.StatusCreated).json(t, &q)
	e.operator.decide(*q.ApprovalID, "approve", "typed_confirmation").expect(t, http.StatusOK).json(t, &d)
	if d.Window == nil || d.Window.Kind != "destructive" || d.Window.Target != "lxc:web" {
		t.Fatalf("typed confirmation of a destructive step opened %+v", d.Window)
	}
	// Approving a destructive step by button in a session also opens its window; via api it
	// cannot be approved at all.
	e.agent.run("lxc:db", "rm -rf /var/lib/open-button", "s-button").expect(t, http.StatusCreated).json(t, &q)
	e.operator.decide(*q.ApprovalID, "approve", "api").problem(t, http.StatusUnprocessableEntity)
	e.operator.decide(*q.ApprovalID, "approve", "button").expect(t, http.StatusOK).json(t, &d)
	if d.Window == nil || d.Window.Kind != "destructive" || d.Window.Target != "lxc:db" {
		t.Fatalf("button approval of a destructive step opened %+v", d.Window)
	}

	kinds := []struct{ cmd, class string }{{roCmd, "read_only"}, {cmCmd, "config_mutation"}, {deCmd, "destructive"}}
	declared := []string{"", "read_only", "reversible_low", "destructive"}
	sessions := []string{"s-assent", "s-destr", "s-other", ""}
	targets := []string{"lxc:web", "lxc:db"}
	n, ran, queued := 0, 0, 0
	for _, k := range kinds {
		for _, dec := range declared {
			for _, session := range sessions {
				for _, target := range targets {
					n++
					class := k.class
					if rank[dec] > rank[class] {
						class = dec
					}
					wantRun, wantBy := false, ""
					switch {
					case rank[class] <= 1:
						wantRun, wantBy = true, "auto"
					case class == "config_mutation" && session == "s-assent":
						wantRun, wantBy = true, "assent_window"
					case class == "destructive" && session == "s-destr" && target == "lxc:web":
						wantRun, wantBy = true, "destructive_window"
					}
					var got executionJSON
					extra := []string{}
					if dec != "" {
						extra = append(extra, "declared_risk", dec)
					}
					e.agent.run(target, fmt.Sprintf(k.cmd, n), session, extra...).expect(t, http.StatusCreated).json(t, &got)
					cell := fmt.Sprintf("%s declared %q session %q target %s", k.class, dec, session, target)
					if got.RiskClass != class {
						t.Errorf("%s: class %s, want %s", cell, got.RiskClass, class)
					}
					if wantRun {
						ran++
						if got.Status != "approved" || got.AuthorisedBy != wantBy || got.ApprovalID != nil {
							t.Errorf("%s: %s by %q, want approved by %s", cell, got.Status, got.AuthorisedBy, wantBy)
						}
						continue
					}
					queued++
					if got.Status != "pending_approval" || got.ApprovalID == nil {
						t.Errorf("%s: %s, want pending_approval", cell, got.Status)
						continue
					}
					// Deny it, so the session's next request is not an approval flood.
					var dd decisionJSON
					e.operator.decide(*got.ApprovalID, "deny", "button").expect(t, http.StatusOK).json(t, &dd)
					if dd.Execution.Status != "denied" {
						t.Errorf("%s: deny left the execution %s", cell, dd.Execution.Status)
					}
				}
			}
		}
	}
	if ran == 0 || queued == 0 {
		t.Fatalf("degenerate matrix: %d ran, %d queued", ran, queued)
	}
	t.Logf("%d cells: %d ran, %d queued", n, ran, queued)
}

func TestApproveRunsAndDecisionsMoveTheExecution(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var q executionJSON
	e.agent.run("lxc:web", "touch /srv/a", "").expect(t, http.StatusCreated).json(t, &q)
	var d decisionJSON
	e.operator.decide(*q.ApprovalID, "approve", "button").expect(t, http.StatusOK).json(t, &d)
	if d.Execution.Status != "approved" || d.Approval.Status != "approved" || d.Approval.RiskClass != "config_mutation" || d.Window != nil {
		t.Fatalf("approve: %+v", d)
	}
	// The scheduler runs it.
	e.claim(q.ID)
	e.finish(q.ID, "completed", 0, []byte("ok\n"))
	var got executionJSON
	e.readonly.do("GET", "/api/v1/executions/"+q.ID, nil).expect(t, http.StatusOK).json(t, &got)
	if got.Status != "completed" || got.ExitCode == nil || *got.ExitCode != 0 || *got.Output != "ok\n" {
		t.Fatalf("after the run: %+v", got)
	}
	// Deny and revoke move the execution too.
	e.agent.run("lxc:web", "touch /srv/b", "").expect(t, http.StatusCreated).json(t, &q)
	e.operator.decide(*q.ApprovalID, "deny", "button", "reason", "not now").expect(t, http.StatusOK).json(t, &d)
	if d.Execution.Status != "denied" || d.Approval.Status != "denied" {
		t.Fatalf("deny: %+v", d)
	}
	e.agent.run("lxc:web", "touch /srv/c", "").expect(t, http.StatusCreated).json(t, &q)
	e.operator.decide(*q.ApprovalID, "approve", "api").expect(t, http.StatusOK)
	e.operator.decide(*q.ApprovalID, "revoke", "button").expect(t, http.StatusOK).json(t, &d)
	if d.Execution.Status != "revoked" || d.Approval.Status != "revoked" {
		t.Fatalf("revoke: %+v", d)
	}
	// A second decision is a conflict that says how it was decided.
	p := e.operator.decide(*q.ApprovalID, "approve", "button").problem(t, http.StatusConflict)
	if !strings.Contains(p.Detail, "already revoked by op via button") || p.Approval == nil || p.Approval.Status != "revoked" {
		t.Fatalf("second decision: %+v", p)
	}
	// Pending approvals list, and one approval.
	e.agent.run("lxc:db", "touch /srv/d", "s-list").expect(t, http.StatusCreated).json(t, &q)
	var l listJSON[approvalJSON]
	e.readonly.do("GET", "/api/v1/approvals?status=pending", nil).expect(t, http.StatusOK).json(t, &l)
	if len(l.Items) != 1 || l.Items[0].ID != *q.ApprovalID || l.Items[0].ExecutionStatus != "pending_approval" {
		t.Fatalf("pending approvals: %+v", l)
	}
	var a approvalJSON
	e.readonly.do("GET", "/api/v1/approvals/"+*q.ApprovalID, nil).expect(t, http.StatusOK).json(t, &a)
	if a.Status != "pending" || a.RiskClass != "config_mutation" {
		t.Fatalf("approval: %+v", a)
	}
	e.readonly.do("GET", "/api/v1/approvals/0190b7a4-0000-7000-8000-000000000000", nil).problem(t, http.StatusNotFound)
	e.readonly.do("GET", "/api/v1/approvals?status=bogus", nil).problem(t, http.StatusUnprocessableEntity)
}

func TestDecisionRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var q executionJSON
	e.agent.run("lxc:web", "rm -rf /var/lib/x", "s-rules").expect(t, http.StatusCreated).json(t, &q)
	id := *q.ApprovalID
	// Chat assent never approves a destructive step.
	p := e.operator.decide(id, "approve", "chat_assent", "message_id", "m-1").problem(t, http.StatusUnprocessableEntity)
	if p.Code != "destructive_needs_confirmation" || p.RiskClass != "destructive" {
		t.Fatalf("chat assent on destructive: %+v", p)
	}
	e.operator.decide(id, "approve", "chat_assent").problem(t, http.StatusUnprocessableEntity)
	e.anon.decide(id, "approve", "button").problem(t, http.StatusUnauthorized)
	// Malformed decisions.
	if p := e.operator.decide(id, "maybe", "button").problem(t, http.StatusUnprocessableEntity); p.Field != "decision" {
		t.Fatalf("bad decision: %+v", p)
	}
	if p := e.operator.do("POST", "/api/v1/approvals/"+id+"/decision", map[string]any{"decision": "approve", "via": "button", "extra": 1}).
		problem(t, http.StatusUnprocessableEntity); p.Field != "extra" {
		t.Fatalf("unknown field: %+v", p)
	}
	e.operator.do("POST", "/api/v1/approvals/"+id+"/decision", "{").problem(t, http.StatusBadRequest)
	e.operator.do("POST", "/api/v1/approvals/"+id+"/decision", "decision=approve", "Content-Type", "text/plain").
		problem(t, http.StatusUnsupportedMediaType)
	// The operator relays nothing: their own chat assent, with its message id, is recorded.
	e.operator.decide(id, "deny", "button").expect(t, http.StatusOK)
	e.agent.run("lxc:web", "touch /srv/y", "s-rules").expect(t, http.StatusCreated).json(t, &q)
	var d decisionJSON
	e.operator.decide(*q.ApprovalID, "approve", "chat_assent", "message_id", "m-3").expect(t, http.StatusOK).json(t, &d)
	if d.Approval.MessageID == nil || *d.Approval.MessageID != "m-3" || *d.Approval.Via != "chat_assent" || *d.Approval.DecidedBy != "op" {
		t.Fatalf("operator's chat assent: %+v", d.Approval)
	}
}

// TestOnlyAnOperatorDecides: no token but an operator's decides an approval on its own say-so.
// For every via × every decision × every class that queues, an agent token without a message
// the api can prove (none, a made-up id, or the operator's real "yes" of the same session
// sent before the approval was asked for) and a readonly token get a 403 problem saying only
// an operator decides, and nothing changes: the approval stays pending, the execution
// pending_approval, and no approval audit row, approval.decided event or window exists. Each
// agent refusal has its approval.relay_refused audit row; the readonly ones, refused by the
// guard, have none. The operator's decision then goes through, and its audit row and event
// name the operator. (A relay the api can prove: TestRelayProvesTheOperatorsMessage.)
func TestOnlyAnOperatorDecides(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	vias := []string{"button", "chat_assent", "typed_confirmation", "api"}
	decisions := []string{"approve", "deny", "revoke"}
	classes := []struct{ class, command, approveVia string }{
		{"config_mutation", "touch /srv/y", "chat_assent"},
		{"destructive", "rm -rf /var/lib/x", "typed_confirmation"},
	}
	for _, k := range classes {
		// The operator's real assent, but sent before the approval was asked for.
		early := e.say("op", "operator", "s-only-"+k.class, "yes")
		callers := []struct {
			name  string
			c     *client
			extra []string
			agent bool
		}{
			{"agent", e.agent, nil, true},
			{"agent relaying a made-up message", e.agent, []string{"message_id", "made-up-456"}, true},
			{"agent relaying the operator's earlier message", e.agent, []string{"message_id", early}, true},
			{"readonly", e.readonly, nil, false},
			{"readonly naming a message", e.readonly, []string{"message_id", "made-up-789"}, false},
			{"readonly naming the operator's message", e.readonly, []string{"message_id", early}, false},
		}
		var q executionJSON
		e.agent.run("lxc:web", k.command, "s-only-"+k.class).expect(t, http.StatusCreated).json(t, &q)
		if q.Status != "pending_approval" || q.ApprovalID == nil || q.RiskClass != k.class {
			t.Fatalf("%s: %+v, want a pending approval", k.class, q)
		}
		id := *q.ApprovalID
		refused, agentCells := 0, 0
		for _, who := range callers {
			for _, via := range vias {
				for _, dec := range decisions {
					cell := fmt.Sprintf("%s: %s %s via %s", k.class, who.name, dec, via)
					p := who.c.decide(id, dec, via, who.extra...).problem(t, http.StatusForbidden)
					if p.Status != http.StatusForbidden || !strings.HasSuffix(p.Type, "forbidden") ||
						!strings.Contains(p.Detail, "only an operator's token may decide an approval") {
						t.Errorf("%s: problem %+v, want a 403 saying only an operator decides", cell, p)
					}
					refused++
					if who.agent {
						agentCells++
					}
				}
			}
		}
		if refused != len(callers)*len(vias)*len(decisions) {
			t.Fatalf("%s: %d cells", k.class, refused)
		}
		if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'approval.relay_refused' AND actor = 'nomos'
			AND after->>'approval_id' = $1`, id); n != agentCells {
			t.Fatalf("%s: %d relay refusals audited, want one per agent cell (%d)", k.class, n, agentCells)
		}
		if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'approval.relay_refused' AND actor <> 'nomos'`); n != 0 {
			t.Fatalf("%s: %d refusal rows of the readonly token", k.class, n)
		}
		// Nothing changed.
		var a approvalJSON
		e.readonly.do("GET", "/api/v1/approvals/"+id, nil).expect(t, http.StatusOK).json(t, &a)
		if a.Status != "pending" || a.DecidedBy != nil || a.Via != nil || a.MessageID != nil || a.ExecutionStatus != "pending_approval" {
			t.Fatalf("%s: after the refusals the approval is %+v", k.class, a)
		}
		var x executionJSON
		e.readonly.do("GET", "/api/v1/executions/"+q.ID, nil).expect(t, http.StatusOK).json(t, &x)
		if x.Status != "pending_approval" || x.AuthorisedBy != "" {
			t.Fatalf("%s: after the refusals the execution is %s (authorised by %q)", k.class, x.Status, x.AuthorisedBy)
		}
		if n := e.count(`SELECT count(*) FROM audit_log WHERE action LIKE 'approval.%' AND after->>'id' = $1`, id); n != 0 {
			t.Fatalf("%s: %d approval audit rows after the refusals", k.class, n)
		}
		if n := e.count(`SELECT count(*) FROM events WHERE type = 'approval.decided' AND payload->>'approval_id' = $1`, id); n != 0 {
			t.Fatalf("%s: %d approval.decided events after the refusals", k.class, n)
		}
		if n := e.count(`SELECT count(*) FROM approval_windows WHERE approval_id = $1::uuid`, id); n != 0 {
			t.Fatalf("%s: %d windows opened by refused decisions", k.class, n)
		}
		if n := e.count(`SELECT count(*) FROM chat_message_uses WHERE approval_id = $1::uuid`, id); n != 0 {
			t.Fatalf("%s: %d message uses recorded by refused decisions", k.class, n)
		}
		// The operator decides; the record names them.
		var d decisionJSON
		e.operator.decide(id, "approve", k.approveVia, "message_id", "m-"+k.class).expect(t, http.StatusOK).json(t, &d)
		if d.Approval.Status != "approved" || d.Execution.Status != "approved" || d.Approval.DecidedBy == nil || *d.Approval.DecidedBy != "op" {
			t.Fatalf("%s: operator's approval: %+v", k.class, d)
		}
		var actor, decidedBy string
		if err := e.pool.QueryRow(context.Background(), `SELECT actor, after->>'decided_by' FROM audit_log
			WHERE action = 'approval.approve' AND after->>'id' = $1`, id).Scan(&actor, &decidedBy); err != nil {
			t.Fatalf("%s: audit row of the approval: %v", k.class, err)
		}
		if actor != "op" || decidedBy != "op" {
			t.Fatalf("%s: audit row actor %q decided_by %q, want op", k.class, actor, decidedBy)
		}
		if err := e.pool.QueryRow(context.Background(), `SELECT actor, payload->>'decided_by' FROM events
			WHERE type = 'approval.decided' AND payload->>'approval_id' = $1`, id).Scan(&actor, &decidedBy); err != nil {
			t.Fatalf("%s: approval.decided event: %v", k.class, err)
		}
		if actor != "op" || decidedBy != "op" {
			t.Fatalf("%s: approval.decided actor %q decided_by %q, want op", k.class, actor, decidedBy)
		}
		// An agent cannot revoke it either once approved.
		e.agent.decide(id, "revoke", "button").problem(t, http.StatusForbidden)
		e.readonly.do("GET", "/api/v1/approvals/"+id, nil).expect(t, http.StatusOK).json(t, &a)
		if a.Status != "approved" {
			t.Fatalf("%s: an agent's revoke left the approval %s", k.class, a.Status)
		}
	}
}

// TestConcurrentDecisions: 20 rounds of two decisions at once over HTTP; exactly one wins
// and the other is told it was already decided.
func TestConcurrentDecisions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for round := range 20 {
		var q executionJSON
		e.agent.run("lxc:web", fmt.Sprintf("touch /srv/race-%d", round), "").expect(t, http.StatusCreated).json(t, &q)
		decisions := [2]string{"approve", "deny"}
		if round%2 == 1 {
			decisions = [2]string{"deny", "deny"}
		}
		var wg sync.WaitGroup
		results := make([]resp, 2)
		errs := make([]error, 2)
		start := make(chan struct{})
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = e.operator.try("POST", "/api/v1/approvals/"+*q.ApprovalID+"/decision",
					map[string]any{"decision": decisions[i], "via": "button"})
			}()
		}
		close(start)
		wg.Wait()
		ok, conflict := 0, 0
		winner := ""
		for i := range 2 {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			switch results[i].Status {
			case http.StatusOK:
				ok++
				winner = decisions[i]
			case http.StatusConflict:
				conflict++
				if !strings.Contains(string(results[i].Body), "already") {
					t.Errorf("round %d: conflict does not say it was already decided: %s", round, results[i].Body)
				}
			default:
				t.Fatalf("round %d: status %d: %s", round, results[i].Status, results[i].Body)
			}
		}
		if ok != 1 || conflict != 1 {
			t.Fatalf("round %d: %d won, %d conflicted", round, ok, conflict)
		}
		var got executionJSON
		e.readonly.do("GET", "/api/v1/executions/"+q.ID, nil).expect(t, http.StatusOK).json(t, &got)
		want := map[string]string{"approve": "approved", "deny": "denied"}[winner]
		if got.Status != want {
			t.Fatalf("round %d: %s won but the execution is %s", round, winner, got.Status)
		}
	}
}

func TestDedupAndFlood(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var first, again executionJSON
	e.agent.run("lxc:web", "touch /srv/dup", "s-dup").expect(t, http.StatusCreated).json(t, &first)
	e.agent.run("lxc:web", "touch /srv/dup", "s-dup").expect(t, http.StatusOK).json(t, &again)
	if !again.AlreadyQueued || again.ID != first.ID || !strings.Contains(again.Message, "already queued") {
		t.Fatalf("duplicate: %+v", again)
	}
	p := e.agent.run("lxc:db", "touch /srv/other", "s-dup").problem(t, http.StatusUnprocessableEntity)
	if p.Code != "approval_pending" || p.ApprovalID != *first.ApprovalID || !strings.Contains(p.Detail, *first.ApprovalID) {
		t.Fatalf("flood: %+v", p)
	}
	if n := e.count(`SELECT count(*) FROM executions WHERE session_id = 's-dup'`); n != 1 {
		t.Fatalf("%d executions for the session", n)
	}
}

func TestRefusalsWriteNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	before := e.count(`SELECT (SELECT count(*) FROM executions) + (SELECT count(*) FROM approvals) + (SELECT count(*) FROM events) + (SELECT count(*) FROM audit_log)`)
	p := e.agent.run("vm:noagent", "uptime", "s-vm").problem(t, http.StatusUnprocessableEntity)
	if p.Code != "no_guest_agent" || !strings.Contains(p.Detail, "guest agent") {
		t.Fatalf("vm without agent: %+v", p)
	}
	e.agent.run("vm:noagent", "rm -rf /data", "s-vm").problem(t, http.StatusUnprocessableEntity)
	p = e.agent.run("lxc:web", "head - n 3 /etc/passwd", "").problem(t, http.StatusUnprocessableEntity)
	if p.Code != "syntax" || !strings.Contains(p.Detail, "-n") {
		t.Fatalf("syntax: %+v", p)
	}
	e.agent.run("lxc:nope", "uptime", "").problem(t, http.StatusNotFound)
	if p := e.agent.run("lxc:web", "uptime", "", "declared_risk", "harmless").problem(t, http.StatusUnprocessableEntity); p.Field != "declared_risk" {
		t.Fatalf("bad declared risk: %+v", p)
	}
	e.agent.do("POST", "/api/v1/executions", map[string]any{"target": "lxc:web", "command": "uptime"}).problem(t, http.StatusUnprocessableEntity)
	e.agent.do("POST", "/api/v1/executions", map[string]any{"target": "lxc:web", "command": "uptime", "purpose": "x", "risk": "low"}).
		problem(t, http.StatusUnprocessableEntity)
	e.readonly.run("lxc:web", "uptime", "").problem(t, http.StatusForbidden)
	e.anon.run("lxc:web", "uptime", "").problem(t, http.StatusUnauthorized)
	after := e.count(`SELECT (SELECT count(*) FROM executions) + (SELECT count(*) FROM approvals) + (SELECT count(*) FROM events) + (SELECT count(*) FROM audit_log)`)
	if after != before {
		t.Fatalf("refused requests wrote %d rows", after-before)
	}
	var ok executionJSON
	e.agent.run("vm:ha", "uptime", "").expect(t, http.StatusCreated).json(t, &ok)
	if ok.Status != "approved" {
		t.Fatalf("vm with agent: %+v", ok)
	}
}

func TestTypedActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	action := func(c *client, a, target string, params any) resp {
		return c.do("POST", "/api/v1/executions/actions", map[string]any{"action": a, "target": target, "params": params, "purpose": "typed"})
	}
	var x executionJSON
	action(e.agent, "pct_create", "proxmox-host:atlas", map[string]any{"vmid": 150, "hostname": "app", "privileged": 0, "nesting": "false"}).
		expect(t, http.StatusCreated).json(t, &x)
	if x.Action != "pct_create" || x.Status != "pending_approval" || x.RiskClass != "config_mutation" || !strings.HasPrefix(x.Command, "pct create 150 ") {
		t.Fatalf("pct_create: %+v", x)
	}
	p := action(e.agent, "pct_create", "proxmox-host:atlas", map[string]any{"vmid": 151, "hostname": "app2", "privileged": "maybe"}).
		problem(t, http.StatusUnprocessableEntity)
	if p.Field != "params.privileged" || !strings.Contains(p.Detail, "maybe") {
		t.Fatalf("privileged maybe: %+v", p)
	}
	// The fleet's reverse proxy is not restarted without an approval.
	action(e.agent, "restart", "lxc:db", map[string]any{"unit": "caddy.service"}).expect(t, http.StatusCreated).json(t, &x)
	if x.Status != "pending_approval" || x.Command != "systemctl restart caddy.service" {
		t.Fatalf("restart: %+v", x)
	}
	action(e.agent, "systemctl", "host:box", map[string]any{"verb": "status", "unit": "caddy"}).expect(t, http.StatusCreated).json(t, &x)
	if x.Status != "approved" || x.RiskClass != "read_only" {
		t.Fatalf("systemctl status: %+v", x)
	}
	if p := action(e.agent, "reboot", "host:box", map[string]any{}).problem(t, http.StatusUnprocessableEntity); p.Field != "action" {
		t.Fatalf("unknown action: %+v", p)
	}
	action(e.agent, "pct_create", "lxc:web", map[string]any{"vmid": 160, "hostname": "x"}).problem(t, http.StatusUnprocessableEntity)
}

// TestOutputAndLogs: bytes that are not text survive the JSON answers exactly, and the SSE
// tail replays stored chunks, follows new ones as they are written (woken by NOTIFY), and
// ends with the execution's end.
func TestOutputAndLogs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{notifier: true, heartbeat: 50 * time.Millisecond})
	var x executionJSON
	e.agent.run("lxc:web", "cat /var/log/app.log", "").expect(t, http.StatusCreated).json(t, &x)
	e.claim(x.ID)
	chunks := [][]byte{[]byte("quote \" backslash \\ tab\t\n"), {0x00, 'N', 'U', 'L', 0xff, 0xc3, '\n'}, []byte("last line\n")}
	e.appendChunk(x.ID, 1, chunks[0])

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", e.ts.URL+"/api/v1/executions/"+x.ID+"/logs/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.readonly.token)
	hr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer hr.Body.Close()
	if hr.StatusCode != http.StatusOK || !strings.HasPrefix(hr.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %s", hr.StatusCode, hr.Header.Get("Content-Type"))
	}
	events := make(chan [3]string, 16) // id, event, data
	go func() {
		defer close(events)
		r := sse.NewReader(hr.Body, 1<<20)
		for {
			e, err := r.Next()
			if err != nil {
				return
			}
			if e.Name != "" {
				events <- [3]string{e.ID, e.Name, e.Data}
			}
		}
	}()
	next := func() [3]string {
		t.Helper()
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("stream closed early")
			}
			return ev
		case <-ctx.Done():
			t.Fatal("no event before the deadline")
		}
		return [3]string{}
	}
	type chunkJSON struct {
		Seq  int    `json:"seq"`
		Data []byte `json:"data"`
		Text string `json:"text"`
	}
	check := func(ev [3]string, seq int) {
		t.Helper()
		var c chunkJSON
		if ev[1] != "chunk" || json.Unmarshal([]byte(ev[2]), &c) != nil || ev[0] != fmt.Sprint(seq) || c.Seq != seq || !bytes.Equal(c.Data, chunks[seq-1]) {
			t.Fatalf("event %v, want chunk %d = %q", ev, seq, chunks[seq-1])
		}
	}
	check(next(), 1) // replayed
	// The stream poll is a minute long: these arrive only through the notifier's wake-ups.
	e.appendChunk(x.ID, 2, chunks[1])
	check(next(), 2)
	e.appendChunk(x.ID, 3, chunks[2])
	check(next(), 3)
	all := bytes.Join(chunks, nil)
	e.finish(x.ID, "failed", 3, all)
	end := next()
	if end[1] != "end" || !strings.Contains(end[2], `"status":"failed"`) || !strings.Contains(end[2], `"exit_code":3`) {
		t.Fatalf("end event: %v", end)
	}
	if _, ok := <-events; ok {
		t.Fatal("stream did not close after the end event")
	}

	// The stored output round-trips exactly through output_base64 and the JSON logs.
	var got executionJSON
	e.readonly.do("GET", "/api/v1/executions/"+x.ID, nil).expect(t, http.StatusOK).json(t, &got)
	raw, err := base64.StdEncoding.DecodeString(*got.OutputBase64)
	if err != nil || !bytes.Equal(raw, all) {
		t.Fatalf("output_base64 = %q, want %q", raw, all)
	}
	if !strings.Contains(*got.Output, "quote \" backslash \\") || !strings.Contains(*got.Output, "\x00NUL\uFFFD") {
		t.Fatalf("output text: %q", *got.Output)
	}
	var logs struct {
		Chunks  []chunkJSON `json:"chunks"`
		NextSeq int         `json:"next_seq"`
		Done    bool        `json:"done"`
	}
	e.readonly.do("GET", "/api/v1/executions/"+x.ID+"/logs?after=1", nil).expect(t, http.StatusOK).json(t, &logs)
	if len(logs.Chunks) != 2 || !bytes.Equal(logs.Chunks[0].Data, chunks[1]) || logs.NextSeq != 3 || !logs.Done {
		t.Fatalf("logs after 1: %+v", logs)
	}
	// Resume with Last-Event-ID: only what follows, then the end.
	r := e.readonly.do("GET", "/api/v1/executions/"+x.ID+"/logs/stream", nil, "Last-Event-ID", "2").expect(t, http.StatusOK)
	if !strings.Contains(string(r.Body), "id: 3\nevent: chunk") || strings.Contains(string(r.Body), "id: 2\n") || !strings.Contains(string(r.Body), "event: end") {
		t.Fatalf("resumed stream: %s", r.Body)
	}
	e.readonly.do("GET", "/api/v1/executions/0190b7a4-0000-7000-8000-000000000000/logs/stream", nil).problem(t, http.StatusNotFound)
	e.readonly.do("GET", "/api/v1/executions/"+x.ID+"/logs/stream", nil, "Last-Event-ID", "x").problem(t, http.StatusBadRequest)
}

// TestStreamWithoutNotifier: without a notifier the stream polls, and still ends.
func TestStreamWithoutNotifier(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var x executionJSON
	e.agent.run("lxc:web", "uptime", "").expect(t, http.StatusCreated).json(t, &x)
	e.claim(x.ID)
	done := make(chan resp, 1)
	go func() {
		r, err := e.readonly.try("GET", "/api/v1/executions/"+x.ID+"/logs/stream", nil)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	e.appendChunk(x.ID, 1, []byte(" 10:00:00 up 1 day\n"))
	e.finish(x.ID, "completed", 0, []byte(" 10:00:00 up 1 day\n"))
	select {
	case r := <-done:
		if !strings.Contains(string(r.Body), "id: 1\nevent: chunk") || !strings.Contains(string(r.Body), `"status":"completed"`) {
			t.Fatalf("stream: %s", r.Body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stream did not end")
	}
}

func TestListExecutions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 5 {
		e.agent.run("lxc:web", fmt.Sprintf("cat /etc/list-%d", i), "s-list").expect(t, http.StatusCreated)
	}
	e.agent.run("lxc:db", "touch /srv/list", "s-list").expect(t, http.StatusCreated)
	seen := map[string]bool{}
	path := "/api/v1/executions?correlation_id=s-list&limit=2"
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("too many pages")
		}
		var l listJSON[executionJSON]
		e.readonly.do("GET", path, nil).expect(t, http.StatusOK).json(t, &l)
		for _, x := range l.Items {
			if seen[x.ID] {
				t.Fatalf("%s repeated", x.ID)
			}
			seen[x.ID] = true
			if x.Output != nil {
				t.Fatal("list carries output")
			}
		}
		if l.NextCursor == nil {
			break
		}
		path = "/api/v1/executions?correlation_id=s-list&limit=2&cursor=" + *l.NextCursor
	}
	if len(seen) != 6 {
		t.Fatalf("walked %d executions, want 6", len(seen))
	}
	var l listJSON[executionJSON]
	e.readonly.do("GET", "/api/v1/executions?target=lxc:db&status=pending_approval,approved&action=run", nil).expect(t, http.StatusOK).json(t, &l)
	if len(l.Items) != 1 || l.Items[0].Target != "lxc:db" {
		t.Fatalf("filtered: %+v", l.Items)
	}
	e.readonly.do("GET", "/api/v1/executions?status=nope", nil).problem(t, http.StatusUnprocessableEntity)
	e.readonly.do("GET", "/api/v1/executions?cursor=***", nil).problem(t, http.StatusBadRequest)
	e.readonly.do("GET", "/api/v1/executions?limit=0", nil).problem(t, http.StatusBadRequest)
	e.readonly.do("GET", "/api/v1/executions/not-a-uuid", nil).problem(t, http.StatusNotFound)
}
