// Package backup is `oikos backup` and `oikos restore`: the whole database as one pg_dump
// archive (custom format), taken from a running system, and that archive restored into a
// new, empty database (a new install's, whose daemons may already be running).
//
// The real tools do the copying. pg_dump reads every table in one repeatable-read snapshot,
// so an archive taken while the scheduler writes results and the api takes requests is a
// state the database was in, with every change beside its audit row and event. pg_restore
// loads the archive in a single transaction: a restore that fails leaves nothing half
// loaded. What this package adds is the care around them:
//
//   - a restore replaces only a database that holds nothing to lose (no entities,
//     executions, agent sessions, chat or notification channels; or no tables at all), checked
//     under lock in the transaction that clears the schema, and never a database that is not
//     Oikos's;
//   - the archive is checked before anything is changed: a pg_dump custom-format archive whose
//     table of contents lists Oikos's tables;
//   - after the load, the migrations run, so an archive of an older release comes up to the
//     current schema; the restore is audited and emits database.restored in the restored
//     database;
//   - the password of OIKOS_DATABASE_URL goes to the tools in PGPASSWORD, never on their
//     command line, where ps would show it.
package backup

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/backupstore"
	"github.com/oikos-hq/oikos/shared/pg"
)

// Contents is what a database holds (backupstore.Contents).
type Contents = backupstore.Contents

// ErrNotEmpty is the refusal to restore over data (backupstore.ErrNotEmpty).
type ErrNotEmpty = backupstore.ErrNotEmpty

// magic starts every pg_dump custom-format archive.
const magic = "PGDMP"

// Tools finds pg_dump and pg_restore: on PATH, else beside the PostgreSQL server binaries on
// PATH (a machine with only the server's bin directory linked, as Debian's postgresql-15
// package leaves /usr/lib/postgresql/15/bin).
func Tools() (dump, restore string, err error) {
	find := func(name string) (string, error) {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		for _, beside := range []string{"postgres", "initdb", "pg_ctl"} {
			p, err := exec.LookPath(beside)
			if err != nil {
				continue
			}
			if real, err := filepath.EvalSymlinks(p); err == nil {
				p = real
			}
			cand := filepath.Join(filepath.Dir(p), name)
			if st, err := os.Stat(cand); err == nil && !st.IsDir() {
				return cand, nil
			}
		}
		return "", fmt.Errorf("%s is not installed: install PostgreSQL's client tools (Debian: postgresql-client-15; the api image has them)", name)
	}
	if dump, err = find("pg_dump"); err != nil {
		return "", "", err
	}
	restore, err = find("pg_restore")
	return dump, restore, err
}

// conn splits a database URL into the URL the tools are given (without the password) and the
// environment that carries the password.
func conn(dbURL string) (string, []string, error) {
	u, err := url.Parse(dbURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, fmt.Errorf("OIKOS_DATABASE_URL is not a postgres:// URL")
	}
	env := os.Environ()
	if u.User != nil {
		if pw, ok := u.User.Password(); ok {
			env = append(env, "PGPASSWORD="+pw)
			u.User = url.User(u.User.Username())
		}
	}
	return u.String(), env, nil
}

// run runs a tool with stdin and stdout, and makes its stderr part of the error.
func run(ctx context.Context, env []string, stdin io.Reader, stdout io.Writer, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout = stdin, stdout
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("%s: %s", filepath.Base(name), msg)
	}
	return nil
}

// Dump writes the archive of the database at dbURL to w and returns what the database held
// when the dump began (counted just before its snapshot, so a busy system's archive may hold
// a few more results than the counts say).
func Dump(ctx context.Context, pool *storage.Pool, dbURL string, w io.Writer) (Contents, error) {
	dump, _, err := Tools()
	if err != nil {
		return Contents{}, err
	}
	target, env, err := conn(dbURL)
	if err != nil {
		return Contents{}, err
	}
	c, err := backupstore.New(pool).Contents(ctx)
	if err != nil {
		return c, err
	}
	if !c.Oikos || c.SchemaVersion == 0 {
		return c, errors.New("the database at OIKOS_DATABASE_URL holds no Oikos schema: nothing to back up")
	}
	// --lock-wait-timeout: pg_dump takes a share lock on every table; a migration holding
	// one for longer fails the backup instead of hanging it.
	err = run(ctx, env, nil, w, dump, "--format=custom", "--no-owner", "--no-privileges",
		"--lock-wait-timeout=30000", "--dbname="+target)
	return c, err
}

