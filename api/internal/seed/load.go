package seed

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/seedfile"
)

// Files are the three seed documents and the names problems are reported under.
type Files struct {
	OntologyName, InventoryName, KnowledgeName string
	Ontology, Inventory, Knowledge             []byte
}

// Embedded returns the seeds compiled into the binary.
func Embedded() Files {
	return Files{
		OntologyName: seeds.OntologyFile, Ontology: seeds.Ontology(),
		InventoryName: seeds.InventoryFile, Inventory: seeds.Inventory(),
		KnowledgeName: seeds.KnowledgeFile, Knowledge: seeds.Knowledge(),
	}
}

// Load parses the three documents. Every problem names its file and line; all problems of
// all three files are returned together.
func Load(f Files) (*ontology.Ontology, *seedfile.Inventory, *seedfile.KnowledgeSet, error) {
	o, oerr := ontology.Parse(f.Ontology)
	if oerr != nil {
		oerr = fmt.Errorf("%s: %w", fileName(f.OntologyName, seeds.OntologyFile), oerr)
	}
	inv, ierr := seedfile.ParseInventoryFile(fileName(f.InventoryName, seedfile.DefaultInventoryFile), f.Inventory)
	kn, kerr := seedfile.ParseKnowledgeFile(fileName(f.KnowledgeName, seedfile.DefaultKnowledgeFile), f.Knowledge)
	if err := errors.Join(oerr, ierr, kerr); err != nil {
		return nil, nil, nil, err
	}
	return o, inv, kn, nil
}

// KnowledgeFor returns the knowledge set with every about link that points outside inv and
// the set itself dropped. The embedded knowledge base is written about the demo fleet; a real
// install seeds it without that fleet (inv nil, or the operator's own inventory), and its
// runbooks must still load instead of failing on `about: [cluster:olympus]`.
func KnowledgeFor(kn *seedfile.KnowledgeSet, inv *seedfile.Inventory) *seedfile.KnowledgeSet {
	if kn == nil {
		return nil
	}
	known := map[string]bool{}
	if inv != nil {
		for _, e := range inv.Entities {
			known[e.Slug()] = true
		}
	}
	for _, d := range kn.Documents {
		known[d.Slug] = true
	}
	out := *kn
	out.Documents = make([]seedfile.DocSeed, len(kn.Documents))
	for i, d := range kn.Documents {
		d.About = slices.DeleteFunc(slices.Clone(d.About), func(s string) bool { return !known[s] })
		out.Documents[i] = d
	}
	return &out
}

// LoadInventoryFile reads an inventory file from disk (OIKOS_INVENTORY, oikos seed
// --inventory); problems name the file and line.
func LoadInventoryFile(path string) (*seedfile.Inventory, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return seedfile.ParseInventoryFile(path, b)
}
