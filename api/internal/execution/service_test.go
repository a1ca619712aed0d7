package execution

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/apierr"
)

// Commands of each class under the default policy.
const (
	cmdRead        = "uptime"
	cmdMutation    = "touch /srv/flag"
	cmdDestructive = "rm -rf /var/lib/app"
)

func run(target, command, session string) Request {
	return Request{Target: target, Command: command, Purpose: "test", SessionID: session}
}

func mustRequest(t testing.TB, f *fixture, m Meta, r Request) Execution {
	t.Helper()
	e, err := f.svc.Request(context.Background(), m, r)
	if err != nil {
		t.Fatalf("request %s on %s: %v", r.Command, r.Target, err)
	}
	return e
}

func mustDecide(t testing.TB, f *fixture, m Meta, approvalID, decision, via string) DecisionResult {
	t.Helper()
	res, err := f.svc.Decide(context.Background(), m, approvalID, Decision{Decision: decision, Via: via})
	if err != nil {
		t.Fatalf("%s %s via %s: %v", decision, approvalID, via, err)
	}
	return res
}

func refusedCode(t testing.TB, err error, code string) *RefusedError {
	t.Helper()
	var re *RefusedError
	if !errors.As(err, &re) || re.Code != code {
		t.Fatalf("err = %v, want a refusal with code %s", err, code)
	}
	return re
}

func TestRequestOutcomes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ro := mustRequest(t, f, agent, run("lxc:web", cmdRead, ""))
	if ro.Status != StatusApproved || ro.RiskClass != "read_only" || ro.AuthorisedBy != AuthorisedAuto || ro.ApprovalID != nil {
		t.Fatalf("read-only: %+v", ro)
	}
	cm := mustRequest(t, f, agent, run("lxc:web", cmdMutation, ""))
	if cm.Status != StatusPendingApproval || cm.RiskClass != "config_mutation" || cm.ApprovalID == nil {
		t.Fatalf("config_mutation: %+v", cm)
	}
	if !strings.Contains(cm.Message, *cm.ApprovalID) {
		t.Errorf("queued message %q does not name the approval", cm.Message)
	}
	de := mustRequest(t, f, agent, run("host:box", cmdDestructive, ""))
	if de.Status != StatusPendingApproval || de.RiskClass != "destructive" {
		t.Fatalf("destructive: %+v", de)
	}
	if _, err := f.svc.Request(context.Background(), agent, run("lxc:nope", cmdRead, "")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown target: %v", err)
	}
	_, err := f.svc.Request(context.Background(), agent, run("service:caddy", cmdRead, ""))
	refusedCode(t, err, "target_kind")
	_, err = f.svc.Request(context.Background(), agent, run("lxc:gone", cmdRead, ""))
	refusedCode(t, err, "target_state")
	_, err = f.svc.Request(context.Background(), agent, run("lxc:web", "head - n 3 /etc/passwd", ""))
	re := refusedCode(t, err, "syntax")
	if !strings.Contains(re.Reason, "-n") {
		t.Errorf("syntax refusal %q does not name the fix", re.Reason)
	}
	if _, err := f.svc.Request(context.Background(), readonly, run("lxc:web", cmdRead, "")); !errors.Is(err, ErrForbidden) {
		t.Fatalf("readonly request: %v", err)
	}
	for _, bad := range []Request{
		{Target: "lxc:web", Command: cmdRead},                                          // no purpose
		{Target: "", Command: cmdRead, Purpose: "x"},                                   // no target
		{Target: "lxc:web", Command: " ", Purpose: "x"},                                // no command
		{Target: "lxc:web", Command: "echo a\x00b", Purpose: "x"},                      // NUL
		{Target: "lxc:web", Command: cmdRead, Purpose: "x", DeclaredRisk: "harmless"},  // bad class
		{Target: "lxc:web", Command: cmdRead, Purpose: "x", TimeoutSeconds: -1},        // bad timeout
		{Target: "lxc:web", Command: cmdRead, Purpose: "x", Params: []byte(`{"a":1}`)}, // params on run
	} {
		var fe *FieldError
		if _, err := f.svc.Request(context.Background(), agent, bad); !errors.As(err, &fe) {
			t.Errorf("request %+v: err = %v, want a field error", bad, err)
		}
	}
}

