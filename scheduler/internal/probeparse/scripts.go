package probeparse

import (
	"bufio"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/oikos-hq/oikos/scheduler/internal/results"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/remote"
)

// Thresholds of the ssh-script probes. CPU, memory and load only ever degrade a target: a
// busy machine is not a down one. A nearly full root filesystem is down: services fail to
// write long before it reaches 100%.
const (
	cpuDegradedPct     = 90
	memDegradedPct     = 90
	diskDegradedPct    = 90
	diskDownPct        = 98
	loadDegradedByCore = 2.0
)

// Spec is an ssh-script check's parsed config (shared/checks documents the keys).
type Spec struct {
	Script string
	Args   []string
	OS     string
}

// Script builds a probe's command for an OS and parses its output. Commands are plain
// reads that exist on a stock Debian, Proxmox or macOS install (nothing is deployed on the
// target) and run under pct exec's minimal PATH. They run as a line of the host's probe
// shell (remote.Pool.Probe), so on Linux cpu, memory and load use only shell builtins (read
// loops over /proc): starting a process is the dominant cost of a check on the target.
type Script struct {
	Command func(s Spec) (string, error)
	// Parse reads stdout and the exit status. Unless AnswersWithExit, a non-zero exit is a
	// probe failure the runner reports before Parse is called.
	Parse           func(s Spec, out string, exit int, st *State) results.Result
	AnswersWithExit bool
}

var scripts = map[string]Script{
	ontology.ScriptCPU:    {Command: cpuCommand, Parse: parseCPU},
	ontology.ScriptMemory: {Command: memoryCommand, Parse: parseMemory},
	ontology.ScriptDisk:   {Command: diskCommand, Parse: parseDisk},
	ontology.ScriptLoad:   {Command: loadCommand, Parse: parseLoad},
	// systemctl is-active exits 3 for an inactive unit and pgrep 1 for no match: answers.
	ontology.ScriptProcess: {Command: processCommand, Parse: parseProcess, AnswersWithExit: true},
}

// Lookup returns the script called name (cpu, memory, disk, load, process).
func Lookup(name string) (Script, bool) {
	s, ok := scripts[name]
	return s, ok
}

// State is what a check's parser remembers between runs: the previous /proc/stat
// counters, so Linux cpu is the busy share since the last run rather than since boot.
// The zero State is ready; it is safe for concurrent use.
type State struct {
	mu      sync.Mutex
	cpu     cpuCounters
	haveCPU bool
}

// Reset forgets the previous run (the check's definition changed).
func (st *State) Reset() {
	st.mu.Lock()
	st.haveCPU = false
	st.mu.Unlock()
}

type cpuCounters struct{ total, idle float64 }

func cpuCommand(s Spec) (string, error) {
	if s.OS == checks.OSDarwin {
		// The first sample of top -l covers no interval worth reading; the second covers
		// the one second between them. (The original probe read /proc on macOS and always
		// reported 0.)
		return "top -l 2 -n 0 -s 1", nil
	}
	// The shell's own read: no process besides the shell sshd (or pct exec) starts anyway.
	// Creating a process is the dominant cost of a check on the target.
	return `read -r l < /proc/stat && echo "$l"`, nil
}

