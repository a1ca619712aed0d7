package system_test

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/coreutils"
	"github.com/oikos-hq/oikos/testkit/labsim/sandbox"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
	"github.com/oikos-hq/oikos/testkit/labsim/system"
)

// clock is a test clock that can be moved forward.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newMachine(t *testing.T, cfg system.Config) (*shell.Shell, *clock) {
	t.Helper()
	clk := &clock{t: time.Date(2026, 7, 13, 10, 15, 2, 0, time.UTC)}
	cfg.Clock = clk.now
	m := system.New(cfg)
	fsys, err := sandbox.New(filepath.Join(t.TempDir(), "m"), m.ProcFiles())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	for _, d := range m.Dirs() {
		if err := fsys.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, data := range m.Files() {
		if err := fsys.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	reg := shell.Registry{}
	coreutils.Register(reg)
	for n, p := range m.Programs() {
		reg[n] = p
	}
	return &shell.Shell{FS: fsys, Programs: reg, Env: m.Env(), Home: m.Home(), Clock: clk.now}, clk
}

func sh(t *testing.T, s *shell.Shell, script string) (string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code := s.Run(ctx, script, shell.Stdio{Stdout: &out, Stderr: &errb})
	return out.String() + errb.String(), code
}

func TestLinuxPrograms(t *testing.T) {
	t.Parallel()
	m, _ := newMachine(t, system.Config{Hostname: "web", Role: system.RoleLXC, Cores: 2, MemoryMB: 2048,
		Units: []string{"nginx"}, Containers: []string{"app"}, Listeners: []system.Listener{{Port: 80, Process: "nginx.service"}},
		Reachable: func(a string) bool { return a == "192.0.2.1" },
		Resolve: func(n string) (string, bool) {
			if n == "db.lab.example" {
				return "192.0.2.30", true
			}
			return "", false
		}})
	for _, tc := range []struct {
		name, script string
		match        string // regular expression over stdout+stderr
		code         int
	}{
		{"uname", "uname -a", `^Linux web 6\.8\.12-4-pve .* x86_64 GNU/Linux\n$`, 0},
		{"uname -r", "uname -r", `^6\.8\.12-4-pve\n$`, 0},
		{"hostname", "hostname; cat /etc/hostname", `^web\nweb\n$`, 0},
		{"os-release", ". /etc/os-release; echo $ID $VERSION_ID", `^debian 12\n$`, 0},
		{"nproc", "nproc", `^2\n$`, 0},
		{"date", "date +%s; date -u '+%F %T'", `^1783937702\n2026-07-13 10:15:02\n$`, 0},
		{"free -b", "free -b", `^ +total +used +free +shared +buff/cache +available\nMem: +\d+ +\d+ +\d+ +\d+ +\d+ +\d+\nSwap: +536870912 +\d+ +\d+\n$`, 0},
		{"free -h", "free -h | sed -n 2p", `^Mem: +2\.0Gi +\d+Mi +[\d.]+[GM]i`, 0},
		{"df -P", "df -P /", `^Filesystem +1024-blocks +Used +Available +Capacity +Mounted on\n/dev/mapper/pve-vm--web--disk--0 +8388608 +\d+ +\d+ +\d+% /\n$`, 0},
		{"df -h", "df -h /var/lib", `^Filesystem +Size +Used +Avail +Use% +Mounted on\n\S+ +8\.0G +[\d.]+G +[\d.]+G +\d+% /\n$`, 0},
		{"df -k", "df -k | head -1", `^Filesystem +1K-blocks +Used +Available +Use% +Mounted on\n$`, 0},
		{"uptime", "uptime", `^ 10:15:02 up \d+ days?, [ \d]\d:\d\d,  1 user,  load average: \d\.\d\d, \d\.\d\d, \d\.\d\d\n$`, 0},
		{"top", "top -bn1 | head -3", `%Cpu\(s\): +[\d.]+ us, +[\d.]+ sy, +0\.0 ni, +[\d.]+ id,`, 0},
		{"loadavg", "cat /proc/loadavg", `^\d\.\d\d \d\.\d\d \d\.\d\d \d+/\d+ \d+\n$`, 0},
		{"meminfo", "grep MemTotal /proc/meminfo", `^MemTotal: +2097152 kB\n$`, 0},
		{"systemctl is-active", "systemctl is-active nginx cron", `^active\nactive\n$`, 0},
		{"systemctl stop/start", "systemctl stop nginx && systemctl is-active nginx; systemctl start nginx.service && systemctl is-active nginx", `^inactive\nactive\n$`, 0},
		{"systemctl status inactive", "systemctl stop cron; systemctl status cron", `○ cron\.service - Regular background program processing daemon\n +Loaded: loaded .*\n +Active: inactive \(dead\)`, 3},
		{"systemctl unknown", "systemctl status nope", `^Unit nope\.service could not be found\.\n$`, 4},
		{"systemctl restart unknown", "systemctl restart nope", `^Failed to restart nope\.service: Unit nope\.service not found\.\n$`, 5},
		{"systemctl is-enabled", "systemctl is-enabled nginx", `^enabled\n$`, 0},
		{"list-units", "systemctl list-units --type=service --no-legend --plain", `(?m)^nginx\.service +loaded active running A high performance web server and a reverse proxy server$`, 0},
		{"journalctl", "journalctl -u nginx -n 2 --no-pager | wc -l", `^2\n$`, 0},
		{"journalctl none", "journalctl -u nope", `^-- No entries --\n$`, 0},
		{"ss", "ss -tlnp", `(?m)^LISTEN .*0\.0\.0\.0:80 .*users:\(\("nginx",pid=\d+,fd=3\)\)$`, 0},
		{"apt update", "apt-get update", `Reading package lists\.\.\. Done\n$`, 0},
		{"apt upgrade -y clears", "apt-get upgrade -y >/dev/null; apt list --upgradable 2>/dev/null", `^Listing\.\.\. Done\n$`, 0},
		{"apt install", "apt-get install -y jq >/dev/null && apt list --installed 2>/dev/null | grep jq", `^jq/stable,now 1\.0-1 amd64 \[installed\]`, 0},
		{"docker ps", "docker ps --format '{{.Names}} {{.State}}'", `^app running\n$`, 0},
		{"docker restart", "docker restart app", `^app\n$`, 0},
		{"docker unknown", "docker restart nope", `^Error response from daemon: No such container: nope\n$`, 1},
		{"docker logs", "docker logs --tail 1 app", `Startup complete\n$`, 0},
		{"docker exec", "docker exec -u root app sh -c 'echo in; echo err >&2; exit 3'", `^in\nerr\n$`, 3},
		{"docker exec unknown", "docker exec nope true", `^Error response from daemon: No such container: nope\n$`, 1},
		{"docker exec stopped", "docker stop app >/dev/null; docker exec app true; docker start app >/dev/null", `^Error response from daemon: container \w+ is not running\n$`, 0},
		{"docker exec no command", "docker exec app", `requires at least 2 arguments`, 1},
		{"getent", "getent hosts db.lab.example localhost", `^192\.0\.2\.30 +db\.lab\.example\n127\.0\.0\.1 +localhost\n$`, 0},
		{"getent miss", "getent hosts nope.example", `^$`, 2},
		{"ping ok", "ping -c 2 -i 0.01 -W 1 192.0.2.1", `2 packets transmitted, 2 received, 0% packet loss`, 0},
		{"ping unknown name", "ping -c 1 nope.example", `^ping: nope\.example: Name or service not known\n$`, 2},
		{"whoami id", "whoami; id -u", `^root\n0\n$`, 0},
		{"ip route", "ip route", `192\.0\.2\.0/24 dev eth0`, 0},
		{"pgrep", "pgrep -x nginx", `^\d+\n$`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := sh(t, m, tc.script)
			if !regexp.MustCompile(tc.match).MatchString(out) || code != tc.code {
				t.Fatalf("%s:\n%s(exit %d, want %d)\ndoes not match %s", tc.script, out, code, tc.code, tc.match)
			}
		})
	}
}

