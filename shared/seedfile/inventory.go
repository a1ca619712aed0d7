package seedfile

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/yamlnode"
)

// Inventory is the parsed inventory seed: the fleet's entities and the edges between them.
type Inventory struct {
	// File names the source in error messages.
	File string `json:"file"`
	// Entities in file order.
	Entities []EntitySeed `json:"entities"`
	// Relationships in file order.
	Relationships []EdgeSeed `json:"relationships"`
}

// EntitySeed is one entity as declared in the inventory.
type EntitySeed struct {
	// Type is the entity type name.
	Type string `json:"type"`
	// Name is unique per type; the slug is "<type>:<name>".
	Name string `json:"name"`
	// State is the lifecycle state; "" means the type's default state.
	State string `json:"state,omitempty"`
	// Attributes as written (strings, ints, floats, bools, lists, maps).
	Attributes map[string]any `json:"attributes"`
	// Line in the inventory file.
	Line int `json:"line"`

	attrLines map[string]int // line of each top-level attribute, for precise errors
}

// Slug returns "<type>:<name>".
func (e EntitySeed) Slug() string { return e.Type + ":" + e.Name }

// EdgeSeed is one relationship as declared in the inventory, between entity slugs.
type EdgeSeed struct {
	// Type is the relationship type name.
	Type string `json:"type"`
	// Source is the slug of the source entity.
	Source string `json:"source"`
	// Target is the slug of the target entity.
	Target string `json:"target"`
	// Line in the inventory file.
	Line int `json:"line"`
}

// String renders the edge as "source -type-> target" for messages.
func (e EdgeSeed) String() string { return e.Source + " -" + e.Type + "-> " + e.Target }

// ParseInventory parses an inventory document; errors name DefaultInventoryFile.
func ParseInventory(data []byte) (*Inventory, error) {
	return ParseInventoryFile(DefaultInventoryFile, data)
}

