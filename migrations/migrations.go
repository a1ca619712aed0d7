// Package migrations embeds the goose SQL migrations of Oikos. The api applies them at start
// under an advisory lock; the scheduler and the agent only check that none is pending.
package migrations

import "embed"

// FS holds every migration under sql/. An applied migration is never edited; a change is a new file.
//
//go:embed sql/*.sql
var FS embed.FS

// Dir is the directory inside FS that holds the migrations.
const Dir = "sql"