// DumpFile writes the archive to file: beside its name first, renamed when complete, so a
// failed backup never leaves a truncated archive under the name. It returns what Dump does
// and the archive's size.
func DumpFile(ctx context.Context, pool *storage.Pool, dbURL, file string) (Contents, int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".partial-*")
	if err != nil {
		return Contents{}, 0, err
	}
	defer os.Remove(tmp.Name()) // gone after the rename; left behind only by a failure
	c, err := Dump(ctx, pool, dbURL, tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		return c, 0, err
	}
	st, err := os.Stat(file)
	if err != nil {
		return c, 0, err
	}
	return c, st.Size(), nil
}

// Result is what a restore did.
type Result struct {
	// Replaced is what the target held before (nothing an operator would lose).
	Replaced Contents
	// Archive is the schema version the archive was taken at; Applied, the migrations run
	// after the load to bring it to this release's schema.
	Archive int64
	Applied []int64
	// Restored is what the database holds afterwards.
	Restored Contents
}

// Restore loads the archive read from r into the database at dbURL, replacing its schema if
// it holds no data (see the package doc), and migrates it to the current schema. A refusal
// (*ErrNotEmpty, a file that is not an Oikos archive) changes nothing. actor names who restored
// in the audit row ("oikos restore" from the CLI). The archive is first copied to a private
// temporary file so that it can be checked before the database is touched, also when it
// arrives on a pipe.
func Restore(ctx context.Context, pool *storage.Pool, dbURL, actor, name string, r io.Reader) (Result, error) {
	var res Result
	_, restore, err := Tools()
	if err != nil {
		return res, err
	}
	target, env, err := conn(dbURL)
	if err != nil {
		return res, err
	}
	tmp, err := os.CreateTemp("", "oikos-restore-*.dump")
	if err != nil {
		return res, err
	}
	defer func() { tmp.Close(); os.Remove(tmp.Name()) }()
	br := bufio.NewReader(r)
	head, _ := br.Peek(len(magic))
	if string(head) != magic {
		return res, fmt.Errorf("%s is not a backup of oikos backup (a pg_dump custom-format archive starts with %q)", name, magic)
	}
	if _, err := io.Copy(tmp, br); err != nil {
		return res, fmt.Errorf("read %s: %w", name, err)
	}
	if err := tmp.Sync(); err != nil {
		return res, err
	}
	var toc bytes.Buffer
	if err := run(ctx, env, nil, &toc, restore, "--list", tmp.Name()); err != nil {
		return res, fmt.Errorf("%s is not a readable archive: %w", name, err)
	}
	for _, table := range []string{"goose_db_version", "entities", "audit_log"} {
		if !strings.Contains(toc.String(), "TABLE public "+table+" ") {
			return res, fmt.Errorf("%s is a pg_dump archive, but not of an Oikos database (it has no table %s)", name, table)
		}
	}

	st := backupstore.New(pool)
	if res.Replaced, err = st.Clear(ctx); err != nil {
		return res, err
	}
	loadErr := run(ctx, env, nil, io.Discard, restore, "--no-owner", "--no-privileges", "--exit-on-error",
		"--single-transaction", "--dbname="+target, tmp.Name())
	if loadErr != nil {
		// The load was one transaction and is gone; bring back the empty schema the running
		// daemons expect rather than leave them on none.
		if _, err := pg.Migrate(ctx, pool); err != nil {
			return res, fmt.Errorf("%w; and migrating the emptied database failed: %v", loadErr, err)
		}
		return res, fmt.Errorf("the archive did not load, the database is empty again: %w", loadErr)
	}
	before, err := st.Contents(ctx)
	if err != nil {
		return res, err
	}
	res.Archive = before.SchemaVersion
	if res.Applied, err = pg.Migrate(ctx, pool); err != nil {
		return res, fmt.Errorf("the archive loaded, but migrating it to this release failed: %w", err)
	}
	if res.Restored, err = st.Contents(ctx); err != nil {
		return res, err
	}
	server, err := st.ServerVersion(ctx)
	if err != nil {
		return res, err
	}
	err = st.RecordRestore(ctx, actor, backupstore.Restored{Archive: name, From: res.Archive, Applied: res.Applied,
		Contents: res.Restored, ServerVersion: server})
	return res, err
}
