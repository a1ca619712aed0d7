package checks

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/shared/attr"
	"github.com/oikos-hq/oikos/shared/duration"
	"github.com/oikos-hq/oikos/shared/ontology"
)

// Defaults for an entity-added check that leaves them out; the same as the ontology's.
const (
	DefaultInterval = ontology.DefaultInterval
	DefaultTimeout  = ontology.DefaultTimeout
)

// minInterval keeps a typo such as "1ms" from turning a check into a busy loop.
const minInterval = time.Second

var knownKinds = []string{
	ontology.KindBackupFreshness, ontology.KindHTTP, ontology.KindProxmoxGuest, ontology.KindSSHScript, ontology.KindTCP,
}

var knownScripts = []string{
	ontology.ScriptCPU, ontology.ScriptDisk, ontology.ScriptLoad, ontology.ScriptMemory, ontology.ScriptProcess,
}

// planned is one spec the entity would get, with the reason it does not when skip is set.
type planned struct {
	spec ontology.MonitoringSpec
	skip string
	// intervalSet and timeoutSet say the entity chose them for this spec explicitly, so
	// check_interval does not override the former and clamping the latter is worth a
	// warning.
	intervalSet, timeoutSet bool
}

// entityPlan is the monitoring an entity warrants once its type, its overrides and its
// state have been taken into account, before any per-kind attribute is read. CoverageGap
// and Derive both start from it, so they cannot disagree on what was expected.
type entityPlan struct {
	none     bool
	inactive bool
	specs    []planned
	warnings []string
}

// expected returns the specs the entity should have got a check for: enabled, applicable
// and on a live entity.
func (p entityPlan) expected() []planned {
	var out []planned
	for _, s := range p.specs {
		if s.skip == "" {
			out = append(out, s)
		}
	}
	return out
}

// override is one entry of an entity's monitoring attribute.
type override struct {
	kind, script      string
	interval, timeout time.Duration
	args              []string
	hasArgs           bool
	disabled          bool
}

func plan(t Target, o *ontology.Ontology) entityPlan {
	var p entityPlan
	if o == nil {
		p.warnings = append(p.warnings, "no ontology given: nothing can be derived")
		return p
	}
	if _, ok := o.Type(t.Type); !ok {
		p.warnings = append(p.warnings, fmt.Sprintf("entity type %q is not in the ontology: nothing derived", t.Type))
		return p
	}
	typeSpecs, typeNone := o.Monitoring(t.Type)
	ovs, entityNone, warns := parseOverrides(t.Attributes[attrMonitoring])
	p.warnings = append(p.warnings, warns...)
	for _, s := range typeSpecs {
		p.specs = append(p.specs, planned{spec: s})
	}
	if entityNone {
		p.none = true
		for i := range p.specs {
			p.specs[i].skip = "disabled: the entity's monitoring attribute is none"
		}
		return p
	}

	added := false
	seen := map[string]bool{}
	for _, ov := range ovs {
		key := ov.kind + "/" + ov.script
		if seen[key] {
			p.warnings = append(p.warnings, fmt.Sprintf("monitoring override %s listed twice; the first entry wins", label(ov.kind, ov.script)))
			continue
		}
		seen[key] = true
		i := slices.IndexFunc(p.specs, func(s planned) bool { return s.spec.Kind == ov.kind && s.spec.Script == ov.script })
		if i < 0 {
			if ov.disabled {
				p.warnings = append(p.warnings, fmt.Sprintf("monitoring override disables %s, which the type does not declare", label(ov.kind, ov.script)))
				continue
			}
			p.specs = append(p.specs, planned{spec: ontology.MonitoringSpec{Kind: ov.kind, Script: ov.script, Interval: DefaultInterval}})
			i = len(p.specs) - 1
			added = true
		}
		s := &p.specs[i]
		if ov.disabled {
			s.skip = "disabled by the entity's monitoring attribute"
			continue
		}
		if ov.interval > 0 {
			s.spec.Interval, s.intervalSet = ov.interval, true
		}
		if ov.timeout > 0 {
			s.spec.Timeout, s.timeoutSet = ov.timeout, true
		}
		if ov.hasArgs {
			s.spec.Args = ov.args
		}
	}
	p.none = typeNone && !added

	if raw, ok := t.Attributes[attrCheckInterval]; ok && raw != nil {
		if d, err := attrDuration(raw); err != nil {
			p.warnings = append(p.warnings, fmt.Sprintf("check_interval %v ignored: %v", raw, err))
		} else {
			for i := range p.specs {
				if !p.specs[i].intervalSet {
					p.specs[i].spec.Interval = d
				}
			}
		}
	}
	for i := range p.specs {
		s := &p.specs[i]
		if s.spec.Interval <= 0 {
			s.spec.Interval = DefaultInterval
		}
		if s.spec.Timeout <= 0 {
			s.spec.Timeout = DefaultTimeout
		}
		if s.spec.Timeout > s.spec.Interval {
			if s.timeoutSet {
				p.warnings = append(p.warnings, fmt.Sprintf("monitoring override %s: timeout %s cut to its interval %s",
					label(s.spec.Kind, s.spec.Script), s.spec.Timeout, s.spec.Interval))
			}
			s.spec.Timeout = s.spec.Interval
		}
	}

	if t.State == StateDestroyed || t.State == StateDeprecated || t.State == StatePlanned || t.State == StateProvisioning {
		// Retired entities and ones that do not exist yet derive nothing: probing them would
		// only report them down and drown real outages.
		p.inactive = true
		why := "its checks are retired"
		if t.State == StatePlanned || t.State == StateProvisioning {
			why = "it is not live yet"
		}
		for i := range p.specs {
			if p.specs[i].skip == "" {
				p.specs[i].skip = "entity is " + t.State + ": " + why
			}
		}
		return p
	}
	for i := range p.specs {
		s := &p.specs[i]
		if s.skip == "" && !s.spec.AppliesTo(t.Attributes) {
			s.skip = notApplicable(s.spec)
		}
	}
	return p
}

