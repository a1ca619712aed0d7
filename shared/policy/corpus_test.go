package policy

import (
	"testing"

	"github.com/oikos-hq/oikos/shared/policy/internal/policytest"
)

// loadCorpus reads every corpus file into one list of cases.
func loadCorpus(tb testing.TB) []policytest.Case { return policytest.Corpus(tb) }

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
