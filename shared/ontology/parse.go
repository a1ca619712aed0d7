package ontology

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/oikos-hq/oikos/shared/duration"
	"github.com/oikos-hq/oikos/shared/yamlnode"
)

// namePattern is the shape of type and relationship names: lower-case kebab.
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

var yamlLinePattern = regexp.MustCompile(`line (\d+)`)

// declared is one entity type as written, before inheritance.
type declared struct {
	t              EntityType // own declarations only
	hasStates      bool
	hasDefault     bool
	hasTransitions bool
	hasMonitoring  bool
}

// parser walks the YAML node tree so every problem can name its line; it collects all
// problems rather than stopping at the first, so one run of the loader shows them all.
type parser struct {
	errs []*ParseError
}

func (p *parser) fail(line int, typ, format string, args ...any) {
	p.errs = append(p.errs, &ParseError{Line: line, Type: typ, Reason: fmt.Sprintf(format, args...)})
}

// Parse loads and validates an ontology document (the format of seeds/ontology.yaml). It
// reports every problem it finds, each a *ParseError naming the line and type, joined into
// one error; on any problem it returns no ontology.
func Parse(data []byte) (*Ontology, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &ParseError{Line: YAMLErrorLine(err), Reason: "invalid YAML: " + err.Error()}
	}
	p := &parser{}
	root := yamlnode.Deref(firstContent(&doc))
	if root == nil {
		return nil, &ParseError{Reason: "document is empty"}
	}
	top := p.fields(root, "", "entity_types", "relationship_types")
	var decls []*declared
	var rels []*RelationshipType
	if n, ok := top["entity_types"]; ok {
		decls = p.entityTypes(n)
	}
	if n, ok := top["relationship_types"]; ok {
		rels = p.relationshipTypes(n)
	}
	if len(decls) == 0 && len(p.errs) == 0 {
		p.fail(root.Line, "", "no entity_types declared")
	}
	o := p.build(decls, rels)
	if len(p.errs) > 0 {
		sort.SliceStable(p.errs, func(i, j int) bool { return p.errs[i].Line < p.errs[j].Line })
		errs := make([]error, len(p.errs))
		for i, e := range p.errs {
			errs[i] = e
		}
		return nil, errors.Join(errs...)
	}
	return o, nil
}

// YAMLErrorLine extracts the first line number from a yaml.v3 error message, 0 if none.
// yaml.v3 reports syntax problems only as text ("yaml: line 3: ...").
func YAMLErrorLine(err error) int {
	m := yamlLinePattern.FindStringSubmatch(err.Error())
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func firstContent(doc *yaml.Node) *yaml.Node {
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil
		}
		return doc.Content[0]
	}
	if doc.Kind == 0 {
		return nil
	}
	return doc
}

// fields returns a mapping's values by key, reporting non-mappings, duplicate keys and keys
// outside allowed (a misspelt key such as "attribute_schema" must fail loudly, never be
// silently ignored).
func (p *parser) fields(n *yaml.Node, typ string, allowed ...string) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	n = yamlnode.Deref(n)
	if n.Kind != yaml.MappingNode {
		p.fail(n.Line, typ, "expected a mapping, got %s", yamlnode.KindName(n))
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := yamlnode.Deref(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.fail(k.Line, typ, "mapping key must be a string")
			continue
		}
		if _, dup := out[k.Value]; dup {
			p.fail(k.Line, typ, "key %q given twice", k.Value)
			continue
		}
		if len(allowed) > 0 && !slices.Contains(allowed, k.Value) {
			p.fail(k.Line, typ, "unknown key %q (allowed: %s)", k.Value, strings.Join(allowed, ", "))
			continue
		}
		out[k.Value] = v
	}
	return out
}

func (p *parser) str(n *yaml.Node, typ, what string) string {
	n = yamlnode.Deref(n)
	if n.Kind != yaml.ScalarNode {
		p.fail(n.Line, typ, "%s: expected a string, got %s", what, yamlnode.KindName(n))
		return ""
	}
	if n.ShortTag() == "!!null" {
		return ""
	}
	return n.Value
}

func (p *parser) boolean(n *yaml.Node, typ, what string) bool {
	n = yamlnode.Deref(n)
	var b bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
		p.fail(n.Line, typ, "%s: expected true or false, got %s", what, yamlnode.KindName(n))
		return false
	}
	return b
}

