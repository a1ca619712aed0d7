// Package lab is the simulated homelab's mutable state: its hosts and guests, each with its
// machine (sandbox, system state and shell) and its fault, all guarded by one lock (Lab.Mu).
// The simulator (labsim) serves it over SSH and HTTP; the Proxmox tools (labsim/proxmox)
// read and change it as pct, qm and pvesh do on a real node.
package lab

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/testkit/labsim/coreutils"
	"github.com/oikos-hq/oikos/testkit/labsim/fleet"
	"github.com/oikos-hq/oikos/testkit/labsim/sandbox"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
	"github.com/oikos-hq/oikos/testkit/labsim/system"
)

// Lab holds every host of a fleet. The set of hosts is fixed by AddHost before the lab
// serves; what changes afterwards (faults, guests, their status) is guarded by Mu.
type Lab struct {
	// Mu guards every mutable field of the hosts and guests, and whatever a user of the lab
	// keeps beside them (the simulator's connections and listeners).
	Mu sync.Mutex

	fleet    fleet.Fleet
	stateDir string
	clock    func() time.Time
	log      zerolog.Logger
	hosts    map[string]*Host
	order    []string
}

// New prepares an empty lab for fl; machines live under stateDir.
func New(fl fleet.Fleet, stateDir string, clock func() time.Time, log zerolog.Logger) *Lab {
	return &Lab{fleet: fl, stateDir: stateDir, clock: clock, log: log, hosts: map[string]*Host{}}
}

// Now is the lab's clock.
func (l *Lab) Now() time.Time { return l.clock() }

// Host is a host by name (nil when the fleet has none).
func (l *Lab) Host(name string) *Host { return l.hosts[name] }

// Hosts lists the hosts in fleet order.
func (l *Lab) Hosts() []*Host {
	out := make([]*Host, len(l.order))
	for i, n := range l.order {
		out[i] = l.hosts[n]
	}
	return out
}

// Machine is one simulated OS: its sandbox, its system state and its shell.
type Machine struct {
	FS  *sandbox.FS
	Sys *system.Machine
	Sh  *shell.Shell
}

// Host is the runtime state of one host. Mutable fields are guarded by Lab.Mu.
type Host struct {
	Cfg    fleet.Host
	M      *Machine
	Fault  Fault
	Guests map[int]*Guest
	// DownAt is when the host last went down (its LRM's last timestamp).
	DownAt time.Time
}

// Guest is the runtime state of one guest. Mutable fields are guarded by Lab.Mu.
type Guest struct {
	Cfg   fleet.Guest
	M     *Machine
	Fault Fault
	// flaps counts invocations per Proxmox command while the guest or its host flaps.
	flaps     map[string]int
	Lock      string
	PID       int
	StartedAt time.Time

	// Container configuration (pct config / qm config).
	Net0     string
	OSType   string
	Storage  string
	Features string
	Swap     int
	Template string
	Descr    string
	IPv4     string
	Gateway  string
	NetDown  bool

	// Dir is the directory holding the guest's machine: it stays where the guest was
	// created when the guest migrates (the machine moves with it, as its disk would).
	Dir string
	// host is the node the guest is on now (Migrate changes it).
	host *Host
	// HAReq is the requested ha-manager state of an HA-managed guest ("started" or
	// "stopped"; "" when ha-manager does not manage it) and HAState the CRM's current one:
	// the requested state, or "fence" between its node going down and its recovery.
	HAReq, HAState string
}

// Host is the node the guest is on now; the caller holds Lab.Mu.
func (g *Guest) Host() *Host { return g.host }

// Place records h as the guest's node (a guest created on h); the caller holds Lab.Mu.
func (g *Guest) Place(h *Host) { g.host = h }

