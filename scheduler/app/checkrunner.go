package app

import (
	"github.com/oikos-hq/oikos/scheduler/internal/checkrun"
	"github.com/oikos-hq/oikos/scheduler/internal/incidents"
)

// The check runner, exported like the executor so the end-to-end tests (e2e/dashboard) run
// the fleet's checks against the lab simulator's dialer exactly as the daemon runs them.
type (
	// CheckRunner runs the enabled check definitions on their intervals and stores their
	// results (health on the target, metric samples, health.changed on a transition).
	CheckRunner = checkrun.Runner
	// CheckRunnerOptions configure a CheckRunner.
	CheckRunnerOptions = checkrun.Options
)

// DefaultTakeoverWithin bounds when the checks of a unit taken from a scheduler that died run
// again (CheckRunnerOptions.TakeoverWithin).
const DefaultTakeoverWithin = checkrun.DefaultTakeoverWithin

// NewCheckRunner builds a check runner; see checkrun.NewRunner.
func NewCheckRunner(opts CheckRunnerOptions) (*CheckRunner, error) { return checkrun.NewRunner(opts) }

// The incident engine, exported with the runner: the end-to-end tests (e2e/incidents) group
// the lab's failures into incidents as the daemon does, the runner's writes kicking it.
type (
	// IncidentEngine keeps the incidents matching the fleet's health.
	IncidentEngine = incidents.Engine
	// IncidentEngineOptions configure an IncidentEngine.
	IncidentEngineOptions = incidents.Options
)

// NewIncidentEngine builds an incident engine; see incidents.New.
func NewIncidentEngine(opts IncidentEngineOptions) (*IncidentEngine, error) {
	return incidents.New(opts)
}
