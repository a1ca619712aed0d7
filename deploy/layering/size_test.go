package layering

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// MaxPackageLines is the most non-test, non-generated lines one Go package may hold (issue
// #29): past it a package is doing more than one job and is split by job.
const MaxPackageLines = 3000

// generated reports whether src carries Go's generated-code marker
// (https://go.dev/s/generatedcode) before its package clause.
func generated(src []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "package ") {
			return false
		}
		if strings.HasPrefix(line, "// Code generated ") && strings.HasSuffix(line, " DO NOT EDIT.") {
			return true
		}
	}
	return false
}

// TestPackageSize counts every package directory of the monorepo and fails on one over
// MaxPackageLines, naming it and its count.
func TestPackageSize(t *testing.T) {
	root := workspaceRoot(t)
	lines := map[string]int{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "node_modules" || (strings.HasPrefix(n, ".") && p != root) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if generated(src) {
			return nil
		}
		dir, _ := filepath.Rel(root, filepath.Dir(p))
		lines[filepath.ToSlash(dir)] += bytes.Count(src, []byte("\n"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) < 50 {
		t.Fatalf("only %d packages found under %s: is the walk rooted at the workspace?", len(lines), root)
	}
	dirs := make([]string, 0, len(lines))
	for d := range lines {
		dirs = append(dirs, d)
	}
	sort.Slice(dirs, func(i, j int) bool { return lines[dirs[i]] > lines[dirs[j]] })
	for _, d := range dirs {
		if lines[d] > MaxPackageLines {
			t.Errorf("%s has %d non-test, non-generated lines (at most %d): split it by job", d, lines[d], MaxPackageLines)
		}
	}
	t.Logf("largest package: %s, %d lines (%d packages)", dirs[0], lines[dirs[0]], len(dirs))
}