// DisplayName is the guest's name as the Proxmox tools show it.
func (g *Guest) DisplayName() string {
	if g.Cfg.Kind == fleet.GuestLXC {
		if g.Cfg.Hostname != "" {
			return g.Cfg.Hostname
		}
		return "CT" + strconv.Itoa(g.Cfg.VMID)
	}
	if g.Cfg.Name != "" {
		return g.Cfg.Name
	}
	return "VM " + strconv.Itoa(g.Cfg.VMID)
}

// Running reports whether the guest runs.
func (g *Guest) Running() bool { return g.Cfg.Status == fleet.StatusRunning }

// flapped reports whether this invocation of cmd finds a flapping guest stopped: every
// second one of the same command does (Fault.Flap). The caller holds Lab.Mu.
func (g *Guest) flapped(host Fault, cmd string) bool {
	if !g.Fault.Flap && !host.Flap {
		return false
	}
	if g.flaps == nil {
		g.flaps = map[string]int{}
	}
	g.flaps[cmd]++
	return g.flaps[cmd]%2 == 0
}

// SeenRunning is Running() as one invocation of cmd sees it (a flapping guest may look
// stopped). The caller holds Lab.Mu.
func (g *Guest) SeenRunning(host Fault, cmd string) bool {
	return g.Running() && !g.flapped(host, cmd)
}

// SetRunning starts or stops the guest at now; the caller holds Lab.Mu.
func (g *Guest) SetRunning(on bool, now time.Time) {
	if on == g.Running() {
		return
	}
	if on {
		g.Cfg.Status = fleet.StatusRunning
		g.StartedAt = now
		g.PID = 10000 + (g.Cfg.VMID*37+int(now.Unix()%1000))%50000
		return
	}
	g.Cfg.Status = fleet.StatusStopped
	g.PID = 0
}

// SortedGuests lists a host's guests by vmid; the caller holds Lab.Mu.
func (h *Host) SortedGuests() []*Guest {
	out := make([]*Guest, 0, len(h.Guests))
	for _, g := range h.Guests {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Cfg.VMID < out[j].Cfg.VMID })
	return out
}

// SameCluster reports whether other is h or a member of h's cluster (a host without a
// cluster is a cluster of its own).
func (h *Host) SameCluster(other *Host) bool {
	return other == h || (h.Cfg.Cluster != "" && other.Cfg.Cluster == h.Cfg.Cluster)
}

// CloseMachines closes the sandboxes of the host and its guests.
func (h *Host) CloseMachines() {
	if h.M != nil {
		h.M.FS.Close()
	}
	for _, g := range h.Guests {
		if g.M != nil {
			g.M.FS.Close()
		}
	}
}

func (l *Lab) hostDir(name string) string {
	return filepath.Join(l.stateDir, "machines", name)
}

// GuestDir is the directory holding a guest's machine.
func (l *Lab) GuestDir(host string, vmid int) string {
	return filepath.Join(l.stateDir, "guests", host, strconv.Itoa(vmid))
}

