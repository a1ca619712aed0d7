package dashboard_test

import (
	"fmt"
	"testing"
	"time"

	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
)

// incidentsInterval is every check's interval in TestBrowserIncidents's stack.
const incidentsInterval = time.Second

// TestBrowserIncidents runs e2e/browser/incidents (the Incidents panel, issue 15) against a
// stack of its own, the package's stack but for three things: the scheduler's incident
// engine runs, kicked by the check runner as in the daemon (the shared stack runs none: the
// suite's faults would open incidents under the other tests' feet); every seeded check
// passes in the lab (fresh backups, the NFS, switch and UPS ports served), so the only
// incident is the test's; and every check runs every second. The node test faults a Proxmox
// host down through the control server, follows the one incident it opens on the Overview
// and on the host's page, acknowledges it with a note, and clears the fault until it
// resolves. Its screenshots join the suite's (not cleaned first).
func TestBrowserIncidents(t *testing.T) {
	requireBuilt(t)
	p := e2estack.NewPackageTB("e2e-dash-incidents")
	defer p.RunCleanups()
	s, err := buildStack(p, stackOptions{name: "e2e-dash-incidents", lab: true, incidents: true, healthy: true, interval: incidentsInterval})
	if err != nil {
		t.Fatal(err)
	}
	c, err := startControl(p, s)
	if err != nil {
		t.Fatal(err)
	}
	defer c.logTo(t)()

	dir := screenshotDir(t)
	env := map[string]string{
		"DASH_BASE_URL":       s.currentURL(),
		"DASH_CONTROL_URL":    c.url,
		"DASH_OPERATOR_TOKEN": s.operator,
		"DASH_READONLY_TOKEN": s.readonly,
		"DASH_OPERATOR_NAME":  operatorName,
		"DASH_CHECK_INTERVAL": fmt.Sprint(incidentsInterval.Milliseconds()),
		"DASH_ARTIFACTS":      dir,
		"DASH_CHROMIUM":       chromium,
	}
	t.Logf("incidents dashboard at %s; screenshots go to %s", env["DASH_BASE_URL"], dir)
	runNode(t, 2*time.Minute, env, "--test", "--test-reporter=spec", "incidents/")
}
