// Package layering holds the import rules of the monorepo (issue #29) and checks them
// against the import graph that `go list -json` reports for every package of the
// workspace. Its test (layering_test.go) runs the check on the real tree; make lint runs
// that test. The rules, exactly:
//
//  1. Daemons never import each other. No package of the api, scheduler or agent modules
//     imports a package of another of the three, and no package of shared, testkit, seeds,
//     migrations or deploy imports any of them. Test imports (TestImports, XTestImports)
//     count too. Only the e2e module may import everything.
//  2. Production code never imports testkit. No non-test package of api, scheduler, agent or
//     shared imports github.com/oikos-hq/oikos/testkit/..., except test-support packages: a
//     package whose last path element ends in "test" (labtest, fleettest, metricstest, ...)
//     and that no non-test package outside the test-support packages imports (that, too, is
//     checked, so a test helper cannot leak into a daemon binary).
//  3. Only the packages allowed to touch the database import github.com/jackc/pgx/v5 or its
//     subpackages (non-test imports): a store/storage package (last path element, or any
//     package below <daemon>/internal/storage/, the api's storage layer), a package
//     of the migrations module, or an entry of PGXAllowlist. Every PGXAllowlist entry must
//     still import pgx, so the list only shrinks and stays true.
//  4. Layers inside a daemon (api, scheduler, agent), non-test imports. Each package is one
//     of: a composition root (<daemon>/app, <daemon>/cmd/...), a handler package (under
//     <daemon>/internal/, last element httpapi, webui, mcpserver, or ending in "api":
//     chatapi, execapi, metricsapi, sessionsapi, ...), a storage package (as in rule 3)
//     or a domain package (anything else). Then:
//     a. only a composition root imports a daemon's composition root (cmd imports app);
//     e2e is exempt;
//     b. only a composition root or another handler package imports a handler package, so
//     domain and storage packages never depend on the HTTP/MCP surface, and only the
//     composition roots see every layer.
//  5. SQL lives where pgx may be imported (HoldsSQL): no non-test Go file elsewhere holds a
//     string literal that starts like a SQL statement. A handler, service or worker calls
//     its daemon's storage methods instead.
package layering

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

// Prefix is the module path prefix of the monorepo.
const Prefix = "github.com/oikos-hq/oikos/"

// PGX is the module path of the PostgreSQL driver.
const PGX = "github.com/jackc/pgx/v5"

// Package is the part of `go list -json` that the rules read.
type Package struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// PGXAllowlist: the packages (path below Prefix) that may import pgx beyond the store and
// storage packages and the migrations module, each of which imports it today. The first
// block is meant to stay; the TODO block is today's SQL outside a storage package, and
// shrinks as it moves (the check fails on an entry that no longer imports pgx: delete it).
var PGXAllowlist = map[string]bool{
	// Permanent: database plumbing shared by the daemons, and the test databases.
	"shared/pg":                 true, // the pool and connection helpers
	"shared/schema":             true, // waits for the migrated schema version
	"shared/eventbus":           true, // the outbox and LISTEN/NOTIFY bus
	"shared/audit":              true, // the audit log table
	"shared/signals":            true, // NOTIFY signals between daemons
	"shared/leasetable":         true, // the leases table
	"scheduler/internal/leases": true, // lease acquisition over the leases table
	"testkit/pgcluster":         true, // private PostgreSQL for tests and oikos-local
	"testkit/pgtest":            true, // per-test databases
	"testkit/sqlcheck":          true, // prepares storage packages' queries in their tests
	"e2e/internal/stack":        true, // the e2e harness waits on the outbox's notifications

	// Permanent: the one writer of a table two daemons share, and test support compiled only
	// into tests.
	"shared/remote":                      true, // pins SSH host keys (ssh_host_keys), their one writer, for every scheduler replica
	"scheduler/internal/labtest":         true, // test support: writes what the api's ingest would
	"scheduler/internal/fleet/fleettest": true, // test support: writes what the api's ingest would
}

var daemons = map[string]bool{"api": true, "scheduler": true, "agent": true}

// rel is path below Prefix, or "" for a package outside the monorepo.
func rel(p string) string {
	if r, ok := strings.CutPrefix(p, Prefix); ok {
		return r
	}
	return ""
}

// module is the first element of a path below Prefix (the module's directory).
func module(r string) string {
	m, _, _ := strings.Cut(r, "/")
	return m
}

func isPGX(p string) bool { return p == PGX || strings.HasPrefix(p, PGX+"/") }

type kind int

const (
	domain kind = iota
	root
	handler
	storage
)

