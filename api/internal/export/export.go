// Package export writes the fleet as an inventory file: the format `oikos seed --inventory`
// reads (shared/seedfile), so that a fleet built up at run time (entities created through the
// api, attributes the agent learned, states an operator set) can be kept in git and seeded
// into another database.
//
// The file is made to round-trip. Seeding it into the database it came from writes nothing
// (the seed compares values the way jsonb stores them); seeding it into a fresh database,
// beside the ontology and knowledge seeds, reproduces the same entities (type, name, state),
// the same attributes and the same live relationships. Attribute values keep their JSON
// kind: integers stay integers, arrays arrays, booleans booleans, and a string that looks
// like a number (pve_version "8.3") stays a quoted string.
//
// What is not fleet is left out:
//   - knowledge (the `knowledge` type and its subtypes: document, investigation, runbook);
//     it lives in seeds/knowledge.yaml, and the seed writes it by slug from there;
//   - Oikos's own records: check (the bookkeeping entity of a derived check, re-derived by
//     every seed), execution and task, with any subtypes;
//   - destroyed entities (they are history, not fleet);
//   - `about` edges (knowledge links, declared in knowledge.yaml);
//   - relationship attributes, which the inventory format has no place for.
//
// An edge whose other end is left out (a destroyed entity, a check, a task, a document, or
// under a type filter a type not asked for) is left out too: the seed requires both ends of
// every relationship to be declared in the same file and would otherwise refuse the whole
// file. Nothing is lost on the database the export came from, since a seed never removes an
// edge; into a fresh database those edges come from wherever their other end does (the
// knowledge seed, the checks the seed derives, an export of the other types).
//
// The output is deterministic: entities sorted by type, then name, relationships by source,
// type and target, attribute keys sorted, one attribute per line, so diffs of two exports in
// git are small. Only the header's timestamp line changes when nothing else did.
package export

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/readmodel"
	"github.com/oikos-hq/oikos/shared/ontology"
)

// ExcludedRoots are the types (with their subtypes) that are not fleet: knowledge, which
// seeds/knowledge.yaml holds, and Oikos's own records.
var ExcludedRoots = []string{"knowledge", "check", "execution", "task"}

// AboutEdge is the knowledge link, declared in knowledge.yaml, never in an inventory.
const AboutEdge = "about"

// destroyed is the lifecycle state of an entity that is gone.
const destroyed = "destroyed"

// Entity is one exported entity.
type Entity struct {
	Type, Name, State string
	// Attributes decoded with json.Number for every number, so none is rounded.
	Attributes map[string]any
}

// Slug returns "<type>:<name>".
func (e Entity) Slug() string { return e.Type + ":" + e.Name }

// Edge is one exported relationship, between slugs.
type Edge struct {
	Type, Source, Target string
}

// Fleet is what one export read, in output order.
type Fleet struct {
	// Types are the entity types asked for, as given; nil means every fleet type.
	Types []string
	// At is when the snapshot was read.
	At       time.Time
	Entities []Entity
	Edges    []Edge
}