func notApplicable(s ontology.MonitoringSpec) string {
	var parts []string
	if len(s.RequiresAll) > 0 {
		parts = append(parts, "all of "+strings.Join(s.RequiresAll, ", "))
	}
	if len(s.RequiresAny) > 0 {
		parts = append(parts, "one of "+strings.Join(s.RequiresAny, ", "))
	}
	return "not applicable: the type asks for this check only on entities with " + strings.Join(parts, " and ") + " set"
}

func label(kind, script string) string {
	if script == "" {
		return kind
	}
	return kind + " " + script
}

// parseOverrides reads the monitoring attribute: absent, the string "none", or a list of
// entries. Malformed entries are dropped with a warning rather than failing the entity.
func parseOverrides(v any) (ovs []override, none bool, warns []string) {
	var items []any
	switch x := v.(type) {
	case nil:
		return nil, false, nil
	case string:
		if strings.EqualFold(strings.TrimSpace(x), "none") {
			return nil, true, nil
		}
		return nil, false, []string{fmt.Sprintf("monitoring attribute %q ignored: expected \"none\" or a list of checks", x)}
	case []map[string]any:
		for _, m := range x {
			items = append(items, m)
		}
	case []any:
		items = x
	default:
		return nil, false, []string{fmt.Sprintf("monitoring attribute ignored: expected \"none\" or a list of checks, got %T", v)}
	}
	for i, e := range items {
		m, ok := e.(map[string]any)
		if !ok {
			warns = append(warns, fmt.Sprintf("monitoring entry %d ignored: expected an object, got %T", i, e))
			continue
		}
		ov, err := parseOverride(m)
		if err != nil {
			warns = append(warns, fmt.Sprintf("monitoring entry %d ignored: %v", i, err))
			continue
		}
		ovs = append(ovs, ov)
	}
	return ovs, false, warns
}

func parseOverride(m map[string]any) (override, error) {
	var ov override
	for k := range m {
		switch k {
		case "kind", "script", "interval", "timeout", "args", "disabled":
		default:
			return ov, fmt.Errorf("unknown key %q (known: kind, script, interval, timeout, args, disabled)", k)
		}
	}
	ov.kind = attrString(m["kind"])
	ov.script = attrString(m["script"])
	switch {
	case !slices.Contains(knownKinds, ov.kind):
		return ov, fmt.Errorf("kind %q is not one of %s", ov.kind, strings.Join(knownKinds, ", "))
	case ov.kind == ontology.KindSSHScript && !slices.Contains(knownScripts, ov.script):
		return ov, fmt.Errorf("ssh-script needs a script, one of %s (got %q)", strings.Join(knownScripts, ", "), ov.script)
	case ov.kind != ontology.KindSSHScript && ov.script != "":
		return ov, fmt.Errorf("kind %s takes no script", ov.kind)
	}
	var err error
	if raw, ok := m["interval"]; ok && raw != nil {
		if ov.interval, err = attrDuration(raw); err != nil {
			return ov, fmt.Errorf("interval: %w", err)
		}
	}
	if raw, ok := m["timeout"]; ok && raw != nil {
		if ov.timeout, err = attrDuration(raw); err != nil {
			return ov, fmt.Errorf("timeout: %w", err)
		}
	}
	if raw, ok := m["args"]; ok && raw != nil {
		if ov.args, err = StringList(raw); err != nil {
			return ov, fmt.Errorf("args: %w", err)
		}
		ov.hasArgs = true
	}
	if raw, ok := m["disabled"]; ok && raw != nil {
		b, isBool := raw.(bool)
		if !isBool {
			return ov, fmt.Errorf("disabled must be true or false, got %v", raw)
		}
		ov.disabled = b
	}
	return ov, nil
}

// attrString returns a string attribute trimmed, or "" for anything else.
func attrString(v any) string {
	if s, ok := v.(string); ok {
		return strings.TrimSpace(s)
	}
	return ""
}

// StringList reads a list of strings in its Go or its JSON shape ([]string, []any of
// strings), as a check's args arrive from an override or from a check row's config; nil
// (absent) is no list.
func StringList(v any) ([]string, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case []string:
		return slices.Clone(x), nil
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("expected strings, got %T", e)
			}
			out = append(out, s)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("expected a list of strings, got %T", v)
	}
}

// attrDuration reads a duration string the one way Oikos reads durations (duration.Parse:
// "90s", "5m", "1d") or a number of seconds, at least one second.
func attrDuration(v any) (time.Duration, error) {
	var d time.Duration
	switch x := v.(type) {
	case string:
		s := strings.TrimSpace(x)
		parsed, err := duration.ParseNonNegative(s)
		if err != nil {
			if rest, neg := strings.CutPrefix(s, "-"); neg {
				if _, err := duration.ParseNonNegative(rest); err == nil {
					return 0, fmt.Errorf("%s is shorter than %s", s, minInterval)
				}
			}
			secs, convErr := strconv.Atoi(s)
			if convErr != nil {
				return 0, fmt.Errorf("%q is not a duration such as 90s or 5m", x)
			}
			parsed = time.Duration(secs) * time.Second
		}
		d = parsed
	default:
		secs, err := attr.Int(v)
		if err != nil {
			return 0, fmt.Errorf("not a duration: %w", err)
		}
		d = time.Duration(secs) * time.Second
	}
	if d < minInterval {
		return 0, fmt.Errorf("%s is shorter than %s", d, minInterval)
	}
	return d, nil
}
