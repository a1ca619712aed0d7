// Package ontology holds Oikos's type system: the entity types of the knowledge graph
// (an is-a tree with abstract bases), their attribute schemas, lifecycle states and
// transitions, the monitoring each type warrants, and the relationship types with the
// endpoint types they allow.
//
// The ontology is declared in seeds/ontology.yaml and loaded with Parse, which validates the
// whole file up front (parents exist, no cycles, states and transitions agree, endpoint types
// exist, monitoring kinds are known) so that nothing downstream ever meets a half-valid type.
// A parsed *Ontology is immutable and safe for concurrent use; every accessor returns copies.
//
// Everything a type declares is inherited through is-a: attributes merge (a child adds or
// overrides keys), required attributes accumulate, and states, default state, transitions and
// monitoring are taken from the nearest ancestor that declares them. Type returns that
// resolved view, which is also what gets stored and what check derivation reads.
package ontology

import (
	"slices"
	"sort"
)

// Ontology is a validated, resolved set of entity and relationship types. Build it with Parse.
type Ontology struct {
	types    map[string]*EntityType // resolved view, keyed by name
	names    []string               // sorted type names
	children map[string][]string    // direct subtypes, sorted
	rels     map[string]*RelationshipType
	relNames []string // sorted relationship type names
}

// EntityType is the resolved view of one entity type: everything it declares merged with
// everything it inherits. It marshals to JSON as stored in entity_types; the attribute schema
// is the "attributes" key (the original read a different key and stored null for every type).
type EntityType struct {
	// Name is the lower-case kebab type name, unique in the ontology.
	Name string `json:"name"`
	// Parent is the is-a parent, "" for a root.
	Parent string `json:"parent"`
	// Description says what an entity of this type is.
	Description string `json:"description"`
	// Abstract types exist only to be inherited from; no entity may have one.
	Abstract bool `json:"abstract"`
	// Attributes is the attribute schema, inherited keys included. Undeclared attributes
	// are allowed on entities; only declared ones are type-checked.
	Attributes map[string]AttributeSpec `json:"attributes"`
	// Required lists attributes an entity must carry at creation, inherited ones included.
	Required []string `json:"required"`
	// States are the lifecycle states an entity of this type may be in.
	States []string `json:"states"`
	// DefaultState is the state given to an entity created without one.
	DefaultState string `json:"default_state"`
	// Transitions are the permitted state changes; From may be "*".
	Transitions []Transition `json:"transitions"`
	// Monitoring lists the checks an entity of this type warrants.
	Monitoring []MonitoringSpec `json:"monitoring"`
	// MonitoringNone is true when the type (or the ancestor it inherits from) declares it
	// needs no monitoring, so a coverage sweep never reports it as a gap.
	MonitoringNone bool `json:"monitoring_none"`
	// Line is where the type is declared in the ontology file. Not stored: editing the
	// file above a type must not look like a change to the type.
	Line int `json:"-"`
}

// AttributeSpec is the schema of one attribute.
type AttributeSpec struct {
	// Type is one of string, integer, number, boolean, object, array.
	Type string `json:"type"`
	// Description documents the attribute.
	Description string `json:"description,omitempty"`
	// Enum, when set, lists the permitted values (string attributes only).
	Enum []string `json:"enum,omitempty"`
}

// Transition is one permitted lifecycle state change.
type Transition struct {
	// From is the current state, or "*" for any state.
	From string `json:"from"`
	// To is the new state.
	To string `json:"to"`
	// Preconditions must hold for the change to be made; see PreconditionNoLiveDependents
	// and PreconditionHasAttribute.
	Preconditions []string `json:"preconditions,omitempty"`
}

// RelationshipType is one kind of edge and the endpoint types it allows.
type RelationshipType struct {
	// Name is the lower-case kebab relationship name, e.g. "runs-on".
	Name string `json:"name"`
	// Description says what the edge means, in the direction source → target.
	Description string `json:"description"`
	// Sources are the allowed source types, checked through is-a; "*" allows any.
	Sources []string `json:"sources"`
	// Targets are the allowed target types, checked through is-a; "*" allows any.
	Targets []string `json:"targets"`
	// Line is where the relationship type is declared in the ontology file (not stored).
	Line int `json:"-"`
}

// Wildcard in a relationship's sources or targets, or a transition's From, matches anything.
const Wildcard = "*"

// Attribute type names accepted in an attribute schema.
const (
	AttrString  = "string"
	AttrInteger = "integer"
	AttrNumber  = "number"
	AttrBoolean = "boolean"
	AttrObject  = "object"
	AttrArray   = "array"
)

