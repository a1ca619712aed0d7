// Package seedfile reads the inventory and knowledge seed files (seeds/inventory.yaml and
// seeds/knowledge.yaml) into plain values that remember the line each item came from, and
// validates them against the ontology before anything is written.
//
// Every problem is reported as an *Error naming the file, the line, the entity slug and the
// field, so that a failed seed ingest says exactly what to fix; all problems are reported at
// once rather than one per run.
package seedfile

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/yamlnode"
)

// Default file names used in error messages when the caller does not name the file.
const (
	DefaultInventoryFile = "inventory.yaml"
	DefaultKnowledgeFile = "knowledge.yaml"
)

// ErrInvalidSeed marks every seed validation or parse problem, so a caller can tell a bad
// seed (fix the file) from an infrastructure failure (retry).
var ErrInvalidSeed = errors.New("invalid seed")

// Error is one problem in a seed file.
type Error struct {
	// File is the seed file name.
	File string
	// Line is the line in File, 0 when unknown.
	Line int
	// Entity is the slug of the entity (or document, or relationship) concerned, if any.
	Entity string
	// Field is the field within it (e.g. "attributes.vmid", "state", "target"), if any.
	Field string
	// Reason says what is wrong.
	Reason string
	// Err is the underlying sentinel (ontology.ErrUnknownType, ...) when there is one.
	Err error
}

// Error implements error: "inventory.yaml:42: lxc:jellyfin: attributes.vmid: expected integer, got string".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Entity != "" {
		b.WriteString(": " + e.Entity)
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	b.WriteString(": " + e.Reason)
	return b.String()
}

// Unwrap exposes the underlying sentinel, if any.
func (e *Error) Unwrap() error { return e.Err }

// Is makes every seed Error match ErrInvalidSeed.
func (e *Error) Is(target error) bool { return target == ErrInvalidSeed }

// problems collects Errors for one file and joins them sorted by line.
type problems struct {
	file string
	errs []*Error
}

func (p *problems) add(line int, entity, field string, cause error, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Entity: entity, Field: field,
		Reason: fmt.Sprintf(format, args...), Err: cause})
}

func (p *problems) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	sort.SliceStable(p.errs, func(i, j int) bool { return p.errs[i].Line < p.errs[j].Line })
	out := make([]error, len(p.errs))
	for i, e := range p.errs {
		out[i] = e
	}
	return errors.Join(out...)
}

// SplitSlug splits "type:name" at the first colon. Type names never contain a colon, names may.
func SplitSlug(slug string) (typ, name string, ok bool) {
	typ, name, ok = strings.Cut(slug, ":")
	if !ok || typ == "" || name == "" {
		return "", "", false
	}
	return typ, name, true
}

// yamlErrorLine extracts a line number from a yaml.v3 error.
func yamlErrorLine(err error) int { return ontology.YAMLErrorLine(err) }

func root(file string, data []byte, p *problems) *yaml.Node {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		p.add(yamlErrorLine(err), "", "", nil, "invalid YAML: %v", err)
		return nil
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		p.add(0, "", "", nil, "document is empty")
		return nil
	}
	return yamlnode.Deref(doc.Content[0])
}

// mapping returns a mapping node's values by key; it reports non-mappings, duplicate and
// unknown keys (a misspelt key must fail, never be ignored).
func (p *problems) mapping(n *yaml.Node, entity, what string, allowed ...string) (map[string]*yaml.Node, bool) {
	n = yamlnode.Deref(n)
	out := map[string]*yaml.Node{}
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, entity, what, nil, "expected a mapping, got %s", yamlnode.KindName(n))
		return out, false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := yamlnode.Deref(n.Content[i])
		if _, dup := out[k.Value]; dup {
			p.add(k.Line, entity, joinField(what, k.Value), nil, "key given twice")
			continue
		}
		if len(allowed) > 0 && !contains(allowed, k.Value) {
			p.add(k.Line, entity, joinField(what, k.Value), nil, "unknown key (allowed: %s)", strings.Join(allowed, ", "))
			continue
		}
		out[k.Value] = n.Content[i+1]
	}
	return out, true
}

func joinField(parent, child string) string {
	if parent == "" {
		return child
	}
	return parent + "." + child
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (p *problems) str(n *yaml.Node, entity, field string) string {
	n = yamlnode.Deref(n)
	if n.Kind != yaml.ScalarNode {
		p.add(n.Line, entity, field, nil, "expected a string, got %s", yamlnode.KindName(n))
		return ""
	}
	if n.ShortTag() == "!!null" {
		return ""
	}
	return n.Value
}

func (p *problems) strList(n *yaml.Node, entity, field string) []string {
	n = yamlnode.Deref(n)
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.add(n.Line, entity, field, nil, "expected a list, got %s", yamlnode.KindName(n))
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for _, c := range n.Content {
		c = yamlnode.Deref(c)
		if c.Kind != yaml.ScalarNode || c.ShortTag() == "!!null" {
			p.add(c.Line, entity, field, nil, "expected a string item, got %s", yamlnode.KindName(c))
			continue
		}
		out = append(out, c.Value)
	}
	return out
}

// value converts a YAML node to the plain Go value stored in an entity's attributes:
// string, int, float64, bool, nil, []any or map[string]any. Unquoted timestamps stay strings
// (yaml.v3 would turn them into time.Time, which the schema and JSON storage do not expect).
func (p *problems) value(n *yaml.Node, entity, field string) any {
	n = yamlnode.Deref(n)
	switch n.Kind {
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil
		case "!!bool", "!!int", "!!float":
			var v any
			if err := n.Decode(&v); err != nil {
				p.add(n.Line, entity, field, nil, "%v", err)
				return nil
			}
			if i, ok := v.(int64); ok {
				return int(i)
			}
			return v
		default:
			return n.Value
		}
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			out = append(out, p.value(c, entity, fmt.Sprintf("%s[%d]", field, i)))
		}
		return out
	case yaml.MappingNode:
		out := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := yamlnode.Deref(n.Content[i])
			if k.Kind != yaml.ScalarNode {
				p.add(k.Line, entity, field, nil, "mapping keys must be strings")
				continue
			}
			if _, dup := out[k.Value]; dup {
				p.add(k.Line, entity, joinField(field, k.Value), nil, "key given twice")
				continue
			}
			out[k.Value] = p.value(n.Content[i+1], entity, joinField(field, k.Value))
		}
		return out
	}
	p.add(n.Line, entity, field, nil, "unsupported YAML node")
	return nil
}
