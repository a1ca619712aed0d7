package labsim

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/oikos-hq/oikos/testkit/labsim/coreutils"
	"github.com/oikos-hq/oikos/testkit/labsim/sandbox"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
	"github.com/oikos-hq/oikos/testkit/labsim/system"
)

// machine is one simulated OS: its sandbox, its system state and its shell.
type machine struct {
	fs  *sandbox.FS
	sys *system.Machine
	sh  *shell.Shell
}

// hostRT is the runtime state of one host. Mutable fields are guarded by Sim.mu.
type hostRT struct {
	cfg    Host
	key    ssh.Signer
	altKey ssh.Signer
	m      *machine

	actual string
	ln     net.Listener
	fault  Fault
	conns  map[net.Conn]struct{}
	total  int
	guests map[int]*guestRT
}

// guestRT is the runtime state of one guest. Mutable fields are guarded by Sim.mu.
type guestRT struct {
	cfg   Guest
	m     *machine
	fault Fault
	// flaps counts invocations per Proxmox command while the guest or its host flaps.
	flaps     map[string]int
	lock      string
	pid       int
	startedAt time.Time

	// Container configuration (pct config / qm config).
	net0     string
	ostype   string
	storage  string
	features string
	swap     int
	template string
	descr    string
	ipv4     string
	gateway  string
	netDown  bool
}

func (g *guestRT) displayName() string {
	if g.cfg.Kind == GuestLXC {
		if g.cfg.Hostname != "" {
			return g.cfg.Hostname
		}
		return "CT" + strconv.Itoa(g.cfg.VMID)
	}
	if g.cfg.Name != "" {
		return g.cfg.Name
	}
	return "VM " + strconv.Itoa(g.cfg.VMID)
}

func (g *guestRT) running() bool { return g.cfg.Status == StatusRunning }

// flapped reports whether this invocation of cmd finds a flapping guest stopped: every
// second one of the same command does (Fault.Flap). The caller holds the Sim's lock.
func (g *guestRT) flapped(host Fault, cmd string) bool {
	if !g.fault.Flap && !host.Flap {
		return false
	}
	if g.flaps == nil {
		g.flaps = map[string]int{}
	}
	g.flaps[cmd]++
	return g.flaps[cmd]%2 == 0
}

// seenRunning is running() as one invocation of cmd sees it (a flapping guest may look
// stopped). The caller holds the Sim's lock.
func (g *guestRT) seenRunning(host Fault, cmd string) bool {
	return g.running() && !g.flapped(host, cmd)
}

func (g *guestRT) setRunning(on bool, now time.Time) {
	if on == g.running() {
		return
	}
	if on {
		g.cfg.Status = StatusRunning
		g.startedAt = now
		g.pid = 10000 + (g.cfg.VMID*37+int(now.Unix()%1000))%50000
		return
	}
	g.cfg.Status = StatusStopped
	g.pid = 0
}

func (h *hostRT) closeMachines() {
	if h.m != nil {
		h.m.fs.Close()
	}
	for _, g := range h.guests {
		if g.m != nil {
			g.m.fs.Close()
		}
	}
}

func (s *Sim) hostDir(name string) string {
	return filepath.Join(s.opts.StateDir, "machines", name)
}

func (s *Sim) guestDir(host string, vmid int) string {
	return filepath.Join(s.opts.StateDir, "guests", host, strconv.Itoa(vmid))
}

func (s *Sim) newHost(h Host) (*hostRT, error) {
	key, err := loadOrCreateKey(filepath.Join(s.opts.StateDir, "keys", h.Name+".key"))
	if err != nil {
		return nil, fmt.Errorf("labsim: host key of %s: %w", h.Name, err)
	}
	alt, err := loadOrCreateKey(filepath.Join(s.opts.StateDir, "keys", h.Name+".changed.key"))
	if err != nil {
		return nil, fmt.Errorf("labsim: changed host key of %s: %w", h.Name, err)
	}
	rt := &hostRT{cfg: h, key: key, altKey: alt, conns: map[net.Conn]struct{}{}, guests: map[int]*guestRT{}}
	role := system.RoleLinux
	switch h.Kind {
	case KindProxmox:
		role = system.RoleProxmox
	case KindDarwin:
		role = system.RoleDarwin
	}
	var gateway string
	if len(h.Gateways) > 0 {
		gateway = h.Gateways[0]
	}
	cfg := system.Config{
		Hostname: h.Name, Role: role, User: h.User, Cores: h.Cores, MemoryMB: h.MemoryMB,
		Units: h.Units, Listeners: listeners(h.Listeners), Containers: h.Containers,
		IPv4: hostIP(h.Addr), Gateway: gateway,
		Reachable: func(addr string) bool { return s.reachableFrom(rt, addr) },
		Resolve:   s.resolveName,
		Clock:     s.opts.Clock,
	}
	var extra shell.Registry
	if h.Kind == KindProxmox {
		extra = s.proxmoxPrograms(h.Name)
	}
	rt.m, err = s.newMachine(s.hostDir(h.Name), cfg, extra, false)
	if err != nil {
		return nil, err
	}
	for _, g := range h.Guests {
		if g.VMID <= 0 {
			return nil, fmt.Errorf("labsim: host %s: guest %q has no vmid", h.Name, g.Name)
		}
		if _, dup := rt.guests[g.VMID]; dup {
			return nil, fmt.Errorf("labsim: host %s: vmid %d used twice", h.Name, g.VMID)
		}
		if g.Kind != GuestLXC && g.Kind != GuestVM {
			return nil, fmt.Errorf("labsim: host %s: guest %d: unknown kind %q", h.Name, g.VMID, g.Kind)
		}
		if g.Status == "" {
			g.Status = StatusRunning
		}
		grt := &guestRT{cfg: g, ostype: g.OSType, storage: "local-lvm"}
		if grt.ostype == "" {
			grt.ostype = map[string]string{GuestLXC: "debian", GuestVM: "l26"}[g.Kind]
		}
		grt.net0 = defaultNet0(g)
		grt.ipv4 = guestIP(g.VMID)
		grt.gateway = gateway
		if err := s.attachGuestMachine(rt, grt, false); err != nil {
			return nil, err
		}
		if grt.running() {
			grt.cfg.Status = StatusStopped
			grt.setRunning(true, s.opts.Clock().Add(-time.Duration(1+g.VMID%20)*24*time.Hour))
		}
		rt.guests[g.VMID] = grt
	}
	return rt, nil
}

