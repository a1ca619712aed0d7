package checks

import (
	"fmt"
	"strings"

	"github.com/oikos-hq/oikos/shared/ontology"
)

// CoverageGap reports whether t lacks monitoring its type declares (docs/behaviours.md S5), given
// r, the result of Derive for t. It is true only when the type (or an entity override)
// asks for at least one check that applies to this live entity and r holds no check at
// all. Types and entities declaring `monitoring: none`, specs the entity disabled, specs
// whose requires_all / requires_any the entity does not meet, and destroyed or deprecated
// entities are never gaps: the original coverage sweep's false positives came from
// flagging such entities. The reason names what was expected and why it is missing.
func CoverageGap(t Target, o *ontology.Ontology, r Result) (gap bool, reason string) {
	if r.MonitoringNone {
		return false, ""
	}
	p := plan(t, o)
	if p.none || p.inactive || len(r.Defs) > 0 {
		return false, ""
	}
	want := p.expected()
	if len(want) == 0 {
		return false, ""
	}
	why := map[string]string{}
	for _, s := range r.Skipped {
		why[s.Kind+"/"+s.Script] = s.Reason
	}
	parts := make([]string, 0, len(want))
	for _, s := range want {
		part := label(s.spec.Kind, s.spec.Script)
		if w := why[s.spec.Kind+"/"+s.spec.Script]; w != "" {
			part += " (" + w + ")"
		}
		parts = append(parts, part)
	}
	return true, fmt.Sprintf("type %s declares monitoring but %s has no check: %s",
		t.Type, slugOf(t), strings.Join(parts, "; "))
}

// PendingReason is what an entity's health says before any check has reported (S5: every
// unknown says why): that its first check is due, or, when nothing could be derived, which
// checks its type asks for and what each lacks. It is "" when r asks for no status at all
// (monitoring: none).
func PendingReason(r Result) string {
	if r.MonitoringNone {
		return ""
	}
	if n := len(r.Defs); n > 0 {
		if n == 1 {
			return "not checked yet: its check " + r.Defs[0].Kind + " has not reported"
		}
		return fmt.Sprintf("not checked yet: none of its %d checks has reported", n)
	}
	if len(r.Skipped) == 0 {
		return "no check can be derived: its type declares none that applies"
	}
	parts := make([]string, 0, len(r.Skipped))
	for _, s := range r.Skipped {
		parts = append(parts, label(s.Kind, s.Script)+": "+s.Reason)
	}
	return "no check can be derived: " + strings.Join(parts, "; ")
}
