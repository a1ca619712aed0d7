package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDaemonsDoNotLinkTestkit keeps the simulator, the private Postgres and the test
// database helper out of what ships: none of the daemon binaries (nor the CLI) may depend
// on a package of the testkit module. Tests of the daemons may.
func TestDaemonsDoNotLinkTestkit(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"./api/cmd/oikos-api", "./api/cmd/oikos", "./scheduler/cmd/oikos-scheduler", "./agent/cmd/oikos-agent"} {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list -deps %s listed only %v", pkg, deps)
		}
		for _, d := range deps {
			if strings.HasPrefix(d, "github.com/oikos-hq/oikos/testkit") {
				t.Errorf("%s links %s", pkg, d)
			}
		}
	}
}
