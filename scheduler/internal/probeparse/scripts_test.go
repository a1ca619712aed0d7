package probeparse

import (
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/scheduler/internal/results"
	"github.com/oikos-hq/oikos/shared/checks"
)

const (
	linuxMeminfo = `MemTotal:        8044856 kB
MemFree:          512344 kB
MemAvailable:    4022428 kB
Buffers:          102400 kB
Cached:          2400000 kB
SwapTotal:       1048576 kB
SwapFree:         786432 kB
`
	oldKernelMeminfo = `MemTotal:        1000000 kB
MemFree:          100000 kB
Buffers:           50000 kB
Cached:           150000 kB
`
	darwinMemory = `34359738368
Mach Virtual Memory Statistics: (page size of 16384 bytes)
Pages free:                              100000.
Pages active:                            900000.
Pages inactive:                          300000.
Pages speculative:                       100000.
Pages throttled:                              0.
Pages wired down:                        400000.
`
	darwinTop = `Processes: 612 total, 3 running, 609 sleeping, 2811 threads
2026/11/30 09:00:00
Load Avg: 1.10, 1.20, 1.30
CPU usage: 3.50% user, 2.10% sys, 94.40% idle
SharedLibs: 512M resident, 96M data, 48M linkedit.

Processes: 612 total, 3 running, 609 sleeping, 2811 threads
2026/11/30 09:00:01
Load Avg: 1.10, 1.20, 1.30
CPU usage: 12.25% user, 7.50% sys, 80.25% idle
SharedLibs: 512M resident, 96M data, 48M linkedit.
`
	gnuDF = `Filesystem     1024-blocks     Used Available Capacity Mounted on
/dev/mapper/pve-root  98559220 44351649  49158023      48% /
`
	darwinDF = `Filesystem     1024-blocks      Used Available Capacity  Mounted on
/dev/disk3s1s1   971350180 961636678   9713502    99%    /
`
)

func TestScriptParsers(t *testing.T) {
	t.Parallel()
	linux := func(script string, args ...string) Spec {
		return Spec{Script: script, OS: checks.OSLinux, Args: args}
	}
	darwin := func(script string, args ...string) Spec {
		return Spec{Script: script, OS: checks.OSDarwin, Args: args}
	}
	tests := []struct {
		name     string
		spec     Spec
		out      string
		exit     int
		health   string
		class    string
		metric   string
		value    float64
		reasonIn string
	}{
		{name: "linux memory uses MemAvailable", spec: linux("memory"), out: linuxMeminfo,
			health: results.HealthUp, metric: "mem_used_pct", value: 50.0},
		{name: "old kernel memory falls back to free+buffers+cached", spec: linux("memory"), out: oldKernelMeminfo,
			health: results.HealthUp, metric: "mem_used_pct", value: 70},
		{name: "darwin memory from sysctl and vm_stat", spec: darwin("memory"), out: darwinMemory,
			health: results.HealthUp, metric: "mem_used_pct", value: 76.16},
		{name: "linux memory garbage", spec: linux("memory"), out: "hello\n", health: results.HealthUnknown, class: results.ClassParse},
		{name: "darwin cpu reads the last sample", spec: darwin("cpu"), out: darwinTop,
			health: results.HealthUp, metric: "cpu_pct", value: 19.75},
		{name: "darwin cpu without a CPU line", spec: darwin("cpu"), out: "Processes: 1 total\n", health: results.HealthUnknown, class: results.ClassParse},
		{name: "gnu df", spec: linux("disk"), out: gnuDF, health: results.HealthUp, metric: "disk_used_pct", value: 47.43},
		{name: "darwin df nearly full is down", spec: darwin("disk"), out: darwinDF, health: results.HealthDown, metric: "disk_used_pct", value: 99.0},
		{name: "df without rows", spec: linux("disk"), out: "Filesystem 1024-blocks Used Available Capacity Mounted on\n",
			health: results.HealthUnknown, class: results.ClassParse},
		{name: "linux load", spec: linux("load"), out: "0.52 0.61 0.70 1/234 5678\n4\n",
			health: results.HealthUp, metric: "load_per_cpu", value: 0.15},
		{name: "linux load too high degrades", spec: linux("load"), out: "9.00 9.10 8.00 1/234 5678\n4\n",
			health: results.HealthDegraded, metric: "load5", value: 9.1},
		{name: "darwin load from sysctl", spec: darwin("load"), out: "{ 2.10 1.90 1.80 }\n12\n",
			health: results.HealthUp, metric: "load1", value: 2.1},
		{name: "process active", spec: linux("process", "jellyfin.service"), out: "active\n", exit: 0,
			health: results.HealthUp, metric: "process_up", value: 1, reasonIn: "jellyfin.service"},
		{name: "process inactive is down, not an error", spec: linux("process", "jellyfin.service"), out: "inactive\n", exit: 3,
			health: results.HealthDown, metric: "process_up", value: 0, reasonIn: "jellyfin.service inactive"},
		{name: "process failed", spec: linux("process", "gitea.service"), out: "failed\n", exit: 3,
			health: results.HealthDown, reasonIn: "gitea.service failed"},
		{name: "process activating degrades", spec: linux("process", "x.service"), out: "activating\n", exit: 3, health: results.HealthDegraded},
		{name: "process odd answer", spec: linux("process", "x.service"), out: "", exit: 1, health: results.HealthUnknown, class: results.ClassParse},
		{name: "darwin process found", spec: darwin("process", "syncthing"), out: "412\n413\n", exit: 0,
			health: results.HealthUp, reasonIn: "2 process"},
		{name: "darwin process missing", spec: darwin("process", "syncthing"), out: "", exit: 1, health: results.HealthDown},
		{name: "darwin pgrep error", spec: darwin("process", "syncthing"), out: "", exit: 2, health: results.HealthUnknown, class: results.ClassProbe},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := scripts[tc.spec.Script].Parse(tc.spec, tc.out, tc.exit, &State{})
			if r.Health != tc.health {
				t.Fatalf("health %q (%s), want %q", r.Health, r.Reason, tc.health)
			}
			if r.Class != tc.class {
				t.Errorf("class %q, want %q", r.Class, tc.class)
			}
			if (r.Class == "") != r.Observed {
				t.Errorf("observed %v with class %q", r.Observed, r.Class)
			}
			if tc.reasonIn != "" && !strings.Contains(r.Reason, tc.reasonIn) {
				t.Errorf("reason %q lacks %q", r.Reason, tc.reasonIn)
			}
			if tc.metric != "" {
				got, ok := metricValue(r, tc.metric)
				if !ok {
					t.Fatalf("no metric %s in %+v", tc.metric, r.Metrics)
				}
				if diff := got - tc.value; diff > 0.01 || diff < -0.01 {
					t.Errorf("%s = %v, want %v", tc.metric, got, tc.value)
				}
			}
		})
	}
}

