// Package migrations embeds the goose SQL migrations of Oikos. The api applies them at start
// under an advisory lock; the scheduler and the agent only check that none is pending.
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// FS holds every migration under sql/. An applied migration is never edited; a change is a new file.
//
//go:embed sql/*.sql
var FS embed.FS

// Dir is the directory inside FS that holds the migrations.
const Dir = "sql"

// PreviousRelease is the newest migration of the release before this one: an install being
// upgraded has this schema, and the migrations after it are the ones the upgrade runs on a
// database full of data (e2e/upgrade runs them on a month of it; rules_test.go holds them to
// the rules for big tables). Bump it when a release is cut.
const PreviousRelease = 16

// BigTables grow with time (results history, the outbox, the audit log, execution output,
// conversations): a migration after PreviousRelease must not rewrite one, scan one under an
// exclusive lock, or update one in a single statement (docs/upgrades.md).
var BigTables = []string{"metric_samples", "events", "audit_log", "execution_logs", "session_messages",
	"tool_calls", "chat_messages", "agent_activity", "notification_attempts", "notification_deliveries"}

// Latest is the newest migration's version in FS (the schema this release runs on).
func Latest() (int64, error) {
	names, err := fs.Glob(FS, Dir+"/*.sql")
	if err != nil {
		return 0, err
	}
	var latest int64
	for _, n := range names {
		v, err := strconv.ParseInt(strings.SplitN(path.Base(n), "_", 2)[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("migration %s: the name does not start with a version", n)
		}
		latest = max(latest, v)
	}
	if latest == 0 {
		return 0, fmt.Errorf("no migrations under %s", Dir)
	}
	return latest, nil
}
