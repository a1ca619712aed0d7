package probeparse

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
	"github.com/oikos-hq/oikos/scheduler/internal/results"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/testkit/labsim/sandbox"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// On Linux the cpu, memory and load probes start no program: run by a shell that has no
// programs at all, they still print what their parsers read.
func TestLinuxProbesAreShellBuiltinsOnly(t *testing.T) {
	t.Parallel()
	procStat := "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\ncpu1 50 0 25 400 25 0 0 0 0 0\n" +
		"cpu2 0 0 0 0 0 0 0 0 0 0\nintr 1\nctxt 2\n"
	// A longer meminfo than the parser needs, in the kernel's order.
	meminfo := strings.Replace(linuxMeminfo, "SwapTotal:", "SwapCached:            0 kB\nActive:          100 kB\nSwapTotal:", 1) +
		"Dirty:               128 kB\nShmem:              1000 kB\n"
	fsys, err := sandbox.New(t.TempDir(), map[string]sandbox.Generator{
		"/proc/stat":    func() []byte { return []byte(procStat) },
		"/proc/meminfo": func() []byte { return []byte(meminfo) },
		"/proc/loadavg": func() []byte { return []byte("0.50 1.25 2.00 3/456 7890\n") },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fsys.Close() })
	sh := &shell.Shell{FS: fsys, Programs: shell.Registry{}, Home: "/", Log: zerolog.Nop()}
	run := func(script string) string {
		t.Helper()
		cmd, err := scripts[script].Command(Spec{Script: script, OS: checks.OSLinux})
		if err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		if code := sh.Run(context.Background(), cmd, shell.Stdio{Stdout: &out, Stderr: &errb}); code != 0 || errb.Len() > 0 {
			t.Fatalf("%s probe needs more than the shell: exit %d, stderr %q", script, code, errb.String())
		}
		return out.String()
	}
	st := &State{}
	if got := run("cpu"); got != "cpu  100 0 50 800 50 0 0 0 0 0\n" {
		t.Errorf("cpu printed %q", got)
	}
	mem := run("memory")
	if strings.Contains(mem, "Dirty") || strings.Contains(mem, "Active") {
		t.Errorf("memory printed lines it does not need (or read past SwapFree): %q", mem)
	}
	if r := parseMemory(Spec{Script: "memory", OS: checks.OSLinux}, mem, 0, st); r.Health != results.HealthUp ||
		r.Summary["mem_used_pct"] != 50.0 || r.Summary["swap_used_pct"] != 25.0 {
		t.Errorf("memory from %q: %+v", mem, r)
	}
	load := run("load")
	if r := parseLoad(Spec{Script: "load", OS: checks.OSLinux}, load, 0, st); r.Health != results.HealthUp ||
		r.Summary["cpus"] != 3 || r.Summary["load5"] != 1.25 {
		t.Errorf("load from %q: %+v", load, r)
	}
}

// Every Linux script through the probe shells of a labsim Proxmox host, on the host itself
// and in a container through pct exec: each parses, memory and load report the machine's
// configured size, and the host sees one SSH connection.
func TestScriptsThroughProbeShell(t *testing.T) {
	t.Parallel()
	inv := strings.Replace(probeInventory, "relationships:",
		"  - {type: host, name: plain, attributes: {lan_ipv4: 127.0.13.1, ssh_port: 2222, user: root, os: linux, cores: 6, memory_mb: 3072}}\nrelationships:", 1)
	inv = strings.Replace(inv, "hostname: web}", "hostname: web, cores: 3, memory_mb: 1536}", 1)
	lab := labtest.New(t, labtest.Options{Inventory: []byte(inv)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		slug, host string
		cores      int
		memMB      float64
	}{
		{"host:plain", "plain", 6, 3072},
		{"lxc:web", "atlas", 3, 1536},
	} {
		tgt, _, err := lab.Fleet.Resolve(ctx, lab.IDs[tc.slug])
		if err != nil {
			t.Fatal(err)
		}
		st := &State{}
		for _, script := range []string{"cpu", "memory", "load", "disk", "cpu"} {
			spec := Spec{Script: script, OS: checks.OSLinux}
			cmd, err := scripts[script].Command(spec)
			if err != nil {
				t.Fatal(err)
			}
			res, err := lab.SSH.Probe(ctx, tgt, cmd)
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("%s %s: exit %d err %v stderr %q", tc.slug, script, res.ExitCode, err, res.Stderr)
			}
			r := scripts[script].Parse(spec, string(res.Stdout), res.ExitCode, st)
			if r.Health != results.HealthUp {
				t.Errorf("%s %s: %s %s from %q", tc.slug, script, r.Health, r.Reason, res.Stdout)
			}
			switch script {
			case "memory":
				// A host's kernel keeps a little of its memory; a container sees its limit.
				if v, _ := r.Summary["mem_total_mb"].(float64); v > tc.memMB || v < 0.95*tc.memMB {
					t.Errorf("%s memory total %v MiB, want about %v", tc.slug, r.Summary["mem_total_mb"], tc.memMB)
				}
			case "load":
				if r.Summary["cpus"] != tc.cores {
					t.Errorf("%s cpus %v, want %d", tc.slug, r.Summary["cpus"], tc.cores)
				}
			}
		}
		if n := lab.Sim.TotalConnections(tc.host); n != 1 {
			t.Errorf("%s accepted %d SSH connections, want 1", tc.host, n)
		}
	}
}

