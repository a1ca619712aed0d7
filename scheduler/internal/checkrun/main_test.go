package checkrun

import (
	"os"
	"testing"

	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) {
	// The benchmarks re-execute this binary as their child process (labsim, HTTP servers).
	if inv := os.Getenv(benchChildEnv); inv != "" {
		os.Exit(runBenchChild(inv))
	}
	if os.Getenv(benchConnsChildEnv) != "" {
		os.Exit(runConnsChild())
	}
	if os.Getenv(benchHTTPChildEnv) != "" {
		os.Exit(runHTTPBenchChild())
	}
	os.Exit(pgtest.Run(m))
}