// attachGuestMachine builds the guest's machine (fresh wipes its directory first).
func (s *Sim) attachGuestMachine(h *hostRT, g *guestRT, fresh bool) error {
	role := system.RoleLXC
	if g.cfg.Kind == GuestVM {
		role = system.RoleVM
	}
	cfg := system.Config{
		Hostname: g.cfg.Hostname, Role: role, Distro: distroFor(g.ostype, g.template),
		Cores: g.cfg.Cores, MemoryMB: g.cfg.MemoryMB, DiskGB: g.cfg.DiskGB,
		Units: g.cfg.Units, Listeners: listeners(g.cfg.Listeners), Containers: g.cfg.Containers,
		IPv4: g.ipv4, Gateway: g.gateway,
		Reachable: func(addr string) bool {
			s.mu.Lock()
			down := g.netDown
			s.mu.Unlock()
			return !down && s.reachableFrom(h, addr)
		},
		NetworkDown: func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return g.netDown
		},
		Resolve: s.resolveName,
		Clock:   s.opts.Clock,
	}
	if cfg.Hostname == "" {
		cfg.Hostname = "CT" + strconv.Itoa(g.cfg.VMID)
	}
	m, err := s.newMachine(s.guestDir(h.cfg.Name, g.cfg.VMID), cfg, nil, fresh)
	if err != nil {
		return err
	}
	g.m = m
	return nil
}

// newMachine opens (and on first use seeds) a machine directory.
func (s *Sim) newMachine(dir string, cfg system.Config, extra shell.Registry, fresh bool) (*machine, error) {
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
	sh := &shell.Shell{FS: fsys, Programs: reg, Env: sys.Env(), Home: sys.Home(), Clock: s.opts.Clock, Log: s.log}
	return &machine{fs: fsys, sys: sys, sh: sh}, nil
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

func listeners(ls []Listener) []system.Listener {
	out := make([]system.Listener, len(ls))
	for i, l := range ls {
		out[i] = system.Listener{Port: l.Port, Process: l.Unit}
	}
	return out
}

func hostIP(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return h
}

// guestIP is the documentation-range address a fleet guest is said to have (data only).
func guestIP(vmid int) string {
	return "192.0.2." + strconv.Itoa(20+vmid%200)
}

func defaultNet0(g Guest) string {
	mac := fmt.Sprintf("BC:24:11:%02X:%02X:%02X", (g.VMID>>16)&0xff, (g.VMID>>8)&0xff, g.VMID&0xff)
	if g.Kind == GuestVM {
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
func (s *Sim) reachableFrom(h *hostRT, addr string) bool {
	for _, gw := range h.cfg.Gateways {
		if gw == addr {
			return true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, other := range s.hosts {
		if hostIP(other.cfg.Addr) == addr && !other.fault.Down {
			return true
		}
	}
	return false
}

// resolveName answers name lookups inside machines: fleet hosts by name (also under
// .lab.example) and guests by hostname. Routes resolve to the ingress listener.
func (s *Sim) resolveName(name string) (string, bool) {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	short := strings.TrimSuffix(name, ".lab.example")
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.hosts {
		if strings.EqualFold(h.cfg.Name, short) {
			return hostIP(h.cfg.Addr), true
		}
		for _, g := range h.guests {
			if strings.EqualFold(g.cfg.Hostname, short) {
				return g.ipv4, true
			}
		}
	}
	if _, ok := s.fleet.Routes[name]; ok {
		return hostIP(s.fleet.HTTPAddr), true
	}
	return "", false
}

// loadOrCreateKey reads an OpenSSH ed25519 private key, creating it on first use so a
// restart serves the same host key.
func loadOrCreateKey(path string) (ssh.Signer, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		return ssh.ParsePrivateKey(data)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "labsim host key")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, err
	}
	return ssh.NewSignerFromKey(priv)
}

// validIPv4 reports whether s is a dotted IPv4 address.
func validIPv4(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is4()
}