var kindName = map[kind]string{domain: "domain", root: "composition root", handler: "handler", storage: "storage"}

// kindOf classifies a package below Prefix (rule 4).
func kindOf(r string) kind {
	m := module(r)
	last := path.Base(r)
	switch {
	case r == m+"/app" || strings.HasPrefix(r, m+"/cmd/"):
		return root
	case last == "store" || last == "storage" || strings.HasPrefix(r, m+"/internal/storage/"):
		return storage
	case strings.HasPrefix(r, m+"/internal/") &&
		(last == "httpapi" || last == "webui" || last == "mcpserver" || (strings.HasSuffix(last, "api") && last != "api")):
		return handler
	}
	return domain
}

func isTestSupportName(r string) bool { return strings.HasSuffix(path.Base(r), "test") }

// Check applies the rules to pkgs with the given pgx allowlist (paths below Prefix) and
// returns one sentence per violation naming the importing package and the forbidden
// import, sorted; none when the graph follows the rules.
func Check(pkgs []Package, pgxAllow map[string]bool) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }

	// Test-support packages: named *test and imported by no non-test package that is not
	// itself one.
	support := map[string]bool{}
	for _, p := range pkgs {
		if r := rel(p.ImportPath); r != "" && isTestSupportName(r) {
			support[r] = true
		}
	}
	for _, p := range pkgs {
		from := rel(p.ImportPath)
		if from == "" || support[from] {
			continue
		}
		for _, imp := range p.Imports {
			if to := rel(imp); support[to] && module(from) != "e2e" {
				add("%s imports test-support package %s outside its tests: only _test.go files and other test-support packages may", p.ImportPath, imp)
			}
		}
	}

	pgxImporters := map[string]bool{}
	for _, p := range pkgs {
		from := rel(p.ImportPath)
		if from == "" {
			continue
		}
		fromMod := module(from)

		// Rule 1: daemons never import each other (test imports too).
		if fromMod != "e2e" {
			seen := map[string]bool{}
			for _, list := range [][]string{p.Imports, p.TestImports, p.XTestImports} {
				for _, imp := range list {
					to := rel(imp)
					toMod := module(to)
					if to == "" || seen[imp] || toMod == fromMod || !daemons[toMod] {
						continue
					}
					seen[imp] = true
					if daemons[fromMod] {
						add("%s imports %s: daemons never import each other (share code through shared/)", p.ImportPath, imp)
					} else {
						add("%s imports %s: module %s must not depend on a daemon (only e2e may)", p.ImportPath, imp, fromMod)
					}
				}
			}
		}

		for _, imp := range p.Imports {
			to := rel(imp)

			// Rule 2: production code never imports testkit.
			if module(to) == "testkit" && (daemons[fromMod] || fromMod == "shared") && !support[from] {
				add("%s imports %s: non-test code of %s must not import testkit (only _test.go files and *test support packages may)", p.ImportPath, imp, fromMod)
			}

			// Rule 3: pgx only where the database is touched.
			if isPGX(imp) {
				pgxImporters[from] = true
				if kindOf(from) != storage && fromMod != "migrations" && !pgxAllow[from] {
					add("%s imports %s: only storage packages touch the database; move the SQL into the daemon's store package (or, for database plumbing, add it to PGXAllowlist in deploy/layering)", p.ImportPath, imp)
				}
			}

			// Rule 4: layers.
			if to == "" || fromMod == "e2e" {
				continue
			}
			fk, tk := kindOf(from), kindOf(to)
			if tk == root && fk != root && daemons[module(to)] {
				add("%s imports %s: only a composition root (app, cmd/...) imports a composition root", p.ImportPath, imp)
			}
			if tk == handler && fk != root && fk != handler {
				add("%s (%s package) imports %s: only composition roots and other handler packages import a handler package", p.ImportPath, kindName[fk], imp)
			}
		}
	}

	for r := range pgxAllow {
		if !pgxImporters[r] {
			add("%s%s is in PGXAllowlist but no longer imports %s: delete it from the list in deploy/layering/layering.go", Prefix, r, PGX)
		}
	}
	sort.Strings(out)
	return out
}

// HoldsSQL reports whether the package directory dir (relative to the monorepo root) may
// hold SQL statements (rule 5): a storage package as in rule 3, a package of the
// migrations module, or an entry of PGXAllowlist.
func HoldsSQL(dir string) bool {
	if dir == "." || module(dir) == "migrations" || PGXAllowlist[dir] {
		return true
	}
	return kindOf(dir) == storage
}
