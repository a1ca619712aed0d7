package checks

import (
	"os"
	"testing"

	"github.com/oikos-hq/oikos/shared/pgtest"
)

func TestMain(m *testing.M) {
	// The labsim benchmark re-executes this binary as the simulator's process.
	if inv := os.Getenv(benchChildEnv); inv != "" {
		os.Exit(runBenchChild(inv))
	}
	if os.Getenv(benchHTTPChildEnv) != "" {
		os.Exit(runHTTPBenchChild())
	}
	os.Exit(pgtest.Run(m))
}