// FleetTypes resolves a type filter: each named type and its subtypes (is-a, through the
// ontology's parent chain), or every type when names is empty, without the types that are
// not fleet. An unknown type, or one that is not fleet, is an *apierr.FieldError on "type".
func FleetTypes(o *ontology.Ontology, names []string) ([]string, error) {
	if o == nil {
		return nil, errors.New("export: no ontology")
	}
	excluded := func(t string) bool {
		return slices.ContainsFunc(ExcludedRoots, func(root string) bool { return o.IsA(t, root) })
	}
	set := map[string]bool{}
	if len(names) == 0 {
		for _, t := range o.Types() {
			if !excluded(t.Name) {
				set[t.Name] = true
			}
		}
	}
	for _, n := range names {
		d := o.Descendants(n)
		if d == nil {
			return nil, &apierr.FieldError{Field: "type", Reason: fmt.Sprintf("unknown entity type %q", n), Err: ontology.ErrUnknownType}
		}
		if excluded(n) {
			return nil, apierr.Invalid("type", "%q is not part of the fleet export (knowledge is in knowledge.yaml; "+
				"checks, executions and tasks are Oikos's own records)", n)
		}
		for _, t := range d {
			if !excluded(t) {
				set[t] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Strings(out)
	return out, nil
}

// Read reads the fleet (of the given types and their subtypes; all when types is empty) in
// one consistent snapshot.
func Read(ctx context.Context, db storage.DB, o *ontology.Ontology, types []string) (*Fleet, error) {
	allowed, err := FleetTypes(o, types)
	if err != nil {
		return nil, err
	}
	at, ents, edges, err := readmodel.New(db, nil).FleetSnapshot(ctx, allowed, destroyed, AboutEdge)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	f := &Fleet{Types: types, At: at, Entities: make([]Entity, 0, len(ents)), Edges: make([]Edge, 0, len(edges))}
	for _, r := range ents {
		e := Entity{Type: r.Type, Name: r.Name, State: r.State}
		if e.Attributes, err = decodeAttributes(r.Attributes); err != nil {
			return nil, fmt.Errorf("export: attributes of %s: %w", e.Slug(), err)
		}
		f.Entities = append(f.Entities, e)
	}
	// Sorted here, byte-wise, not by the database's collation: the same fleet gives the
	// same file whatever the server's locale.
	sort.Slice(f.Entities, func(i, j int) bool {
		a, b := f.Entities[i], f.Entities[j]
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		return a.Name < b.Name
	})
	for _, r := range edges {
		// A relationship type the ontology no longer declares would fail the seed.
		if _, ok := o.RelationshipType(r.Type); !ok {
			continue
		}
		f.Edges = append(f.Edges, Edge(r))
	}
	sort.Slice(f.Edges, func(i, j int) bool {
		a, b := f.Edges[i], f.Edges[j]
		if a.Source != b.Source {
			return a.Source < b.Source
		}
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		return a.Target < b.Target
	})
	return f, nil
}

// decodeAttributes decodes a jsonb object keeping every number's text (json.Number). A
// top-level null is dropped: the seed reads a null as "not declared". Scheduler-owned keys
// are dropped too: they live in entity_status, and the seed refuses them.
func decodeAttributes(raw string) (map[string]any, error) {
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the attributes object")
	}
	for k, v := range m {
		if v == nil || slices.Contains(graph.SchedulerOwnedKeys, k) {
			delete(m, k)
		}
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// YAML renders the fleet as an inventory file with a header comment.
func (f *Fleet) YAML() ([]byte, error) {
	var b bytes.Buffer
	scope := "every fleet type"
	if len(f.Types) > 0 {
		scope = strings.Join(f.Types, ", ") + " (with subtypes)"
	}
	fmt.Fprintf(&b, "# Oikos fleet inventory, written by `oikos export` (GET /api/v1/export).\n")
	fmt.Fprintf(&b, "# Exported at %s: %d entities, %d relationships; types: %s.\n",
		f.At.UTC().Format(time.RFC3339), len(f.Entities), len(f.Edges), scope)
	fmt.Fprintf(&b, "# Not in it: knowledge (seeds/knowledge.yaml), checks, executions, tasks, destroyed entities,\n")
	fmt.Fprintf(&b, "# about edges, and edges whose other end is not in it.\n")
	fmt.Fprintf(&b, "# Re-seed (idempotent, never removes anything): oikos seed --inventory fleet.yaml\n")

	ents := &yaml.Node{Kind: yaml.SequenceNode}
	for _, e := range f.Entities {
		m := mapping(false)
		add(m, "type", str(e.Type))
		add(m, "name", str(e.Name))
		add(m, "state", str(e.State))
		if len(e.Attributes) > 0 {
			a, err := node(e.Attributes)
			if err != nil {
				return nil, fmt.Errorf("export: %s: %w", e.Slug(), err)
			}
			add(m, "attributes", a)
		}
		ents.Content = append(ents.Content, m)
	}
	edges := &yaml.Node{Kind: yaml.SequenceNode}
	for _, r := range f.Edges {
		m := mapping(true) // one line per edge
		add(m, "type", str(r.Type))
		add(m, "source", str(r.Source))
		add(m, "target", str(r.Target))
		edges.Content = append(edges.Content, m)
	}
	if len(f.Entities) == 0 {
		ents.Style = yaml.FlowStyle
	}
	if len(f.Edges) == 0 {
		edges.Style = yaml.FlowStyle
	}
	doc := mapping(false)
	add(doc, "entities", ents)
	add(doc, "relationships", edges)

	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("export: encode: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("export: encode: %w", err)
	}
	return b.Bytes(), nil
}

// Write reads the fleet and renders it: Read then YAML.
func Write(ctx context.Context, db storage.DB, o *ontology.Ontology, types []string) ([]byte, error) {
	f, err := Read(ctx, db, o, types)
	if err != nil {
		return nil, err
	}
	return f.YAML()
}

func mapping(flow bool) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	if flow {
		n.Style = yaml.FlowStyle
	}
	return n
}

func add(m *yaml.Node, key string, v *yaml.Node) {
	m.Content = append(m.Content, str(key), v)
}

// str is a string scalar; the encoder quotes it when its plain form would read back as
// anything but that string ("8.3", "true", "", "2024-01-01").
func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

// node converts a decoded JSON value into a YAML node that seedfile reads back as the same
// value: json.Number to !!int or !!float, lists of plain scalars in flow style ([a, b]),
// maps with sorted keys in block style.
func node(v any) (*yaml.Node, error) {
	switch x := v.(type) {
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(x)}, nil
	case string:
		return str(x), nil
	case json.Number:
		return number(x)
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		flow := true
		for _, item := range x {
			c, err := node(item)
			if err != nil {
				return nil, err
			}
			flow = flow && c.Kind == yaml.ScalarNode && !strings.ContainsAny(c.Value, "\n\r") && len(c.Value) <= 80
			n.Content = append(n.Content, c)
		}
		if flow {
			n.Style = yaml.FlowStyle
		}
		return n, nil
	case map[string]any:
		n := mapping(len(x) == 0)
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			c, err := node(x[k])
			if err != nil {
				return nil, err
			}
			add(n, k, c)
		}
		return n, nil
	}
	return nil, fmt.Errorf("unexpected attribute value %T", v)
}

// number renders a JSON number: an integer as written (exact, whatever its size within
// int64), anything else as a float that reads back as the same float64 (with ".0" when it
// is integral, so that it stays a float).
func number(n json.Number) (*yaml.Node, error) {
	if _, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: n.String()}, nil
	}
	f, err := strconv.ParseFloat(n.String(), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("number %s does not fit a float64", n)
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: s}, nil
}
