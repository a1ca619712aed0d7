package notify_test

import (
	"testing"

	"github.com/oikos-hq/oikos/api/internal/notify"
)

// Matches is the rule's whole decision.
func TestRuleMatches(t *testing.T) {
	t.Parallel()
	isA := func(typ, anc string) bool { return anc == "guest" && (typ == "lxc" || typ == "vm") }
	n := notify.Notification{Kind: notify.KindIncidentOpened, Severity: "warning", EntityType: "lxc", Tags: []string{"media"}}
	for _, c := range []struct {
		name string
		r    notify.Rule
		want bool
	}{
		{"kind", notify.Rule{Kinds: []string{notify.KindIncidentOpened}}, true},
		{"other kind", notify.Rule{Kinds: []string{notify.KindIncidentResolved}}, false},
		{"severity met", notify.Rule{Kinds: []string{notify.KindIncidentOpened}, MinSeverity: "warning"}, true},
		{"severity not met", notify.Rule{Kinds: []string{notify.KindIncidentOpened}, MinSeverity: "critical"}, false},
		{"type", notify.Rule{Kinds: []string{notify.KindIncidentOpened}, EntityTypes: []string{"lxc"}}, true},
		{"supertype", notify.Rule{Kinds: []string{notify.KindIncidentOpened}, EntityTypes: []string{"guest"}}, true},
		{"other type", notify.Rule{Kinds: []string{notify.KindIncidentOpened}, EntityTypes: []string{"vm"}}, false},
		{"tag", notify.Rule{Kinds: []string{notify.KindIncidentOpened}, Tags: []string{"backup", "media"}}, true},
		{"other tag", notify.Rule{Kinds: []string{notify.KindIncidentOpened}, Tags: []string{"backup"}}, false},
		{"disabled", notify.Rule{Kinds: []string{notify.KindIncidentOpened}}, false},
	} {
		c.r.Enabled = c.name != "disabled"
		if got := notify.Matches(c.r, n, isA); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