func metricValue(r results.Result, name string) (float64, bool) {
	for _, m := range r.Metrics {
		if m.Name == name {
			return m.Value, true
		}
	}
	return 0, false
}

// Linux cpu is the busy share between two runs, not since boot.
func TestLinuxCPUUsesTheDeltaBetweenRuns(t *testing.T) {
	t.Parallel()
	spec := Spec{Script: "cpu", OS: checks.OSLinux}
	st := &State{}
	// Since boot: 900 busy of 10000 → 9%.
	first := parseCPU(spec, "cpu  500 0 300 9000 100 0 100 0 0 0\n", 0, st)
	if v, _ := metricValue(first, "cpu_pct"); v < 8.99 || v > 9.01 || first.Summary["window"] != "since boot" {
		t.Fatalf("first run: %v %v", v, first.Summary)
	}
	// Next: +1000 jiffies of which 500 idle → 50%.
	second := parseCPU(spec, "cpu  900 0 400 9500 100 0 100 0 0 0\n", 0, st)
	if v, _ := metricValue(second, "cpu_pct"); v < 49.99 || v > 50.01 || second.Summary["window"] != "since the previous run" {
		t.Fatalf("second run: %v %v", v, second.Summary)
	}
	// Counters that went backwards (a reboot) fall back to since boot instead of nonsense.
	third := parseCPU(spec, "cpu  100 0 100 700 100 0 0 0 0 0\n", 0, st)
	if v, _ := metricValue(third, "cpu_pct"); v < 19.99 || v > 20.01 {
		t.Fatalf("after reboot: %v", v)
	}
}

func TestScriptCommands(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec Spec
		want string
	}{
		{Spec{Script: "cpu", OS: "linux"}, `read -r l < /proc/stat && echo "$l"`},
		{Spec{Script: "cpu", OS: "darwin"}, "top -l 2 -n 0 -s 1"},
		{Spec{Script: "memory", OS: "darwin"}, "sysctl -n hw.memsize; vm_stat"},
		{Spec{Script: "memory", OS: "linux"}, `while read -r k v u; do case $k in MemTotal:|MemFree:|MemAvailable:|Buffers:|Cached:|SwapTotal:) echo "$k $v";; ` +
			`SwapFree:) echo "$k $v"; break;; esac; done < /proc/meminfo`},
		{Spec{Script: "load", OS: "linux"}, `read -r l < /proc/loadavg && echo "$l" && n=0 && while read -r c r; do case $c in cpu) ;; ` +
			`cpu[0-9]*) n=$((n+1));; *) break;; esac; done < /proc/stat && echo "$n"`},
		{Spec{Script: "process", OS: "linux", Args: []string{"jellyfin.service"}}, "systemctl is-active jellyfin.service"},
		{Spec{Script: "process", OS: "linux", Args: []string{"odd unit$(x)"}}, "systemctl is-active 'odd unit$(x)'"},
		{Spec{Script: "process", OS: "darwin", Args: []string{"syncthing"}}, "pgrep -f syncthing"},
	}
	for _, tc := range tests {
		got, err := scripts[tc.spec.Script].Command(tc.spec)
		if err != nil || got != tc.want {
			t.Errorf("%+v: %q, %v; want %q", tc.spec, got, err, tc.want)
		}
	}
}
