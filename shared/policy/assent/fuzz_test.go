package assent

import (
	"strings"
	"testing"
	"unicode"

	"github.com/oikos-hq/oikos/shared/policy"
)

var negations = []string{"no", "not", "don", "dont", "wait", "but", "yet", "stop", "never", "cancel", "deny", "nope"}

// FuzzDetectAssent: loose assent never grants a destructive approval, never
// grants on a message with a negation, and grants only what is pending.
func FuzzDetect(f *testing.F) {
	for _, s := range []string{"yes", "ok but not yet", "no, don't go ahead", "go ahead", "confirm destroy lxc:test-01",
		"Yes!", "approved", "confirm rm host:atlas\nconfirm destroy lxc:test-01", "yes no", "ok 👍"} {
		f.Add(s)
	}
	pending := []PendingApproval{
		{ID: "a1", TargetSlug: "lxc:web", Class: policy.ConfigMutation, Command: "systemctl restart caddy"},
		{ID: "a2", TargetSlug: "lxc:test-01", Class: policy.Destructive, Command: "pct destroy 101"},
		{ID: "a3", TargetSlug: "host:atlas", Class: policy.Destructive, Command: "rm -rf /srv/old"},
		{ID: "a4", TargetSlug: "host:atlas", Class: policy.ReversibleLow, Command: "apt-get update"},
	}
	classOf := map[string]policy.Class{}
	for _, a := range pending {
		classOf[a.ID] = a.Class
	}
	f.Fuzz(func(t *testing.T, msg string) {
		grants := Detect(msg, pending)
		words := strings.FieldsFunc(strings.ToLower(msg), func(r rune) bool { return !unicode.IsLetter(r) })
		negated := false
		for _, w := range words {
			for _, n := range negations {
				if w == n {
					negated = true
				}
			}
		}
		seen := map[string]bool{}
		for _, g := range grants {
			c, ok := classOf[g.ApprovalID]
			if !ok || seen[g.ApprovalID] {
				t.Fatalf("Detect(%q) granted %q (unknown or twice)", msg, g.ApprovalID)
			}
			seen[g.ApprovalID] = true
			switch g.Via {
			case ViaChatAssent:
				if c == policy.Destructive {
					t.Fatalf("Detect(%q): loose assent granted destructive %s", msg, g.ApprovalID)
				}
				if negated {
					t.Fatalf("Detect(%q): a negated message granted %s", msg, g.ApprovalID)
				}
			case ViaTypedConfirmation:
				if !strings.Contains(strings.ToLower(msg), "confirm") {
					t.Fatalf("Detect(%q): typed confirmation without 'confirm'", msg)
				}
			default:
				t.Fatalf("Detect(%q): unknown via %q", msg, g.Via)
			}
		}
	})
}