func TestDarwinPrograms(t *testing.T) {
	t.Parallel()
	m, _ := newMachine(t, system.Config{Hostname: "studio", Role: system.RoleDarwin, User: "dana", Cores: 12, MemoryMB: 32768})
	for _, tc := range []struct{ script, match string }{
		{"uname -a", `^Darwin studio 24\.1\.0 Darwin Kernel Version 24\.1\.0: .* arm64\n$`},
		{"sysctl -n hw.ncpu", `^12\n$`},
		{"sysctl -n vm.loadavg", `^\{ \d+\.\d\d \d+\.\d\d \d+\.\d\d \}\n$`},
		{"sysctl hw.memsize", `^hw\.memsize: 34359738368\n$`},
		{"top -l 1 | grep 'CPU usage'", `^CPU usage: \d+\.\d\d% user, \d+\.\d\d% sys, \d+\.\d\d% idle \n$`},
		{"vm_stat | sed -n 2p", `^Pages free: +\d+\.\n$`},
		{"df -h / | head -1", `^Filesystem +Size +Used +Avail +Capacity +iused +ifree +%iused +Mounted on\n$`},
		{"pwd; whoami", `^/Users/dana\ndana\n$`},
		{"systemctl status; free", `zsh: command not found: systemctl\n.*zsh: command not found: free\n`},
		{"cat /proc/loadavg", `No such file or directory`},
	} {
		out, _ := sh(t, m, tc.script)
		if !regexp.MustCompile(tc.match).MatchString(out) {
			t.Errorf("%s:\n%q\ndoes not match %s", tc.script, out, tc.match)
		}
	}
}

// TestProcStatAdvances checks two reads a second apart give a healthy CPU percentage.
func TestProcStatAdvances(t *testing.T) {
	t.Parallel()
	m, clk := newMachine(t, system.Config{Hostname: "h", Role: system.RoleLinux, Cores: 4})
	read := func() (busy, total float64) {
		out, _ := sh(t, m, "head -1 /proc/stat")
		f := strings.Fields(out)
		for i, v := range f[1:] {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%q: %v", out, err)
			}
			total += n
			if i != 3 && i != 4 {
				busy += n
			}
		}
		return busy, total
	}
	b1, t1 := read()
	clk.advance(time.Second)
	b2, t2 := read()
	if t2 <= t1 {
		t.Fatalf("counters did not advance: %v → %v", t1, t2)
	}
	pct := (b2 - b1) * 100 / (t2 - t1)
	if pct <= 0 || pct > 30 {
		t.Fatalf("cpu %.1f%% is not healthy", pct)
	}
}

func TestBlackHoledNetworkHangs(t *testing.T) {
	t.Parallel()
	m, _ := newMachine(t, system.Config{Hostname: "h", Role: system.RoleLXC, NetworkDown: func() bool { return true },
		Resolve: func(string) (string, bool) { return "192.0.2.40", true }})
	start := time.Now()
	out, code := sh(t, m, "timeout 0.1 getent hosts deb.debian.org; echo $?; timeout 0.1 apt-get update >/dev/null; echo $?")
	if out != "124\n124\n" || code != 0 || time.Since(start) > 5*time.Second {
		t.Fatalf("got %q exit %d after %v", out, code, time.Since(start))
	}
	if out, _ := sh(t, m, "getent hosts localhost"); !strings.HasPrefix(out, "127.0.0.1") {
		t.Fatalf("localhost must still resolve: %q", out)
	}
}
