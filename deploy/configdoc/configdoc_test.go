// Package configdoc checks the README's configuration table against the
// variables the code reads, both ways: a variable the daemons, the CLI or the
// local runner read must have a row, and a row must name a variable the code
// still reads. Nothing here runs at build time; it is only this test.
package configdoc

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// sources are the trees whose non-test Go files read configuration.
var sources = []string{"api", "scheduler", "agent", "shared", "deploy", "testkit"}

// envName is a variable name written as a Go string literal: "OIKOS_X" or
// "LABSIM_X". A literal that ends in "_" is a prefix (OIKOS_SECRET_<NAME>).
var envName = regexp.MustCompile(`"((?:OIKOS|LABSIM)_[A-Z0-9_]*)"`)

// rowName is a variable in the first column of a table row.
var rowName = regexp.MustCompile("`((?:OIKOS|LABSIM)_[A-Z0-9_<>]*)`")

// undocumented are variables the code reads that are not settings for
// operators, with why.
var undocumented = map[string]string{}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.work")); err != nil {
		t.Fatalf("repository root not found from %s: %v", dir, err)
	}
	return dir
}

// codeVariables returns every variable name the non-test code mentions, with
// the first file that does.
func codeVariables(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, src := range sources {
		err := filepath.WalkDir(filepath.Join(root, src), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "node_modules" || d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range envName.FindAllSubmatch(data, -1) {
				name := string(m[1])
				if _, ok := out[name]; !ok {
					rel, _ := filepath.Rel(root, path)
					out[name] = rel
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// tableVariables returns the variables named in the first column of the
// README's configuration table (the table under "| variable | daemon |").
func tableVariables(t *testing.T, root string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "| variable | daemon |"):
			in = true
		case in && !strings.HasPrefix(line, "|"):
			in = false
		case in:
			first := strings.SplitN(strings.TrimPrefix(line, "|"), "|", 2)[0]
			for _, m := range rowName.FindAllStringSubmatch(first, -1) {
				out = append(out, m[1])
			}
		}
	}
	if len(out) < 20 {
		t.Fatalf("found %d variables in README's configuration table; is the table still headed `| variable | daemon |`?", len(out))
	}
	return out
}

// documented reports whether a variable the code reads has a row: its own,
// or the row of the pattern it belongs to (OIKOS_SECRET_<NAME> covers the
// prefix OIKOS_SECRET_).
func documented(name string, rows []string) bool {
	for _, r := range rows {
		if r == name {
			return true
		}
		if prefix, ok := strings.CutSuffix(r, "<NAME>"); ok && strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

func TestConfigurationTable(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	code := codeVariables(t, root)
	rows := tableVariables(t, root)
	var missing []string
	for name, file := range code {
		if _, ok := undocumented[name]; ok || documented(name, rows) {
			continue
		}
		missing = append(missing, name+" (read in "+file+")")
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("README's configuration table has no row for %s", m)
	}
	for _, r := range rows {
		name := strings.TrimSuffix(r, "<NAME>")
		if _, ok := code[name]; ok {
			continue
		}
		found := false
		for c := range code {
			found = found || strings.HasPrefix(c, name) && strings.HasSuffix(r, "<NAME>")
		}
		if !found {
			t.Errorf("README's configuration table documents %s, which no code reads", r)
		}
	}
	for name := range undocumented {
		if _, ok := code[name]; !ok {
			t.Errorf("undocumented lists %s, which no code reads any more", name)
		}
	}
}

func TestDocumented(t *testing.T) {
	t.Parallel()
	rows := []string{"OIKOS_A", "OIKOS_SECRET_<NAME>"}
	for name, want := range map[string]bool{"OIKOS_A": true, "OIKOS_SECRET_X": true, "OIKOS_SECRET_": true, "OIKOS_B": false} {
		if got := documented(name, rows); got != want {
			t.Errorf("documented(%q) = %v, want %v", name, got, want)
		}
	}
	if !slices.Contains(rows, "OIKOS_A") {
		t.Fatal("unreachable")
	}
}
