package seeds

import (
	"bytes"
	"io/fs"
	"os"
	"testing"
)

// The seed contents are validated in shared/seedfile (which reads these same files); here we
// check that the binary carries exactly what is on disk and that callers get private copies.
func TestEmbeddedFiles(t *testing.T) {
	t.Parallel()
	accessors := map[string]func() []byte{
		OntologyFile:  Ontology,
		InventoryFile: Inventory,
		KnowledgeFile: Knowledge,
	}
	for name, get := range accessors {
		onDisk, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		embedded, err := fs.ReadFile(FS, name)
		if err != nil {
			t.Fatalf("%s not embedded: %v", name, err)
		}
		if len(embedded) == 0 || !bytes.Equal(embedded, onDisk) || !bytes.Equal(get(), onDisk) {
			t.Errorf("%s: embedded copy differs from the file", name)
		}
		b := get()
		b[0] ^= 0xff
		if !bytes.Equal(get(), onDisk) {
			t.Errorf("%s: modifying a returned slice changed the next read", name)
		}
	}
	entries, err := fs.ReadDir(FS, ".")
	if err != nil || len(entries) != len(accessors) {
		t.Errorf("FS holds %d entries (%v), want exactly the three seed files", len(entries), err)
	}
}