// TestDeclaredRiskOnlyEscalates: the agent's own verdict is never trusted.
func TestDeclaredRiskOnlyEscalates(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cases := []struct {
		command, declared, want, status string
	}{
		{cmdDestructive, "read_only", "destructive", StatusPendingApproval},
		{cmdMutation, "read_only", "config_mutation", StatusPendingApproval},
		{cmdRead, "destructive", "destructive", StatusPendingApproval},
		{cmdRead, "config_mutation", "config_mutation", StatusPendingApproval},
		{cmdRead, "reversible_low", "reversible_low", StatusApproved},
		{cmdRead, "read_only", "read_only", StatusApproved},
	}
	for i, c := range cases {
		// One session per case keeps the dedup keys apart.
		r := run("lxc:web", c.command, fmt.Sprintf("sess-declared-%d", i))
		r.DeclaredRisk = c.declared
		e := mustRequest(t, f, agent, r)
		if e.RiskClass != c.want || e.Status != c.status {
			t.Errorf("%q declared %s: class %s status %s, want %s %s", c.command, c.declared, e.RiskClass, e.Status, c.want, c.status)
		}
		if e.DeclaredRisk == nil || *e.DeclaredRisk != c.declared {
			t.Errorf("%q declared %s: declared risk not recorded", c.command, c.declared)
		}
	}
}

// TestVMWithoutGuestAgentRefusedBeforeQueuing: nothing is written, not even for a command
// that would otherwise queue.
func TestVMWithoutGuestAgentRefusedBeforeQueuing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tables := []string{"executions", "approvals", "entities", "relationships", "events", "audit_log"}
	before := map[string]int{}
	for _, tb := range tables {
		before[tb] = f.count(t, `SELECT count(*) FROM `+tb)
	}
	for _, target := range []string{"vm:noagent", "vm:unknownagent"} {
		for _, cmd := range []string{cmdRead, cmdMutation, cmdDestructive} {
			_, err := f.svc.Request(context.Background(), agent, run(target, cmd, "sess-vm"))
			re := refusedCode(t, err, "no_guest_agent")
			if !strings.Contains(re.Reason, "guest agent") {
				t.Errorf("%s: reason %q does not say why", target, re.Reason)
			}
		}
	}
	for _, tb := range tables {
		if n := f.count(t, `SELECT count(*) FROM `+tb); n != before[tb] {
			t.Errorf("%s: %d rows after refusals, %d before", tb, n, before[tb])
		}
	}
	if e := mustRequest(t, f, agent, run("vm:ha", cmdRead, "")); e.Status != StatusApproved {
		t.Fatalf("vm with agent: %+v", e)
	}
}

func TestDedup(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for _, session := range []string{"", "sess-dedup"} {
		const n = 8
		results := make([]Execution, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = f.svc.Request(ctx, agent, run("lxc:db", cmdMutation, session))
			}()
		}
		close(start)
		wg.Wait()
		created := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("session %q request %d: %v", session, i, errs[i])
			}
			if results[i].ID != results[0].ID {
				t.Fatalf("session %q: two executions %s and %s for one request", session, results[0].ID, results[i].ID)
			}
			if !results[i].AlreadyQueued {
				created++
			} else if !strings.Contains(results[i].Message, "already queued") {
				t.Errorf("already-queued message: %q", results[i].Message)
			}
		}
		if created != 1 {
			t.Fatalf("session %q: %d requests created an execution, want 1", session, created)
		}
		if c := f.count(t, `SELECT count(*) FROM executions WHERE target_slug = 'lxc:db' AND coalesce(session_id, '') = $1`, session); c != 1 {
			t.Fatalf("session %q: %d execution rows", session, c)
		}
	}
	// Same command, other session: not a duplicate (but it queues its own approval).
	other := mustRequest(t, f, agent, run("lxc:db", cmdMutation, "sess-other"))
	if other.AlreadyQueued {
		t.Fatal("a request of another session was treated as a duplicate")
	}
	// Once decided, the same request queues anew.
	first := mustRequest(t, f, agent, run("lxc:db", cmdMutation, ""))
	if !first.AlreadyQueued {
		t.Fatal("expected the pending one")
	}
	mustDecide(t, f, operator, *first.ApprovalID, DecisionDeny, ViaButton)
	again := mustRequest(t, f, agent, run("lxc:db", cmdMutation, ""))
	if again.AlreadyQueued || again.ID == first.ID {
		t.Fatal("a denied execution still counted as pending")
	}
}