// AddHost builds host h's machine (with the extra programs) and its guests' machines and
// adds it to the lab. The caller has validated h against the fleet.
func (l *Lab) AddHost(h fleet.Host, extra shell.Registry) (*Host, error) {
	if h.Node == "" {
		h.Node = h.Name // as fleet.FromInventory defaults it
	}
	rt := &Host{Cfg: h, Guests: map[int]*Guest{}}
	role := system.RoleLinux
	switch h.Kind {
	case fleet.KindProxmox:
		role = system.RoleProxmox
	case fleet.KindDarwin:
		role = system.RoleDarwin
	}
	var gateway string
	if len(h.Gateways) > 0 {
		gateway = h.Gateways[0]
	}
	cfg := system.Config{
		Hostname: h.Name, Role: role, User: h.User, Cores: h.Cores, MemoryMB: h.MemoryMB,
		Units: h.Units, Listeners: listeners(h.Listeners), Containers: h.Containers,
		IPv4: HostIP(h.Addr), Gateway: gateway,
		Reachable: func(addr string) bool { return l.reachableFrom(rt, addr) },
		Resolve:   l.resolveName,
		Clock:     l.clock,
	}
	var err error
	rt.M, err = l.newMachine(l.hostDir(h.Name), cfg, extra, false)
	if err != nil {
		return nil, err
	}
	for _, g := range h.Guests {
		if g.VMID <= 0 {
			return nil, fmt.Errorf("labsim: host %s: guest %q has no vmid", h.Name, g.Name)
		}
		if _, dup := rt.Guests[g.VMID]; dup {
			return nil, fmt.Errorf("labsim: host %s: vmid %d used twice", h.Name, g.VMID)
		}
		if g.Kind != fleet.GuestLXC && g.Kind != fleet.GuestVM {
			return nil, fmt.Errorf("labsim: host %s: guest %d: unknown kind %q", h.Name, g.VMID, g.Kind)
		}
		if g.Status == "" {
			g.Status = fleet.StatusRunning
		}
		grt := &Guest{Cfg: g, OSType: g.OSType, Storage: "local-lvm", host: rt}
		if g.HA {
			grt.HAReq = map[bool]string{true: "started", false: "stopped"}[g.Status != fleet.StatusStopped]
			grt.HAState = grt.HAReq
		}
		if grt.OSType == "" {
			grt.OSType = map[string]string{fleet.GuestLXC: "debian", fleet.GuestVM: "l26"}[g.Kind]
		}
		grt.Net0 = defaultNet0(g)
		grt.IPv4 = GuestIP(g.VMID)
		grt.Gateway = gateway
		if err := l.AttachGuestMachine(rt, grt, false); err != nil {
			return nil, err
		}
		if grt.Running() {
			grt.Cfg.Status = fleet.StatusStopped
			grt.SetRunning(true, l.clock().Add(-time.Duration(1+g.VMID%20)*24*time.Hour))
		}
		rt.Guests[g.VMID] = grt
	}
	l.hosts[h.Name] = rt
	l.order = append(l.order, h.Name)
	return rt, nil
}

// AttachGuestMachine builds the guest's machine (fresh wipes its directory first).
func (l *Lab) AttachGuestMachine(h *Host, g *Guest, fresh bool) error {
	role := system.RoleLXC
	if g.Cfg.Kind == fleet.GuestVM {
		role = system.RoleVM
	}
	cfg := system.Config{
		Hostname: g.Cfg.Hostname, Role: role, Distro: distroFor(g.OSType, g.Template),
		Cores: g.Cfg.Cores, MemoryMB: g.Cfg.MemoryMB, DiskGB: g.Cfg.DiskGB,
		Units: g.Cfg.Units, Listeners: listeners(g.Cfg.Listeners), Containers: g.Cfg.Containers,
		IPv4: g.IPv4, Gateway: g.Gateway,
		Reachable: func(addr string) bool {
			l.Mu.Lock()
			down, on := g.NetDown, g.host
			l.Mu.Unlock()
			return !down && l.reachableFrom(on, addr)
		},
		NetworkDown: func() bool {
			l.Mu.Lock()
			defer l.Mu.Unlock()
			return g.NetDown
		},
		Resolve: l.resolveName,
		Clock:   l.clock,
	}
	if cfg.Hostname == "" {
		cfg.Hostname = "CT" + strconv.Itoa(g.Cfg.VMID)
	}
	g.Dir = l.GuestDir(h.Cfg.Name, g.Cfg.VMID)
	m, err := l.newMachine(g.Dir, cfg, nil, fresh)
	if err != nil {
		return err
	}
	g.M = m
	return nil
}

