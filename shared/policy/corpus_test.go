package policy

import (
	"os"
	"testing"

	"go.yaml.in/yaml/v3"
)

type corpusCase struct {
	Command  string `yaml:"command"`
	Declared Class  `yaml:"declared"`
	Class    Class  `yaml:"class"`
}

type corpusFile struct {
	ReadOnly       []string     `yaml:"read_only"`
	ConfigMutation []string     `yaml:"config_mutation"`
	Destructive    []string     `yaml:"destructive"`
	Declared       []corpusCase `yaml:"declared"`
}

// corpusFiles are the classifier corpora: the original one, and the one for
// the principle that destructive means irreversible (data loss, discarded
// history, lost machines or reachability), dry runs and --help read-only.
var corpusFiles = []string{"testdata/corpus.yaml", "testdata/corpus_gate.yaml"}

// loadCorpus reads every corpus file into one list of cases.
func loadCorpus(tb testing.TB) []corpusCase {
	tb.Helper()
	var out []corpusCase
	for _, name := range corpusFiles {
		out = append(out, loadCorpusFile(tb, name)...)
	}
	return out
}

func loadCorpusFile(tb testing.TB, name string) []corpusCase {
	tb.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		tb.Fatalf("read corpus: %v", err)
	}
	var f corpusFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		tb.Fatalf("parse corpus %s: %v", name, err)
	}
	var out []corpusCase
	for _, c := range f.ReadOnly {
		out = append(out, corpusCase{Command: c, Class: ReadOnly})
	}
	for _, c := range f.ConfigMutation {
		out = append(out, corpusCase{Command: c, Class: ConfigMutation})
	}
	for _, c := range f.Destructive {
		out = append(out, corpusCase{Command: c, Class: Destructive})
	}
	return append(out, f.Declared...)
}

func TestCorpus(t *testing.T) {
	t.Parallel()
	cases := loadCorpus(t)
	if len(cases) < 400 {
		t.Fatalf("corpus has %d cases, want at least 400", len(cases))
	}
	t.Logf("corpus: %d cases", len(cases))
	p := Default()
	seen := map[string]bool{}
	for _, tc := range cases {
		key := tc.Command + "\x00" + string(tc.Declared)
		if seen[key] {
			t.Errorf("duplicate corpus case %q (declared %q)", tc.Command, tc.Declared)
		}
		seen[key] = true
		got := p.Classify(tc.Command, tc.Declared)
		if got.Class != tc.Class {
			t.Errorf("Classify(%q, %q) = %s, want %s\n  reasons: %q", tc.Command, tc.Declared, got.Class, tc.Class, got.Reasons)
		}
	}
}
