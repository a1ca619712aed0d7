// Package sqlcheck checks a storage package's SQL against the migrated schema and against
// its own source (issue #29), for the storage packages' tests:
//
//   - Prepare prepares every registered query on a database migrated to the current schema,
//     so a renamed column or table fails in the package's tests rather than at run time;
//   - Registered parses the package's non-test files and fails on a constant that starts
//     like a SQL statement but is not registered, or on a statement literal outside a
//     constant (it would escape Prepare);
//   - Outside walks a tree and reports every statement literal in a non-test file of a
//     package that is not allowed to hold SQL.
//
// A query is "registered" when its constant's name is a key of the package's Queries map.
// Queries built at run time (optional filters, keyset pages) are registered as the
// variants their builder can produce, under names of the form "qName/variant".
package sqlcheck

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// statement matches a literal that starts like a statement: a message may mention "update"
// in passing, a statement starts with its verb (and an HTTP route "DELETE /x" is no statement).
var statement = regexp.MustCompile("^[`\"]\\s*(SELECT|INSERT|UPDATE|DELETE|WITH|LOCK|TRUNCATE)\\s+[^/\\s]")

// IsStatement reports whether the Go source of a string literal (quotes included) starts
// like a SQL statement.
func IsStatement(literal string) bool { return statement.MatchString(literal) }

// Prepare prepares every query of queries on one connection of pool, naming each failure.
func Prepare(t testing.TB, pool *pgxpool.Pool, queries map[string]string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	names := make([]string, 0, len(queries))
	for name := range queries {
		names = append(names, name)
	}
	sort.Strings(names)
	ok := 0
	for _, name := range names {
		if _, err := conn.Conn().Prepare(ctx, "", queries[name]); err != nil {
			t.Errorf("query %s does not prepare against the migrated schema: %v\n%s", name, err, queries[name])
			continue
		}
		ok++
	}
	if ok == 0 {
		t.Error("no query prepared: the registry is empty")
	}
	t.Logf("%d of %d queries prepared", ok, len(names))
}

// Registered parses the non-test Go files of dir and fails on a constant whose value starts
// like a statement (its first string literal) but whose name is not a key of queries (or
// the prefix of a "name/variant" key), and on a statement literal outside a const
// declaration.
func Registered(t testing.TB, dir string, queries map[string]string) {
	t.Helper()
	registered := map[string]bool{}
	for k := range queries {
		name, _, _ := strings.Cut(k, "/")
		registered[name] = true
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := map[string]bool{} // SQL constants seen in the source
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				for _, pos := range statementLiterals(decl) {
					t.Errorf("%s: SQL statement literal outside a registered constant", fset.Position(pos))
				}
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) || !startsLikeStatement(vs.Values[i]) {
						continue
					}
					found[name.Name] = true
					if !registered[name.Name] {
						t.Errorf("%s: SQL constant %s is not registered in Queries", fset.Position(name.Pos()), name.Name)
					}
				}
			}
		}
	}
	if len(found) == 0 {
		t.Errorf("%s: no SQL constant found", dir)
	}
}

// startsLikeStatement reports whether the first string literal of e starts a statement.
func startsLikeStatement(e ast.Expr) bool {
	var first *ast.BasicLit
	ast.Inspect(e, func(n ast.Node) bool {
		if first != nil {
			return false
		}
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			first = lit
			return false
		}
		return true
	})
	return first != nil && IsStatement(first.Value)
}

func statementLiterals(n ast.Node) []token.Pos {
	var out []token.Pos
	ast.Inspect(n, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && IsStatement(lit.Value) {
			out = append(out, lit.Pos())
		}
		return true
	})
	return out
}

// Outside walks root and returns "file:line" of every statement literal in a non-test Go
// file whose directory (slash-separated, relative to root) allowed rejects. Directories
// named testdata or node_modules are skipped.
func Outside(root string, allowed func(dir string) bool) ([]string, error) {
	var out []string
	fset := token.NewFileSet()
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
		dir, _ := filepath.Rel(root, filepath.Dir(p))
		if allowed(filepath.ToSlash(dir)) {
			return nil
		}
		file, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		for _, pos := range statementLiterals(file) {
			position := fset.Position(pos)
			rel, _ := filepath.Rel(root, position.Filename)
			out = append(out, filepath.ToSlash(rel)+":"+strconv.Itoa(position.Line))
		}
		return nil
	})
	return out, err
}
