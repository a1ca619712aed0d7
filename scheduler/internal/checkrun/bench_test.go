package checkrun

// Benchmarks of issue 6 (figures in docs/benchmarks.md).
//
// BenchmarkRunnerLabsim: 20 Proxmox hosts × 100 LXCs in labsim, one ssh-script check per
// guest through pct exec, plus 200 http checks against a local HTTP server. labsim and the
// HTTP server run in a child process (this test binary re-executed), so the CPU measured
// from /proc/self is the scheduler's alone (Postgres is its own process too). Phases:
// nominal (60 s intervals), stress (ssh every 10 s, http every 2 s: 300 checks/s offered) and
// http only (100 checks/s).
//
// BenchmarkRunnerSSHD: the same ssh-script checks (2000, 100 per "host") against a real
// OpenSSH sshd with 20 loopback ports, measuring sshd's CPU per check from /proc
// (utime+stime+cutime+cstime over its whole process tree; the probe shells are part of
// it), and, for comparison, one probe run 100 times on the pooled connection's probe shell,
// as a session of its own per check, and over a fresh SSH connection per check.
//
// Both run for minutes; OIKOS_BENCH_SECONDS scales the measurement windows (default 30).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"

	"github.com/oikos-hq/oikos/scheduler/internal/labtest"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/testkit/labsim"
)

const (
	benchChildEnv = "OIKOS_BENCH_LABSIM_CHILD"
	benchHosts    = 20
	benchGuests   = 100
	benchHTTP     = 200
)