func (p *parser) strList(n *yaml.Node, typ, what string) []string {
	n = yamlnode.Deref(n)
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return []string{}
	}
	if n.Kind != yaml.SequenceNode {
		p.fail(n.Line, typ, "%s: expected a list, got %s", what, yamlnode.KindName(n))
		return []string{}
	}
	out := make([]string, 0, len(n.Content))
	for _, c := range n.Content {
		c = yamlnode.Deref(c)
		if c.Kind != yaml.ScalarNode || c.ShortTag() == "!!null" {
			p.fail(c.Line, typ, "%s: expected a string item, got %s", what, yamlnode.KindName(c))
			continue
		}
		out = append(out, c.Value)
	}
	return out
}

func (p *parser) duration(n *yaml.Node, typ, what string) time.Duration {
	s := p.str(n, typ, what)
	if s == "" {
		return 0
	}
	d, err := duration.Parse(s)
	if err != nil {
		p.fail(yamlnode.Deref(n).Line, typ, "%s: %q is not a positive duration such as 60s, 5m or 1d", what, s)
		return 0
	}
	return d
}

func (p *parser) entityTypes(n *yaml.Node) []*declared {
	n = yamlnode.Deref(n)
	if n.Kind != yaml.SequenceNode {
		p.fail(n.Line, "", "entity_types: expected a list, got %s", yamlnode.KindName(n))
		return nil
	}
	var out []*declared
	for _, item := range n.Content {
		item = yamlnode.Deref(item)
		if d := p.entityType(item); d != nil {
			out = append(out, d)
		}
	}
	return out
}

func (p *parser) entityType(n *yaml.Node) *declared {
	name := ""
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if yamlnode.Deref(n.Content[i]).Value == "name" {
				name = yamlnode.Deref(n.Content[i+1]).Value
			}
		}
	}
	f := p.fields(n, name, "name", "parent", "abstract", "description", "attributes", "required",
		"states", "default_state", "transitions", "monitoring")
	if len(f) == 0 {
		return nil
	}
	d := &declared{t: EntityType{Name: name, Line: n.Line, Attributes: map[string]AttributeSpec{}}}
	if !namePattern.MatchString(name) {
		p.fail(n.Line, name, "name %q must be lower-case kebab (e.g. proxmox-host)", name)
	}
	if v, ok := f["parent"]; ok {
		d.t.Parent = p.str(v, name, "parent")
	}
	if v, ok := f["abstract"]; ok {
		d.t.Abstract = p.boolean(v, name, "abstract")
	}
	if v, ok := f["description"]; ok {
		d.t.Description = p.str(v, name, "description")
	}
	if v, ok := f["attributes"]; ok {
		d.t.Attributes = p.attributes(v, name)
	}
	if v, ok := f["required"]; ok {
		d.t.Required = p.strList(v, name, "required")
	}
	if v, ok := f["states"]; ok {
		d.hasStates = true
		d.t.States = p.strList(v, name, "states")
	}
	if v, ok := f["default_state"]; ok {
		d.hasDefault = true
		d.t.DefaultState = p.str(v, name, "default_state")
	}
	if v, ok := f["transitions"]; ok {
		d.hasTransitions = true
		d.t.Transitions = p.transitions(v, name)
	}
	if v, ok := f["monitoring"]; ok {
		d.hasMonitoring = true
		d.t.Monitoring, d.t.MonitoringNone = p.monitoring(v, name)
	}
	return d
}

var attrTypes = []string{AttrString, AttrInteger, AttrNumber, AttrBoolean, AttrObject, AttrArray}