func TestApprovalFlood(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	first := mustRequest(t, f, agent, run("lxc:web", cmdMutation, "sess-flood"))
	_, err := f.svc.Request(ctx, agent, run("lxc:db", "touch /srv/other", "sess-flood"))
	re := refusedCode(t, err, "approval_pending")
	if re.ApprovalID != *first.ApprovalID || !strings.Contains(re.Reason, *first.ApprovalID) {
		t.Fatalf("flood refusal %+v does not name pending approval %s", re, *first.ApprovalID)
	}
	// A destructive request is refused the same way; read-only still runs; other sessions
	// and requests without a session are not affected.
	_, err = f.svc.Request(ctx, agent, run("lxc:db", cmdDestructive, "sess-flood"))
	refusedCode(t, err, "approval_pending")
	if e := mustRequest(t, f, agent, run("lxc:db", cmdRead, "sess-flood")); e.Status != StatusApproved {
		t.Fatalf("read-only during a pending approval: %+v", e)
	}
	if e := mustRequest(t, f, agent, run("lxc:db", "touch /srv/other", "sess-flood-2")); e.Status != StatusPendingApproval {
		t.Fatalf("other session: %+v", e)
	}
	if e := mustRequest(t, f, agent, run("lxc:db", "touch /srv/third", "")); e.Status != StatusPendingApproval {
		t.Fatalf("no session: %+v", e)
	}
	// Concurrent requests of one session: exactly one approval.
	var wg sync.WaitGroup
	var mu sync.Mutex
	queued, refused := 0, 0
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := f.svc.Request(ctx, agent, run("lxc:web", fmt.Sprintf("touch /srv/c%d", i), "sess-flood-race"))
			mu.Lock()
			defer mu.Unlock()
			var re *RefusedError
			switch {
			case err == nil && e.Status == StatusPendingApproval:
				queued++
			case errors.As(err, &re) && re.Code == "approval_pending":
				refused++
			default:
				t.Errorf("request %d: %+v, %v", i, e, err)
			}
		}()
	}
	wg.Wait()
	if queued != 1 || refused != 5 {
		t.Fatalf("concurrent requests of one session: %d queued, %d refused; want 1 and 5", queued, refused)
	}
}

// TestConcurrentDecisionsOneWins: of two decisions made at once exactly one transitions the
// approval; the other is told how it was decided.
func TestConcurrentDecisionsOneWins(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	pairs := [][2]string{{DecisionApprove, DecisionDeny}, {DecisionApprove, DecisionApprove}, {DecisionDeny, DecisionRevoke}, {DecisionApprove, DecisionRevoke}}
	for round := range 20 {
		e := mustRequest(t, f, agent, run("lxc:web", fmt.Sprintf("touch /srv/round-%d", round), ""))
		pair := pairs[round%len(pairs)]
		var wg sync.WaitGroup
		results := make([]DecisionResult, 2)
		errs := make([]error, 2)
		start := make(chan struct{})
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = f.svc.Decide(ctx, operator, *e.ApprovalID, Decision{Decision: pair[i], Via: ViaButton})
			}()
		}
		close(start)
		wg.Wait()
		wins := 0
		var winner DecisionResult
		var loser error
		for i := range 2 {
			if errs[i] == nil {
				wins++
				winner = results[i]
			} else {
				loser = errs[i]
			}
		}
		// approve then revoke may both succeed (revoke applies to an approved execution
		// that has not started); every other pair has exactly one winner.
		if pair == [2]string{DecisionApprove, DecisionRevoke} && wins == 2 {
			got, _ := f.svc.Get(ctx, e.ID)
			if got.Status != StatusRevoked {
				t.Fatalf("round %d: approve and revoke both won but the execution is %s", round, got.Status)
			}
			continue
		}
		if wins != 1 {
			t.Fatalf("round %d (%v): %d winners (%v)", round, pair, wins, errs)
		}
		var ce *ConflictError
		if !errors.As(loser, &ce) || !strings.Contains(ce.Reason, "already") {
			t.Fatalf("round %d: loser error %v, want a conflict saying it was already decided", round, loser)
		}
		got, err := f.svc.Get(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != winner.Execution.Status {
			t.Fatalf("round %d: execution is %s, the winner moved it to %s", round, got.Status, winner.Execution.Status)
		}
		if n := f.count(t, `SELECT count(*) FROM events WHERE type = 'approval.decided' AND payload->>'approval_id' = $1`, *e.ApprovalID); n != 1 {
			t.Fatalf("round %d: %d approval.decided events", round, n)
		}
	}
}

