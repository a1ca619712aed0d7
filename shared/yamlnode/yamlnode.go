// Package yamlnode holds the helpers the YAML file readers (shared/ontology, shared/seedfile)
// share for walking a yaml.Node tree and wording what they found in an error.
package yamlnode

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// Deref follows aliases, so anchors (&lifecycle / *lifecycle) can share declarations.
func Deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// KindName words what n is, for "expected X, got Y" errors: "a mapping", "a list",
// "nothing" (a null), "the scalar \"v\"".
func KindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("the scalar %q", n.Value)
	}
	return "an unexpected node"
}
