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
