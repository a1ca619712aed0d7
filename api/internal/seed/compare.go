package seed

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"

	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/storage/readmodel"
	"github.com/oikos-hq/oikos/shared/seedfile"
)

// dbEntity is what the comparison needs of a stored entity.
type dbEntity struct {
	Type, State string
	Attributes  map[string]any
}

// dbDoc is what the comparison needs of a stored knowledge document.
type dbDoc struct {
	Kind, Title, Body string
	Tags              []string
}

type edge struct{ Source, Type, Target string }

func (e edge) String() string { return e.Source + " -" + e.Type + "-> " + e.Target }

// state is the part of the database a seed is compared with.
type state struct {
	entities map[string]dbEntity
	docs     map[string]dbDoc
	edges    map[edge]bool
}

// readState reads the entities with the given slugs (all but checks when slugs is nil), the
// current edges out of them, and their knowledge text (readmodel.SeedState).
func readState(ctx context.Context, r *readmodel.Reader, slugs []string) (*state, error) {
	ents, edges, docs, err := r.SeedState(ctx, slugs)
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	st := &state{entities: make(map[string]dbEntity, len(ents)), docs: make(map[string]dbDoc, len(docs)),
		edges: make(map[edge]bool, len(edges))}
	for _, e := range ents {
		st.entities[e.Slug] = dbEntity{Type: e.Type, State: e.State, Attributes: e.Attributes}
	}
	for _, e := range edges {
		st.edges[edge(e)] = true
	}
	for _, d := range docs {
		st.docs[d.Slug] = dbDoc{Kind: d.Kind, Title: d.Title, Body: d.Body, Tags: d.Tags}
	}
	return st, nil
}

// DiffItem is one difference between the seeds and the database.
type DiffItem struct {
	// Kind is entity, relationship or knowledge.
	Kind string `json:"kind"`
	// Ref is the slug, or "source -type-> target" for a relationship.
	Ref string `json:"ref"`
	// Field is what differs (attributes.<name>, state, title, body, tags), for Changed.
	Field string `json:"field,omitempty"`
	// Seed and DB are the two values, for Changed.
	Seed any `json:"seed,omitempty"`
	DB   any `json:"db,omitempty"`
	// File and Line locate the seed item, when it comes from a seed.
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
}

// String renders the item for the CLI.
func (d DiffItem) String() string {
	s := d.Kind + " " + d.Ref
	if d.Field != "" {
		s += " " + d.Field + ": seed " + render(d.Seed) + ", database " + render(d.DB)
	}
	if d.File != "" && d.Line > 0 {
		s += fmt.Sprintf(" (%s:%d)", d.File, d.Line)
	}
	return s
}

func render(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 120 {
		return string(b[:117]) + "..."
	}
	return string(b)
}

// DiffReport is seed drift: what the seeds declare that the database lacks (Missing), what
// the database holds that no seed declares (Extra), and seeded values that differ (Changed).
type DiffReport struct {
	Missing []DiffItem `json:"missing"`
	Extra   []DiffItem `json:"extra"`
	Changed []DiffItem `json:"changed"`
}

// Empty reports whether there is no drift.
func (r DiffReport) Empty() bool { return len(r.Missing)+len(r.Extra)+len(r.Changed) == 0 }

// comparison is the result of comparing seeds with a state: the writes that bring the
// database up to the seeds, and the same facts as drift.
type comparison struct {
	bulk graph.BulkPlan
	diff DiffReport
}

// normalize gives a seed value the shape jsonb gives back (float64 numbers, []any lists).
func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return v
	}
	return out
}