func TestDecisionsMoveTheExecution(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	cases := []struct {
		decision, wantExec, wantApproval string
	}{
		{DecisionApprove, StatusApproved, ApprovalApproved},
		{DecisionDeny, StatusDenied, ApprovalDenied},
		{DecisionRevoke, StatusRevoked, ApprovalRevoked},
	}
	for i, c := range cases {
		e := mustRequest(t, f, agent, run("lxc:web", fmt.Sprintf("touch /srv/move-%d", i), ""))
		res := mustDecide(t, f, operator, *e.ApprovalID, c.decision, ViaButton)
		if res.Execution.Status != c.wantExec || res.Approval.Status != c.wantApproval {
			t.Errorf("%s: execution %s approval %s", c.decision, res.Execution.Status, res.Approval.Status)
		}
		if res.Approval.DecidedBy == nil || *res.Approval.DecidedBy != "alice" || res.Approval.Via == nil || *res.Approval.Via != ViaButton {
			t.Errorf("%s: decision not recorded: %+v", c.decision, res.Approval)
		}
		if got, _ := f.svc.Get(ctx, e.ID); got.Status != c.wantExec {
			t.Errorf("%s: stored execution status %s", c.decision, got.Status)
		}
	}
	// Revoke after approval, before the scheduler claims it.
	e := mustRequest(t, f, agent, run("lxc:web", "touch /srv/revoke-late", ""))
	mustDecide(t, f, operator, *e.ApprovalID, DecisionApprove, ViaAPI)
	res := mustDecide(t, f, operator, *e.ApprovalID, DecisionRevoke, ViaButton)
	if res.Execution.Status != StatusRevoked {
		t.Fatalf("revoke of an approved execution: %s", res.Execution.Status)
	}
	// Once running it can no longer be revoked.
	e = mustRequest(t, f, agent, run("lxc:web", "touch /srv/revoke-running", ""))
	mustDecide(t, f, operator, *e.ApprovalID, DecisionApprove, ViaAPI)
	if _, err := f.pool.Exec(ctx, `UPDATE executions SET status = 'running', started_at = now() WHERE id = $1`, e.ID); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.Decide(ctx, operator, *e.ApprovalID, Decision{Decision: DecisionRevoke, Via: ViaButton})
	var ce *ConflictError
	if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "running") {
		t.Fatalf("revoke of a running execution: %v", err)
	}
	if _, err := f.svc.Decide(ctx, operator, "0190b7a4-0000-7000-8000-000000000000", Decision{Decision: DecisionApprove, Via: ViaButton}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown approval: %v", err)
	}
}

// TestDecisionRecordsRealRiskClass: the approval carries the execution's class, whatever was
// stored before (the original hard-coded config_mutation on every approval).
func TestDecisionRecordsRealRiskClass(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for i, c := range []struct{ command, class, via string }{
		{cmdDestructive, "destructive", ViaTypedConfirmation},
		{"rm -rf /var/lib/other", "destructive", ViaButton},
		{cmdMutation, "config_mutation", ViaAPI},
		{"touch /srv/chat", "config_mutation", ViaChatAssent},
	} {
		e := mustRequest(t, f, agent, run("host:box", c.command, fmt.Sprintf("sess-class-%d", i)))
		// Corrupt the stored class: the decision must write the real one back.
		if _, err := f.pool.Exec(ctx, `UPDATE approvals SET risk_class = 'read_only' WHERE id = $1`, *e.ApprovalID); err != nil {
			t.Fatal(err)
		}
		res := mustDecide(t, f, operator, *e.ApprovalID, DecisionApprove, c.via)
		if res.Approval.RiskClass != c.class {
			t.Errorf("%s: approval records %s, want %s", c.command, res.Approval.RiskClass, c.class)
		}
		var payloadClass string
		if err := f.pool.QueryRow(ctx, `SELECT payload->>'risk_class' FROM events WHERE type = 'approval.decided' AND payload->>'approval_id' = $1`,
			*e.ApprovalID).Scan(&payloadClass); err != nil || payloadClass != c.class {
			t.Errorf("%s: approval.decided carries %q (%v), want %s", c.command, payloadClass, err, c.class)
		}
	}
}

