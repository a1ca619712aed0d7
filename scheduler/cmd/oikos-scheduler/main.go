// Command oikos-scheduler checks the fleet's health through the Proxmox host-hop and runs
// approved executions. It is the only process that holds SSH keys.
package main

import (
	"os"

	"github.com/oikos-hq/oikos/scheduler/app"
	"github.com/oikos-hq/oikos/shared/daemon"
)

func main() { os.Exit(daemon.Main("oikos-scheduler", app.Run)) }