func parseCPU(s Spec, out string, _ int, st *State) results.Result {
	if s.OS == checks.OSDarwin {
		line := lastLineWith(out, "CPU usage:")
		if line == "" {
			return results.Unknown(results.ClassParse, "top -l printed no CPU usage line")
		}
		idle, ok := percentBefore(line, "idle")
		if !ok {
			return results.Unknown(results.ClassParse, "cannot read the idle share from %q", line)
		}
		user, _ := percentBefore(line, "user")
		sys, _ := percentBefore(line, "sys")
		return cpuResult(100-idle, "last second (top -l)", map[string]any{"user_pct": Round2(user), "sys_pct": Round2(sys)})
	}
	line := firstLineWith(out, "cpu ")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return results.Unknown(results.ClassParse, "/proc/stat has no aggregate cpu line")
	}
	var vals []float64
	for _, x := range f[1:] {
		v, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return results.Unknown(results.ClassParse, "/proc/stat cpu line: %q is not a number", x)
		}
		vals = append(vals, v)
	}
	// user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is
	// already counted in user, so only the first eight are summed.
	var cur cpuCounters
	for i, v := range vals {
		if i >= 8 {
			break
		}
		cur.total += v
	}
	cur.idle = vals[3]
	if len(vals) > 4 {
		cur.idle += vals[4]
	}
	st.mu.Lock()
	prev, have := st.cpu, st.haveCPU
	st.cpu, st.haveCPU = cur, true
	st.mu.Unlock()
	window := "since boot"
	dt, di := cur.total, cur.idle
	if have && cur.total > prev.total && cur.idle >= prev.idle {
		dt, di = cur.total-prev.total, cur.idle-prev.idle
		window = "since the previous run"
	}
	if dt <= 0 {
		return results.Unknown(results.ClassParse, "/proc/stat counters did not advance")
	}
	return cpuResult(100*(1-di/dt), window, nil)
}

func cpuResult(pct float64, window string, extra map[string]any) results.Result {
	pct = math.Max(0, math.Min(100, pct))
	r := results.Observed(results.HealthUp, "cpu %.1f%%", pct)
	if pct >= cpuDegradedPct {
		r = results.Observed(results.HealthDegraded, "cpu %.1f%% (>= %d%%)", pct, cpuDegradedPct)
	}
	r.Summary = map[string]any{"cpu_pct": Round2(pct), "window": window}
	for k, v := range extra {
		r.Summary[k] = v
	}
	r.Metrics = []results.Metric{{Name: "cpu_pct", Value: Round2(pct)}}
	return r
}

func memoryCommand(s Spec) (string, error) {
	if s.OS == checks.OSDarwin {
		return "sysctl -n hw.memsize; vm_stat", nil
	}
	// Only the lines parseMemory reads, up to SwapFree (the 16th or so of ~50): the shell's
	// read takes a file a byte at a time.
	return `while read -r k v u; do case $k in MemTotal:|MemFree:|MemAvailable:|Buffers:|Cached:|SwapTotal:) echo "$k $v";; ` +
		`SwapFree:) echo "$k $v"; break;; esac; done < /proc/meminfo`, nil
}

func parseMemory(s Spec, out string, _ int, _ *State) results.Result {
	var totalKB, availKB, swapTotal, swapFree float64
	if s.OS == checks.OSDarwin {
		sc := bufio.NewScanner(strings.NewReader(out))
		var memsize, page float64
		pages := map[string]float64{}
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if memsize == 0 {
				if v, err := strconv.ParseFloat(line, 64); err == nil {
					memsize = v
					continue
				}
			}
			if strings.HasPrefix(line, "Mach Virtual Memory Statistics") {
				if i := strings.Index(line, "page size of "); i >= 0 {
					f := strings.Fields(line[i+len("page size of "):])
					if len(f) > 0 {
						page, _ = strconv.ParseFloat(f[0], 64)
					}
				}
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			n, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), "."), 64)
			if err == nil {
				pages[strings.TrimSpace(k)] = n
			}
		}
		if memsize <= 0 || page <= 0 {
			return results.Unknown(results.ClassParse, "sysctl hw.memsize / vm_stat printed no memory size or page size")
		}
		totalKB = memsize / 1024
		availKB = (pages["Pages free"] + pages["Pages inactive"] + pages["Pages speculative"]) * page / 1024
	} else {
		kv := map[string]float64{}
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			f := strings.Fields(v)
			if len(f) == 0 {
				continue
			}
			if n, err := strconv.ParseFloat(f[0], 64); err == nil {
				kv[strings.TrimSpace(k)] = n
			}
		}
		totalKB = kv["MemTotal"]
		if a, ok := kv["MemAvailable"]; ok {
			availKB = a
		} else {
			availKB = kv["MemFree"] + kv["Buffers"] + kv["Cached"]
		}
		swapTotal, swapFree = kv["SwapTotal"], kv["SwapFree"]
	}
	if totalKB <= 0 {
		return results.Unknown(results.ClassParse, "no total memory figure in the output")
	}
	pct := math.Max(0, math.Min(100, 100*(1-availKB/totalKB)))
	r := results.Observed(results.HealthUp, "memory %.1f%% used", pct)
	if pct >= memDegradedPct {
		r = results.Observed(results.HealthDegraded, "memory %.1f%% used (>= %d%%)", pct, memDegradedPct)
	}
	r.Summary = map[string]any{"mem_used_pct": Round2(pct), "mem_total_mb": math.Round(totalKB / 1024)}
	r.Metrics = []results.Metric{{Name: "mem_used_pct", Value: Round2(pct)}}
	if swapTotal > 0 {
		sp := Round2(100 * (1 - swapFree/swapTotal))
		r.Summary["swap_used_pct"] = sp
		r.Metrics = append(r.Metrics, results.Metric{Name: "swap_used_pct", Value: sp})
	}
	return r
}