// TestDecisionRoles: only an operator decides on its own say-so. An agent (naming no message,
// or one the api never recorded) and a readonly token are refused every decision by every via,
// and nothing is written but the agent's refusals' audit rows (approval.relay_refused).
func TestDecisionRoles(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	e := mustRequest(t, f, agent, run("lxc:web", cmdMutation, "sess-roles"))
	d := mustRequest(t, f, agent, run("lxc:web", cmdDestructive, "sess-roles-2"))
	for _, id := range []string{*e.ApprovalID, *d.ApprovalID} {
		for _, m := range []Meta{agent, readonly} {
			for _, via := range []string{ViaButton, ViaChatAssent, ViaTypedConfirmation, ViaAPI} {
				for _, dec := range []string{DecisionApprove, DecisionDeny, DecisionRevoke} {
					for _, msg := range []string{"", "msg-42"} {
						_, err := f.svc.Decide(ctx, m, id, Decision{Decision: dec, Via: via, MessageID: msg})
						if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "only an operator's token may decide") {
							t.Errorf("%s %s via %s (message %q): err = %v, want forbidden", m.Role, dec, via, msg, err)
						}
					}
				}
			}
		}
		// Refused even for a malformed or unknown decision: the role is checked first.
		if _, err := f.svc.Decide(ctx, agent, id, Decision{Decision: "maybe", Via: "telepathy"}); !errors.Is(err, ErrForbidden) {
			t.Errorf("agent, malformed decision: %v", err)
		}
		got, err := f.svc.GetApproval(ctx, id)
		if err != nil || got.Status != ApprovalPending || got.DecidedBy != nil || got.ExecutionStatus != StatusPendingApproval {
			t.Fatalf("refused decisions changed the approval: %+v %v", got, err)
		}
		var audits, events int
		if err := f.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM audit_log WHERE action LIKE 'approval.%' AND after->>'id' = $1),
			(SELECT count(*) FROM events WHERE type = 'approval.decided' AND payload->>'approval_id' = $1)`, id).Scan(&audits, &events); err != nil {
			t.Fatal(err)
		}
		if audits != 0 || events != 0 {
			t.Fatalf("refused decisions wrote %d audit rows and %d events", audits, events)
		}
	}
	for _, d := range []Decision{{Decision: "maybe", Via: ViaButton}, {Decision: DecisionApprove, Via: "telepathy"}} {
		var fe *FieldError
		if _, err := f.svc.Decide(ctx, operator, *e.ApprovalID, d); !errors.As(err, &fe) {
			t.Errorf("%+v: err = %v, want a field error", d, err)
		}
	}
	// The operator's own chat assent, with its message id, approves the config_mutation.
	res, err := f.svc.Decide(ctx, operator, *e.ApprovalID, Decision{Decision: DecisionApprove, Via: ViaChatAssent, MessageID: "msg-42"})
	if err != nil {
		t.Fatalf("operator's chat assent: %v", err)
	}
	if res.Approval.MessageID == nil || *res.Approval.MessageID != "msg-42" || *res.Approval.DecidedBy != operator.Actor {
		t.Fatalf("chat assent not recorded: %+v", res.Approval)
	}
	// Chat assent never approves a destructive execution, nor does via=api.
	_, err = f.svc.Decide(ctx, operator, *d.ApprovalID, Decision{Decision: DecisionApprove, Via: ViaChatAssent, MessageID: "msg-43"})
	refusedCode(t, err, "destructive_needs_confirmation")
	_, err = f.svc.Decide(ctx, operator, *d.ApprovalID, Decision{Decision: DecisionApprove, Via: ViaAPI})
	refusedCode(t, err, "destructive_needs_confirmation")
	if got, _ := f.svc.GetApproval(ctx, *d.ApprovalID); got.Status != ApprovalPending {
		t.Fatalf("refused decisions changed the approval: %s", got.Status)
	}
	// The approval carries the phrase to type; a wrong one (the dashboard sends what the
	// operator typed) approves nothing.
	pending, _ := f.svc.GetApproval(ctx, *d.ApprovalID)
	if pending.ConfirmationPhrase != "confirm rm lxc:web" {
		t.Fatalf("confirmation phrase %q, want %q", pending.ConfirmationPhrase, "confirm rm lxc:web")
	}
	_, err = f.svc.Decide(ctx, operator, *d.ApprovalID, Decision{Decision: DecisionApprove, Via: ViaTypedConfirmation, Confirmation: "confirm rm lxc:db"})
	if fe := (*apierr.FieldError)(nil); !errors.As(err, &fe) || fe.Field != "confirmation" {
		t.Fatalf("a wrong typed phrase: %v, want a field error on confirmation", err)
	}
	if got, _ := f.svc.GetApproval(ctx, *d.ApprovalID); got.Status != ApprovalPending {
		t.Fatalf("a wrong phrase changed the approval: %s", got.Status)
	}
	// The operator's typed confirmation approves it and opens the destructive window for that
	// target and session; the audit row and the event name the operator.
	res, err = f.svc.Decide(ctx, operator, *d.ApprovalID, Decision{Decision: DecisionApprove, Via: ViaTypedConfirmation, MessageID: "msg-44",
		Confirmation: pending.ConfirmationPhrase})
	if err != nil || res.Approval.RiskClass != "destructive" || res.Window == nil || res.Window.Kind != "destructive" || res.Window.Target != "lxc:web" {
		t.Fatalf("typed confirmation: %+v %v", res, err)
	}
	var auditActor, auditBy, eventActor, eventBy string
	if err := f.pool.QueryRow(ctx, `SELECT a.actor, a.after->>'decided_by', e.actor, e.payload->>'decided_by'
		FROM audit_log a, events e
		WHERE a.action = 'approval.approve' AND a.after->>'id' = $1
		  AND e.type = 'approval.decided' AND e.payload->>'approval_id' = $1`, *d.ApprovalID).
		Scan(&auditActor, &auditBy, &eventActor, &eventBy); err != nil {
		t.Fatal(err)
	}
	if auditActor != operator.Actor || auditBy != operator.Actor || eventActor != operator.Actor || eventBy != operator.Actor {
		t.Fatalf("decided by: audit %q/%q, event %q/%q; want %s", auditActor, auditBy, eventActor, eventBy, operator.Actor)
	}
}

func TestWindowExpiryAndRevoke(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	e := mustRequest(t, f, agent, run("lxc:web", cmdMutation, "sess-w"))
	res := mustDecide(t, f, operator, *e.ApprovalID, DecisionApprove, ViaButton)
	if res.Window == nil || res.Window.Kind != "assent" || time.Until(res.Window.ExpiresAt) < 29*time.Minute {
		t.Fatalf("assent window: %+v", res.Window)
	}
	in := mustRequest(t, f, agent, run("lxc:web", "touch /srv/in-window", "sess-w"))
	if in.Status != StatusApproved || in.AuthorisedBy != AuthorisedAssent {
		t.Fatalf("inside the window: %+v", in)
	}
	if _, err := f.pool.Exec(ctx, `UPDATE approval_windows SET expires_at = now() - interval '1 second' WHERE session_id = 'sess-w'`); err != nil {
		t.Fatal(err)
	}
	late := mustRequest(t, f, agent, run("lxc:web", "touch /srv/after-window", "sess-w"))
	if late.Status != StatusPendingApproval {
		t.Fatalf("after the window expired: %+v", late)
	}
	// Revoking the approval that opened a window closes it.
	e2 := mustRequest(t, f, agent, run("lxc:db", cmdMutation, "sess-w2"))
	mustDecide(t, f, operator, *e2.ApprovalID, DecisionApprove, ViaButton)
	mustDecide(t, f, operator, *e2.ApprovalID, DecisionRevoke, ViaButton)
	if e := mustRequest(t, f, agent, run("lxc:db", "touch /srv/after-revoke", "sess-w2")); e.Status != StatusPendingApproval {
		t.Fatalf("window of a revoked approval still served: %+v", e)
	}
}

// TestAuditEventsAndEntity: every mutation leaves its audit row and events, the execution
// entity and its edges commit with it, and a runnable execution is NOTIFYed.
func TestAuditEventsAndEntity(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, f.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `LISTEN oikos_exec`); err != nil {
		t.Fatal(err)
	}
	waitNotify := func(want string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := conn.WaitForNotification(wctx)
		if err != nil || n.Payload != want {
			t.Fatalf("oikos_exec notification: %v %v, want %s", n, err, want)
		}
	}
	events := func(exec string) []string {
		rows, err := f.pool.Query(ctx, `SELECT type FROM events WHERE payload->>'execution_id' = $1 ORDER BY id`, exec)
		if err != nil {
			t.Fatal(err)
		}
		types, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return types
	}
	audits := func(action, target string) int {
		return f.count(t, `SELECT count(*) FROM audit_log WHERE action = $1 AND entity_id = (SELECT id FROM entities WHERE slug = $2)`, action, target)
	}
	ro := mustRequest(t, f, agent, run("lxc:web", cmdRead, "sess-task"))
	waitNotify(ro.ID)
	if got := strings.Join(events(ro.ID), ","); got != "execution.requested,execution.approved" {
		t.Errorf("run-now events: %s", got)
	}
	q := mustRequest(t, f, agent, run("lxc:web", cmdMutation, "sess-task"))
	if got := strings.Join(events(q.ID), ","); got != "execution.requested,execution.queued,approval.requested" {
		t.Errorf("queued events: %s", got)
	}
	if audits("execution.request", "lxc:web") != 2 {
		t.Errorf("execution.request audit rows: %d", audits("execution.request", "lxc:web"))
	}
	mustDecide(t, f, operator, *q.ApprovalID, DecisionApprove, ViaButton)
	waitNotify(q.ID)
	if got := strings.Join(events(q.ID), ","); got != "execution.requested,execution.queued,approval.requested,approval.decided,execution.approved" {
		t.Errorf("decided events: %s", got)
	}
	if audits("approval.approve", "lxc:web") != 1 {
		t.Error("no approval.approve audit row")
	}
	d := mustRequest(t, f, agent, run("lxc:db", cmdMutation, ""))
	mustDecide(t, f, operator, *d.ApprovalID, DecisionDeny, ViaButton)
	if got := strings.Join(events(d.ID), ","); !strings.HasSuffix(got, "approval.decided,execution.denied") {
		t.Errorf("deny events: %s", got)
	}
	var actor, corr string
	if err := f.pool.QueryRow(ctx, `SELECT actor, correlation_id FROM events WHERE type = 'execution.queued' AND payload->>'execution_id' = $1`, q.ID).
		Scan(&actor, &corr); err != nil || actor != "nomos" || corr != "sess-task" {
		t.Errorf("event actor/correlation: %q %q %v", actor, corr, err)
	}
	// G12: the entity (slug from the full id), targets edge, and involves edge from the
	// session's task.
	for _, e := range []Execution{ro, q} {
		var state string
		if err := f.pool.QueryRow(ctx, `SELECT state FROM entities WHERE slug = $1`, "execution:"+e.ID).Scan(&state); err != nil {
			t.Fatalf("execution entity of %s: %v", e.ID, err)
		}
		for _, edge := range []struct{ typ, src string }{{"targets", "lxc:web"}, {"involves", "task:t1"}} {
			n := f.count(t, `SELECT count(*) FROM relationships r JOIN entities s ON s.id = r.source_id JOIN entities d ON d.id = r.target_id
				WHERE r.type = $1 AND s.slug = $2 AND d.slug = $3 AND r.valid_to IS NULL`, edge.typ, edge.src, "execution:"+e.ID)
			if n != 1 {
				t.Errorf("%s edge %s -> execution:%s: %d", edge.typ, edge.src, e.ID, n)
			}
		}
	}
	if n := f.count(t, `SELECT count(*) FROM relationships r JOIN entities d ON d.id = r.target_id WHERE r.type = 'involves' AND d.slug = $1`, "execution:"+d.ID); n != 0 {
		t.Errorf("an execution without a session got an involves edge")
	}
}

// TestOutputRoundTrip: output with NUL, invalid UTF-8, quotes and backslashes comes back
// byte for byte in output_base64 and in the log chunks.
func TestOutputRoundTrip(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	e := mustRequest(t, f, agent, run("lxc:web", cmdRead, ""))
	chunks := [][]byte{[]byte("say \"hi\" \\ back\n"), {0x00, 0x01, 'a', 0xff, 0xfe, '\n'}, []byte("caf\xc3\xa9 \xe2\x82")}
	f.simulate(t, e.ID, chunks, StatusCompleted, 0, `{"ok": true}`)
	got, err := f.svc.Get(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Join(chunks, nil)
	raw, err := base64.StdEncoding.DecodeString(*got.OutputBase64)
	if err != nil || !bytes.Equal(raw, want) {
		t.Fatalf("output_base64 = %q, want %q", raw, want)
	}
	if *got.Output != TextOf(want) || got.ExitCode == nil || *got.ExitCode != 0 || got.Status != StatusCompleted {
		t.Fatalf("execution after run: %+v", got)
	}
	// Through JSON as the api answers it.
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var back Execution
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	raw, _ = base64.StdEncoding.DecodeString(*back.OutputBase64)
	if !bytes.Equal(raw, want) || string(back.Result) != `{"ok":true}` {
		t.Fatalf("after JSON: %q result %s", raw, back.Result)
	}
	logs, err := f.svc.Logs(ctx, e.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(logs.Chunks) != len(chunks) || !logs.Done || logs.NextSeq != len(chunks) {
		t.Fatalf("logs: %+v", logs)
	}
	for i, c := range logs.Chunks {
		if !bytes.Equal(c.Data, chunks[i]) || c.Seq != i+1 {
			t.Errorf("chunk %d = %q", i, c.Data)
		}
	}
	page, err := f.svc.Logs(ctx, e.ID, 1, 1)
	if err != nil || len(page.Chunks) != 1 || page.Chunks[0].Seq != 2 || page.Done {
		t.Fatalf("logs after 1, limit 1: %+v %v", page, err)
	}
}

func TestListCursor(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	var ids []string
	for i := range 7 {
		target := "lxc:web"
		if i%2 == 1 {
			target = "lxc:db"
		}
		e := mustRequest(t, f, agent, run(target, fmt.Sprintf("cat /etc/hostname%d", i), "sess-list"))
		ids = append(ids, e.ID)
	}
	// Force ties on created_at: the cursor must still neither drop nor repeat rows.
	if _, err := f.pool.Exec(ctx, `UPDATE executions SET created_at = '2026-01-01T00:00:00Z'`); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	cursor := ""
	pages := 0
	for {
		p, err := f.svc.List(ctx, ListFilter{SessionID: "sess-list", After: cursor, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, e := range p.Items {
			if seen[e.ID] {
				t.Fatalf("row %s repeated", e.ID)
			}
			seen[e.ID] = true
			if e.Output != nil || e.OutputBase64 != nil {
				t.Fatal("a list carries output")
			}
		}
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	if len(seen) != len(ids) || pages != 3 {
		t.Fatalf("walked %d rows in %d pages, want %d in 3", len(seen), pages, len(ids))
	}
	p, err := f.svc.List(ctx, ListFilter{Target: "lxc:db", Statuses: []string{StatusApproved}, CorrelationID: "sess-list"})
	if err != nil || len(p.Items) != 3 {
		t.Fatalf("filtered list: %d items, %v", len(p.Items), err)
	}
	var fe *FieldError
	if _, err := f.svc.List(ctx, ListFilter{Statuses: []string{"bogus"}}); !errors.As(err, &fe) {
		t.Fatalf("bad status filter: %v", err)
	}
	if _, err := f.svc.List(ctx, ListFilter{After: "garbage"}); !errors.As(err, &fe) {
		t.Fatalf("bad cursor: %v", err)
	}
	ap, err := f.svc.ListApprovals(ctx, ApprovalFilter{Statuses: []string{ApprovalPending}})
	if err != nil || len(ap.Items) != 0 {
		t.Fatalf("pending approvals: %+v %v", ap, err)
	}
}