// ParseInventoryFile parses an inventory document; errors name file. It checks the shape of
// the document (known keys, types of fields); Validate checks it against the ontology.
func ParseInventoryFile(file string, data []byte) (*Inventory, error) {
	p := &problems{file: file}
	inv := &Inventory{File: file, Entities: []EntitySeed{}, Relationships: []EdgeSeed{}}
	r := root(file, data, p)
	if r == nil {
		return nil, p.err()
	}
	top, _ := p.mapping(r, "", "", "entities", "relationships")
	if n, ok := top["entities"]; ok {
		inv.Entities = p.entities(n)
	}
	if n, ok := top["relationships"]; ok {
		inv.Relationships = p.edges(n)
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return inv, nil
}

func (p *problems) entities(n *yaml.Node) []EntitySeed {
	n = yamlnode.Deref(n)
	if n.Kind != yaml.SequenceNode {
		p.add(n.Line, "", "entities", nil, "expected a list, got %s", yamlnode.KindName(n))
		return []EntitySeed{}
	}
	out := make([]EntitySeed, 0, len(n.Content))
	for _, item := range n.Content {
		item = yamlnode.Deref(item)
		f, ok := p.mapping(item, "", "", "type", "name", "state", "attributes")
		if !ok {
			continue
		}
		e := EntitySeed{Line: item.Line, Attributes: map[string]any{}}
		if v, ok := f["type"]; ok {
			e.Type = p.str(v, "", "type")
		}
		if v, ok := f["name"]; ok {
			e.Name = p.str(v, "", "name")
		}
		slug := e.Slug()
		if v, ok := f["state"]; ok {
			e.State = p.str(v, slug, "state")
		}
		if v, ok := f["attributes"]; ok {
			switch a := p.value(v, slug, "attributes").(type) {
			case map[string]any:
				e.Attributes = a
				e.attrLines = keyLines(v)
			case nil:
			default:
				p.add(yamlnode.Deref(v).Line, slug, "attributes", nil, "expected a mapping, got %s", yamlnode.KindName(yamlnode.Deref(v)))
			}
		}
		out = append(out, e)
	}
	return out
}

func (p *problems) edges(n *yaml.Node) []EdgeSeed {
	n = yamlnode.Deref(n)
	if n.Kind != yaml.SequenceNode {
		p.add(n.Line, "", "relationships", nil, "expected a list, got %s", yamlnode.KindName(n))
		return []EdgeSeed{}
	}
	out := make([]EdgeSeed, 0, len(n.Content))
	for _, item := range n.Content {
		item = yamlnode.Deref(item)
		f, ok := p.mapping(item, "", "", "type", "source", "target")
		if !ok {
			continue
		}
		e := EdgeSeed{Line: item.Line}
		if v, ok := f["type"]; ok {
			e.Type = p.str(v, "", "type")
		}
		if v, ok := f["source"]; ok {
			e.Source = p.str(v, "", "source")
		}
		if v, ok := f["target"]; ok {
			e.Target = p.str(v, "", "target")
		}
		out = append(out, e)
	}
	return out
}

// Validate checks the inventory against the ontology: every type exists and is concrete,
// names are well formed and slugs unique, states are declared, attributes match the schema,
// and every relationship has a known type, endpoints declared in this inventory, and
// endpoint types the ontology allows; no relationship is declared twice. It returns every
// problem found, each an *Error.
func (inv *Inventory) Validate(o *ontology.Ontology) error {
	p := &problems{file: inv.fileName()}
	slugs := make(map[string]EntitySeed, len(inv.Entities))
	for _, e := range inv.Entities {
		slug := e.Slug()
		switch {
		case e.Type == "":
			p.add(e.Line, slug, "type", nil, "entity has no type")
			continue
		case e.Name == "":
			p.add(e.Line, slug, "name", nil, "entity has no name")
			continue
		case strings.IndexFunc(e.Name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
			p.add(e.Line, slug, "name", nil, "name %q contains whitespace", e.Name)
		}
		if prev, dup := slugs[slug]; dup {
			p.add(e.Line, slug, "name", nil, "duplicate slug %s (first declared at line %d)", slug, prev.Line)
			continue
		}
		slugs[slug] = e
		t, ok := o.Type(e.Type)
		if !ok {
			p.add(e.Line, slug, "type", ontology.ErrUnknownType, "unknown entity type %q", e.Type)
			continue
		}
		if t.Abstract {
			p.add(e.Line, slug, "type", ontology.ErrAbstractType,
				"type %q is abstract; use one of its subtypes (%s)", e.Type, strings.Join(concreteBelow(o, e.Type), ", "))
			continue
		}
		if e.State != "" {
			if err := o.ValidateState(e.Type, e.State); err != nil {
				p.add(e.Line, slug, "state", ontology.ErrUndeclaredState, "state %q is not declared for %s (states: %s)",
					e.State, e.Type, strings.Join(t.States, ", "))
			}
		}
		if err := o.ValidateAttributes(e.Type, e.Attributes, true); err != nil {
			p.attributeErrors(e.Line, e.attrLines, slug, err)
		}
	}

	seen := map[EdgeSeed]int{}
	for _, r := range inv.Relationships {
		edge := r.String()
		if _, ok := o.RelationshipType(r.Type); !ok {
			p.add(r.Line, edge, "type", ontology.ErrUnknownRelationshipType, "unknown relationship type %q", r.Type)
			continue
		}
		src, srcOK := slugs[r.Source]
		if !srcOK {
			p.add(r.Line, edge, "source", nil, "source %q is not an entity declared in this inventory", r.Source)
		}
		dst, dstOK := slugs[r.Target]
		if !dstOK {
			p.add(r.Line, edge, "target", nil, "target %q is not an entity declared in this inventory", r.Target)
		}
		if !srcOK || !dstOK {
			continue
		}
		if err := o.ValidateEdge(r.Type, src.Type, dst.Type); err != nil {
			p.add(r.Line, edge, "type", ontology.ErrEdgeNotAllowed, "the ontology forbids this edge: %v", err)
			continue
		}
		key := EdgeSeed{Type: r.Type, Source: r.Source, Target: r.Target}
		if first, dup := seen[key]; dup {
			p.add(r.Line, edge, "", nil, "relationship declared twice (first at line %d)", first)
			continue
		}
		seen[key] = r.Line
	}
	return p.err()
}

// Entity returns the entity with the given slug.
func (inv *Inventory) Entity(slug string) (EntitySeed, bool) {
	for _, e := range inv.Entities {
		if e.Slug() == slug {
			return e, true
		}
	}
	return EntitySeed{}, false
}

func (inv *Inventory) fileName() string {
	if inv.File == "" {
		return DefaultInventoryFile
	}
	return inv.File
}

// attributeErrors turns ValidateAttributes' joined FieldErrors into one Error per field.
func (p *problems) attributeErrors(line int, attrLines map[string]int, slug string, err error) {
	var found bool
	for _, e := range flatten(err) {
		var fe *ontology.FieldError
		if errors.As(e, &fe) {
			found = true
			l := line
			if al, ok := attrLines[fe.Field]; ok {
				l = al
			}
			p.add(l, slug, "attributes."+fe.Field, ontology.ErrInvalidAttribute, "%s", fe.Reason)
		}
	}
	if !found {
		p.add(line, slug, "attributes", err, "%v", err)
	}
}

// keyLines maps each key of a mapping node to the line it is on.
func keyLines(n *yaml.Node) map[string]int {
	n = yamlnode.Deref(n)
	out := map[string]int{}
	if n.Kind != yaml.MappingNode {
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		out[n.Content[i].Value] = n.Content[i].Line
	}
	return out
}

// flatten unpacks errors.Join trees.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

func concreteBelow(o *ontology.Ontology, typ string) []string {
	var out []string
	for _, d := range o.Descendants(typ) {
		if t, ok := o.Type(d); ok && !t.Abstract {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		return []string{fmt.Sprintf("none under %s", typ)}
	}
	return out
}