func (p *parser) attributes(n *yaml.Node, typ string) map[string]AttributeSpec {
	out := map[string]AttributeSpec{}
	n = yamlnode.Deref(n)
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return out
	}
	if n.Kind != yaml.MappingNode {
		p.fail(n.Line, typ, "attributes: expected a mapping of attribute name to schema, got %s", yamlnode.KindName(n))
		return out
	}
	for name, v := range p.fields(n, typ) {
		f := p.fields(v, typ, "type", "description", "enum")
		spec := AttributeSpec{}
		line := yamlnode.Deref(v).Line
		if t, ok := f["type"]; ok {
			spec.Type = p.str(t, typ, "attributes."+name+".type")
		}
		if !slices.Contains(attrTypes, spec.Type) {
			p.fail(line, typ, "attribute %q: type %q is not one of %s", name, spec.Type, strings.Join(attrTypes, ", "))
		}
		if d, ok := f["description"]; ok {
			spec.Description = p.str(d, typ, "attributes."+name+".description")
		}
		if e, ok := f["enum"]; ok {
			spec.Enum = p.strList(e, typ, "attributes."+name+".enum")
			if spec.Type != AttrString {
				p.fail(line, typ, "attribute %q: enum is only allowed on string attributes", name)
			}
			if len(spec.Enum) == 0 {
				p.fail(line, typ, "attribute %q: enum must list at least one value", name)
			}
		}
		out[name] = spec
	}
	return out
}

func (p *parser) transitions(n *yaml.Node, typ string) []Transition {
	n = yamlnode.Deref(n)
	if n.Kind != yaml.SequenceNode {
		p.fail(n.Line, typ, "transitions: expected a list, got %s", yamlnode.KindName(n))
		return []Transition{}
	}
	out := make([]Transition, 0, len(n.Content))
	for _, item := range n.Content {
		f := p.fields(item, typ, "from", "to", "preconditions")
		tr := Transition{}
		if v, ok := f["from"]; ok {
			tr.From = p.str(v, typ, "transition from")
		}
		if v, ok := f["to"]; ok {
			tr.To = p.str(v, typ, "transition to")
		}
		if v, ok := f["preconditions"]; ok {
			tr.Preconditions = p.strList(v, typ, "transition preconditions")
		}
		if tr.From == "" || tr.To == "" {
			p.fail(yamlnode.Deref(item).Line, typ, "a transition needs both from and to")
			continue
		}
		out = append(out, tr)
	}
	return out
}

// monitoring decodes either the scalar "none" or a list of checks.
func (p *parser) monitoring(n *yaml.Node, typ string) ([]MonitoringSpec, bool) {
	n = yamlnode.Deref(n)
	if n.Kind == yaml.ScalarNode {
		if n.Value == "none" {
			return []MonitoringSpec{}, true
		}
		p.fail(n.Line, typ, "monitoring: expected a list of checks or the word none, got %s", yamlnode.KindName(n))
		return []MonitoringSpec{}, false
	}
	if n.Kind != yaml.SequenceNode {
		p.fail(n.Line, typ, "monitoring: expected a list of checks or the word none, got %s", yamlnode.KindName(n))
		return []MonitoringSpec{}, false
	}
	if len(n.Content) == 0 {
		p.fail(n.Line, typ, "monitoring: an empty list is ambiguous; write `monitoring: none` to declare that the type needs none")
	}
	out := make([]MonitoringSpec, 0, len(n.Content))
	for _, item := range n.Content {
		line := yamlnode.Deref(item).Line
		f := p.fields(item, typ, "kind", "script", "interval", "timeout", "args", "requires_all", "requires_any")
		m := MonitoringSpec{}
		if v, ok := f["kind"]; ok {
			m.Kind = p.str(v, typ, "monitoring kind")
		}
		if v, ok := f["script"]; ok {
			m.Script = p.str(v, typ, "monitoring script")
		}
		if v, ok := f["interval"]; ok {
			m.Interval = p.duration(v, typ, "monitoring interval")
		}
		if v, ok := f["timeout"]; ok {
			m.Timeout = p.duration(v, typ, "monitoring timeout")
		}
		if v, ok := f["args"]; ok {
			m.Args = p.strList(v, typ, "monitoring args")
		}
		if v, ok := f["requires_all"]; ok {
			m.RequiresAll = p.strList(v, typ, "monitoring requires_all")
		}
		if v, ok := f["requires_any"]; ok {
			m.RequiresAny = p.strList(v, typ, "monitoring requires_any")
		}
		switch {
		case !knownKinds[m.Kind]:
			p.fail(line, typ, "monitoring kind %q is unknown (known: %s)", m.Kind, strings.Join(sortedKeys(knownKinds), ", "))
		case m.Kind == KindSSHScript && !knownScripts[m.Script]:
			p.fail(line, typ, "ssh-script needs a script, one of %s (got %q)", strings.Join(sortedKeys(knownScripts), ", "), m.Script)
		case m.Kind != KindSSHScript && m.Script != "":
			p.fail(line, typ, "monitoring kind %s takes no script", m.Kind)
		}
		if m.Interval == 0 {
			m.Interval = DefaultInterval
		}
		if m.Timeout == 0 {
			m.Timeout = min(DefaultTimeout, m.Interval)
		}
		if m.Timeout > m.Interval {
			p.fail(line, typ, "monitoring timeout %s is longer than its interval %s", m.Timeout, m.Interval)
		}
		out = append(out, m)
	}
	return out, false
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (p *parser) relationshipTypes(n *yaml.Node) []*RelationshipType {
	n = yamlnode.Deref(n)
	if n.Kind != yaml.SequenceNode {
		p.fail(n.Line, "", "relationship_types: expected a list, got %s", yamlnode.KindName(n))
		return nil
	}
	var out []*RelationshipType
	for _, item := range n.Content {
		item = yamlnode.Deref(item)
		name := ""
		if item.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(item.Content); i += 2 {
				if yamlnode.Deref(item.Content[i]).Value == "name" {
					name = yamlnode.Deref(item.Content[i+1]).Value
				}
			}
		}
		f := p.fields(item, name, "name", "description", "sources", "targets")
		if len(f) == 0 {
			continue
		}
		r := &RelationshipType{Name: name, Line: item.Line, Sources: []string{}, Targets: []string{}}
		if v, ok := f["description"]; ok {
			r.Description = p.str(v, name, "description")
		}
		if v, ok := f["sources"]; ok {
			r.Sources = p.strList(v, name, "sources")
		}
		if v, ok := f["targets"]; ok {
			r.Targets = p.strList(v, name, "targets")
		}
		out = append(out, r)
	}
	return out
}

