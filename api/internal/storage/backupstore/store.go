// Package backupstore holds the SQL of `oikos backup` and `oikos restore` (api/internal/backup):
// what the target of a restore holds before it is replaced, clearing its schema for the
// archive, and recording the restore in the audit log and the event outbox once it is done.
// pg_dump and pg_restore do the copying itself; nothing here reads or writes rows in bulk.
//
// Every SQL string is a named package-level constant registered in Queries; store_test.go
// prepares each against the migrated schema and fails on a constant that is not registered.
package backupstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
)

// Store runs the backup's queries on the pool of the database being backed up or restored.
type Store struct{ db storage.DB }

// New returns a Store on the pool.
func New(pool *storage.Pool) *Store { return &Store{db: pool} }

// Contents is what a database holds, counted by what an operator would lose.
type Contents struct {
	// Oikos is true when the schema carries goose's version table: the database is one Oikos
	// migrated (an empty new install counts).
	Oikos bool `json:"oikos"`
	// Tables is how many tables the public schema holds (any, Oikos's or not).
	Tables int `json:"tables"`
	// SchemaVersion is the newest migration applied (0 without the version table).
	SchemaVersion int64 `json:"schema_version"`
	// The operator's data; zero everywhere on a new install, whose api has only seeded the
	// ontology and the knowledge base and made its tokens.
	Entities      int `json:"entities"`
	Relationships int `json:"relationships"`
	Audit         int `json:"audit"`
	Executions    int `json:"executions"`
	Approvals     int `json:"approvals"`
	Knowledge     int `json:"knowledge"`
	Sessions      int `json:"sessions"`
	ChatMessages  int `json:"chat_messages"`
	Channels      int `json:"notification_channels"`
	// Notes are knowledge documents an operator or the agent wrote or changed (the seeded
	// knowledge base is the same on every install).
	Notes int `json:"knowledge_written"`
}

// HoldsData reports whether c has anything an operator made or the fleet recorded: a restore
// replaces only a database that holds none of it.
func (c Contents) HoldsData() bool {
	return c.Entities+c.Executions+c.Sessions+c.ChatMessages+c.Channels+c.Notes > 0
}

const (
	qTables = `SELECT count(*)::int, coalesce(bool_or(c.relname = 'goose_db_version'), false)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')`
	qSchemaVersion = `SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied`
	// Entities counts the fleet: knowledge documents are entities too, and a new install's
	// api seeds the knowledge base at start; Notes counts those an operator wrote or changed.
	qContents = `SELECT (SELECT count(*) FROM entities e WHERE NOT EXISTS (SELECT 1 FROM knowledge_entities k WHERE k.entity_id = e.id))::int,
 (SELECT count(*) FROM relationships)::int,
 (SELECT count(*) FROM audit_log)::int, (SELECT count(*) FROM executions)::int,
 (SELECT count(*) FROM approvals)::int, (SELECT count(*) FROM knowledge_entities)::int,
 (SELECT count(*) FROM agent_sessions)::int, (SELECT count(*) FROM chat_messages)::int,
 (SELECT count(*) FROM notification_channels)::int,
 (SELECT count(DISTINCT a.entity_id) FROM audit_log a JOIN knowledge_entities k ON k.entity_id = a.entity_id WHERE a.actor <> 'seed')::int`
)

// Contents counts what the database holds. A schema without Oikos's version table reports
// only its table count.
func (s *Store) Contents(ctx context.Context) (Contents, error) { return contents(ctx, s.db) }

func contents(ctx context.Context, db storage.DB) (Contents, error) {
	var c Contents
	if err := db.QueryRow(ctx, qTables).Scan(&c.Tables, &c.Oikos); err != nil {
		return c, fmt.Errorf("read the schema: %w", err)
	}
	if !c.Oikos {
		return c, nil
	}
	if err := db.QueryRow(ctx, qSchemaVersion).Scan(&c.SchemaVersion); err != nil {
		return c, fmt.Errorf("read the schema version: %w", err)
	}
	if c.SchemaVersion == 0 {
		return c, nil // goose's table exists, nothing migrated yet
	}
	err := db.QueryRow(ctx, qContents).Scan(&c.Entities, &c.Relationships, &c.Audit, &c.Executions,
		&c.Approvals, &c.Knowledge, &c.Sessions, &c.ChatMessages, &c.Channels, &c.Notes)
	if err != nil {
		return c, fmt.Errorf("count the database's contents: %w", err)
	}
	return c, nil
}

