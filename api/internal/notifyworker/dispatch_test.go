package notifyworker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/oikos-hq/oikos/api/internal/apitest"
	"github.com/oikos-hq/oikos/api/internal/notify"
	"github.com/oikos-hq/oikos/api/internal/notifyworker"
)

// Rules choose what goes where: by kind, minimum severity, entity type (with subtypes) and
// tag. Each source event becomes its kind: an approval request carries the command, the
// target, the risk class, the Operations link and the CLI line; a drift report is news only
// when something is missing or a ghost; a host key change comes as a raised signal.
func TestRulesChooseWhatGoesWhere(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	ont := apitest.SeedOntology(t)
	url := newReceiver(t).Ntfy("x")
	mk := func(name string, r notify.RuleInput) {
		e.Channel(notify.ChannelInput{Name: name, URL: url, Rules: []notify.RuleInput{r}})
	}
	incidents := []string{notify.KindIncidentOpened}
	mk("critical-only", notify.RuleInput{Kinds: incidents, MinSeverity: "critical"})
	mk("guests", notify.RuleInput{Kinds: incidents, EntityTypes: []string{"guest"}})
	mk("media", notify.RuleInput{Kinds: incidents, Tags: []string{"media", "backup"}})
	mk("approvals", notify.RuleInput{Kinds: []string{notify.KindApprovalRequested}})
	mk("destructive", notify.RuleInput{Kinds: []string{notify.KindApprovalRequested}, MinSeverity: "critical"})
	mk("drift", notify.RuleInput{Kinds: []string{notify.KindDriftFound}})
	mk("keys", notify.RuleInput{Kinds: []string{notify.KindHostKeyChanged}})
	off := false
	mk("disabled-rule", notify.RuleInput{Kinds: incidents, Enabled: &off})
	e.Channel(notify.ChannelInput{Name: "disabled-channel", URL: url, Enabled: &off}, notify.KindIncidentOpened)

	d := mustDispatcher(t, notifyworker.DispatcherOptions{Pool: e.Pool, Logger: e.Logger, PublicURL: "https://oikos.example/",
		IsA: ont.IsA, Poll: time.Minute})
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)

	root, p := incident("lxc", "jellyfin", "warning", "media")
	warnLXC := e.AppendEvent("incident.opened", root, p)
	root, p = incident("proxmox-host", "atlas", "critical")
	critHost := e.AppendEvent("incident.opened", root, p)
	approvalID := uuid.NewString()
	destructive := e.AppendEvent("approval.requested", uuid.NewString(), map[string]any{
		"approval_id": approvalID, "execution_id": uuid.NewString(), "target": "lxc:db", "action": "run",
		"command": "rm -rf /srv/data", "purpose": "free space", "risk_class": "destructive",
		"reasons": []string{"rm -r deletes files"}})
	mild := e.AppendEvent("approval.requested", uuid.NewString(), map[string]any{
		"approval_id": "a-2", "execution_id": uuid.NewString(), "target": "lxc:web", "action": "run",
		"command": "systemctl restart caddy", "risk_class": "config_mutation"})
	nothing := e.AppendEvent("drift.reported", "", map[string]any{"report_id": "r1", "trigger": "scheduled", "missing": 0,
		"ghost": 0, "unchecked": 3, "hosts_unreachable": 1})
	found := e.AppendEvent("drift.reported", "", map[string]any{"report_id": "r2", "trigger": "scheduled", "missing": 1,
		"ghost": 2, "unchecked": 0, "hosts_unreachable": 0})
	hostKey := e.AppendEvent("signal.raised", "", map[string]any{"signal_id": uuid.NewString(), "kind": "host_key_changed",
		"dedup_key": "host_key_changed:127.0.10.1:22", "severity": "critical",
		"summary": "SSH host key of 127.0.10.1:22 changed", "occurrences": 1})
	other := e.AppendEvent("signal.raised", "", map[string]any{"signal_id": uuid.NewString(), "kind": "probe_stuck",
		"dedup_key": "probe_stuck:x", "severity": "warning", "occurrences": 1})
	d.Wake()
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := d.WaitCursor(waitCtx, other); err != nil {
		t.Fatal(err)
	}

	want := map[int64][]string{
		warnLXC:     {"guests", "media"},
		critHost:    {"critical-only"},
		destructive: {"approvals", "destructive"},
		mild:        {"approvals"},
		nothing:     nil,
		found:       {"drift"},
		hostKey:     {"keys"},
		other:       nil,
	}
	for id, channels := range want {
		rows, err := e.Pool.Query(ctx, `SELECT c.name FROM notification_deliveries d JOIN notification_channels c ON c.id = d.channel_id
			WHERE d.event_id = $1 ORDER BY c.name`, id)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			got = append(got, n)
		}
		if strings.Join(got, ",") != strings.Join(channels, ",") {
			t.Errorf("event %d went to %v, want %v", id, got, channels)
		}
	}

	body := func(event int64) (title, body, severity string) {
		t.Helper()
		if err := e.Pool.QueryRow(ctx, `SELECT title, body, severity FROM notification_deliveries WHERE event_id = $1 LIMIT 1`,
			event).Scan(&title, &body, &severity); err != nil {
			t.Fatal(err)
		}
		return title, body, severity
	}
	title, text, sev := body(destructive)
	if sev != "critical" || title != "Approval needed: destructive on lxc:db" {
		t.Errorf("destructive approval: %q %s", title, sev)
	}
	for _, want := range []string{"Command: rm -rf /srv/data", "Target: lxc:db", "Risk class: destructive (rm -r deletes files)",
		"https://oikos.example/ops", "oikos approve --confirm lxc:db " + approvalID, "oikos deny " + approvalID} {
		if !strings.Contains(text, want) {
			t.Errorf("approval message lacks %q:\n%s", want, text)
		}
	}
	if _, text, sev = body(mild); sev != "warning" || !strings.Contains(text, "or run: oikos approve a-2\n") ||
		!strings.Contains(text, "Command: systemctl restart caddy") {
		t.Errorf("config_mutation approval (%s):\n%s", sev, text)
	}
	if title, text, sev = body(found); sev != "warning" || title != "Drift: 1 missing, 2 ghost" || !strings.Contains(text, "oikos drift") {
		t.Errorf("drift: %q %s\n%s", title, sev, text)
	}
	if title, text, sev = body(hostKey); sev != "critical" || title != "SSH host key changed: 127.0.10.1:22" ||
		!strings.Contains(text, "https://oikos.example/signals") {
		t.Errorf("host key: %q %s\n%s", title, sev, text)
	}
}
