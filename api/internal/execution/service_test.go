package execution_test

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

	"github.com/oikos-hq/oikos/api/internal/execution"
	"github.com/oikos-hq/oikos/api/internal/execution/exectest"
)

func TestRequestOutcomes(t *testing.T) {
	t.Parallel()
	f := exectest.NewFixture(t)
	ro := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:web", exectest.CmdRead, ""))
	if ro.Status != execution.StatusApproved || ro.RiskClass != "read_only" || ro.AuthorisedBy != execution.AuthorisedAuto || ro.ApprovalID != nil {
		t.Fatalf("read-only: %+v", ro)
	}
	cm := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:web", exectest.CmdMutation, ""))
	if cm.Status != execution.StatusPendingApproval || cm.RiskClass != "config_mutation" || cm.ApprovalID == nil {
		t.Fatalf("config_mutation: %+v", cm)
	}
	if !strings.Contains(cm.Message, *cm.ApprovalID) {
		t.Errorf("queued message %q does not name the approval", cm.Message)
	}
	de := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("host:box", exectest.CmdDestructive, ""))
	if de.Status != execution.StatusPendingApproval || de.RiskClass != "destructive" {
		t.Fatalf("destructive: %+v", de)
	}
	if _, err := f.Svc.Request(context.Background(), exectest.Agent, exectest.Run("lxc:nope", exectest.CmdRead, "")); !errors.Is(err, execution.ErrNotFound) {
		t.Fatalf("unknown target: %v", err)
	}
	_, err := f.Svc.Request(context.Background(), exectest.Agent, exectest.Run("service:caddy", exectest.CmdRead, ""))
	exectest.RefusedCode(t, err, "target_kind")
	_, err = f.Svc.Request(context.Background(), exectest.Agent, exectest.Run("lxc:gone", exectest.CmdRead, ""))
	exectest.RefusedCode(t, err, "target_state")
	_, err = f.Svc.Request(context.Background(), exectest.Agent, exectest.Run("lxc:web", "head - n 3 /etc/passwd", ""))
	re := exectest.RefusedCode(t, err, "syntax")
	if !strings.Contains(re.Reason, "-n") {
		t.Errorf("syntax refusal %q does not name the fix", re.Reason)
	}
	if _, err := f.Svc.Request(context.Background(), exectest.Readonly, exectest.Run("lxc:web", exectest.CmdRead, "")); !errors.Is(err, execution.ErrForbidden) {
		t.Fatalf("readonly request: %v", err)
	}
	for _, bad := range []execution.Request{
		{Target: "lxc:web", Command: exectest.CmdRead},                                          // no purpose
		{Target: "", Command: exectest.CmdRead, Purpose: "x"},                                   // no target
		{Target: "lxc:web", Command: " ", Purpose: "x"},                                         // no command
		{Target: "lxc:web", Command: "echo a\x00b", Purpose: "x"},                               // NUL
		{Target: "lxc:web", Command: exectest.CmdRead, Purpose: "x", DeclaredRisk: "harmless"},  // bad class
		{Target: "lxc:web", Command: exectest.CmdRead, Purpose: "x", TimeoutSeconds: -1},        // bad timeout
		{Target: "lxc:web", Command: exectest.CmdRead, Purpose: "x", Params: []byte(`{"a":1}`)}, // params on run
	} {
		var fe *execution.FieldError
		if _, err := f.Svc.Request(context.Background(), exectest.Agent, bad); !errors.As(err, &fe) {
			t.Errorf("request %+v: err = %v, want a field error", bad, err)
		}
	}
}

// TestDeclaredRiskOnlyEscalates: the agent's own verdict is never trusted.
func TestDeclaredRiskOnlyEscalates(t *testing.T) {
	t.Parallel()
	f := exectest.NewFixture(t)
	cases := []struct {
		command, declared, want, status string
	}{
		{exectest.CmdDestructive, "read_only", "destructive", execution.StatusPendingApproval},
		{exectest.CmdMutation, "read_only", "config_mutation", execution.StatusPendingApproval},
		{exectest.CmdRead, "destructive", "destructive", execution.StatusPendingApproval},
		{exectest.CmdRead, "config_mutation", "config_mutation", execution.StatusPendingApproval},
		{exectest.CmdRead, "reversible_low", "reversible_low", execution.StatusApproved},
		{exectest.CmdRead, "read_only", "read_only", execution.StatusApproved},
	}
	for i, c := range cases {
		// One session per case keeps the dedup keys apart.
		r := exectest.Run("lxc:web", c.command, fmt.Sprintf("sess-declared-%d", i))
		r.DeclaredRisk = c.declared
		e := exectest.MustRequest(t, f, exectest.Agent, r)
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
	f := exectest.NewFixture(t)
	tables := []string{"executions", "approvals", "entities", "relationships", "events", "audit_log"}
	before := map[string]int{}
	for _, tb := range tables {
		before[tb] = f.Count(t, `SELECT count(*) FROM `+tb)
	}
	for _, target := range []string{"vm:noagent", "vm:unknownagent"} {
		for _, cmd := range []string{exectest.CmdRead, exectest.CmdMutation, exectest.CmdDestructive} {
			_, err := f.Svc.Request(context.Background(), exectest.Agent, exectest.Run(target, cmd, "sess-vm"))
			re := exectest.RefusedCode(t, err, "no_guest_agent")
			if !strings.Contains(re.Reason, "guest agent") {
				t.Errorf("%s: reason %q does not say why", target, re.Reason)
			}
		}
	}
	for _, tb := range tables {
		if n := f.Count(t, `SELECT count(*) FROM `+tb); n != before[tb] {
			t.Errorf("%s: %d rows after refusals, %d before", tb, n, before[tb])
		}
	}
	if e := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("vm:ha", exectest.CmdRead, "")); e.Status != execution.StatusApproved {
		t.Fatalf("vm with agent: %+v", e)
	}
}

