package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/backup"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/pg"
)

// rawDB opens a pool on OIKOS_DATABASE_URL without migrating it: a backup must not change the
// database it copies, and a restore must not create Oikos's tables in a database it may yet
// refuse.
func (e *cliEnv) rawDB(ctx context.Context) (*storage.Pool, string, error) {
	url := e.Getenv("OIKOS_DATABASE_URL")
	if url == "" {
		return nil, "", errors.New("OIKOS_DATABASE_URL is not set")
	}
	pool, err := pg.Connect(ctx, url, 2, zerolog.Nop())
	return pool, url, err
}

// oneFile parses a command that takes flags and one FILE argument ("-": the standard stream).
func oneFile(fs *flag.FlagSet, args []string) (file string, status int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", 0, false
		}
		return "", 2, false
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(fs.Output(), "%s: give one FILE (- for the standard stream)\n", fs.Name())
		fs.Usage()
		return "", 2, false
	}
	return fs.Arg(0), 0, true
}

// runBackup writes the database as one pg_dump archive to FILE (or standard output with -),
// while the system runs. A file is written beside its name and renamed when complete, so a
// failed backup never leaves a truncated archive under the name; an existing file is kept
// unless --force.
func runBackup(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("oikos backup", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	force := fs.Bool("force", false, "replace FILE if it exists")
	fs.Usage = func() {
		fmt.Fprintln(env.Stderr, "usage: oikos backup [--force] FILE|-   (OIKOS_DATABASE_URL; restore with oikos restore)")
		fs.PrintDefaults()
	}
	file, status, ok := oneFile(fs, args)
	if !ok {
		return status
	}
	fail := func(err error) int { fmt.Fprintf(env.Stderr, "oikos backup: %v\n", err); return 1 }
	if file != "-" && !*force {
		if _, err := os.Stat(file); err == nil {
			return fail(fmt.Errorf("%s exists: choose another name or pass --force", file))
		}
	}
	pool, url, err := env.rawDB(ctx)
	if err != nil {
		return fail(err)
	}
	defer pool.Close()

	if file == "-" {
		if _, err := backup.Dump(ctx, pool, url, env.Stdout); err != nil {
			return fail(err)
		}
		return 0
	}
	c, size, err := backup.DumpFile(ctx, pool, url, file)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(env.Stdout, "backup: %s (%d bytes): schema version %d, %d entities, %d relationships, %d audit entries, %d approvals, %d knowledge documents, %d agent sessions\n",
		file, size, c.SchemaVersion, c.Entities, c.Relationships, c.Audit, c.Approvals, c.Knowledge, c.Sessions)
	return 0
}

// runRestore loads an archive of oikos backup from FILE (or standard input with -) into the
// database of OIKOS_DATABASE_URL, which must hold no fleet yet (a new install), and migrates
// it to this release. The daemons should then be restarted so they read the restored state.
func runRestore(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("oikos restore", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintln(env.Stderr, "usage: oikos restore FILE|-   (into the empty database of OIKOS_DATABASE_URL)")
	}
	file, status, ok := oneFile(fs, args)
	if !ok {
		return status
	}
	fail := func(err error) int {
		var full *backup.ErrNotEmpty
		if errors.As(err, &full) {
			fmt.Fprintf(env.Stderr, "oikos restore: %v; restore only into a new, empty database. Nothing was changed.\n", err)
			return 1
		}
		fmt.Fprintf(env.Stderr, "oikos restore: %v\n", err)
		return 1
	}
	var in io.Reader = env.Stdin
	name := "standard input"
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return fail(err)
		}
		defer f.Close()
		in, name = f, file
	}
	pool, url, err := env.rawDB(ctx)
	if err != nil {
		return fail(err)
	}
	defer pool.Close()
	res, err := backup.Restore(ctx, pool, url, "oikos restore", name, in)
	if err != nil {
		return fail(err)
	}
	r := res.Restored
	fmt.Fprintf(env.Stdout, "restored %s: %d entities, %d relationships, %d audit entries, %d approvals, %d executions, %d knowledge documents, %d agent sessions, %d chat messages\n",
		name, r.Entities, r.Relationships, r.Audit, r.Approvals, r.Executions, r.Knowledge, r.Sessions, r.ChatMessages)
	if len(res.Applied) > 0 {
		fmt.Fprintf(env.Stdout, "the archive was at schema version %d; applied migrations %v\n", res.Archive, res.Applied)
	}
	fmt.Fprintln(env.Stdout, "restart the daemons so they read the restored state (docker compose restart api scheduler agent)")
	return 0
}