// build checks the declarations against each other, resolves inheritance and assembles the
// ontology. Problems are recorded on p; the result is only used when there are none.
func (p *parser) build(decls []*declared, rels []*RelationshipType) *Ontology {
	byName := map[string]*declared{}
	for _, d := range decls {
		if prev, dup := byName[d.t.Name]; dup {
			p.fail(d.t.Line, d.t.Name, "declared twice (first at line %d)", prev.t.Line)
			continue
		}
		byName[d.t.Name] = d
	}
	cyclic := map[string]bool{}
	for _, d := range decls {
		if byName[d.t.Name] != d {
			continue
		}
		if d.t.Parent != "" {
			if _, ok := byName[d.t.Parent]; !ok {
				p.fail(d.t.Line, d.t.Name, "parent %q is not declared", d.t.Parent)
				cyclic[d.t.Name] = true // unresolvable; keep it out of resolution
				continue
			}
		}
		seen := map[string]bool{d.t.Name: true}
		for cur := d.t.Parent; cur != ""; {
			if seen[cur] {
				p.fail(d.t.Line, d.t.Name, "is-a cycle through %q", cur)
				cyclic[d.t.Name] = true
				break
			}
			seen[cur] = true
			next, ok := byName[cur]
			if !ok {
				break
			}
			cur = next.t.Parent
		}
	}

	o := &Ontology{types: map[string]*EntityType{}, children: map[string][]string{}, rels: map[string]*RelationshipType{}}
	var resolve func(name string) *EntityType
	resolve = func(name string) *EntityType {
		if t, ok := o.types[name]; ok {
			return t
		}
		d := byName[name]
		t := d.t.clone()
		if d.t.Parent != "" {
			parent := resolve(d.t.Parent)
			attrs := map[string]AttributeSpec{}
			for k, v := range parent.Attributes {
				attrs[k] = v
			}
			for k, v := range d.t.Attributes {
				attrs[k] = v
			}
			t.Attributes = attrs
			req := slices.Clone(parent.Required)
			for _, r := range d.t.Required {
				if !slices.Contains(req, r) {
					req = append(req, r)
				}
			}
			t.Required = cloneStrings(req)
			if !d.hasStates {
				t.States = cloneStrings(parent.States)
			}
			if !d.hasDefault {
				t.DefaultState = parent.DefaultState
			}
			if !d.hasTransitions {
				t.Transitions = parent.clone().Transitions
			}
			if !d.hasMonitoring {
				t.Monitoring = cloneSpecs(parent.Monitoring)
				t.MonitoringNone = parent.MonitoringNone
			}
		}
		o.types[name] = t
		return t
	}
	// A type whose ancestry is broken cannot be resolved; neither can its descendants.
	broken := func(name string) bool {
		for cur := name; cur != ""; {
			if cyclic[cur] {
				return true
			}
			d, ok := byName[cur]
			if !ok {
				return true
			}
			cur = d.t.Parent
		}
		return false
	}
	for _, d := range decls {
		if byName[d.t.Name] == d && !broken(d.t.Name) {
			resolve(d.t.Name)
		}
	}
	for name, t := range o.types {
		o.names = append(o.names, name)
		if t.Parent != "" {
			o.children[t.Parent] = append(o.children[t.Parent], name)
		}
	}
	sort.Strings(o.names)
	for _, c := range o.children {
		sort.Strings(c)
	}
	for _, d := range decls {
		if t, ok := o.types[d.t.Name]; ok && byName[d.t.Name] == d {
			p.checkType(d, t)
		}
	}

	for _, r := range rels {
		if !namePattern.MatchString(r.Name) {
			p.fail(r.Line, r.Name, "relationship name %q must be lower-case kebab (e.g. runs-on)", r.Name)
		}
		if prev, dup := o.rels[r.Name]; dup {
			p.fail(r.Line, r.Name, "relationship type declared twice (first at line %d)", prev.Line)
			continue
		}
		for _, side := range []struct {
			what  string
			names []string
		}{{"sources", r.Sources}, {"targets", r.Targets}} {
			if len(side.names) == 0 {
				p.fail(r.Line, r.Name, "%s must list at least one type (or *)", side.what)
			}
			for _, n := range side.names {
				if _, ok := byName[n]; !ok && n != Wildcard {
					p.fail(r.Line, r.Name, "%s: entity type %q is not declared", side.what, n)
				}
			}
		}
		o.rels[r.Name] = r
		o.relNames = append(o.relNames, r.Name)
	}
	sort.Strings(o.relNames)
	return o
}

