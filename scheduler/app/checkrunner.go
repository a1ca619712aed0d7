package app

import "github.com/oikos-hq/oikos/scheduler/internal/checkrun"

// The check runner, exported like the executor so the end-to-end tests (e2e/dashboard) run
// the fleet's checks against the lab simulator's dialer exactly as the daemon runs them.
type (
	// CheckRunner runs the enabled check definitions on their intervals and stores their
	// results (health on the target, metric samples, health.changed on a transition).
	CheckRunner = checkrun.Runner
	// CheckRunnerOptions configure a CheckRunner.
	CheckRunnerOptions = checkrun.Options
)

// NewCheckRunner builds a check runner; see checkrun.NewRunner.
func NewCheckRunner(opts CheckRunnerOptions) (*CheckRunner, error) { return checkrun.NewRunner(opts) }
