package remote

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/testkit/labsim"
)

// Probe against the lab simulator: a Proxmox host whose probe shell runs pct
// exec and qm guest exec for its guests, a plain Linux host and a macOS
// workstation, all over real SSH.
func TestProbeAgainstLabsim(t *testing.T) {
	t.Parallel()
	fleet := labsim.Fleet{Hosts: []labsim.Host{
		{Name: "atlas", Kind: labsim.KindProxmox, Addr: "127.0.20.1:22", Node: "atlas", User: "root", Cores: 8, MemoryMB: 32768,
			Guests: []labsim.Guest{
				{VMID: 101, Kind: labsim.GuestLXC, Name: "web", Hostname: "web", Status: labsim.StatusRunning, Cores: 2, MemoryMB: 1024},
				{VMID: 102, Kind: labsim.GuestLXC, Name: "db", Hostname: "db", Status: labsim.StatusStopped, Cores: 2, MemoryMB: 1024},
				{VMID: 200, Kind: labsim.GuestVM, Name: "ha", Hostname: "ha", Status: labsim.StatusRunning, GuestAgent: true, Cores: 2, MemoryMB: 4096},
			}},
		{Name: "hermes", Kind: labsim.KindLinux, Addr: "127.0.21.1:22", User: "root", Cores: 4},
		{Name: "studio", Kind: labsim.KindDarwin, Addr: "127.0.22.1:22", User: "dana", Cores: 12},
	}}
	signer := newSigner(t)
	sim, err := labsim.New(fleet, labsim.Options{StateDir: t.TempDir(), Listen: func(string) string { return "127.0.0.1:0" }, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Stop)
	pool := NewPool(PoolOptions{Signer: signer, HostKeys: NewMemoryHostKeys(), Dial: sim.DialContext, DialTimeout: 5 * time.Second})
	t.Cleanup(pool.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	machine := func(addr, user string) Target {
		return Target{Slug: "host:" + addr, Addr: addr, User: user, Kind: KindMachine, Wrap: directWrap}
	}
	lxc := func(vmid int) Target {
		return Target{Slug: "lxc", Addr: "127.0.20.1:22", User: "root", Kind: KindLXC, VMID: vmid, Host: "proxmox-host:atlas",
			Wrap: func(c string) (string, error) { return PctExecCommand(vmid, c) }}
	}
	vm := Target{Slug: "vm:ha", Addr: "127.0.20.1:22", User: "root", Kind: KindVM, VMID: 200, Host: "proxmox-host:atlas",
		Wrap: func(c string) (string, error) { return GuestExecCommand(200, 30*time.Second, c) }}

	probe := func(tgt Target, cmd string) Result {
		t.Helper()
		res, err := pool.Probe(ctx, tgt, cmd)
		if err != nil {
			t.Fatalf("probe %q on %s: %v", cmd, tgt.Slug, err)
		}
		return res
	}

	t.Run("lxc through pct exec in the host's shell", func(t *testing.T) {
		res := probe(lxc(101), `read -r l < /proc/stat && echo "$l"`)
		if res.ExitCode != 0 || !strings.HasPrefix(string(res.Stdout), "cpu ") {
			t.Fatalf("cpu line: %+v", res)
		}
		if res := probe(lxc(101), "cat /etc/hostname; echo oops >&2; exit 4"); string(res.Stdout) != "web\n" ||
			string(res.Stderr) != "oops\n" || res.ExitCode != 4 {
			t.Fatalf("hostname: stdout %q stderr %q exit %d", res.Stdout, res.Stderr, res.ExitCode)
		}
		// exit inside the guest ends the guest's sh, not the host's probe shell.
		if res := probe(lxc(102), "true"); res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "not running") {
			t.Fatalf("stopped container: %+v", res)
		}
	})
	t.Run("vm through qm guest exec, JSON decoded", func(t *testing.T) {
		res := probe(vm, "cat /etc/hostname; exit 3")
		if string(res.Stdout) != "ha\n" || res.ExitCode != 3 {
			t.Fatalf("vm: stdout %q exit %d", res.Stdout, res.ExitCode)
		}
	})
	t.Run("plain host and macOS", func(t *testing.T) {
		if res := probe(machine("127.0.21.1:22", "root"), "nproc"); string(res.Stdout) != "4\n" {
			t.Fatalf("linux nproc: %q", res.Stdout)
		}
		if res := probe(machine("127.0.22.1:22", "dana"), "sysctl -n hw.ncpu"); string(res.Stdout) != "12\n" {
			t.Fatalf("darwin hw.ncpu: %q", res.Stdout)
		}
	})
	t.Run("host faults apply to every line of the shell", func(t *testing.T) {
		host := machine("127.0.21.1:22", "root")
		probe(host, "true") // the shell exists before the fault
		if err := sim.SetHostFault("hermes", labsim.Fault{Delay: 200 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if res := probe(host, "echo slow"); string(res.Stdout) != "slow\n" || time.Since(start) < 200*time.Millisecond {
			t.Fatalf("delay: %q after %s", res.Stdout, time.Since(start))
		}
		if err := sim.SetHostFault("hermes", labsim.Fault{DisconnectMidOutput: true}); err != nil {
			t.Fatal(err)
		}
		res, err := pool.Probe(ctx, host, "seq 1000")
		if err == nil || !errors.Is(err, ErrProbeShell) || len(res.Stdout) == 0 || len(res.Stdout) >= len("1\n")*1000 {
			t.Fatalf("disconnect: %d bytes, err %v", len(res.Stdout), err)
		}
		if err := sim.SetHostFault("hermes", labsim.Fault{}); err != nil {
			t.Fatal(err)
		}
		if res := probe(host, "echo back"); string(res.Stdout) != "back\n" {
			t.Fatalf("after the faults: %q", res.Stdout)
		}
	})
	// One connection per host for all of the above (hermes reconnected once,
	// after the disconnect fault).
	for host, want := range map[string]int{"atlas": 1, "studio": 1, "hermes": 2} {
		if got := sim.TotalConnections(host); got != want {
			t.Errorf("%s accepted %d connections, want %d", host, got, want)
		}
	}
}