func diskCommand(Spec) (string, error) {
	// POSIX output with 1024-byte blocks on both GNU and BSD df.
	return "df -P -k /", nil
}

func parseDisk(_ Spec, out string, _ int, _ *State) results.Result {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		return results.Unknown(results.ClassParse, "df printed no filesystem line")
	}
	// Read from the right: a filesystem name may contain spaces, the mount point "/" not.
	f := strings.Fields(lines[len(lines)-1])
	if len(f) < 6 {
		return results.Unknown(results.ClassParse, "df line %q has too few columns", lines[len(lines)-1])
	}
	n := len(f)
	used, err1 := strconv.ParseFloat(f[n-4], 64)
	avail, err2 := strconv.ParseFloat(f[n-3], 64)
	if err1 != nil || err2 != nil || used+avail <= 0 {
		return results.Unknown(results.ClassParse, "df line %q has no used/available figures", lines[len(lines)-1])
	}
	pct := 100 * used / (used + avail)
	r := results.Observed(results.HealthUp, "disk / %.1f%% used", pct)
	switch {
	case pct >= diskDownPct:
		r = results.Observed(results.HealthDown, "disk / %.1f%% used (>= %d%%)", pct, diskDownPct)
	case pct >= diskDegradedPct:
		r = results.Observed(results.HealthDegraded, "disk / %.1f%% used (>= %d%%)", pct, diskDegradedPct)
	}
	r.Summary = map[string]any{"disk_used_pct": Round2(pct), "disk_avail_gb": Round2(avail / 1024 / 1024), "mount": "/"}
	r.Metrics = []results.Metric{{Name: "disk_used_pct", Value: Round2(pct)}}
	return r
}

func loadCommand(s Spec) (string, error) {
	if s.OS == checks.OSDarwin {
		return "sysctl -n vm.loadavg hw.ncpu", nil
	}
	// The cpu count is the number of cpuN lines of /proc/stat (the cpus online, what nproc
	// reports outside a restricted affinity; lxcfs shows a container its own), counted by the
	// shell rather than by starting nproc.
	return `read -r l < /proc/loadavg && echo "$l" && n=0 && while read -r c r; do case $c in cpu) ;; cpu[0-9]*) n=$((n+1));; ` +
		`*) break;; esac; done < /proc/stat && echo "$n"`, nil
}

func parseLoad(_ Spec, out string, _ int, _ *State) results.Result {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		return results.Unknown(results.ClassParse, "expected the load averages and the cpu count, got %q", strings.TrimSpace(out))
	}
	f := strings.Fields(strings.NewReplacer("{", " ", "}", " ").Replace(lines[0]))
	if len(f) < 3 {
		return results.Unknown(results.ClassParse, "load line %q has fewer than three figures", lines[0])
	}
	var loads [3]float64
	for i := range loads {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return results.Unknown(results.ClassParse, "load line %q: %q is not a number", lines[0], f[i])
		}
		loads[i] = v
	}
	cpus, err := strconv.Atoi(strings.TrimSpace(lines[len(lines)-1]))
	if err != nil || cpus <= 0 {
		return results.Unknown(results.ClassParse, "cpu count %q is not a positive integer", strings.TrimSpace(lines[len(lines)-1]))
	}
	per := loads[1] / float64(cpus)
	r := results.Observed(results.HealthUp, "load %.2f on %d cpus", loads[1], cpus)
	if per >= loadDegradedByCore {
		r = results.Observed(results.HealthDegraded, "load %.2f on %d cpus (>= %.0f per cpu)", loads[1], cpus, loadDegradedByCore)
	}
	r.Summary = map[string]any{"load1": loads[0], "load5": loads[1], "load15": loads[2], "cpus": cpus, "load_per_cpu": Round2(per)}
	r.Metrics = []results.Metric{{Name: "load1", Value: loads[0]}, {Name: "load5", Value: loads[1]}, {Name: "load15", Value: loads[2]}, {Name: "load_per_cpu", Value: Round2(per)}}
	return r
}

