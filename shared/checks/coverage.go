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
