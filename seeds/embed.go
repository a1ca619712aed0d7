// Package seeds embeds the seed files that describe Oikos's world: the ontology (entity and
// relationship types), the inventory of a fictional homelab, and the knowledge base of
// documents, investigations and runbooks. Parsing and validation live in
// shared/ontology and shared/seedfile; this package only carries the bytes into the binaries.
//
// Every address in the inventory is on loopback (127.0.0.0/8) and every name is under a
// reserved .example domain, so nothing built from these seeds can reach a real network.
package seeds

import (
	"bytes"
	"embed"
)

// FS holds ontology.yaml, inventory.yaml and knowledge.yaml. It is read-only by construction.
//
//go:embed ontology.yaml inventory.yaml knowledge.yaml
var FS embed.FS

// File names inside FS.
const (
	OntologyFile  = "ontology.yaml"
	InventoryFile = "inventory.yaml"
	KnowledgeFile = "knowledge.yaml"
)

// Ontology returns a copy of ontology.yaml.
func Ontology() []byte { return read(OntologyFile) }

// Inventory returns a copy of inventory.yaml.
func Inventory() []byte { return read(InventoryFile) }

// Knowledge returns a copy of knowledge.yaml.
func Knowledge() []byte { return read(KnowledgeFile) }

// read returns a copy so a caller that modifies the slice cannot affect another. The files
// are embedded at compile time, so a read error means the binary itself is broken.
func read(name string) []byte {
	b, err := FS.ReadFile(name)
	if err != nil {
		panic("seeds: embedded file " + name + " missing: " + err.Error())
	}
	return bytes.Clone(b)
}