// probeInventory is a lab of a Proxmox host with a container (and a service on it).
const probeInventory = `
entities:
  - {type: proxmox-host, name: atlas, attributes: {lan_ipv4: 127.0.10.1, ssh_port: 2222, user: root, node: atlas, os: linux}}
  - {type: lxc, name: web, attributes: {vmid: 101, host: atlas, hostname: web}}
  - {type: service, name: nginx, attributes: {unit: nginx.service}}
relationships:
  - {type: runs-on, source: "service:nginx", target: "lxc:web"}
`

// pct status and qm status answers: running, stopped, missing, paused, garbage.
func TestParseGuestStatus(t *testing.T) {
	t.Parallel()
	lxc := Guest{VMID: 101, Kind: checks.GuestLXC, Host: "proxmox-host:atlas"}
	vm := Guest{VMID: 200, Kind: checks.GuestVM, Host: "proxmox-host:atlas"}
	if got := GuestCommand(lxc); got != "pct status 101" {
		t.Errorf("lxc command %q", got)
	}
	if got := GuestCommand(vm); got != "qm status 200" {
		t.Errorf("vm command %q", got)
	}
	tests := []struct {
		name          string
		g             Guest
		res           remote.Result
		health, class string
		running       float64
	}{
		{"running", lxc, remote.Result{Stdout: []byte("status: running\n")}, results.HealthUp, "", 1},
		{"stopped", vm, remote.Result{Stdout: []byte("status: stopped\n")}, results.HealthDown, "", 0},
		{"paused", vm, remote.Result{Stdout: []byte("status: paused\n")}, results.HealthDegraded, "", 0},
		{"missing", lxc, remote.Result{ExitCode: 2, Stderr: []byte("Configuration file 'nodes/atlas/lxc/101.conf' does not exist\n")}, results.HealthDown, "", 0},
		{"other failure", lxc, remote.Result{ExitCode: 255, Stderr: []byte("ipcc_send_rec failed")}, results.HealthUnknown, results.ClassProbe, -1},
		{"no status line", lxc, remote.Result{Stdout: []byte("hello\n")}, results.HealthUnknown, results.ClassParse, -1},
		{"odd status", lxc, remote.Result{Stdout: []byte("status: exploding\n")}, results.HealthUnknown, results.ClassProbe, 0},
		{"stopped on purpose", Guest{VMID: 351, Kind: checks.GuestVM, Host: "proxmox-host:ceres", StoppedOnPurpose: true},
			remote.Result{Stdout: []byte("status: stopped\n")}, results.HealthUp, "", 0},
	}
	for _, tc := range tests {
		r := ParseGuestStatus(tc.g, tc.res)
		if r.Health != tc.health || r.Class != tc.class {
			t.Errorf("%s: %s [%s] %s, want %s [%s]", tc.name, r.Health, r.Class, r.Reason, tc.health, tc.class)
			continue
		}
		if tc.running >= 0 {
			if v, ok := metricValue(r, "guest_running"); !ok || v != tc.running {
				t.Errorf("%s: guest_running %v (%v), want %v", tc.name, v, ok, tc.running)
			}
		}
	}
}