func benchSeconds() time.Duration {
	if s, err := strconv.Atoi(os.Getenv("OIKOS_BENCH_SECONDS")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 30 * time.Second
}

// benchInventory is the generated fleet: hosts h01..h20 at 127.0.30.N:2222, each with 100
// LXCs (vmid 100..199).
func benchInventory() string {
	var b strings.Builder
	b.WriteString("entities:\n")
	for h := 1; h <= benchHosts; h++ {
		fmt.Fprintf(&b, "  - {type: proxmox-host, name: h%02d, attributes: {lan_ipv4: 127.0.30.%d, ssh_port: 2222, user: root, node: h%02d, os: linux, cores: 16, memory_mb: 65536}}\n", h, h, h)
		for g := 0; g < benchGuests; g++ {
			fmt.Fprintf(&b, "  - {type: lxc, name: g%02d-%03d, attributes: {vmid: %d, host: h%02d, hostname: g%02d-%03d, cores: 2, memory_mb: 1024}}\n",
				h, g, 100+g, h, h, g)
		}
	}
	return b.String()
}

// childInfo is what the child process reports once it listens.
type childInfo struct {
	Hosts map[string]string `json:"hosts"` // declared ip:port → actual
	HTTP  string            `json:"http"`
}

// runBenchChild serves labsim (the inventory in the file named by the environment) and a
// plain HTTP server until stdin closes. Called from TestMain.
func runBenchChild(inventoryFile string) int {
	inv, err := os.ReadFile(inventoryFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fl, err := labsim.FleetFromInventory(inv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "oikos-bench-labsim-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	sim, err := labsim.New(fl, labsim.Options{StateDir: dir, Listen: func(string) string { return "127.0.0.1:0" }, Logger: zerolog.Nop()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := sim.Start(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer sim.Stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok "+r.Host+"\n")
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	info := childInfo{Hosts: map[string]string{}, HTTP: ln.Addr().String()}
	for _, h := range fl.Hosts {
		info.Hosts[h.Addr] = sim.Addr(h.Name)
	}
	if err := json.NewEncoder(os.Stdout).Encode(info); err != nil {
		return 1
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// procCPU is a process's CPU time (utime+stime, plus cutime+cstime of reaped children).
func procCPU(pid string) (time.Duration, error) {
	raw, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0, err
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("odd /proc/%s/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// After the comm: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
	var ticks int64
	for _, k := range []int{11, 12, 13, 14} {
		n, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100), nil // CLK_TCK is 100 on Linux
}

// treeCPU sums procCPU over root and all its live descendants.
func treeCPU(root int) time.Duration {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(raw)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if len(f) > 1 {
			pp, _ := strconv.Atoi(f[1])
			parent[pid] = pp
		}
	}
	in := func(pid int) bool {
		for i := 0; i < 64 && pid > 1; i++ {
			if pid == root {
				return true
			}
			pid = parent[pid]
		}
		return false
	}
	var total time.Duration
	for pid := range parent {
		if in(pid) {
			if d, err := procCPU(strconv.Itoa(pid)); err == nil {
				total += d
			}
		}
	}
	return total
}

// phaseResult is what one measured window found.
type phaseResult struct {
	name         string
	window       time.Duration
	runs         int64
	checksPerSec float64
	cpu          time.Duration // this process
	cpuPct       float64
	cpuPerCheck  time.Duration
	lagP50       float64
	lagP99       float64
	lagMax       float64
	overruns     int64
	failures     map[string]float64
	sshConns     int
	sshdPerCheck time.Duration // sshd's CPU per check (BenchmarkRunnerSSHD)
}

func (p phaseResult) String() string {
	s := fmt.Sprintf("%-34s %4.0fs  runs %6d  %6.1f checks/s  cpu %5.1f%% (%.3f ms/check)  lag p50 %.3fs p99 %.3fs max %.3fs  overruns %d  ssh conns %d  failures %v",
		p.name, p.window.Seconds(), p.runs, p.checksPerSec, p.cpuPct, float64(p.cpuPerCheck.Microseconds())/1000,
		p.lagP50, p.lagP99, p.lagMax, p.overruns, p.sshConns, p.failures)
	if p.sshdPerCheck > 0 {
		s += fmt.Sprintf("  sshd %.3f ms/check", float64(p.sshdPerCheck.Microseconds())/1000)
	}
	return s
}

// measure starts a runner over the definitions in the database, lets it warm up, then
// measures a window; with sshdPIDs it also measures those sshd process trees.
func measure(b *testing.B, name string, opts Options, warm, window time.Duration, sshdPIDs []int) phaseResult {
	b.Helper()
	opts.Metrics = metrics.NewRegistry()
	opts.Logger = zerolog.Nop()
	r, err := NewRunner(opts)
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer r.Stop()
	timer := time.NewTimer(warm)
	<-timer.C
	runs0 := r.Status().RunsTotal
	cpu0, _ := procCPU("self")
	sshd0 := sshdCPU(sshdPIDs)
	// Lag quantiles over the window only.
	r.lagMu.Lock()
	r.lags, r.lagPos = r.lags[:0], 0
	r.lagMu.Unlock()
	start := time.Now()
	timer.Reset(window)
	<-timer.C
	elapsed := time.Since(start)
	cpu1, _ := procCPU("self")
	st := r.Status()
	res := phaseResult{name: name, window: elapsed, runs: st.RunsTotal - runs0, cpu: cpu1 - cpu0,
		lagP50: st.LagP50Seconds, lagP99: st.LagP99Seconds, lagMax: st.LagMaxSeconds, overruns: st.OverrunsTotal,
		failures: st.FailuresByReason, sshConns: st.SSHConnections}
	res.checksPerSec = float64(res.runs) / elapsed.Seconds()
	res.cpuPct = 100 * res.cpu.Seconds() / elapsed.Seconds()
	if res.runs > 0 {
		res.cpuPerCheck = res.cpu / time.Duration(res.runs)
		if len(sshdPIDs) > 0 {
			res.sshdPerCheck = (sshdCPU(sshdPIDs) - sshd0) / time.Duration(res.runs)
		}
	}
	b.Log(res.String())
	return res
}

func setIntervals(b *testing.B, lab *labtest.Lab, kind string, interval time.Duration) {
	b.Helper()
	if _, err := lab.DB.Exec(context.Background(), `UPDATE check_defs SET interval_seconds = $2, timeout_seconds = LEAST(timeout_seconds, $2),
enabled = true, updated_at = now() WHERE kind = $1`, kind, int(interval.Seconds())); err != nil {
		b.Fatal(err)
	}
}

func enableKind(b *testing.B, lab *labtest.Lab, kind string, on bool) {
	b.Helper()
	if _, err := lab.DB.Exec(context.Background(), `UPDATE check_defs SET enabled = $2, updated_at = now() WHERE kind = $1`, kind, on); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkRunnerLabsim(b *testing.B) {
	if testing.Short() {
		b.Skip("minutes long")
	}
	window := benchSeconds()
	dir := b.TempDir()
	invFile := filepath.Join(dir, "inventory.yaml")
	inv := benchInventory()
	if err := os.WriteFile(invFile, []byte(inv), 0o600); err != nil {
		b.Fatal(err)
	}
	var info childInfo
	child := startBenchChild(b, benchChildEnv+"="+invFile, &info)
	childPID := strconv.Itoa(child.Process.Pid)

	// The graph: the fleet plus 200 ingress routes whose url names the local server.
	_, port, _ := net.SplitHostPort(info.HTTP)
	var routes strings.Builder
	names := map[string]string{}
	for i := 0; i < benchHTTP; i++ {
		host := fmt.Sprintf("svc%03d.lab.example", i)
		names[host] = "127.0.0.1"
		fmt.Fprintf(&routes, "  - {type: ingress-route, name: %s, attributes: {url: \"http://%s:%s/health\"}}\n", host, host, port)
	}
	lab := labtest.New(b, labtest.Options{Inventory: []byte(inv + routes.String()), NoSim: true})
	lab.SSH = remote.NewPool(remote.PoolOptions{
		Signer: labtest.Signer(b), HostKeys: remote.NewMemoryHostKeys(), Logger: zerolog.Nop(),
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			actual, ok := info.Hosts[addr]
			if !ok {
				return nil, fmt.Errorf("no simulated host at %s", addr)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, actual)
		},
	})
	defer lab.SSH.Close()
	defs := lab.DeriveChecks(b, func(t checks.Target, d *checks.Def) bool {
		switch {
		case t.Type == "lxc":
			return d.Kind == "ssh-script" && d.Config["script"] == "cpu"
		case t.Type == "ingress-route":
			return d.Kind == "http"
		}
		return false
	})
	b.Logf("%d checks (%d ssh-script through pct exec on %d hosts, %d http)", len(defs), benchHosts*benchGuests, benchHosts, benchHTTP)
	base := Options{Pool: lab.DB, SSH: lab.SSH, Fleet: lab.Fleet, NameMap: names, Concurrency: DefaultConcurrency}

	b.ResetTimer()
	var results []phaseResult
	// Nominal: every check on its 60 s interval; first runs spread over the interval.
	setIntervals(b, lab, "ssh-script", 60*time.Second)
	setIntervals(b, lab, "http", 60*time.Second)
	nominal := base
	nominal.InitialSpread = 60 * time.Second
	childCPU0, _ := procCPU(childPID)
	results = append(results, measure(b, "nominal (60 s intervals)", nominal, 15*time.Second, 2*window, nil))
	childCPU1, _ := procCPU(childPID)

	// Stress: 200 ssh-script/s + 100 http/s offered.
	setIntervals(b, lab, "ssh-script", 10*time.Second)
	setIntervals(b, lab, "http", 2*time.Second)
	stress := base
	stress.InitialSpread = 10 * time.Second
	results = append(results, measure(b, "stress (300 checks/s offered)", stress, 12*time.Second, window, nil))
	childCPU2, _ := procCPU(childPID)

	// HTTP only, 100 checks/s.
	enableKind(b, lab, "ssh-script", false)
	httpOnly := base
	httpOnly.InitialSpread = 2 * time.Second
	results = append(results, measure(b, "http only (100 checks/s)", httpOnly, 5*time.Second, window, nil))
	b.StopTimer()

	dials := 0
	for addr := range info.Hosts {
		dials += lab.SSH.DialCount(addr)
	}
	var stored int
	_ = lab.DB.QueryRow(context.Background(), `SELECT count(*) FROM check_results`).Scan(&stored)
	b.Logf("labsim child cpu: nominal %s, stress %s (it runs the 2000 guests' shells and the HTTP server)",
		childCPU1-childCPU0, childCPU2-childCPU1)
	b.Logf("ssh dials over the whole run: %d for %d hosts; check_results rows %d", dials, benchHosts, stored)
	b.ReportMetric(results[0].checksPerSec, "nominal-checks/s")
	b.ReportMetric(results[0].cpuPct, "nominal-cpu-%")
	b.ReportMetric(results[1].checksPerSec, "stress-checks/s")
	b.ReportMetric(results[1].lagP99, "stress-lag-p99-s")
	b.ReportMetric(float64(results[1].cpuPerCheck.Microseconds())/1000, "stress-cpu-ms/check")
	b.ReportMetric(float64(results[2].cpuPerCheck.Microseconds())/1000, "http-cpu-ms/check")
	b.ReportMetric(float64(dials), "ssh-dials")
}

// startSSHD runs /usr/sbin/sshd on the given loopback ports, accepting key, and returns the
// pids of the listening sshd processes (one per ten ports: sshd listens on at most 16
// sockets).
func startSSHD(b *testing.B, ports []int, key ssh.PublicKey) []int {
	b.Helper()
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		b.Skip("no /usr/sbin/sshd (scripts/test-deps.sh installs openssh-server)")
	}
	dir := b.TempDir()
	hostKey := filepath.Join(dir, "host_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", hostKey).CombinedOutput(); err != nil {
		b.Fatalf("ssh-keygen: %v %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(key), 0o600); err != nil {
		b.Fatal(err)
	}
	// SetEnv SHLVL=1: Debian's bash sources ~/.bashrc for every command run by sshd unless
	// SHLVL says it is nested; on this machine root's .bashrc runs `pyenv init` (about 100
	// processes, ~0.6 s of CPU), which would be measured as sshd's cost of every check.
	// sshd insists on its privilege separation directory.
	_ = os.MkdirAll("/run/sshd", 0o755)
	var pids []int
	for i := 0; i < len(ports); i += 10 {
		var cfg strings.Builder
		for _, p := range ports[i:min(i+10, len(ports))] {
			fmt.Fprintf(&cfg, "Port %d\n", p)
		}
		fmt.Fprintf(&cfg, `ListenAddress 127.0.0.1
HostKey %s
AuthorizedKeysFile %s
PidFile %s
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
SetEnv SHLVL=1
MaxSessions 64
MaxStartups 200:30:400
LogLevel ERROR
`, hostKey, filepath.Join(dir, "authorized_keys"), filepath.Join(dir, fmt.Sprintf("sshd%d.pid", i)))
		cfgFile := filepath.Join(dir, fmt.Sprintf("sshd_config%d", i))
		if err := os.WriteFile(cfgFile, []byte(cfg.String()), 0o600); err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", cfgFile)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		pids = append(pids, cmd.Process.Pid)
	}
	// sshd writes its pid file once it listens (probing the ports would only make it log
	// aborted handshakes).
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < len(ports); i += 10 {
		for {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("sshd%d.pid", i))); err == nil {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("sshd for ports %v did not start", ports[i:min(i+10, len(ports))])
			}
			tick := time.NewTimer(20 * time.Millisecond)
			<-tick.C
		}
	}
	return pids
}

// sshdCPU sums treeCPU over the sshd processes.
func sshdCPU(pids []int) time.Duration {
	var total time.Duration
	for _, p := range pids {
		total += treeCPU(p)
	}
	return total
}

func freePorts(b *testing.B, n int) []int {
	b.Helper()
	var ports []int
	var lns []net.Listener
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	return ports
}

func BenchmarkRunnerSSHD(b *testing.B) {
	if testing.Short() {
		b.Skip("minutes long")
	}
	window := benchSeconds()
	signer := labtest.Signer(b)
	ports := freePorts(b, benchHosts)
	sshdPIDs := startSSHD(b, ports, signer.PublicKey())

	// The graph: 20 machines, one per sshd port, 100 cpu checks on each.
	var inv strings.Builder
	inv.WriteString("entities:\n")
	for i, p := range ports {
		fmt.Fprintf(&inv, "  - {type: host, name: s%02d, attributes: {lan_ipv4: 127.0.0.1, ssh_port: %d, user: root, os: linux}}\n", i+1, p)
	}
	lab := labtest.New(b, labtest.Options{Inventory: []byte(inv.String()), NoSim: true})
	ctx := context.Background()
	err := pg.InTx(ctx, lab.DB, func(tx pgx.Tx) error {
		for i := range ports {
			target := lab.IDs[fmt.Sprintf("host:s%02d", i+1)]
			for k := 0; k < benchGuests; k++ {
				name := fmt.Sprintf("host.s%02d.ssh-script.cpu.%03d", i+1, k)
				eid, did := uuid.NewString(), uuid.NewString()
				if _, err := tx.Exec(ctx, `INSERT INTO entities (id, slug, type, name, state) VALUES ($1, $2, 'check', $3, 'enabled')`, eid, "check:"+name, name); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `INSERT INTO check_defs (id, slug, entity_id, target_id, kind, config, interval_seconds, timeout_seconds)
VALUES ($1, $2, $3, $4, 'ssh-script', '{"script": "cpu", "os": "linux", "args": []}', 60, 10)`, did, "check:"+name, eid, target); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	lab.SSH = remote.NewPool(remote.PoolOptions{Signer: signer, HostKeys: remote.NewMemoryHostKeys(), Logger: zerolog.Nop()})
	defer lab.SSH.Close()
	base := Options{Pool: lab.DB, SSH: lab.SSH, Fleet: lab.Fleet}

	b.ResetTimer()
	var results []phaseResult
	for _, phase := range []struct {
		name     string
		interval time.Duration
		warm     time.Duration
		window   time.Duration
	}{
		{"sshd nominal (60 s intervals)", 60 * time.Second, 15 * time.Second, 2 * window},
		{"sshd stress (200 checks/s offered)", 10 * time.Second, 12 * time.Second, window},
	} {
		setIntervals(b, lab, "ssh-script", phase.interval)
		o := base
		o.InitialSpread = phase.interval
		results = append(results, measure(b, phase.name, o, phase.warm, phase.window, sshdPIDs))
	}

	// For comparison, the same probe run 100 times in a row on one host three ways: as a
	// line of the pooled connection's probe shell (what the runner does), as a session of
	// its own on the pooled connection (the runner before probe shells), and with a fresh
	// connection per check, as the peer monitor does.
	t, _, err := lab.Fleet.Resolve(ctx, lab.IDs["host:s01"])
	if err != nil {
		b.Fatal(err)
	}
	const cmd = `read -r l < /proc/stat && echo "$l"`
	pooled := remote.NewPool(remote.PoolOptions{Signer: signer, HostKeys: remote.NewMemoryHostKeys(), Logger: zerolog.Nop()})
	defer pooled.Close()
	if _, err := pooled.Probe(ctx, t, cmd); err != nil { // connection and shell up
		b.Fatal(err)
	}
	seq := func(name string, run func() error) time.Duration {
		const n = 100
		s0 := sshdCPU(sshdPIDs)
		start := time.Now()
		for i := 0; i < n; i++ {
			if err := run(); err != nil {
				b.Fatalf("%s: %v", name, err)
			}
		}
		per := (sshdCPU(sshdPIDs) - s0) / n
		b.Logf("%-40s sshd %6.2f ms/check (%d sequential checks in %s)", name+":",
			float64(per.Microseconds())/1000, n, time.Since(start).Round(time.Millisecond))
		return per
	}
	shellPer := seq("pooled, probe shell (Probe)", func() error {
		_, err := pooled.Probe(ctx, t, cmd)
		return err
	})
	sessionPer := seq("pooled, a session per check (Exec)", func() error {
		_, err := pooled.Exec(ctx, t, cmd, nil)
		return err
	})
	freshPer := seq("fresh connection per check (peer)", func() error {
		p := remote.NewPool(remote.PoolOptions{Signer: signer, HostKeys: remote.NewMemoryHostKeys(), Logger: zerolog.Nop()})
		defer p.Close()
		_, err := p.Exec(ctx, t, cmd, nil)
		return err
	})
	b.StopTimer()
	b.ReportMetric(results[0].checksPerSec, "nominal-checks/s")
	b.ReportMetric(float64(results[0].sshdPerCheck.Microseconds())/1000, "nominal-sshd-ms/check")
	b.ReportMetric(results[1].checksPerSec, "stress-checks/s")
	b.ReportMetric(float64(results[1].sshdPerCheck.Microseconds())/1000, "stress-sshd-ms/check")
	b.ReportMetric(results[1].lagP99, "stress-lag-p99-s")
	b.ReportMetric(float64(shellPer.Microseconds())/1000, "seq-probe-shell-sshd-ms/check")
	b.ReportMetric(float64(sessionPer.Microseconds())/1000, "seq-session-sshd-ms/check")
	b.ReportMetric(float64(freshPer.Microseconds())/1000, "fresh-conn-sshd-ms/check")
}

// startBenchChild re-executes the test binary as the benchmark's child process (labsim and
// the HTTP servers, so their CPU is not the scheduler's) with env set, decodes the JSON the
// child prints first into info, and stops the child when the benchmark ends (closing its
// stdin is its signal to exit). The returned command exposes the child's pid.
func startBenchChild(b *testing.B, env string, info any) *exec.Cmd {
	b.Helper()
	child := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	child.Env = append(os.Environ(), env)
	stdin, err := child.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = stdin.Close()
		_ = child.Wait()
	})
	if err := json.NewDecoder(bufio.NewReader(stdout)).Decode(info); err != nil {
		b.Fatalf("child: %v", err)
	}
	return child
}
