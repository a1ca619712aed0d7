// Package pgtest gives every test its own real PostgreSQL database, cloned from a template
// that carries the current migrations. The server is the one named by
// OIKOS_TEST_DATABASE_URL (make test starts one for the whole run) or, when that is unset,
// a private cluster this test binary starts in a temporary directory and stops at exit.
//
// A database per test (rather than a rolled-back transaction) means NOTIFY tests get real
// commits and packages run in parallel without seeing each other's rows.
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/migrations"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/testkit/pgcluster"
)

// EnvURL names the variable holding an admin URL of the server tests may create databases on.
const EnvURL = "OIKOS_TEST_DATABASE_URL"

var (
	serverOnce sync.Once
	serverURL  string
	serverErr  error
	cluster    *pgcluster.Cluster
	tmpDir     string

	templateOnce sync.Once
	templateName string
	templateErr  error
)

// Run is called from TestMain: it runs the tests and stops a cluster this binary started.
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }
func Run(m *testing.M) int {
	code := m.Run()
	if cluster != nil {
		_ = cluster.Stop()
		_ = os.RemoveAll(tmpDir)
	}
	return code
}

// ServerURL returns an admin URL (database postgres) of the test server, starting a private
// cluster when no server is configured.
func ServerURL(tb testing.TB) string {
	tb.Helper()
	serverOnce.Do(func() {
		if u := os.Getenv(EnvURL); u != "" {
			serverURL = u
			return
		}
		tmpDir, serverErr = os.MkdirTemp("", "oikos-pgtest-")
		if serverErr != nil {
			return
		}
		cluster, serverErr = pgcluster.Start(context.Background(), pgcluster.Options{DataDir: tmpDir, Fast: true})
		if serverErr == nil {
			serverURL = cluster.URL("postgres")
		}
	})
	if serverErr != nil {
		tb.Fatalf("pgtest: no PostgreSQL for tests: %v", serverErr)
	}
	return serverURL
}

// Cluster returns the private cluster this binary started, or nil when the server is an
// external one (tests that restart the server skip then).
func Cluster() *pgcluster.Cluster { return cluster }

func withDB(admin, db string) string {
	u, err := url.Parse(admin)
	if err != nil {
		return admin
	}
	u.Path = "/" + db
	return u.String()
}

func migrationsHash() string {
	h := sha256.New()
	_ = fs.WalkDir(migrations.FS, migrations.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := fs.ReadFile(migrations.FS, path)
		h.Write([]byte(path))
		h.Write(b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// template makes sure a migrated template database exists for the current migrations. Test
// binaries of several packages may race here; an advisory lock on the admin database makes
// one of them build it while the others wait.
func template(tb testing.TB) string {
	templateOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		name := "oikos_tpl_" + migrationsHash()
		admin, err := pgx.Connect(ctx, ServerURL(tb))
		if err != nil {
			templateErr = err
			return
		}
		defer admin.Close(context.Background())
		if _, err = admin.Exec(ctx, `SELECT pg_advisory_lock(hashtext('oikos_pgtest_template'))`); err != nil {
			templateErr = err
			return
		}
		defer admin.Exec(context.Background(), `SELECT pg_advisory_unlock(hashtext('oikos_pgtest_template'))`)
		var exists bool
		if err = admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate)`, name).Scan(&exists); err != nil {
			templateErr = err
			return
		}
		if !exists {
			// A half-built template from a killed run is dropped and rebuilt.
			if _, err = admin.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
				templateErr = err
				return
			}
			if _, err = admin.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
				templateErr = err
				return
			}
			pool, err := pgxpool.New(ctx, withDB(ServerURL(tb), name))
			if err != nil {
				templateErr = err
				return
			}
			_, err = pg.Migrate(ctx, pool)
			pool.Close()
			if err != nil {
				templateErr = fmt.Errorf("migrate template: %w", err)
				return
			}
			if _, err = admin.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+` IS_TEMPLATE true`); err != nil {
				templateErr = err
				return
			}
		}
		templateName = name
	})
	if templateErr != nil {
		tb.Fatalf("pgtest: template: %v", templateErr)
	}
	return templateName
}

// DB is one test's database.
type DB struct {
	Name string
	URL  string
	Pool *pgxpool.Pool
}

// Empty creates a database with nothing in it (no migrations, no tables), as a new server
// gives, opens a pool on it and drops it when the test ends: what a restore starts from.
func Empty(tb testing.TB) *DB {
	tb.Helper()
	return create(tb, "")
}

// New creates a fresh migrated database for the test, opens a pool on it and drops it when
// the test ends.
func New(tb testing.TB) *DB {
	tb.Helper()
	return create(tb, template(tb))
}

// create makes a database from the template tpl ("": the server's default, empty).
func create(tb testing.TB, tpl string) *DB {
	tb.Helper()
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "oikos_t_" + hex.EncodeToString(b[:])
	admin, err := pgx.Connect(ctx, ServerURL(tb))
	if err != nil {
		tb.Fatalf("pgtest: connect admin: %v", err)
	}
	defer admin.Close(ctx)
	stmt := `CREATE DATABASE ` + pgx.Identifier{name}.Sanitize()
	if tpl != "" {
		stmt += ` TEMPLATE ` + pgx.Identifier{tpl}.Sanitize()
	}
	if _, err := admin.Exec(ctx, stmt); err != nil {
		tb.Fatalf("pgtest: create database: %v", err)
	}
	u := withDB(ServerURL(tb), name)
	pool, err := pg.Connect(ctx, u, 20, zerolog.Nop())
	if err != nil {
		tb.Fatalf("pgtest: open pool: %v", err)
	}
	tb.Cleanup(func() {
		pool.Close()
		c, err := pgx.Connect(context.Background(), ServerURL(tb))
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`)
	})
	return &DB{Name: name, URL: u, Pool: pool}
}

// Private starts a PostgreSQL server of the test's own, with the migrations applied and a
// pool of conns connections on it, for a test that stops and starts the server under what
// it tests (an outage: Cluster.Halt and Resume); the shared server is never stopped. Both
// end with the test.
func Private(tb testing.TB, conns int32) (*pgcluster.Cluster, *pgxpool.Pool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: tb.TempDir(), Fast: true})
	if err != nil {
		tb.Fatalf("private PostgreSQL: %v", err)
	}
	tb.Cleanup(func() { _ = c.Stop() })
	pool, err := pg.Connect(ctx, c.URL("postgres"), conns, zerolog.Nop())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	if _, err := pg.Migrate(ctx, pool); err != nil {
		tb.Fatal(err)
	}
	return c, pool
}