// checkType validates a resolved type. Each rule runs where the data it covers is declared,
// so one mistake in a base type is reported once, not once per descendant.
func (p *parser) checkType(d *declared, t *EntityType) {
	name, line := t.Name, t.Line
	if !t.Abstract && (len(t.States) == 0 || t.DefaultState == "") {
		p.fail(line, name, "concrete type has no lifecycle states/default_state (declare them or inherit them)")
	}
	if d.hasStates || d.hasDefault || d.hasTransitions {
		seen := map[string]bool{}
		for _, s := range t.States {
			if seen[s] {
				p.fail(line, name, "state %q listed twice", s)
			}
			seen[s] = true
		}
		if t.DefaultState != "" && !seen[t.DefaultState] {
			p.fail(line, name, "default_state %q is not among its states (%s)", t.DefaultState, strings.Join(t.States, ", "))
		}
		if len(t.States) > 0 && t.DefaultState == "" {
			p.fail(line, name, "states are declared but default_state is not")
		}
		for _, tr := range t.Transitions {
			if tr.From != Wildcard && !seen[tr.From] {
				p.fail(line, name, "transition from undeclared state %q", tr.From)
			}
			if !seen[tr.To] {
				p.fail(line, name, "transition to undeclared state %q", tr.To)
			}
			for _, pre := range tr.Preconditions {
				if !knownPrecondition(pre) {
					p.fail(line, name, "transition %s→%s: unknown precondition %q (known: %s, %s<attribute>)",
						tr.From, tr.To, pre, PreconditionNoLiveDependents, PreconditionHasAttribute)
				}
			}
		}
	}
	for _, r := range d.t.Required {
		if _, ok := t.Attributes[r]; !ok {
			p.fail(line, name, "required attribute %q is not declared in attributes", r)
		}
	}
	if d.hasMonitoring {
		for _, m := range t.Monitoring {
			for _, a := range slices.Concat(m.RequiresAll, m.RequiresAny) {
				if _, ok := t.Attributes[a]; !ok {
					p.fail(line, name, "monitoring %s requires attribute %q, which is not declared", m.Kind, a)
				}
			}
		}
	}
}

func knownPrecondition(s string) bool {
	if s == PreconditionNoLiveDependents {
		return true
	}
	attr, ok := strings.CutPrefix(s, PreconditionHasAttribute)
	return ok && attr != ""
}