// compare works out what the seeds need written (never removing anything) and the drift.
func compare(inv *seedfile.Inventory, kn *seedfile.KnowledgeSet, st *state) comparison {
	var c comparison
	invFile := fileName(inv.File, seedfile.DefaultInventoryFile)
	knFile := fileName(kn.File, seedfile.DefaultKnowledgeFile)
	for _, e := range inv.Entities {
		slug := e.Slug()
		cur, ok := st.entities[slug]
		if !ok {
			c.bulk.Creates = append(c.bulk.Creates, graph.NewEntity{Type: e.Type, Name: e.Name, State: e.State, Attributes: e.Attributes})
			c.diff.Missing = append(c.diff.Missing, DiffItem{Kind: "entity", Ref: slug, File: invFile, Line: e.Line})
			continue
		}
		set := map[string]any{}
		for _, k := range sortedKeys(e.Attributes) {
			v := e.Attributes[k]
			if v == nil {
				continue // a null in the seed means "not declared", never "delete"
			}
			nv := normalize(v)
			if dv, has := cur.Attributes[k]; !has || !reflect.DeepEqual(nv, dv) {
				set[k] = v
				c.diff.Changed = append(c.diff.Changed, DiffItem{Kind: "entity", Ref: slug, Field: "attributes." + k,
					Seed: nv, DB: cur.Attributes[k], File: invFile, Line: e.Line})
			}
		}
		if len(set) > 0 {
			c.bulk.Patches = append(c.bulk.Patches, graph.AttributePatch{Slug: slug, Set: set})
		}
		if e.State != "" && e.State != cur.State {
			// Reported, not written: after creation an entity follows its lifecycle.
			c.diff.Changed = append(c.diff.Changed, DiffItem{Kind: "entity", Ref: slug, Field: "state",
				Seed: e.State, DB: cur.State, File: invFile, Line: e.Line})
		}
	}
	for _, d := range kn.Documents {
		cur, ok := st.docs[d.Slug]
		w := graph.KnowledgeWrite{Slug: d.Slug, Kind: d.Kind, Title: d.Title, Body: d.Body, Tags: d.Tags}
		if !ok {
			c.bulk.Knowledge = append(c.bulk.Knowledge, w)
			c.diff.Missing = append(c.diff.Missing, DiffItem{Kind: "knowledge", Ref: d.Slug, File: knFile, Line: d.Line})
		} else {
			changed := false
			add := func(field string, seed, db any) {
				changed = true
				c.diff.Changed = append(c.diff.Changed, DiffItem{Kind: "knowledge", Ref: d.Slug, Field: field,
					Seed: seed, DB: db, File: knFile, Line: d.Line})
			}
			if cur.Kind != d.Kind {
				add("kind", d.Kind, cur.Kind)
			}
			if cur.Title != d.Title {
				add("title", d.Title, cur.Title)
			}
			if cur.Body != d.Body {
				add("body", d.Body, cur.Body)
			}
			if !slices.Equal(cur.Tags, d.Tags) {
				add("tags", d.Tags, cur.Tags)
			}
			if changed {
				c.bulk.Knowledge = append(c.bulk.Knowledge, w)
			}
		}
		for _, a := range d.About {
			e := edge{Source: d.Slug, Type: "about", Target: a}
			if !st.edges[e] {
				c.bulk.Edges = append(c.bulk.Edges, graph.NewEdge{Type: e.Type, Source: e.Source, Target: e.Target})
				c.diff.Missing = append(c.diff.Missing, DiffItem{Kind: "relationship", Ref: e.String(), File: knFile, Line: d.Line})
			}
		}
	}
	for _, r := range inv.Relationships {
		e := edge{Source: r.Source, Type: r.Type, Target: r.Target}
		if !st.edges[e] {
			c.bulk.Edges = append(c.bulk.Edges, graph.NewEdge{Type: e.Type, Source: e.Source, Target: e.Target})
			c.diff.Missing = append(c.diff.Missing, DiffItem{Kind: "relationship", Ref: e.String(), File: invFile, Line: r.Line})
		}
	}
	return c
}

// operationalTypes are Oikos's own records, never seeded, so never drift.
var operationalTypes = map[string]bool{"check": true, "execution": true, "task": true}

// extras lists what the database holds that no seed declares.
func extras(inv *seedfile.Inventory, kn *seedfile.KnowledgeSet, st *state) []DiffItem {
	seeded := map[string]bool{}
	for _, e := range inv.Entities {
		seeded[e.Slug()] = true
	}
	for _, d := range kn.Documents {
		seeded[d.Slug] = true
	}
	seededEdges := map[edge]bool{}
	for _, r := range inv.Relationships {
		seededEdges[edge{Source: r.Source, Type: r.Type, Target: r.Target}] = true
	}
	for _, d := range kn.Documents {
		for _, a := range d.About {
			seededEdges[edge{Source: d.Slug, Type: "about", Target: a}] = true
		}
	}
	var out []DiffItem
	for _, slug := range sortedKeys(st.entities) {
		e := st.entities[slug]
		if seeded[slug] || operationalTypes[e.Type] {
			continue
		}
		kind := "entity"
		if slices.Contains(graph.KnowledgeKinds, e.Type) {
			kind = "knowledge"
		}
		out = append(out, DiffItem{Kind: kind, Ref: slug})
	}
	var edges []edge
	for e := range st.edges {
		if seededEdges[e] || operationalTypes[typeOf(st, e.Source)] || operationalTypes[typeOf(st, e.Target)] {
			continue
		}
		edges = append(edges, e)
	}
	sort.Slice(edges, func(i, j int) bool { return edges[i].String() < edges[j].String() })
	for _, e := range edges {
		out = append(out, DiffItem{Kind: "relationship", Ref: e.String()})
	}
	return out
}

// typeOf is the type of slug: from the state when read, else from the slug itself.
func typeOf(st *state, slug string) string {
	if e, ok := st.entities[slug]; ok {
		return e.Type
	}
	t, _, _ := seedfile.SplitSlug(slug)
	return t
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
