// Command oikos-agent runs Nomos, the LLM operator, and serves its tools over MCP.
package main

import (
	"os"

	"github.com/oikos-hq/oikos/agent/app"
	"github.com/oikos-hq/oikos/shared/daemon"
)

func main() { os.Exit(daemon.Main("oikos-agent", app.Run)) }
