package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/testkit/sqlcheck"
)

// workspaceRoot is the directory holding go.work, above the test's directory.
func workspaceRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the test's directory")
		}
		dir = parent
	}
}

// listWorkspace is every package of every module in go.work, from go list -json.
func listWorkspace(t *testing.T) []Package {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports,Error", Prefix+"...")
	cmd.Dir = workspaceRoot(t)
	cmd.Env = append(os.Environ(), "GOWORK=") // the workspace file found from Dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			Package
			Error *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.Error != nil {
			t.Errorf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p.Package)
	}
	// A sanity floor: the pattern must have matched the whole workspace, not one module.
	mods := map[string]bool{}
	for _, p := range pkgs {
		mods[module(rel(p.ImportPath))] = true
	}
	for _, m := range []string{"shared", "testkit", "api", "scheduler", "agent", "deploy", "e2e"} {
		if !mods[m] {
			t.Fatalf("go list matched no package of module %s (%d packages): is go.work in use?", m, len(pkgs))
		}
	}
	return pkgs
}

// TestLayering checks the rules of this package's doc comment on the real tree.
func TestLayering(t *testing.T) {
	pkgs := listWorkspace(t)
	if v := Check(pkgs, PGXAllowlist); len(v) > 0 {
		t.Errorf("%d import rule violation(s) (rules: deploy/layering/layering.go):\n  %s", len(v), strings.Join(v, "\n  "))
	}
	t.Logf("%d packages checked, %d on the pgx allowlist", len(pkgs), len(PGXAllowlist))
}

func pk(path string, imports ...string) Package {
	return Package{ImportPath: Prefix + path, Imports: prefixed(imports)}
}

func prefixed(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		if strings.HasPrefix(s, "github.com/jackc/") || !strings.Contains(s, "/") && !strings.Contains(s, ".") {
			out[i] = s
		} else {
			out[i] = Prefix + s
		}
	}
	return out
}

// TestCheckCatchesViolations: a synthetic graph with one violation of every rule, and
// the same graph's legal edges, which must pass.
func TestCheckCatchesViolations(t *testing.T) {
	legal := []Package{
		pk("shared/pg", PGX+"/pgxpool"),
		pk("api/app", "api/internal/httpapi", "api/internal/store", "shared/pg"),
		pk("api/cmd/oikos-api", "api/app"),
		pk("api/internal/httpapi", "api/internal/webui", "api/internal/store"),
		pk("api/internal/webui"),
		pk("api/internal/store", PGX, "shared/pg"),
		pk("scheduler/internal/labtest", "testkit/pgtest"),
		{ImportPath: Prefix + "scheduler/internal/sweep", TestImports: []string{Prefix + "scheduler/internal/labtest", Prefix + "testkit/labsim"}},
		pk("testkit/pgtest", PGX),
		pk("migrations", "embed"),
		pk("e2e/internal/stack", "api/app", "scheduler/app", "agent/app", PGX, "testkit/pgtest"),
		pk("scheduler/app"),
		pk("agent/app"),
	}
	allow := map[string]bool{"shared/pg": true, "testkit/pgtest": true, "e2e/internal/stack": true}
	if v := Check(legal, allow); len(v) > 0 {
		t.Fatalf("legal graph reported:\n%s", strings.Join(v, "\n"))
	}

	cases := []struct {
		name  string
		pkg   Package
		allow map[string]bool
		want  string // a violation must contain both importer and import, and this
	}{
		{"daemon imports daemon", pk("api/internal/graph", "scheduler/internal/leases"), nil,
			Prefix + "api/internal/graph imports " + Prefix + "scheduler/internal/leases: daemons never import each other"},
		{"daemon test imports daemon",
			Package{ImportPath: Prefix + "agent/internal/tools", XTestImports: []string{Prefix + "api/internal/auth"}}, nil,
			Prefix + "agent/internal/tools imports " + Prefix + "api/internal/auth: daemons never import each other"},
		{"shared imports daemon", pk("shared/eventbus", "api/internal/ids"), nil,
			Prefix + "shared/eventbus imports " + Prefix + "api/internal/ids: module shared must not depend on a daemon"},
		{"production imports testkit", pk("scheduler/internal/sweep", "testkit/labsim"), nil,
			Prefix + "scheduler/internal/sweep imports " + Prefix + "testkit/labsim: non-test code of scheduler must not import testkit"},
		{"production imports test support", pk("scheduler/internal/drift", "scheduler/internal/labtest"), nil,
			Prefix + "scheduler/internal/drift imports test-support package " + Prefix + "scheduler/internal/labtest"},
		{"new pgx importer", pk("api/internal/topology", PGX+"/pgxpool"), nil,
			Prefix + "api/internal/topology imports " + PGX + "/pgxpool: only storage packages touch the database"},
		{"stale allowlist entry", pk("api/internal/topology"), map[string]bool{"api/internal/topology": true},
			Prefix + "api/internal/topology is in PGXAllowlist but no longer imports " + PGX},
		{"domain imports composition root", pk("api/internal/graph", "api/app"), nil,
			Prefix + "api/internal/graph imports " + Prefix + "api/app: only a composition root"},
		{"storage imports handler", pk("api/internal/store", "api/internal/httpapi"), nil,
			Prefix + "api/internal/store (storage package) imports " + Prefix + "api/internal/httpapi: only composition roots and other handler packages"},
		{"domain imports handler", pk("agent/internal/loop", "agent/internal/mcpserver"), nil,
			Prefix + "agent/internal/loop (domain package) imports " + Prefix + "agent/internal/mcpserver"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			graph := slices.Clone(legal)
			// Replace a package of the legal graph with the same path, or add it.
			if i := slices.IndexFunc(graph, func(p Package) bool { return p.ImportPath == c.pkg.ImportPath }); i >= 0 {
				graph[i] = c.pkg
			} else {
				graph = append(graph, c.pkg)
			}
			a := map[string]bool{}
			for k := range allow {
				a[k] = true
			}
			for k := range c.allow {
				a[k] = true
			}
			v := Check(graph, a)
			if len(v) == 0 {
				t.Fatalf("no violation reported; want one containing %q", c.want)
			}
			if !slices.ContainsFunc(v, func(s string) bool { return strings.Contains(s, c.want) }) {
				t.Fatalf("violations:\n%s\nwant one containing %q", strings.Join(v, "\n"), c.want)
			}
		})
	}
}

// TestNoSQLOutsideStorage applies rule 5 to every non-test Go file of the monorepo.
func TestNoSQLOutsideStorage(t *testing.T) {
	found, err := sqlcheck.Outside(filepath.Join("..", ".."), HoldsSQL)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("%d SQL statement(s) outside the storage packages (rule 5, deploy/layering/layering.go); move each into its daemon's storage package:\n  %s", len(found), strings.Join(found, "\n  "))
	}
}
