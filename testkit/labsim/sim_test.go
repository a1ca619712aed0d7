package labsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func TestProxmoxListsAreByteExact(t *testing.T) {
	t.Parallel()
	sim := startSim(t, testFleet(), nil)
	c := dialHost(t, sim, "atlas")

	pct := run(t, c, "pct list")
	wantPct := "VMID       Status     Lock         Name                \n" +
		"101        running                 web                 \n" +
		"102        stopped                 db                  \n" +
		"103        running                 files               \n"
	if pct.stdout != wantPct || pct.code != 0 {
		t.Fatalf("pct list:\n%q\nwant\n%q", pct.stdout, wantPct)
	}

	s := sim.hosts["atlas"]
	sim.mu.Lock()
	pid200, pid202 := s.Guests[200].PID, s.Guests[202].PID
	sim.mu.Unlock()
	qm := run(t, c, "qm list")
	wantQm := "      VMID NAME                 STATUS     MEM(MB)    BOOTDISK(GB) PID       \n" +
		fmt.Sprintf("       200 homeassistant        running    4096              32.00 %-10d\n", pid200) +
		"       201 jammy-server-cloudimg-amd64 stopped    4096              32.00 0         \n" +
		fmt.Sprintf("       202 opnsense             running    2048              32.00 %-10d\n", pid202)
	if qm.stdout != wantQm || qm.code != 0 {
		t.Fatalf("qm list:\n%q\nwant\n%q", qm.stdout, wantQm)
	}
	if pid200 == 0 || pid202 == 0 {
		t.Fatal("running VMs must have a PID")
	}

	pveam := run(t, c, "pveam list local")
	wantPveam := "NAME                                                         SIZE  \n" +
		"local:vztmpl/debian-11-standard_11.7-1_amd64.tar.zst         109.23MB\n" +
		"local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst         120.29MB\n" +
		"local:vztmpl/ubuntu-24.04-standard_24.04-2_amd64.tar.zst     141.11MB\n"
	if pveam.stdout != wantPveam {
		t.Fatalf("pveam list:\n%q\nwant\n%q", pveam.stdout, wantPveam)
	}
	if r := run(t, c, "pveam list local-lvm"); r.stdout != "NAME                                                         SIZE  \n" || r.code != 0 {
		t.Fatalf("pveam list of a storage without templates must print the header only: %q", r.stdout)
	}

	// An empty node prints nothing at all, not even the header.
	b := dialHost(t, sim, "boreas")
	for _, cmd := range []string{"pct list", "qm list"} {
		if r := run(t, b, cmd); r.stdout != "" || r.stderr != "" || r.code != 0 {
			t.Fatalf("%s on an empty node: %+v", cmd, r)
		}
	}
}

func TestStatusAndConfigErrors(t *testing.T) {
	t.Parallel()
	sim := startSim(t, testFleet(), nil)
	c := dialHost(t, sim, "atlas")
	for _, tc := range []struct {
		cmd, stdout, stderr string
		code                int
	}{
		{"pct status 101", "status: running\n", "", 0},
		{"pct status 102", "status: stopped\n", "", 0},
		{"qm status 201", "status: stopped\n", "", 0},
		{"pct status 999", "", "Configuration file 'nodes/atlas/lxc/999.conf' does not exist\n", 2},
		{"pct status 200", "", "Configuration file 'nodes/atlas/lxc/200.conf' does not exist\n", 2},
		{"qm status 999", "", "Configuration file 'nodes/atlas/qemu-server/999.conf' does not exist\n", 2},
		{"pct exec 102 -- true", "", "container '102' not running!\n", 255},
		{"pct exec 101", "", "missing command\n", 255},
		{"qm guest exec 201 -- true", "", "VM 201 is not running\n", 255},
		{"qm guest exec 202 -- true", "", "No QEMU guest agent configured\n", 255},
		{"pct start 101", "", "CT 101 already running\n", 255},
		{"qm start 200", "", "VM 200 already running\n", 255},
	} {
		r := run(t, c, tc.cmd)
		if r.stdout != tc.stdout || r.stderr != tc.stderr || r.code != tc.code {
			t.Errorf("%s: got (%q, %q, %d), want (%q, %q, %d)", tc.cmd, r.stdout, r.stderr, r.code, tc.stdout, tc.stderr, tc.code)
		}
	}
}