// Preconditions understood by the api when it changes an entity's state.
const (
	// PreconditionNoLiveDependents holds when no non-destroyed entity has a current
	// depends-on, runs-on or routes-to edge into the entity.
	PreconditionNoLiveDependents = "no_live_dependents"
	// PreconditionHasAttribute is a prefix: "has_attribute:<name>" holds when the entity
	// carries that attribute.
	PreconditionHasAttribute = "has_attribute:"
)

// Type returns the resolved view of the named type.
func (o *Ontology) Type(name string) (*EntityType, bool) {
	t, ok := o.types[name]
	if !ok {
		return nil, false
	}
	return t.clone(), true
}

// Types returns every entity type, sorted by name.
func (o *Ontology) Types() []*EntityType {
	out := make([]*EntityType, 0, len(o.names))
	for _, n := range o.names {
		out = append(out, o.types[n].clone())
	}
	return out
}

// RelationshipTypes returns every relationship type, sorted by name.
func (o *Ontology) RelationshipTypes() []*RelationshipType {
	out := make([]*RelationshipType, 0, len(o.relNames))
	for _, n := range o.relNames {
		out = append(out, o.rels[n].clone())
	}
	return out
}

// RelationshipType returns the named relationship type.
func (o *Ontology) RelationshipType(name string) (*RelationshipType, bool) {
	r, ok := o.rels[name]
	if !ok {
		return nil, false
	}
	return r.clone(), true
}

// IsA reports whether typ is ancestor or one of its subtypes. Unknown names are never related.
func (o *Ontology) IsA(typ, ancestor string) bool {
	if _, ok := o.types[ancestor]; !ok {
		return false
	}
	for cur := typ; cur != ""; {
		t, ok := o.types[cur]
		if !ok {
			return false
		}
		if cur == ancestor {
			return true
		}
		cur = t.Parent
	}
	return false
}

// Ancestors returns typ's is-a chain from its parent up to the root; nil for an unknown type.
func (o *Ontology) Ancestors(typ string) []string {
	t, ok := o.types[typ]
	if !ok {
		return nil
	}
	var out []string
	for cur := t.Parent; cur != ""; cur = o.types[cur].Parent {
		out = append(out, cur)
	}
	return out
}

// Descendants returns typ and all its subtypes, sorted, so that a filter on a type can
// include its subtypes (a filter on "guest" matches lxc and vm). Nil for an unknown type.
func (o *Ontology) Descendants(typ string) []string {
	if _, ok := o.types[typ]; !ok {
		return nil
	}
	out := []string{typ}
	for i := 0; i < len(out); i++ {
		out = append(out, o.children[out[i]]...)
	}
	sort.Strings(out)
	return out
}

// Monitoring returns the monitoring the type warrants, resolved through is-a, and whether
// the type declares it needs none. Unknown types warrant nothing and declare nothing.
func (o *Ontology) Monitoring(typ string) (specs []MonitoringSpec, declaredNone bool) {
	t, ok := o.types[typ]
	if !ok {
		return nil, false
	}
	return cloneSpecs(t.Monitoring), t.MonitoringNone
}

func (t *EntityType) clone() *EntityType {
	c := *t
	c.Attributes = make(map[string]AttributeSpec, len(t.Attributes))
	for k, v := range t.Attributes {
		v.Enum = slices.Clone(v.Enum)
		c.Attributes[k] = v
	}
	c.Required = cloneStrings(t.Required)
	c.States = cloneStrings(t.States)
	c.Transitions = make([]Transition, len(t.Transitions))
	for i, tr := range t.Transitions {
		tr.Preconditions = slices.Clone(tr.Preconditions)
		c.Transitions[i] = tr
	}
	c.Monitoring = cloneSpecs(t.Monitoring)
	return &c
}

func (r *RelationshipType) clone() *RelationshipType {
	c := *r
	c.Sources = cloneStrings(r.Sources)
	c.Targets = cloneStrings(r.Targets)
	return &c
}

func cloneSpecs(in []MonitoringSpec) []MonitoringSpec {
	out := make([]MonitoringSpec, len(in))
	for i, s := range in {
		s.Args = slices.Clone(s.Args)
		s.RequiresAll = slices.Clone(s.RequiresAll)
		s.RequiresAny = slices.Clone(s.RequiresAny)
		out[i] = s
	}
	return out
}

// cloneStrings copies a slice and never returns nil, so JSON shows [] rather than null.
func cloneStrings(in []string) []string {
	out := make([]string, len(in))
	copy(out, in)
	return out
}