// newMachine opens (and on first use seeds) a machine directory.
func (l *Lab) newMachine(dir string, cfg system.Config, extra shell.Registry, fresh bool) (*Machine, error) {
	if fresh {
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("labsim: wipe %s: %w", dir, err)
		}
	}
	sys := system.New(cfg)
	fsys, err := sandbox.New(dir, sys.ProcFiles())
	if err != nil {
		return nil, fmt.Errorf("labsim: %w", err)
	}
	if entries, err := fsys.ReadDir("/"); err == nil && onlySynthetic(entries) {
		if err := seed(fsys, sys); err != nil {
			fsys.Close()
			return nil, fmt.Errorf("labsim: seed %s: %w", dir, err)
		}
	}
	reg := shell.Registry{}
	coreutils.Register(reg)
	for n, p := range sys.Programs() {
		reg[n] = p
	}
	for n, p := range extra {
		reg[n] = p
	}
	sh := &shell.Shell{FS: fsys, Programs: reg, Env: sys.Env(), Home: sys.Home(), Clock: l.clock, Log: l.log}
	return &Machine{FS: fsys, Sys: sys, Sh: sh}, nil
}

func onlySynthetic(entries []fs.DirEntry) bool {
	for _, e := range entries {
		if e.Name() != "proc" {
			return false
		}
	}
	return true
}

func seed(fsys *sandbox.FS, sys *system.Machine) error {
	for _, d := range sys.Dirs() {
		if err := fsys.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for p, data := range sys.Files() {
		if err := fsys.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func listeners(ls []fleet.Listener) []system.Listener {
	out := make([]system.Listener, len(ls))
	for i, l := range ls {
		out[i] = system.Listener{Port: l.Port, Process: l.Unit}
	}
	return out
}

// HostIP is the host part of a declared "ip:port" ("" when it has none).
func HostIP(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return h
}

// GuestIP is the documentation-range address a fleet guest is said to have (data only).
func GuestIP(vmid int) string {
	return "192.0.2." + strconv.Itoa(20+vmid%200)
}

// MAC is the hardware address Proxmox gives a guest's first interface.
func MAC(vmid int) string {
	return fmt.Sprintf("BC:24:11:%02X:%02X:%02X", (vmid>>16)&0xff, (vmid>>8)&0xff, vmid&0xff)
}

func defaultNet0(g fleet.Guest) string {
	mac := MAC(g.VMID)
	if g.Kind == fleet.GuestVM {
		return "virtio=" + mac + ",bridge=vmbr0,firewall=1"
	}
	return "name=eth0,bridge=vmbr0,firewall=1,hwaddr=" + mac + ",ip=dhcp,ip6=dhcp,type=veth"
}

func distroFor(ostype, template string) string {
	switch {
	case strings.Contains(template, "debian-11"):
		return "debian-11"
	case strings.Contains(template, "debian-13"):
		return "debian-13"
	case strings.Contains(template, "ubuntu-22.04"):
		return "ubuntu-22.04"
	case strings.Contains(template, "ubuntu"):
		return "ubuntu-24.04"
	case ostype == "ubuntu":
		return "ubuntu-24.04"
	}
	return "debian-12"
}

// reachableFrom reports whether addr answers ping from host h: one of its gateways, or a
// fleet machine that is not down.
func (l *Lab) reachableFrom(h *Host, addr string) bool {
	for _, gw := range h.Cfg.Gateways {
		if gw == addr {
			return true
		}
	}
	l.Mu.Lock()
	defer l.Mu.Unlock()
	for _, other := range l.hosts {
		if HostIP(other.Cfg.Addr) == addr && !other.Fault.Down {
			return true
		}
	}
	return false
}

// resolveName answers name lookups inside machines: fleet hosts by name (also under
// .lab.example) and guests by hostname. Routes resolve to the ingress listener.
func (l *Lab) resolveName(name string) (string, bool) {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	short := strings.TrimSuffix(name, ".lab.example")
	l.Mu.Lock()
	defer l.Mu.Unlock()
	for _, h := range l.hosts {
		if strings.EqualFold(h.Cfg.Name, short) {
			return HostIP(h.Cfg.Addr), true
		}
		for _, g := range h.Guests {
			if strings.EqualFold(g.Cfg.Hostname, short) {
				return g.IPv4, true
			}
		}
	}
	if _, ok := l.fleet.Routes[name]; ok {
		return HostIP(l.fleet.HTTPAddr), true
	}
	return "", false
}