func TestPctExecExitCodes(t *testing.T) {
	t.Parallel()
	sim := startSim(t, testFleet(), nil)
	c := dialHost(t, sim, "atlas")
	for _, tc := range []struct {
		cmd, stdout string
		code        int
	}{
		{"pct exec 101 -- true", "", 0},
		{"pct exec 101 -- false", "", 1},
		{"pct exec 101 -- no-such-program", "", 127},
		{"pct exec 101 -- hostname", "web\n", 0},
		{"pct exec 101 -- sh -c 'echo in $(hostname); exit 42'", "in web\n", 42},
		// argv goes through unchanged: no expansion in the guest.
		{"pct exec 101 -- echo '$HOME' '*'", "$HOME *\n", 0},
		{"pct exec 101 -- systemctl is-active nginx", "active\n", 0},
		{"pct exec 101 -- systemctl is-active nothing", "inactive\n", 3},
	} {
		r := run(t, c, tc.cmd)
		if r.stdout != tc.stdout || r.code != tc.code {
			t.Errorf("%s: got %q exit %d (stderr %q), want %q exit %d", tc.cmd, r.stdout, r.code, r.stderr, tc.stdout, tc.code)
		}
	}
	if r := run(t, c, "pct exec 101 -- no-such-program"); r.stderr != "no-such-program: command not found\n" {
		t.Errorf("unknown program stderr: %q", r.stderr)
	}
}

func TestQmGuestExec(t *testing.T) {
	t.Parallel()
	sim := startSim(t, testFleet(), nil)
	c := dialHost(t, sim, "atlas")
	r := run(t, c, "qm guest exec 200 -- hostname")
	want := "{\n   \"exitcode\" : 0,\n   \"exited\" : 1,\n   \"out-data\" : \"homeassistant\\n\",\n   \"out-truncated\" : 0\n}\n"
	if r.stdout != want || r.code != 0 {
		t.Fatalf("qm guest exec:\n%q\nwant\n%q", r.stdout, want)
	}
	// A failing guest command still exits 0: the exit code is in the JSON.
	r = run(t, c, `qm guest exec 200 -- sh -c 'echo "q\"b\\" >&2; exit 3'`)
	want = "{\n   \"err-data\" : \"q\\\"b\\\\\\n\",\n   \"err-truncated\" : 0,\n   \"exitcode\" : 3,\n   \"exited\" : 1\n}\n"
	if r.stdout != want || r.code != 0 {
		t.Fatalf("failing guest command:\n%q\nwant\n%q", r.stdout, want)
	}
	r = run(t, c, "qm guest exec 200 -- true")
	if r.stdout != "{\n   \"exitcode\" : 0,\n   \"exited\" : 1\n}\n" {
		t.Fatalf("silent command: %q", r.stdout)
	}
	r = run(t, c, "qm guest exec 200 --timeout 1 -- sleep 30")
	if r.stdout != "{\n   \"pid\" : 1200\n}\n" || r.stderr != "timeout reached, returning pid\n" || r.code != 0 {
		t.Fatalf("timeout: %+v", r)
	}
	r = run(t, c, "qm guest exec 200 -- no-such-binary")
	if r.stderr != "Agent error: Failed to execute child process “no-such-binary” (No such file or directory)\n" || r.code != 255 {
		t.Fatalf("unknown program in the guest: %+v", r)
	}
	r = run(t, c, "echo piped | qm guest exec 200 --pass-stdin 1 -- cat")
	if !strings.Contains(r.stdout, `"out-data" : "piped\n"`) {
		t.Fatalf("pass-stdin: %+v", r)
	}
	if err := sim.SetGuestFault("atlas", 200, Fault{GuestAgentDown: true}); err != nil {
		t.Fatal(err)
	}
	r = run(t, c, "qm guest exec 200 -- true")
	if r.stderr != "QEMU guest agent is not running\n" || r.code != 255 || r.stdout != "" {
		t.Fatalf("agent down: %+v", r)
	}
}