func TestApprovalFlood(t *testing.T) {
	t.Parallel()
	f := exectest.NewFixture(t)
	ctx := context.Background()
	first := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:web", exectest.CmdMutation, "sess-flood"))
	_, err := f.Svc.Request(ctx, exectest.Agent, exectest.Run("lxc:db", "touch /srv/other", "sess-flood"))
	re := exectest.RefusedCode(t, err, "approval_pending")
	if re.ApprovalID != *first.ApprovalID || !strings.Contains(re.Reason, *first.ApprovalID) {
		t.Fatalf("flood refusal %+v does not name pending approval %s", re, *first.ApprovalID)
	}
	// A destructive request is refused the same way; read-only still runs; other sessions
	// and requests without a session are not affected.
	_, err = f.Svc.Request(ctx, exectest.Agent, exectest.Run("lxc:db", exectest.CmdDestructive, "sess-flood"))
	exectest.RefusedCode(t, err, "approval_pending")
	if e := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:db", exectest.CmdRead, "sess-flood")); e.Status != execution.StatusApproved {
		t.Fatalf("read-only during a pending approval: %+v", e)
	}
	if e := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:db", "touch /srv/other", "sess-flood-2")); e.Status != execution.StatusPendingApproval {
		t.Fatalf("other session: %+v", e)
	}
	if e := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:db", "touch /srv/third", "")); e.Status != execution.StatusPendingApproval {
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
			e, err := f.Svc.Request(ctx, exectest.Agent, exectest.Run("lxc:web", fmt.Sprintf("touch /srv/c%d", i), "sess-flood-race"))
			mu.Lock()
			defer mu.Unlock()
			var re *execution.RefusedError
			switch {
			case err == nil && e.Status == execution.StatusPendingApproval:
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
	f := exectest.NewFixture(t)
	ctx := context.Background()
	e := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:web", exectest.CmdRead, ""))
	chunks := [][]byte{[]byte("say \"hi\" \\ back\n"), {0x00, 0x01, 'a', 0xff, 0xfe, '\n'}, []byte("caf\xc3\xa9 \xe2\x82")}
	simulate(t, f, e.ID, chunks, execution.StatusCompleted, 0, `{"ok": true}`)
	got, err := f.Svc.Get(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Join(chunks, nil)
	raw, err := base64.StdEncoding.DecodeString(*got.OutputBase64)
	if err != nil || !bytes.Equal(raw, want) {
		t.Fatalf("output_base64 = %q, want %q", raw, want)
	}
	if *got.Output != execution.TextOf(want) || got.ExitCode == nil || *got.ExitCode != 0 || got.Status != execution.StatusCompleted {
		t.Fatalf("execution after run: %+v", got)
	}
	// Through JSON as the api answers it.
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var back execution.Execution
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	raw, _ = base64.StdEncoding.DecodeString(*back.OutputBase64)
	if !bytes.Equal(raw, want) || string(back.Result) != `{"ok":true}` {
		t.Fatalf("after JSON: %q result %s", raw, back.Result)
	}
	logs, err := f.Svc.Logs(ctx, e.ID, 0, 0)
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
	page, err := f.Svc.Logs(ctx, e.ID, 1, 1)
	if err != nil || len(page.Chunks) != 1 || page.Chunks[0].Seq != 2 || page.Done {
		t.Fatalf("logs after 1, limit 1: %+v %v", page, err)
	}
}

func TestListCursor(t *testing.T) {
	t.Parallel()
	f := exectest.NewFixture(t)
	ctx := context.Background()
	var ids []string
	for i := range 7 {
		target := "lxc:web"
		if i%2 == 1 {
			target = "lxc:db"
		}
		e := exectest.MustRequest(t, f, exectest.Agent, exectest.Run(target, fmt.Sprintf("cat /etc/hostname%d", i), "sess-list"))
		ids = append(ids, e.ID)
	}
	// Force ties on created_at: the cursor must still neither drop nor repeat rows.
	if _, err := f.Pool.Exec(ctx, `UPDATE executions SET created_at = '2026-01-01T00:00:00Z'`); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	cursor := ""
	pages := 0
	for {
		p, err := f.Svc.List(ctx, execution.ListFilter{SessionID: "sess-list", After: cursor, Limit: 3})
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
	p, err := f.Svc.List(ctx, execution.ListFilter{Target: "lxc:db", Statuses: []string{execution.StatusApproved}, CorrelationID: "sess-list"})
	if err != nil || len(p.Items) != 3 {
		t.Fatalf("filtered list: %d items, %v", len(p.Items), err)
	}
	var fe *execution.FieldError
	if _, err := f.Svc.List(ctx, execution.ListFilter{Statuses: []string{"bogus"}}); !errors.As(err, &fe) {
		t.Fatalf("bad status filter: %v", err)
	}
	if _, err := f.Svc.List(ctx, execution.ListFilter{After: "garbage"}); !errors.As(err, &fe) {
		t.Fatalf("bad cursor: %v", err)
	}
	ap, err := f.Svc.ListApprovals(ctx, execution.ApprovalFilter{Statuses: []string{execution.ApprovalPending}})
	if err != nil || len(ap.Items) != 0 {
		t.Fatalf("pending approvals: %+v %v", ap, err)
	}
}
