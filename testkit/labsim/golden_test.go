package labsim

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/proxmox")

// goldenCommands are the read-only Proxmox commands whose output is kept under
// testdata/proxmox: each file holds the command, its stdout, its stderr and its exit
// status, from the three-node fleet at a fixed time. The shapes (headers, columns, fields,
// exit codes) follow the sources docs/labsim.md names per program.
var goldenCommands = []struct{ host, cmd string }{
	{"atlas", "pveversion"},
	{"atlas", "pveversion -v"},
	{"atlas", "pveversion --bogus"},
	{"atlas", "pvesm status"},
	{"atlas", "pvesm list local"},
	{"atlas", "pvesm list local-lvm"},
	{"atlas", "pvesm list nosuch"},
	{"atlas", "pvesm"},
	{"atlas", "qm list"},
	{"atlas", "qm config 150"},
	{"atlas", "qm status 150"},
	{"atlas", "qm status 999"},
	{"atlas", "qm bogus"},
	{"atlas", "qm"},
	{"atlas", "pct list"},
	{"atlas", "pct config 101"},
	{"atlas", "pct status 101"},
	{"atlas", "pct bogus"},
	{"ceres", "pct list"},
	{"atlas", "pvecm status"},
	{"atlas", "pvecm nodes"},
	{"solo", "pvecm status"},
	{"atlas", "pvecm bogus"},
	{"atlas", "ha-manager status"},
	{"atlas", "ha-manager config"},
	{"atlas", "ha-manager bogus"},
	{"atlas", "pveam list local"},
	{"atlas", "pvesh get /nodes --output-format json"},
	{"atlas", "pvesh get /nodes"},
	{"atlas", "pvesh get /nodes --output-format json-pretty"},
	{"atlas", "pvesh get /nodes/atlas/status --output-format json"},
	{"atlas", "pvesh get /nodes/atlas/qemu --output-format json"},
	{"atlas", "pvesh get /nodes/atlas/lxc"},
	{"atlas", "pvesh get /nodes/atlas/lxc --noborder"},
	{"atlas", "pvesh get /nodes/atlas/storage --output-format json"},
	{"atlas", "pvesh get /nodes/atlas/tasks --output-format json"},
	{"atlas", "pvesh get /cluster/resources --output-format json"},
	{"atlas", "pvesh get /cluster/resources --type vm"},
	{"atlas", "pvesh get /cluster/status --output-format json"},
	{"atlas", "pvesh get /cluster/status"},
	{"solo", "pvesh get /cluster/status --output-format json"},
	{"atlas", "pvesh get /cluster/ha/resources --output-format json"},
	{"atlas", "pvesh get /cluster/ha/status/current --output-format json"},
	{"atlas", "pvesh get /cluster/nextid"},
	{"atlas", "pvesh get /version --output-format json"},
	{"atlas", "pvesh get /version"},
	{"atlas", "pvesh get /nodes/nowhere/status"},
	{"atlas", "pvesh get /bogus/path"},
	{"atlas", "pvesh set /nodes/atlas/status"},
	{"atlas", "pvesh bogus"},
}

var goldenName = regexp.MustCompile(`[^A-Za-z0-9]+`)

func TestProxmoxGolden(t *testing.T) {
	fixed := time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)
	sim := startSim(t, threeNodes(), func(o *Options) {
		o.Clock = func() time.Time { return fixed }
		o.HARecoveryDelay = -1
	})
	clients := map[string]*ssh.Client{}
	seen := map[string]bool{}
	for _, c := range goldenCommands {
		if clients[c.host] == nil {
			clients[c.host] = dialHost(t, sim, c.host)
		}
		r := run(t, clients[c.host], c.cmd)
		got := fmt.Sprintf("$ %s  # on %s\n--- stdout\n%s--- stderr\n%s--- exit %d\n", c.cmd, c.host, r.stdout, r.stderr, r.code)
		name := c.host + "_" + goldenName.ReplaceAllString(c.cmd, "_") + ".golden"
		if seen[name] {
			t.Fatalf("two commands map to %s", name)
		}
		seen[name] = true
		file := filepath.Join("testdata", "proxmox", name)
		if *update {
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("%s: %v (run with -update)", c.cmd, err)
			continue
		}
		if string(want) != got {
			t.Errorf("%s on %s differs from %s:\n%s", c.cmd, c.host, file, got)
		}
	}
}