func processCommand(s Spec) (string, error) {
	unit, err := remote.QuoteArg(s.Args[0])
	if err != nil {
		return "", err
	}
	if s.OS == checks.OSDarwin {
		// launchd has no is-active; a running process whose command line names it is the
		// closest portable answer.
		return "pgrep -f " + unit, nil
	}
	return "systemctl is-active " + unit, nil
}

// parseProcess reads is-active's word (Linux) or pgrep's exit status (macOS).
func parseProcess(s Spec, body string, code int, _ *State) results.Result {
	unit := s.Args[0]
	var r results.Result
	if s.OS == checks.OSDarwin {
		switch code {
		case 0:
			n := len(strings.Fields(body))
			r = results.Observed(results.HealthUp, "%s running (%d process(es))", unit, n)
			r.Summary = map[string]any{"unit": unit, "state": "running", "processes": n}
		case 1:
			r = results.Observed(results.HealthDown, "no process matches %s", unit)
			r.Summary = map[string]any{"unit": unit, "state": "not running"}
		default:
			return results.Unknown(results.ClassProbe, "pgrep -f %s exited %d: %s", unit, code, strings.TrimSpace(body))
		}
	} else {
		state := strings.TrimSpace(FirstLine(body))
		switch state {
		case "active":
			r = results.Observed(results.HealthUp, "%s active", unit)
		case "activating", "reloading", "deactivating", "refreshing":
			r = results.Observed(results.HealthDegraded, "%s %s", unit, state)
		case "inactive", "failed", "dead":
			r = results.Observed(results.HealthDown, "%s %s", unit, state)
		case "unknown":
			r = results.Observed(results.HealthDown, "%s unknown to systemd", unit)
		default:
			return results.Unknown(results.ClassParse, "systemctl is-active %s exited %d and printed %q", unit, code, state)
		}
		r.Summary = map[string]any{"unit": unit, "state": state}
	}
	v := 0.0
	if r.Health == results.HealthUp {
		v = 1
	}
	r.Metrics = []results.Metric{{Name: "process_up", Value: v}}
	return r
}

// FirstLine is s up to its first newline.
func FirstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func firstLineWith(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

func lastLineWith(out, sub string) string {
	lines := strings.Split(out, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], sub) {
			return lines[i]
		}
	}
	return ""
}

// percentBefore finds "<n>% <word>" in line and returns n.
func percentBefore(line, word string) (float64, bool) {
	for _, part := range strings.Split(line, ",") {
		part = strings.TrimSpace(part)
		if i := strings.LastIndex(part, ":"); i >= 0 {
			part = strings.TrimSpace(part[i+1:])
		}
		num, rest, ok := strings.Cut(part, "%")
		if !ok || strings.TrimSpace(rest) != word {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err == nil {
			return v, true
		}
	}
	return 0, false
}

// Round2 keeps two decimals: the precision every figure a probe reports is stored with.
func Round2(v float64) float64 { return math.Round(v*100) / 100 }

// Describe names a probe in reasons: "cpu", "process jellyfin.service".
func Describe(s Spec) string {
	if s.Script == ontology.ScriptProcess && len(s.Args) > 0 {
		return fmt.Sprintf("%s %s", s.Script, s.Args[0])
	}
	return s.Script
}