// ErrNotEmpty is returned by Clear for a database that holds data or tables not Oikos's.
type ErrNotEmpty struct{ Contents Contents }

func (e *ErrNotEmpty) Error() string {
	c := e.Contents
	if !c.Oikos {
		return fmt.Sprintf("the database holds %d tables and none is Oikos's (no goose_db_version): it is not an Oikos database", c.Tables)
	}
	return fmt.Sprintf("the database holds a fleet (%d entities, %d executions, %d agent sessions, %d chat messages, %d notification channels, %d knowledge documents written)",
		c.Entities, c.Executions, c.Sessions, c.ChatMessages, c.Channels, c.Notes)
}

const (
	// sLockTimeout bounds how long Clear waits for the running daemons' transactions.
	sLockTimeout = `SET LOCAL lock_timeout = '30s'`
	// qLockWriters holds the tables an operator's data lives in while Clear counts them.
	qLockWriters = `LOCK TABLE entities, executions, agent_sessions, chat_messages, notification_channels, audit_log IN ACCESS EXCLUSIVE MODE`
	// The schema is dropped and made again rather than its tables truncated: an archive of
	// an older release brings its own tables, and the migrations then bring them up to date.
	sDropSchema   = `DROP SCHEMA public CASCADE`
	sCreateSchema = `CREATE SCHEMA public`
)

// Clear empties the public schema for an archive to be restored into, after checking under
// lock that it holds nothing to lose: no table at all, or Oikos's schema with no operator data
// (a new install whose daemons are running). Anything else is *ErrNotEmpty and changes nothing.
// The check and the drop are one transaction, so no write can slip in between.
func (s *Store) Clear(ctx context.Context) (Contents, error) {
	var before Contents
	err := pg.InTx(ctx, s.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sLockTimeout); err != nil {
			return err
		}
		c, err := contents(ctx, tx)
		if err != nil {
			return err
		}
		if c.Tables > 0 && !c.Oikos {
			return &ErrNotEmpty{Contents: c}
		}
		if c.SchemaVersion > 0 {
			// Hold the tables writers use, then count again: the first count ran before the
			// lock, and a daemon may have written since.
			if _, err := tx.Exec(ctx, qLockWriters); err != nil {
				return fmt.Errorf("lock the database for the restore (are long transactions running?): %w", err)
			}
			if c, err = contents(ctx, tx); err != nil {
				return err
			}
		}
		before = c
		if c.HoldsData() {
			return &ErrNotEmpty{Contents: c}
		}
		if _, err := tx.Exec(ctx, sDropSchema); err != nil {
			return fmt.Errorf("clear the schema: %w", err)
		}
		_, err = tx.Exec(ctx, sCreateSchema)
		return err
	})
	return before, err
}

// Restored is what RecordRestore writes into the audit log and the event.
type Restored struct {
	Archive       string   `json:"archive"`
	From          int64    `json:"schema_version_of_archive"`
	Applied       []int64  `json:"migrations_applied"`
	Contents      Contents `json:"contents"`
	ServerVersion string   `json:"server_version"`
}

// EventRestored is appended once a restore is complete.
const EventRestored = "database.restored"

// RecordRestore writes the audit row and the event of a completed restore, in one transaction
// of the restored database (the rows before it are the archive's, unchanged).
func (s *Store) RecordRestore(ctx context.Context, actor string, r Restored) error {
	return pg.InTx(ctx, s.db, func(tx pgx.Tx) error {
		if err := audit.Write(ctx, tx, audit.Row{Actor: actor, Action: EventRestored, After: r}); err != nil {
			return err
		}
		_, err := eventbus.Append(ctx, tx, eventbus.Event{Type: EventRestored, Actor: actor}, r)
		return err
	})
}

const qServerVersion = `SELECT current_setting('server_version')`

// ServerVersion is the server's version string ("15.18 (Debian …)").
func (s *Store) ServerVersion(ctx context.Context) (string, error) {
	var v string
	err := s.db.QueryRow(ctx, qServerVersion).Scan(&v)
	return v, err
}

// Queries names every SQL constant of the package; store_test.go prepares each against the
// migrated schema, and fails on a SQL constant missing here.
var Queries = map[string]string{
	"qTables":        qTables,
	"qSchemaVersion": qSchemaVersion,
	"qContents":      qContents,
	"qServerVersion": qServerVersion,
	"qLockWriters":   qLockWriters,
}
