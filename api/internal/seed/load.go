package seed

import (
	"errors"
	"fmt"

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
