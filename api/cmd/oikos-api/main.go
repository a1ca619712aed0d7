// Command oikos-api owns the infrastructure knowledge graph and the approvals: it migrates the
// schema, ingests the seeds, and serves REST, SSE and the dashboard.
package main

import (
	"os"

	"github.com/oikos-hq/oikos/api/app"
	"github.com/oikos-hq/oikos/shared/daemon"
)

func main() { os.Exit(daemon.Main("oikos-api", app.Run)) }
