package seedfile

import (
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/yamlnode"
)

// Knowledge kinds; each is also the entity type of the document.
const (
	KindDocument      = "document"
	KindInvestigation = "investigation"
	KindRunbook       = "runbook"
)

var knowledgeKinds = []string{KindDocument, KindInvestigation, KindRunbook}

// KnowledgeSet is the parsed knowledge seed.
type KnowledgeSet struct {
	// File names the source in error messages.
	File string `json:"file"`
	// Documents in file order.
	Documents []DocSeed `json:"documents"`
}

// DocSeed is one document, investigation or runbook.
type DocSeed struct {
	// Slug is "<kind>:<name>"; it is the entity slug of the document.
	Slug string `json:"slug"`
	// Kind is document, investigation or runbook.
	Kind string `json:"kind"`
	// Title is the human title.
	Title string `json:"title"`
	// Body is markdown.
	Body string `json:"body"`
	// Tags help search.
	Tags []string `json:"tags"`
	// About lists slugs of entities this is about (each becomes an about edge).
	About []string `json:"about"`
	// Line in the knowledge file.
	Line int `json:"line"`
}

// Name returns the part of the slug after "<kind>:".
func (d DocSeed) Name() string {
	_, name, _ := SplitSlug(d.Slug)
	return name
}

// ParseKnowledge parses a knowledge document; errors name DefaultKnowledgeFile.
func ParseKnowledge(data []byte) (*KnowledgeSet, error) {
	return ParseKnowledgeFile(DefaultKnowledgeFile, data)
}

// ParseKnowledgeFile parses a knowledge document; errors name file.
func ParseKnowledgeFile(file string, data []byte) (*KnowledgeSet, error) {
	p := &problems{file: file}
	ks := &KnowledgeSet{File: file, Documents: []DocSeed{}}
	r := root(file, data, p)
	if r == nil {
		return nil, p.err()
	}
	top, _ := p.mapping(r, "", "", "documents")
	if n, ok := top["documents"]; ok {
		n = yamlnode.Deref(n)
		if n.Kind != yaml.SequenceNode {
			p.add(n.Line, "", "documents", nil, "expected a list, got %s", yamlnode.KindName(n))
		} else {
			for _, item := range n.Content {
				item = yamlnode.Deref(item)
				f, ok := p.mapping(item, "", "", "slug", "kind", "title", "tags", "about", "body")
				if !ok {
					continue
				}
				d := DocSeed{Line: item.Line, Tags: []string{}, About: []string{}}
				if v, ok := f["slug"]; ok {
					d.Slug = p.str(v, "", "slug")
				}
				if v, ok := f["kind"]; ok {
					d.Kind = p.str(v, d.Slug, "kind")
				}
				if v, ok := f["title"]; ok {
					d.Title = p.str(v, d.Slug, "title")
				}
				if v, ok := f["body"]; ok {
					d.Body = p.str(v, d.Slug, "body")
				}
				if v, ok := f["tags"]; ok {
					if t := p.strList(v, d.Slug, "tags"); t != nil {
						d.Tags = t
					}
				}
				if v, ok := f["about"]; ok {
					if a := p.strList(v, d.Slug, "about"); a != nil {
						d.About = a
					}
				}
				ks.Documents = append(ks.Documents, d)
			}
		}
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return ks, nil
}

// Validate checks every document: slug "<kind>:<name>" with kind document, investigation or
// runbook (a concrete knowledge type in the ontology), unique slugs, a title and a body, and
// about-targets that exist and that the ontology lets an about edge reach. When inv is nil
// about-targets are checked only for shape (they may live in the database, not the seed).
func (ks *KnowledgeSet) Validate(o *ontology.Ontology, inv *Inventory) error {
	file := ks.File
	if file == "" {
		file = DefaultKnowledgeFile
	}
	p := &problems{file: file}
	var entities map[string]string // slug -> type
	if inv != nil {
		entities = make(map[string]string, len(inv.Entities))
		for _, e := range inv.Entities {
			entities[e.Slug()] = e.Type
		}
	}
	docs := map[string]int{}
	for _, d := range ks.Documents {
		kind, name, ok := SplitSlug(d.Slug)
		switch {
		case !ok:
			p.add(d.Line, d.Slug, "slug", nil, "slug must be <kind>:<name>")
			continue
		case strings.IndexFunc(name, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' }) >= 0:
			p.add(d.Line, d.Slug, "slug", nil, "slug must not contain whitespace")
		}
		if !contains(knowledgeKinds, d.Kind) {
			p.add(d.Line, d.Slug, "kind", nil, "kind %q is not one of %s", d.Kind, strings.Join(knowledgeKinds, ", "))
			continue
		}
		if kind != d.Kind {
			p.add(d.Line, d.Slug, "slug", nil, "slug prefix %q does not match kind %q", kind, d.Kind)
		}
		if t, ok := o.Type(d.Kind); !ok {
			p.add(d.Line, d.Slug, "kind", ontology.ErrUnknownType, "the ontology has no type %q", d.Kind)
			continue
		} else if t.Abstract {
			p.add(d.Line, d.Slug, "kind", ontology.ErrAbstractType, "type %q is abstract", d.Kind)
			continue
		}
		if first, dup := docs[d.Slug]; dup {
			p.add(d.Line, d.Slug, "slug", nil, "duplicate slug (first declared at line %d)", first)
			continue
		}
		docs[d.Slug] = d.Line
		if entities != nil {
			if _, clash := entities[d.Slug]; clash {
				p.add(d.Line, d.Slug, "slug", nil, "slug is also declared as an entity in the inventory")
			}
		}
		if strings.TrimSpace(d.Title) == "" {
			p.add(d.Line, d.Slug, "title", nil, "title is empty")
		}
		if strings.TrimSpace(d.Body) == "" {
			p.add(d.Line, d.Slug, "body", nil, "body is empty")
		}
	}
	// About edges are checked after all slugs are known, so documents may point at each other.
	for _, d := range ks.Documents {
		if _, ok := docs[d.Slug]; !ok {
			continue
		}
		for _, target := range d.About {
			typ, _, ok := SplitSlug(target)
			if !ok {
				p.add(d.Line, d.Slug, "about", nil, "%q is not a <type>:<name> slug", target)
				continue
			}
			if entities != nil {
				t, isEntity := entities[target]
				_, isDoc := docs[target]
				if !isEntity && !isDoc {
					p.add(d.Line, d.Slug, "about", nil, "%q is not declared in the inventory or the knowledge file", target)
					continue
				}
				if isEntity {
					typ = t
				}
			}
			if err := o.ValidateEdge("about", d.Kind, typ); err != nil {
				p.add(d.Line, d.Slug, "about", ontology.ErrEdgeNotAllowed, "about %s: %v", target, err)
			}
		}
	}
	return p.err()
}
