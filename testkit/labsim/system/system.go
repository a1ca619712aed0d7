// Package system simulates what a lab machine reports about itself: its units, disks,
// memory, load, sockets, packages, accounts, name lookup, ping and kernel, plus the /proc
// files and /etc files scripts read. Figures are healthy and vary a little from one call to
// the next, drawn from a random source seeded by the machine's name so a run is
// reproducible.
//
// A Machine keeps the mutable part (unit states, pending upgrades, containers) behind a
// mutex and offers it to the program families through the small API of
// labsim/system/state (api.go). Programs lists every program the machine has: the ones in
// this package — procs.go and vmstat.go (pgrep, pidof, vmstat), metrics.go (uptime, top,
// free, df, vm_stat, sysctl, /proc), net.go (ping, ss, hostname, getent), accounts.go (id,
// getent passwd/group), apt.go, packages.go (the installed catalogue), date.go and
// identity.go (uname, whoami, lsb_release, sw_vers) — and those of the families beside it,
// each importing only labsim/system/state: systemd (systemctl, journalctl), docker,
// storage (lsblk, findmnt, mount, LVM, ZFS, smartctl), netif (ip), procs (ps), cron (crontab), logins (who, w, last,
// lastlog) and dpkg (dpkg, dpkg-query, apt-cache). docs/labsim.md lists what each answers
// and where its format comes from.
package system

import (
	"fmt"
	"hash/fnv"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/sandbox"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
	"github.com/oikos-hq/oikos/testkit/labsim/system/cron"
	"github.com/oikos-hq/oikos/testkit/labsim/system/docker"
	"github.com/oikos-hq/oikos/testkit/labsim/system/dpkg"
	"github.com/oikos-hq/oikos/testkit/labsim/system/logins"
	"github.com/oikos-hq/oikos/testkit/labsim/system/netif"
	"github.com/oikos-hq/oikos/testkit/labsim/system/procs"
	"github.com/oikos-hq/oikos/testkit/labsim/system/state"
	"github.com/oikos-hq/oikos/testkit/labsim/system/storage"
	"github.com/oikos-hq/oikos/testkit/labsim/system/systemd"
)

// Role says what kind of machine is simulated; it decides kernels, mounts and base units.
type Role string

// Roles of simulated machines.
const (
	RoleProxmox Role = "proxmox" // a Proxmox VE node
	RoleLinux   Role = "linux"   // a plain Linux host or VPS
	RoleDarwin  Role = "darwin"  // a macOS workstation
	RoleLXC     Role = "lxc"     // a container on a Proxmox node
	RoleVM      Role = "vm"      // a QEMU virtual machine
)

// Listener is a TCP port a machine listens on, shown by ss.
type Listener struct {
	Port    int
	Process string
}

// Config describes a machine. Zero values get sensible defaults in New.
type Config struct {
	Hostname string
	Role     Role
	// Distro selects /etc/os-release: "debian-12" (default), "debian-11", "debian-13",
	// "ubuntu-24.04", "ubuntu-22.04".
	Distro   string
	User     string
	Cores    int
	MemoryMB int
	DiskGB   int
	// IPv4 is the machine's address as shown by hostname -I and ip addr (data only).
	IPv4 string
	// Gateway is the default route shown by ip route (data only).
	Gateway string
	// Units are the machine's own systemd units (base units are added per role).
	Units     []string
	Listeners []Listener
	// Containers are docker containers; docker exists on the machine when this is
	// non-empty or a docker.service unit is present.
	Containers []string
	// Reachable reports whether ping gets an answer from addr.
	Reachable func(addr string) bool
	// NetworkDown makes name lookups and package downloads hang until their context ends,
	// as a container with a wrong gateway does (packets dropped, not rejected).
	NetworkDown func() bool
	// Resolve answers getent hosts / ping name lookups.
	Resolve func(name string) (string, bool)
	// Clock is the machine's clock; nil means time.Now.
	Clock func() time.Time
	// ZFSPools are the machine's ZFS pools; zfs and zpool exist only where there is one.
	ZFSPools []string
}

type unitState struct {
	name    string
	active  bool
	enabled bool
	since   time.Time
	pid     int
}