func TestRmRfRootEmptiesOnlyThatGuest(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	state := filepath.Join(base, "state")
	outside := filepath.Join(base, "outside.txt")
	if err := os.WriteFile(outside, []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	sim := startSim(t, testFleet(), func(o *Options) { o.StateDir = state })
	c := dialHost(t, sim, "atlas")
	run(t, c, "pct exec 103 -- touch /root/sibling-file")
	run(t, c, "touch /root/host-file")

	r := run(t, c, "pct exec 101 -- rm -rf /")
	if r.code != 0 {
		t.Fatalf("rm -rf /: %+v", r)
	}
	entries, err := os.ReadDir(sim.guestDir("atlas", 101))
	if err != nil || len(entries) != 0 {
		t.Fatalf("guest 101's directory not empty: %v %v", entries, err)
	}
	if r := run(t, c, "pct exec 103 -- ls /root"); r.stdout != "sibling-file\n" {
		t.Fatalf("sibling guest changed: %+v", r)
	}
	if r := run(t, c, "ls /root"); r.stdout != "host-file\n" {
		t.Fatalf("host changed: %+v", r)
	}
	if data, err := os.ReadFile(outside); err != nil || string(data) != "untouched" {
		t.Fatalf("file outside StateDir changed: %q %v", data, err)
	}
	// The emptied guest still answers.
	if r := run(t, c, "pct exec 101 -- ls /"); r.stdout != "proc\n" || r.code != 0 {
		t.Fatalf("ls / after rm -rf /: %+v", r)
	}
}

func TestPathsMapIntoTheSandbox(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	state := filepath.Join(base, "state")
	secretDir := filepath.Join(base, "var", "lib", "x")
	if err := os.MkdirAll(secretDir, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(secretDir, "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	sim := startSim(t, testFleet(), func(o *Options) { o.StateDir = state })
	c := dialHost(t, sim, "atlas")

	run(t, c, "pct exec 101 -- mkdir -p /var/lib/x/data")
	run(t, c, "pct exec 101 -- touch /var/lib/x/data/f")
	inGuest := filepath.Join(sim.guestDir("atlas", 101), "var", "lib", "x", "data", "f")
	if _, err := os.Stat(inGuest); err != nil {
		t.Fatalf("file not created inside the guest's directory: %v", err)
	}
	if r := run(t, c, "pct exec 101 -- rm -rf /var/lib/x"); r.code != 0 {
		t.Fatalf("rm -rf /var/lib/x: %+v", r)
	}
	if _, err := os.Stat(filepath.Dir(filepath.Dir(inGuest))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("guest's /var/lib/x still there: %v", err)
	}
	climb := strings.Repeat("../", 30) + strings.TrimPrefix(secret, "/")
	for _, cmd := range []string{
		"cat ../../../../etc/passwd",
		"cat " + climb,
		"cd / && cd ../../../.. && cat ." + secret,
		"ln -s " + secret + " /tmp/s && cat /tmp/s",
		"ln -s / /tmp/root && cat /tmp/root/../../../" + climb,
		"rm -rf " + secret,
		"rm -rf " + climb,
		"echo overwritten > " + climb,
	} {
		r := run(t, c, "pct exec 101 -- sh -c '"+cmd+"'")
		if strings.Contains(r.stdout, "host secret") || strings.Contains(r.stdout, "root:x:0:0") {
			t.Errorf("%s escaped the sandbox: %q", cmd, r.stdout)
		}
	}
	if data, err := os.ReadFile(secret); err != nil || string(data) != "host secret" {
		t.Fatalf("host file changed: %q %v", data, err)
	}
	// A symlink planted in the guest's real directory is still resolved inside it.
	if err := os.Symlink(secret, filepath.Join(sim.guestDir("atlas", 101), "planted")); err != nil {
		t.Fatal(err)
	}
	if r := run(t, c, "pct exec 101 -- cat /planted"); strings.Contains(r.stdout, "host secret") || r.code == 0 {
		t.Fatalf("planted symlink escaped: %+v", r)
	}
}

func TestPctCreateStartDestroy(t *testing.T) {
	t.Parallel()
	sim := startSim(t, testFleet(), nil)
	c := dialHost(t, sim, "atlas")
	r := run(t, c, "pct create 150 local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst --hostname app --net0 name=eth0,bridge=vmbr0,ip=dhcp --unprivileged 0 --features nesting=1 --memory 1024 --cores 2 --storage local-lvm --description $'media app\nowner: dana'")
	if r.code != 0 || !strings.Contains(r.stdout, "extracting archive '/var/lib/vz/template/cache/debian-12-standard_12.7-1_amd64.tar.zst'") {
		t.Fatalf("pct create: %+v", r)
	}
	if r := run(t, c, "pct list"); !strings.Contains(r.stdout, "150        stopped                 app                 \n") {
		t.Fatalf("created container missing from pct list: %q", r.stdout)
	}
	cfg := run(t, c, "pct config 150").stdout
	for _, want := range []string{"description: media app%0Aowner: dana\n", "features: nesting=1\n", "hostname: app\n", "memory: 1024\n", "cores: 2\n", "rootfs: local-lvm:vm-150-disk-0,size=8G\n"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("pct config lacks %q:\n%s", want, cfg)
		}
	}
	if strings.Contains(cfg, "unprivileged") {
		t.Errorf("--unprivileged 0 must not write unprivileged: %s", cfg)
	}
	if r := run(t, c, "pct start 150"); r.code != 0 {
		t.Fatalf("pct start: %+v", r)
	}
	if r := run(t, c, "pct exec 150 -- cat /etc/hostname"); r.stdout != "app\n" {
		t.Fatalf("new container's hostname: %+v", r)
	}
	if r := run(t, c, "pct destroy 150"); r.code != 255 || r.stderr != "unable to destroy CT 150 - container is running\n" {
		t.Fatalf("destroying a running container: %+v", r)
	}
	run(t, c, "pct stop 150")
	if r := run(t, c, "pct destroy 150"); r.code != 0 {
		t.Fatalf("pct destroy: %+v", r)
	}
	if r := run(t, c, "pct list"); strings.Contains(r.stdout, "150 ") {
		t.Fatalf("destroyed container still listed: %q", r.stdout)
	}
	if _, err := os.Stat(sim.guestDir("atlas", 150)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("destroyed container's directory remains: %v", err)
	}

	for _, tc := range []struct{ cmd, stderr string }{
		{"pct create 151 local:vztmpl/debian-13.0-1_amd64.tar.zst --hostname x",
			"unable to create CT 151 - volume 'local:vztmpl/debian-13.0-1_amd64.tar.zst' does not exist\n"},
		{"pct create 101 local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
			"unable to create CT 101 - CT 101 already exists on node 'atlas'\n"},
		{"pct create 152 local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst --unprivileged maybe",
			"400 Parameter verification failed.\nunprivileged: type check ('boolean') failed - got 'maybe'\npct create <vmid> <ostemplate> [OPTIONS]\n"},
		{"pct create 153 local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst --bogus 1",
			"Unknown option: bogus\n400 unable to parse option\npct create <vmid> <ostemplate> [OPTIONS]\n"},
		{"pct create 154 local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst --storage nfs-9",
			"unable to create CT 154 - storage 'nfs-9' does not exist\n"},
	} {
		r := run(t, c, tc.cmd)
		if r.code != 255 || r.stderr != tc.stderr {
			t.Errorf("%s: got %q exit %d, want %q", tc.cmd, r.stderr, r.code, tc.stderr)
		}
	}
	// The VMID namespace is the cluster's: boreas cannot reuse atlas's 101.
	b := dialHost(t, sim, "boreas")
	if r := run(t, b, "pct create 101 local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"); r.stderr != "unable to create CT 101 - CT 101 already exists on node 'atlas'\n" {
		t.Fatalf("cluster-wide vmid: %+v", r)
	}
}

func TestStaticIPGatewayPing(t *testing.T) {
	t.Parallel()
	sim := startSim(t, testFleet(), nil)
	c := dialHost(t, sim, "atlas")
	if r := run(t, c, "ping -c 1 -W 1 192.0.2.1"); r.code != 0 || !strings.Contains(r.stdout, "1 packets transmitted, 1 received, 0% packet loss") {
		t.Fatalf("configured gateway must answer: %+v", r)
	}
	start := time.Now()
	r := run(t, c, "ping -c 1 -W 1 192.0.2.254")
	if r.code != 1 || !strings.Contains(r.stdout, "1 packets transmitted, 0 received, 100% packet loss") {
		t.Fatalf("unknown gateway must not answer: %+v", r)
	}
	if time.Since(start) < 900*time.Millisecond {
		t.Fatalf("a failed ping returned before its -W wait: %v", time.Since(start))
	}
	// A container created with a gateway nobody answers has a black-holed network: name
	// lookups hang until the caller gives up.
	run(t, c, "pct create 160 local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst --hostname static --net0 name=eth0,bridge=vmbr0,ip=192.0.2.50/24,gw=192.0.2.9 --start 1")
	if cfg := run(t, c, "pct config 160").stdout; !strings.Contains(cfg, "net0: name=eth0,bridge=vmbr0,ip=192.0.2.50/24,gw=192.0.2.9,hwaddr=BC:24:11:00:00:A0,type=veth\n") {
		t.Fatalf("net0 not kept: %s", cfg)
	}
	r = run(t, c, "pct exec 160 -- timeout 0.2 getent hosts deb.debian.org")
	if r.code != 124 {
		t.Fatalf("lookup over a black-holed network must hang (timeout exit 124): %+v", r)
	}
}

func TestLinuxAndDarwinHosts(t *testing.T) {
	t.Parallel()
	sim := startSim(t, testFleet(), nil)
	l := dialHost(t, sim, "hermes")
	if r := run(t, l, "uname -s; top -bn1 | grep '^%Cpu(s):' | wc -l; systemctl is-active frigate"); r.stdout != "Linux\n1\nactive\n" {
		t.Fatalf("linux host: %+v", r)
	}
	d := dialHost(t, sim, "studio")
	r := run(t, d, "uname -s; sysctl -n hw.ncpu; whoami; pwd")
	if r.stdout != "Darwin\n8\ndana\n/Users/dana\n" {
		t.Fatalf("darwin host: %+v", r)
	}
	top := run(t, d, "top -l 1 | grep 'CPU usage'").stdout
	var us, sy, id float64
	if n, err := fmt.Sscanf(top, "CPU usage: %f%% user, %f%% sys, %f%% idle", &us, &sy, &id); n != 3 || err != nil || id < 50 {
		t.Fatalf("darwin top: %q (%v)", top, err)
	}
	if r := run(t, d, "vm_stat | head -1; systemctl status x"); !strings.HasPrefix(r.stdout, "Mach Virtual Memory Statistics: (page size of 16384 bytes)\n") || r.code != 127 {
		t.Fatalf("darwin vm_stat / no systemctl: %+v", r)
	}
}

func TestFiguresAreHealthyAndVary(t *testing.T) {
	t.Parallel()
	sim := startSim(t, testFleet(), nil)
	c := dialHost(t, sim, "atlas")
	a := run(t, c, "cat /proc/meminfo | head -2; df -P / | tail -1").stdout
	b := run(t, c, "cat /proc/meminfo | head -2; df -P / | tail -1").stdout
	if a == b {
		t.Fatalf("two readings are identical:\n%s", a)
	}
	var pct int
	line := strings.Fields(strings.Split(strings.TrimSpace(a), "\n")[2])
	if _, err := fmt.Sscanf(line[4], "%d%%", &pct); err != nil || pct < 5 || pct > 60 {
		t.Fatalf("disk use %q is not healthy", line)
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	sim := startSim(t, testFleet(), nil)

	t.Run("down", func(t *testing.T) {
		c := dialHost(t, sim, "hermes")
		if err := sim.SetHostFault("hermes", Fault{Down: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := runErr(c, "true"); err == nil {
			t.Fatal("open connection survived the host going down")
		}
		start := time.Now()
		_, err := tryDial(sim, "hermes", clientConfig(sim, "hermes"))
		if !errors.Is(err, syscall.ECONNREFUSED) || time.Since(start) > time.Second {
			t.Fatalf("dial to a down host: %v after %v", err, time.Since(start))
		}
		if err := sim.SetHostFault("hermes", Fault{}); err != nil {
			t.Fatal(err)
		}
		c = dialHost(t, sim, "hermes")
		if r := run(t, c, "echo back"); r.stdout != "back\n" {
			t.Fatalf("after recovery: %+v", r)
		}
	})
	t.Run("refusing", func(t *testing.T) {
		if err := sim.SetHostFault("hermes", Fault{Refusing: true}); err != nil {
			t.Fatal(err)
		}
		_, err := tryDial(sim, "hermes", clientConfig(sim, "hermes"))
		if err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
			t.Fatalf("auth should be refused: %v", err)
		}
		sim.SetHostFault("hermes", Fault{})
	})
	t.Run("changed host key", func(t *testing.T) {
		orig := sim.HostKey("hermes")
		if err := sim.SetHostFault("hermes", Fault{ChangedHostKey: true}); err != nil {
			t.Fatal(err)
		}
		_, err := tryDial(sim, "hermes", clientConfig(sim, "hermes"))
		if err == nil || !strings.Contains(err.Error(), "host key mismatch") {
			t.Fatalf("pinned key must not match: %v", err)
		}
		sim.SetHostFault("hermes", Fault{})
		if !bytesEqual(sim.HostKey("hermes").Marshal(), orig.Marshal()) {
			t.Fatal("HostKey changed")
		}
		dialHost(t, sim, "hermes")
	})
	t.Run("slow", func(t *testing.T) {
		c := dialHost(t, sim, "hermes")
		sim.SetHostFault("hermes", Fault{Delay: 300 * time.Millisecond})
		start := time.Now()
		if r := run(t, c, "echo slow"); r.stdout != "slow\n" || time.Since(start) < 300*time.Millisecond {
			t.Fatalf("slow: %+v after %v", r, time.Since(start))
		}
		sim.SetHostFault("hermes", Fault{})
	})
	t.Run("hang", func(t *testing.T) {
		c := dialHost(t, sim, "hermes")
		sim.SetHostFault("hermes", Fault{Hang: true})
		defer sim.SetHostFault("hermes", Fault{})
		sess, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- sess.Run("echo never") }()
		select {
		case err := <-done:
			t.Fatalf("hung command returned: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		sess.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("closing the session did not end the hung command")
		}
	})
	t.Run("disconnect mid output", func(t *testing.T) {
		c := dialHost(t, sim, "hermes")
		sim.SetHostFault("hermes", Fault{DisconnectMidOutput: true})
		defer sim.SetHostFault("hermes", Fault{})
		r, err := runErr(c, "seq 1000")
		if err == nil {
			t.Fatal("expected the connection to drop")
		}
		if len(r.stdout) == 0 || len(r.stdout) >= len("1\n")*1000 || !strings.HasPrefix(r.stdout, "1\n2\n3\n") {
			t.Fatalf("want a partial output, got %d bytes", len(r.stdout))
		}
	})
	t.Run("guest faults", func(t *testing.T) {
		c := dialHost(t, sim, "atlas")
		sim.SetGuestFault("atlas", 101, Fault{Delay: 200 * time.Millisecond})
		start := time.Now()
		if r := run(t, c, "pct exec 101 -- echo x; pct exec 103 -- echo y"); r.stdout != "x\ny\n" || time.Since(start) < 200*time.Millisecond {
			t.Fatalf("guest delay: %+v", r)
		}
		sim.SetGuestFault("atlas", 101, Fault{DisconnectMidOutput: true})
		if r, err := runErr(c, "pct exec 101 -- seq 100"); err == nil || !strings.HasPrefix(r.stdout, "1\n") {
			t.Fatalf("guest disconnect: %+v %v", r, err)
		}
		sim.ClearFaults()
		c = dialHost(t, sim, "atlas")
		sim.SetGuestFault("atlas", 101, Fault{Hang: true})
		ctxDone := make(chan struct{})
		go func() {
			defer close(ctxDone)
			_, _ = runErr(c, "pct exec 101 -- true")
		}()
		select {
		case <-ctxDone:
			t.Fatal("hung guest returned")
		case <-time.After(150 * time.Millisecond):
		}
		c.Close()
		<-ctxDone
		sim.ClearFaults()
	})
	if err := sim.SetHostFault("nope", Fault{}); !errors.Is(err, ErrUnknownHost) {
		t.Fatalf("unknown host: %v", err)
	}
	if err := sim.SetGuestFault("atlas", 999, Fault{}); !errors.Is(err, ErrUnknownGuest) {
		t.Fatalf("unknown guest: %v", err)
	}
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

func TestManySessionsOneConnection(t *testing.T) {
	t.Parallel()
	sim := startSim(t, testFleet(), nil)
	c := dialHost(t, sim, "atlas")
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := fmt.Sprintf("pct exec %d -- sh -c 'echo %d'", []int{101, 103}[i%2], i)
			r, err := runErr(c, cmd)
			if err != nil || r.stdout != fmt.Sprintf("%d\n", i) {
				errs <- fmt.Errorf("%s: %+v %v", cmd, r, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := sim.Connections("atlas"); got != 1 {
		t.Fatalf("Connections = %d, want 1", got)
	}
	if got := sim.TotalConnections("atlas"); got != 1 {
		t.Fatalf("TotalConnections = %d, want 1", got)
	}
	c.Close()
	waitFor(t, "the closed connection to be uncounted", func() bool { return sim.Connections("atlas") == 0 })
}

func TestHostKeysPersist(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, err := New(testFleet(), Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(testFleet(), Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !bytesEqual(a.HostKey("atlas").Marshal(), b.HostKey("atlas").Marshal()) {
		t.Fatal("host key changed across restarts")
	}
	if bytesEqual(a.HostKey("atlas").Marshal(), a.HostKey("boreas").Marshal()) {
		t.Fatal("two hosts share a key")
	}
	if a.HostKey("atlas").Type() != ssh.KeyAlgoED25519 {
		t.Fatalf("key type %s", a.HostKey("atlas").Type())
	}
	a.Stop()
	b.Stop()
	b.Stop()
}

func TestAuthorizedKeys(t *testing.T) {
	t.Parallel()
	other, err := ssh.NewSignerFromKey(ed25519Key(make([]byte, 32)))
	if err != nil {
		t.Fatal(err)
	}
	sim := startSim(t, testFleet(), func(o *Options) { o.AuthorizedKeys = []ssh.PublicKey{testSigner.PublicKey()} })
	dialHost(t, sim, "hermes")
	cfg := clientConfig(sim, "hermes")
	cfg.Auth = []ssh.AuthMethod{ssh.PublicKeys(other)}
	if _, err := tryDial(sim, "hermes", cfg); err == nil {
		t.Fatal("an unknown key was accepted")
	}
}

func TestHTTPIngressAndControlAPI(t *testing.T) {
	t.Parallel()
	sim := startSim(t, testFleet(), func(o *Options) { o.ControlAddr = "127.0.0.1:0" })
	get := func(host string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+sim.HTTPAddr()+"/", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("web.lab.example"); code != 200 || body != "ok web.lab.example\n" {
		t.Fatalf("running route: %d %q", code, body)
	}
	if code, _ := get("db.lab.example"); code != 502 {
		t.Fatalf("route to a stopped guest: %d", code)
	}
	if code, _ := get("unknown.lab.example"); code != 404 {
		t.Fatalf("unknown route: %d", code)
	}
	ctl := "http://" + sim.ControlAddr()
	do := func(method, path, body string) int {
		req, _ := http.NewRequest(method, ctl+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := do(http.MethodPost, "/guests/atlas/101/stop", ""); code != 204 {
		t.Fatalf("stop guest: %d", code)
	}
	if code, _ := get("web.lab.example"); code != 502 {
		t.Fatalf("route after stop: %d", code)
	}
	if code := do(http.MethodPost, "/guests/atlas/101/start", ""); code != 204 {
		t.Fatalf("start guest: %d", code)
	}
	// Stopping the unit behind the route makes it fail too.
	c := dialHost(t, sim, "atlas")
	run(t, c, "pct exec 101 -- systemctl stop nginx")
	if code, _ := get("web.lab.example"); code != 502 {
		t.Fatalf("route with its unit stopped: %d", code)
	}
	run(t, c, "pct exec 101 -- systemctl start nginx")
	if code := do(http.MethodPut, "/faults/hosts/hermes", `{"down":true,"delay":"10ms"}`); code != 204 {
		t.Fatalf("put fault: %d", code)
	}
	if code := do(http.MethodPut, "/faults/hosts/nope", `{}`); code != 404 {
		t.Fatalf("fault on unknown host: %d", code)
	}
	if code := do(http.MethodPut, "/faults/hosts/hermes", `{"delay":"soon"}`); code != 400 {
		t.Fatalf("bad fault: %d", code)
	}
	resp, err := http.Get(ctl + "/state")
	if err != nil {
		t.Fatal(err)
	}
	var st State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var hermes HostState
	for _, h := range st.Hosts {
		if h.Name == "hermes" {
			hermes = h
		}
	}
	if !hermes.Fault.Down || hermes.Fault.Delay != 10*time.Millisecond {
		t.Fatalf("state: %+v", hermes)
	}
	if code := do(http.MethodDelete, "/faults", ""); code != 204 {
		t.Fatalf("clear faults: %d", code)
	}
	dialHost(t, sim, "hermes")
}

func TestStopIsSafeTwiceAndEndsCommands(t *testing.T) {
	t.Parallel()
	sim := startSim(t, testFleet(), nil)
	c := dialHost(t, sim, "atlas")
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = runErr(c, "sleep 60")
	}()
	waitFor(t, "the connection", func() bool { return sim.Connections("atlas") == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stopped := make(chan struct{})
	go func() { sim.Stop(); sim.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		t.Fatal("Stop did not return")
	}
	<-done
}

// BenchmarkPctExecTrue measures one host-hopped command over an open connection, the path
// every read-only execution takes.
func BenchmarkPctExecTrue(b *testing.B) {
	sim, err := New(testFleet(), Options{StateDir: b.TempDir(), Listen: func(string) string { return "127.0.0.1:0" }})
	if err != nil {
		b.Fatal(err)
	}
	if err := sim.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer sim.Stop()
	c, err := tryDial(sim, "atlas", clientConfig(sim, "atlas"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r, err := runErr(c, "pct exec 101 -- true"); err != nil || r.code != 0 {
			b.Fatalf("%+v %v", r, err)
		}
	}
}

// Flap: every second invocation of the same Proxmox command finds a flapping guest
// stopped, per command (so each probe alternates run after run), on the guest or on every
// guest of a flapping host; the fault travels through the control API's JSON.
func TestFlap(t *testing.T) {
	t.Parallel()
	sim := startSim(t, testFleet(), nil)
	c := dialHost(t, sim, "atlas")
	var f Fault
	if err := json.Unmarshal([]byte(`{"flap": true}`), &f); err != nil || !f.Flap {
		t.Fatalf("flap from JSON: %+v %v", f, err)
	}
	if err := sim.SetGuestFault("atlas", 101, f); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for range 4 {
		seen = append(seen, strings.TrimSpace(run(t, c, "pct status 101").stdout))
	}
	if fmt.Sprint(seen) != "[status: running status: stopped status: running status: stopped]" {
		t.Fatalf("pct status of a flapping guest: %v", seen)
	}
	// A different command keeps its own count, and a stopped exec says so as pct does.
	if r := run(t, c, "pct exec 101 -- echo in"); r.stdout != "in\n" {
		t.Fatalf("first exec: %+v", r)
	}
	if r := run(t, c, "pct exec 101 -- echo in"); r.code == 0 || !strings.Contains(r.stderr, "not running") {
		t.Fatalf("second exec should find it stopped: %+v", r)
	}
	if err := sim.ClearFaults(); err != nil {
		t.Fatal(err)
	}
	if err := sim.SetHostFault("atlas", Fault{Flap: true}); err != nil {
		t.Fatal(err)
	}
	a, b := run(t, c, "qm status 200").stdout, run(t, c, "qm status 200").stdout
	if a != "status: running\n" || b != "status: stopped\n" {
		t.Fatalf("a flapping host's VM: %q then %q", a, b)
	}
}

// Only the machine's login user is let in: a wrong --user is an authentication failure, as
// on a real host where the key sits in one user's authorized_keys.
func TestOnlyTheLoginUserAuthenticates(t *testing.T) {
	sim := startSim(t, testFleet(), nil)
	cfg := clientConfig(sim, "atlas")
	cfg.User = "admin"
	if c, err := tryDial(sim, "atlas", cfg); err == nil {
		c.Close()
		t.Fatal("user admin was let into atlas, whose login user is root")
	}
}

func TestPveshOverSSH(t *testing.T) {
	t.Parallel()
	sim := startSim(t, testFleet(), nil)
	c := dialHost(t, sim, "atlas")
	r := run(t, c, "pvesh get /nodes/atlas/lxc --output-format json")
	if strings.Count(r.stdout, "\n") != 1 || r.code != 0 {
		t.Fatalf("compact JSON must be one line: %q", r.stdout)
	}
	var items []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &items); err != nil || len(items) != 3 {
		t.Fatalf("lxc list: %v %q", err, r.stdout)
	}
	for _, it := range items {
		for _, k := range []string{"vmid", "type", "status", "name", "cpus", "cpu", "mem", "maxmem", "swap", "maxswap", "disk", "maxdisk", "netin", "netout", "diskread", "diskwrite", "uptime"} {
			if _, ok := it[k]; !ok {
				t.Errorf("item %v lacks %s", it["vmid"], k)
			}
		}
		_, hasPID := it["pid"]
		if (it["status"] == "running") != hasPID {
			t.Errorf("pid only for running guests: %v", it)
		}
	}
	// /cluster/resources spans the cluster; the other node (boreas) is empty but listed.
	r = run(t, c, "pvesh get /cluster/resources --type vm --output-format json")
	var res []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || len(res) != 6 {
		t.Fatalf("cluster resources: %v %q", err, r.stdout)
	}
	if res[3]["id"] != "qemu/200" || res[3]["node"] != "atlas" || res[3]["type"] != "qemu" {
		t.Fatalf("cluster resource: %v", res[3])
	}
	// /cluster/nextid: the lowest vmid from 100 that no guest of the cluster holds.
	used := map[int]bool{}
	for _, g := range res {
		if v, ok := g["vmid"].(float64); ok {
			used[int(v)] = true
		}
	}
	want := 100
	for used[want] {
		want++
	}
	r = run(t, c, "pvesh get /cluster/nextid --output-format json")
	var next string
	if err := json.Unmarshal([]byte(r.stdout), &next); err != nil || next != strconv.Itoa(want) || r.code != 0 {
		t.Fatalf("nextid = %q (%v), want %q", r.stdout, err, strconv.Itoa(want))
	}
	if err := sim.SetHostFault("atlas", Fault{}); err != nil {
		t.Fatal(err)
	}
	b := dialHost(t, sim, "boreas")
	r = run(t, b, "pvesh get /nodes/atlas/qemu --output-format json")
	if !strings.Contains(r.stdout, `"name":"homeassistant"`) {
		t.Fatalf("a node of the same cluster: %q", r.stdout)
	}
	if r := run(t, c, "pvesh get /nodes/nowhere/lxc"); r.code != 255 || !strings.Contains(r.stderr, "hostname lookup 'nowhere' failed") {
		t.Fatalf("unknown node: %+v", r)
	}
}
