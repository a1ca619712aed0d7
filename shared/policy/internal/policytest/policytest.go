// Package policytest holds what the tests of the classifier's packages
// share: the corpus (shared/policy/testdata), and the check of a principle's
// table of cases. Only tests import it.
package policytest

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"mvdan.cc/sh/v3/syntax"

	"github.com/oikos-hq/oikos/shared/policy/internal/ruleset"
	"github.com/oikos-hq/oikos/shared/policy/internal/walk"
)

// Classifier is what the checks classify with: *policy.Policy.
type Classifier interface {
	Classify(command string, declared ruleset.Class) walk.Result
}

// Case is one corpus case: a command, the class it was declared with ("" for
// none) and the class it must get.
type Case struct {
	Command  string        `yaml:"command"`
	Declared ruleset.Class `yaml:"declared"`
	Class    ruleset.Class `yaml:"class"`
}

type corpusFile struct {
	ReadOnly       []string `yaml:"read_only"`
	ConfigMutation []string `yaml:"config_mutation"`
	Destructive    []string `yaml:"destructive"`
	Declared       []Case   `yaml:"declared"`
}

// corpusFiles are the classifier corpora: the original one, and the one for
// the principle that destructive means irreversible (data loss, discarded
// history, lost machines or reachability), dry runs and --help read-only.
var corpusFiles = []string{"corpus.yaml", "corpus_gate.yaml"}

// testdata is shared/policy/testdata, found from this file's place in the
// tree, so a test of any of the classifier's packages reads the same corpus.
func testdata(tb testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("policytest: cannot find its own source file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata")
}

// Corpus reads every corpus file into one list of cases.
func Corpus(tb testing.TB) []Case {
	tb.Helper()
	var out []Case
	for _, name := range corpusFiles {
		out = append(out, corpusFileCases(tb, filepath.Join(testdata(tb), name))...)
	}
	return out
}

func corpusFileCases(tb testing.TB, name string) []Case {
	tb.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		tb.Fatalf("read corpus: %v", err)
	}
	var f corpusFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		tb.Fatalf("parse corpus %s: %v", name, err)
	}
	var out []Case
	for _, c := range f.ReadOnly {
		out = append(out, Case{Command: c, Class: ruleset.ReadOnly})
	}
	for _, c := range f.ConfigMutation {
		out = append(out, Case{Command: c, Class: ruleset.ConfigMutation})
	}
	for _, c := range f.Destructive {
		out = append(out, Case{Command: c, Class: ruleset.Destructive})
	}
	return append(out, f.Declared...)
}

// SimpleCommand reports whether cmd is one program with arguments.
func SimpleCommand(cmd string) bool {
	f, err := syntax.NewParser().Parse(strings.NewReader(cmd), "")
	if err != nil || len(f.Stmts) != 1 {
		return false
	}
	st := f.Stmts[0]
	call, ok := st.Cmd.(*syntax.CallExpr)
	return ok && len(call.Assigns) == 0 && len(st.Redirs) == 0 && !st.Background && len(call.Args) > 0
}

// PrincipleCase is one table case of a principle: a command, the class it
// must get, and where the case comes from — "" for one written from the
// issue's examples, else the manual page or document whose semantics it
// follows. A test declares its table with its own type of this shape
// (`type principleCase policytest.PrincipleCase`), so that its cases are
// written without field names.
type PrincipleCase struct {
	Cmd  string
	Want ruleset.Class
	Src  string
}

// CheckPrinciple classifies every case with p, and checks that each case
// above read_only is explained with the given label.
func CheckPrinciple[C ~struct {
	Cmd  string
	Want ruleset.Class
	Src  string
}](t *testing.T, p Classifier, cases []C, label string, minCases int) {
	t.Helper()
	if len(cases) < minCases {
		t.Fatalf("%d cases, want at least %d", len(cases), minCases)
	}
	fromManuals := 0
	for _, c := range cases {
		tc := PrincipleCase(c)
		if tc.Src != "" {
			fromManuals++
		}
		got := p.Classify(tc.Cmd, "")
		if got.Class != tc.Want {
			t.Errorf("Classify(%q) = %s, want %s (%s)\n  reasons: %q", tc.Cmd, got.Class, tc.Want, tc.Src, got.Reasons)
			continue
		}
		if label != "" && tc.Want != ruleset.ReadOnly && tc.Want == got.Class && !strings.Contains(got.Explanation, label) {
			t.Errorf("Classify(%q).Explanation = %q, want it to name %q", tc.Cmd, got.Explanation, label)
		}
	}
	if 2*fromManuals < len(cases) {
		t.Errorf("%d of %d cases come from the tools' manuals, want at least half", fromManuals, len(cases))
	}
}