type container struct {
	id, name, image string
	running         bool
	since           time.Time
	created         time.Time
}

type upgrade struct {
	pkg, suite, newVer, oldVer string
}

// Machine is one simulated machine's state and programs.
type Machine struct {
	cfg  Config
	boot time.Time

	mu         sync.Mutex
	rng        *rand.Rand
	units      map[string]*unitState
	upgrades   []upgrade
	installed  map[string]string // package → installed version
	catalogue  map[string]state.Package
	containers map[string]*container
	nextPID    int
	stat       cpuCounters

	// Baselines drawn once per machine; every reading varies a little around them.
	memFrac, diskFrac, loadPerCore, cpuBusy float64
}

// cpuCounters are the cumulative jiffies of /proc/stat, advanced on every read so that two
// reads a second apart give a realistic CPU percentage.
type cpuCounters struct {
	last                                        time.Time
	user, nice, system, idle, iowait, irq, soft float64
}

// New builds a machine from cfg.
func New(cfg Config) *Machine {
	if cfg.Hostname == "" {
		cfg.Hostname = "localhost"
	}
	if cfg.Role == "" {
		cfg.Role = RoleLinux
	}
	if cfg.Distro == "" {
		cfg.Distro = "debian-12"
	}
	if cfg.User == "" {
		cfg.User = "root"
	}
	if cfg.Cores <= 0 {
		cfg.Cores = map[Role]int{RoleProxmox: 16, RoleDarwin: 8, RoleVM: 2}[cfg.Role]
		if cfg.Cores == 0 {
			cfg.Cores = 1
		}
	}
	if cfg.MemoryMB <= 0 {
		cfg.MemoryMB = map[Role]int{RoleProxmox: 65536, RoleDarwin: 16384, RoleVM: 4096, RoleLinux: 4096}[cfg.Role]
		if cfg.MemoryMB == 0 {
			cfg.MemoryMB = 1024
		}
	}
	if cfg.DiskGB <= 0 {
		cfg.DiskGB = map[Role]int{RoleProxmox: 100, RoleDarwin: 460, RoleVM: 32, RoleLinux: 80}[cfg.Role]
		if cfg.DiskGB == 0 {
			cfg.DiskGB = 8
		}
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	h := fnv.New64a()
	h.Write([]byte(cfg.Hostname + "/" + string(cfg.Role)))
	seed := int64(h.Sum64())
	m := &Machine{
		cfg:        cfg,
		rng:        rand.New(rand.NewSource(seed)),
		units:      map[string]*unitState{},
		installed:  map[string]string{},
		containers: map[string]*container{},
		nextPID:    300,
	}
	now := cfg.Clock().UTC()
	m.boot = now.Add(-time.Duration(3+m.rng.Intn(40))*24*time.Hour - time.Duration(m.rng.Intn(86400))*time.Second).Truncate(time.Second)
	for _, u := range append(append(baseUnits(cfg.Role), systemd.BaseTimers(string(cfg.Role))...), cfg.Units...) {
		name := UnitName(u)
		if _, ok := m.units[name]; ok {
			continue
		}
		m.units[name] = &unitState{name: name, active: true, enabled: true, since: m.boot.Add(time.Duration(5+m.rng.Intn(40)) * time.Second), pid: m.pid()}
	}
	for _, c := range cfg.Containers {
		m.containers[c] = &container{
			id: fmt.Sprintf("%012x", m.rng.Int63()&0xffffffffffff), name: c, image: imageFor(c), running: true,
			created: m.boot.Add(-time.Duration(7+m.rng.Intn(50)) * 24 * time.Hour), since: m.boot.Add(time.Minute),
		}
	}
	m.upgrades = pendingUpgrades(cfg.Distro, m.rng)
	_, hasDocker := m.units["docker.service"]
	m.catalogue = basePackages(cfg.Distro, cfg.Role, hasDocker || len(cfg.Containers) > 0)
	if cfg.Role != RoleDarwin {
		for n, p := range m.catalogue {
			m.installed[n] = p.Version
		}
	}
	m.memFrac = 0.2 + 0.25*m.rng.Float64()
	m.diskFrac = 0.15 + 0.25*m.rng.Float64()
	m.loadPerCore = 0.02 + 0.1*m.rng.Float64()
	m.cpuBusy = 0.02 + 0.06*m.rng.Float64()
	m.stat.last = now
	up := now.Sub(m.boot).Seconds() * 100 * float64(cfg.Cores)
	m.stat.user, m.stat.system, m.stat.iowait = up*0.03, up*0.01, up*0.002
	m.stat.irq, m.stat.soft, m.stat.idle = 0, up*0.001, up*0.957
	return m
}

// UnitName normalises a unit name: "jellyfin" becomes "jellyfin.service".
func UnitName(u string) string { return state.UnitName(u) }

func imageFor(name string) string {
	known := map[string]string{
		"jellyfin": "jellyfin/jellyfin:10.10.3", "caddy": "caddy:2.8", "homeassistant": "ghcr.io/home-assistant/home-assistant:stable",
		"pihole": "pihole/pihole:2024.07.0", "grafana": "grafana/grafana:11.3.0", "postgres": "postgres:16",
	}
	if img, ok := known[name]; ok {
		return img
	}
	return name + ":latest"
}

func baseUnits(r Role) []string {
	switch r {
	case RoleDarwin:
		return nil
	case RoleProxmox:
		return []string{"ssh.service", "cron.service", "systemd-journald.service", "pve-cluster.service", "pvedaemon.service", "pveproxy.service", "pvestatd.service"}
	case RoleLXC:
		return []string{"cron.service", "systemd-journald.service", "postfix.service"}
	}
	return []string{"ssh.service", "cron.service", "systemd-journald.service"}
}

func (m *Machine) pid() int {
	m.nextPID += 1 + m.rng.Intn(400)
	return m.nextPID
}

// now reads the machine clock.
func (m *Machine) now() time.Time { return m.cfg.Clock().UTC() }

// jitter returns base varied by up to ±spread (fraction), under the lock.
func (m *Machine) jitter(base, spread float64) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return base * (1 + spread*(2*m.rng.Float64()-1))
}

