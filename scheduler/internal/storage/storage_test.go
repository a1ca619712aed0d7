package storage

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

	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// TestQueriesPrepare prepares every registered query against the migrated schema, so a
// renamed column or table fails here rather than at run time.
func TestQueriesPrepare(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	names := make([]string, 0, len(Queries))
	for name := range Queries {
		names = append(names, name)
	}
	sort.Strings(names)
	ok := 0
	for _, name := range names {
		if _, err := conn.Conn().Prepare(ctx, "", Queries[name]); err != nil {
			t.Errorf("query %s does not prepare against the migrated schema: %v", name, err)
			continue
		}
		ok++
	}
	t.Logf("%d of %d queries prepared", ok, len(names))
}

// sqlStatement is a literal that starts like a statement (an error message may mention
// "update" in passing; a statement starts with its verb).
var sqlStatement = regexp.MustCompile(`^[` + "`" + `"]\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\s`)

var sqlWord = regexp.MustCompile(`(?i)\b(SELECT|INSERT|UPDATE|DELETE|WITH)\b`)

// TestQueriesRegistered parses the package's own source: every string constant that looks
// like SQL must be in Queries under its own name, with the same text.
func TestQueriesRegistered(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := 0
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
				// No SQL outside a constant: a literal elsewhere would escape the check.
				ast.Inspect(decl, func(n ast.Node) bool {
					if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && sqlStatement.MatchString(lit.Value) {
						t.Errorf("%s: SQL literal outside a registered constant", fset.Position(lit.Pos()))
					}
					return true
				})
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						if sqlWord.MatchString(exprText(vs.Values[i])) {
							t.Errorf("%s: constant %s looks like SQL but is not one string literal", fset.Position(name.Pos()), name.Name)
						}
						continue
					}
					val, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					if !sqlWord.MatchString(val) {
						continue
					}
					found++
					got, ok := Queries[name.Name]
					switch {
					case !ok:
						t.Errorf("%s: SQL constant %s is not registered in Queries", fset.Position(name.Pos()), name.Name)
					case got != val:
						t.Errorf("%s: Queries[%q] is not the constant %s", fset.Position(name.Pos()), name.Name, name.Name)
					}
				}
			}
		}
	}
	if found != len(Queries) {
		t.Errorf("Queries has %d entries, the source %d SQL constants", len(Queries), found)
	}
}

func exprText(e ast.Expr) string {
	var b strings.Builder
	ast.Inspect(e, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			b.WriteString(lit.Value)
		}
		return true
	})
	return b.String()
}

// sqlOutside are the scheduler's packages that may still hold SQL: the lease writers of the
// shared leases tables (as shared/audit, signals and eventbus hold theirs), and the test
// fixtures that write what the api's ingest would (the scheduler itself never writes
// entities or relationships).
var sqlOutside = map[string]bool{
	"internal/storage":         true,
	"internal/leases":          true,
	"internal/labtest":         true,
	"internal/fleet/fleettest": true,
}

// TestNoSQLOutsideStorage parses every non-test file of the scheduler module and fails on a
// string literal that starts like a SQL statement outside storage (and sqlOutside).
func TestNoSQLOutsideStorage(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if sqlOutside[rel] {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && sqlStatement.MatchString(lit.Value) {
				t.Errorf("%s: SQL outside scheduler/internal/storage", fset.Position(lit.Pos()))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