// Hostname is the machine's host name.
func (m *Machine) Hostname() string { return m.cfg.Hostname }

// IsDarwin reports whether the machine is a macOS workstation.
func (m *Machine) IsDarwin() bool { return m.cfg.Role == RoleDarwin }

// SetUnitActive starts or stops a unit (false if the unit does not exist).
func (m *Machine) SetUnitActive(unit string, active bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.units[UnitName(unit)]
	if !ok {
		return false
	}
	m.setActive(u, active)
	return true
}

func (m *Machine) setActive(u *unitState, active bool) {
	if active && !u.active {
		u.pid = m.pid()
	}
	u.active = active
	u.since = m.now()
}

// UnitActive reports a unit's state (and whether it exists).
func (m *Machine) UnitActive(unit string) (active, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.units[UnitName(unit)]
	if !ok {
		return false, false
	}
	return u.active, true
}

func (m *Machine) sortedUnits() []unitState {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]unitState, 0, len(m.units))
	for _, u := range m.units {
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// Programs returns the machine's system programs (coreutils are registered separately).
func (m *Machine) Programs() shell.Registry {
	reg := shell.Registry{
		"uname": m.uname, "hostname": m.hostnameProg, "uptime": m.uptime, "date": m.date,
		"top": m.top, "df": m.df, "ping": m.ping, "ps": procs.Tool{M: m}.Program(), "id": m.id, "whoami": m.whoami,
		"pgrep": m.pgrep, "pidof": m.pidof, "sysctl": m.sysctl, "getent": m.getent,
	}
	if m.IsDarwin() {
		reg["vm_stat"] = m.vmStat
		reg["sw_vers"] = m.swVers
		return reg
	}
	for name, p := range map[string]shell.Program{
		"free": m.free, "ss": m.ss,
		"apt": m.apt, "apt-get": m.apt, "nproc": m.nproc, "ip": netif.Tool{M: m}.Program(), "lsb_release": m.lsbRelease,
	} {
		reg[name] = p
	}
	for name, p := range (systemd.Tools{M: m}).Programs() {
		reg[name] = p
	}
	for _, fam := range []shell.Registry{storage.Tools{M: m}.Programs(), logins.Tools{M: m}.Programs(), dpkg.Tools{M: m}.Programs()} {
		for name, p := range fam {
			reg[name] = p
		}
	}
	reg["vmstat"] = m.vmstat
	reg["crontab"] = cron.Crontab
	m.mu.Lock()
	_, hasDocker := m.units["docker.service"]
	m.mu.Unlock()
	if hasDocker || len(m.cfg.Containers) > 0 {
		reg["docker"] = docker.Tool{M: m}.Program()
	}
	return reg
}

// Files returns the files to seed into a fresh sandbox.
func (m *Machine) Files() map[string][]byte {
	if m.IsDarwin() {
		return map[string][]byte{
			"/etc/hosts": []byte("127.0.0.1\tlocalhost\n255.255.255.255\tbroadcasthost\n::1             localhost\n"),
		}
	}
	files := map[string][]byte{
		"/etc/os-release":  []byte(osRelease(m.cfg.Distro)),
		"/etc/hostname":    []byte(m.cfg.Hostname + "\n"),
		"/etc/hosts":       []byte(fmt.Sprintf("127.0.0.1\tlocalhost\n127.0.1.1\t%s\n", m.cfg.Hostname)),
		"/etc/resolv.conf": []byte(m.resolvConf()),
		// No /etc/passwd: the root package's sandbox test takes "root:x:0:0" in a guest's
		// output as a sign that a path escaped to the host; getent passwd answers instead.
		"/etc/group": []byte(strings.Join(m.groups(), "\n") + "\n"),
	}
	for p, data := range cron.Files() {
		files[p] = data
	}
	if strings.HasPrefix(m.cfg.Distro, "debian") {
		files["/etc/debian_version"] = []byte(map[string]string{"debian-11": "11.11\n", "debian-12": "12.8\n", "debian-13": "13.1\n"}[m.cfg.Distro])
	}
	return files
}

// Dirs are the directories a fresh sandbox gets.
func (m *Machine) Dirs() []string {
	if m.IsDarwin() {
		home := "/Users/" + m.cfg.User
		if m.cfg.User == "root" {
			home = "/var/root"
		}
		return []string{"/etc", "/tmp", "/var/log", "/Applications", "/Users", home, "/usr/local/bin"}
	}
	return append([]string{"/etc", "/tmp", "/root", "/var/log", "/var/lib", "/var/tmp", "/usr/local/bin", "/opt", "/srv", "/home", m.Home()}, cron.Dirs()...)
}

// Home is the login user's home directory.
func (m *Machine) Home() string {
	if m.IsDarwin() {
		if m.cfg.User == "root" {
			return "/var/root"
		}
		return "/Users/" + m.cfg.User
	}
	if m.cfg.User == "root" {
		return "/root"
	}
	return "/home/" + m.cfg.User
}

// Env is the login environment of the machine's user.
func (m *Machine) Env() []string {
	path := shell.DefaultPath
	sh := "/bin/bash"
	if m.IsDarwin() {
		path = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin:/opt/homebrew/bin"
		sh = "/bin/zsh"
	}
	return []string{"PATH=" + path, "HOME=" + m.Home(), "USER=" + m.cfg.User, "LOGNAME=" + m.cfg.User,
		"SHELL=" + sh, "HOSTNAME=" + m.cfg.Hostname}
}

// ProcFiles returns the generators of the synthetic /proc files (none on macOS).
func (m *Machine) ProcFiles() map[string]sandbox.Generator {
	if m.IsDarwin() {
		return nil
	}
	return map[string]sandbox.Generator{
		"/proc/loadavg": func() []byte { return []byte(m.procLoadavg()) },
		"/proc/meminfo": func() []byte { return []byte(m.procMeminfo()) },
		"/proc/stat":    func() []byte { return []byte(m.procStat()) },
		"/proc/uptime":  func() []byte { return []byte(m.procUptime()) },
		"/proc/cpuinfo": func() []byte { return []byte(m.procCPUInfo()) },
		"/proc/mounts":  func() []byte { return []byte(storage.Tools{M: m}.ProcMounts()) },
	}
}

func osRelease(distro string) string {
	switch distro {
	case "debian-11":
		return debianRelease("11", "bullseye")
	case "debian-13":
		return debianRelease("13", "trixie")
	case "ubuntu-22.04":
		return ubuntuRelease("22.04", "22.04.5", "Jammy Jellyfish", "jammy")
	case "ubuntu-24.04":
		return ubuntuRelease("24.04", "24.04.1", "Noble Numbat", "noble")
	}
	return debianRelease("12", "bookworm")
}

func debianRelease(v, code string) string {
	return fmt.Sprintf(`PRETTY_NAME="Debian GNU/Linux %[1]s (%[2]s)"
NAME="Debian GNU/Linux"
VERSION_ID="%[1]s"
VERSION="%[1]s (%[2]s)"
VERSION_CODENAME=%[2]s
ID=debian
HOME_URL="https://www.debian.org/"
SUPPORT_URL="https://www.debian.org/support"
BUG_REPORT_URL="https://bugs.debian.org/"
`, v, code)
}

func ubuntuRelease(v, full, name, code string) string {
	return fmt.Sprintf(`PRETTY_NAME="Ubuntu %[2]s LTS"
NAME="Ubuntu"
VERSION_ID="%[1]s"
VERSION="%[2]s LTS (%[3]s)"
VERSION_CODENAME=%[4]s
ID=ubuntu
ID_LIKE=debian
HOME_URL="https://www.ubuntu.com/"
SUPPORT_URL="https://help.ubuntu.com/"
BUG_REPORT_URL="https://bugs.launchpad.net/ubuntu/"
PRIVACY_POLICY_URL="https://www.ubuntu.com/legal/terms-and-policies/privacy-policy"
UBUNTU_CODENAME=%[4]s
LOGO=ubuntu-logo
`, v, full, name, code)
}

func pendingUpgrades(distro string, rng *rand.Rand) []upgrade {
	var catalogue []upgrade
	switch {
	case strings.HasPrefix(distro, "ubuntu"):
		catalogue = []upgrade{
			{"openssl", "noble-updates", "3.0.13-0ubuntu3.4", "3.0.13-0ubuntu3.3"},
			{"libssl3t64", "noble-updates", "3.0.13-0ubuntu3.4", "3.0.13-0ubuntu3.3"},
			{"curl", "noble-security", "8.5.0-2ubuntu10.5", "8.5.0-2ubuntu10.4"},
			{"tzdata", "noble-updates", "2024a-3ubuntu1.2", "2024a-3ubuntu1.1"},
		}
	case distro == "debian-11":
		catalogue = []upgrade{
			{"openssl", "bullseye-security", "1.1.1w-0+deb11u2", "1.1.1w-0+deb11u1"},
			{"libssl1.1", "bullseye-security", "1.1.1w-0+deb11u2", "1.1.1w-0+deb11u1"},
			{"tzdata", "bullseye-updates", "2024a-0+deb11u1", "2021a-1+deb11u11"},
		}
	case distro == "debian-13":
		catalogue = []upgrade{
			{"openssl", "stable-security", "3.5.1-1+deb13u1", "3.5.1-1"},
			{"libssl3t64", "stable-security", "3.5.1-1+deb13u1", "3.5.1-1"},
			{"tzdata", "stable-updates", "2025b-4+deb13u2", "2025b-4+deb13u1"},
		}
	default:
		catalogue = []upgrade{
			{"openssl", "stable-security", "3.0.15-1~deb12u1", "3.0.14-1~deb12u2"},
			{"libssl3", "stable-security", "3.0.15-1~deb12u1", "3.0.14-1~deb12u2"},
			{"curl", "stable-security", "7.88.1-10+deb12u8", "7.88.1-10+deb12u7"},
			{"tzdata", "stable-updates", "2024b-0+deb12u1", "2024a-0+deb12u1"},
		}
	}
	n := rng.Intn(len(catalogue) + 1)
	return append([]upgrade(nil), catalogue[:n]...)
}
