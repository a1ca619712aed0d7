package labsim

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// Proxmox CLI exit statuses: a `die` in the Perl tools exits 255, except when a missing
// config file set errno to ENOENT first (2).
const (
	exitPVE       = 255
	exitNoConfig  = 2
	maxAgentBytes = 16 << 20 // qemu-ga truncates captured output at 16 MiB
)

// defaultTemplates is the container template cache of every Proxmox host: two Debian
// releases and one Ubuntu, as `pveam list local` shows them.
var defaultTemplates = []template{
	{Volid: "local:vztmpl/debian-11-standard_11.7-1_amd64.tar.zst", SizeMB: 109.23},
	{Volid: "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst", SizeMB: 120.29},
	{Volid: "local:vztmpl/ubuntu-24.04-standard_24.04-2_amd64.tar.zst", SizeMB: 141.11},
}

func templateCache(extra []string) []template {
	ts := append([]template(nil), defaultTemplates...)
	seen := map[string]bool{}
	for _, t := range ts {
		seen[t.Volid] = true
	}
	for _, v := range extra {
		if seen[v] || !strings.Contains(v, ":vztmpl/") {
			continue
		}
		seen[v] = true
		h := fnv.New32a()
		h.Write([]byte(v))
		ts = append(ts, template{Volid: v, SizeMB: round2(3 + float64(h.Sum32()%20000)/100)})
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Volid < ts[j].Volid })
	return ts
}

// storages are the storage ids every simulated node has.
var storages = map[string]bool{"local": true, "local-lvm": true, "local-zfs": true}

func (s *Sim) proxmoxPrograms(host string) shell.Registry {
	return shell.Registry{
		"pct":   func(ctx context.Context, inv *shell.Invocation) int { return s.pct(ctx, inv, host) },
		"qm":    func(ctx context.Context, inv *shell.Invocation) int { return s.qm(ctx, inv, host) },
		"pveam": func(ctx context.Context, inv *shell.Invocation) int { return s.pveam(ctx, inv, host) },
		"pvesh": func(ctx context.Context, inv *shell.Invocation) int { return s.pvesh(ctx, inv, host) },
		"pveversion": func(_ context.Context, inv *shell.Invocation) int {
			// What PVE 8.3 prints; -v (the package list) is not simulated.
			fmt.Fprintln(inv.Stdout, "pve-manager/8.3.0/c1689ccb1065a83b (running kernel: 6.8.12-4-pve)")
			return 0
		},
	}
}

// pveArgs splits a PVE command line into positional arguments, --options and the extra
// arguments after "--".
type pveArgs struct {
	pos   []string
	opts  map[string]string
	order []string
	extra []string
	dash  bool
}

func parsePVEArgs(args []string, flags map[string]bool) pveArgs {
	a := pveArgs{opts: map[string]string{}}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			a.dash = true
			a.extra = append([]string(nil), args[i+1:]...)
			return a
		}
		if strings.HasPrefix(arg, "-") && len(arg) > 1 {
			name := strings.TrimLeft(arg, "-")
			if k, v, ok := strings.Cut(name, "="); ok {
				a.opts[k] = v
				a.order = append(a.order, k)
				continue
			}
			if flags[name] || i+1 >= len(args) {
				a.opts[name] = "1"
				a.order = append(a.order, name)
				continue
			}
			i++
			a.opts[name] = args[i]
			a.order = append(a.order, name)
			continue
		}
		a.pos = append(a.pos, arg)
	}
	return a
}

func pveBool(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "1", "yes", "on", "true":
		return true, true
	case "0", "no", "off", "false":
		return false, true
	}
	return false, false
}

// guest looks up a guest of kind on host; the caller holds no lock.
func (s *Sim) guest(host string, vmid int, kind string) (*hostRT, *guestRT, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hosts[host]
	g, ok := h.guests[vmid]
	if !ok || g.cfg.Kind != kind {
		return h, nil, false
	}
	return h, g, true
}

func parseVMID(inv *shell.Invocation, v string) (int, bool) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 100 || n > 999999999 {
		fmt.Fprintf(inv.Stderr, "400 Parameter verification failed.\nvmid: invalid format - value does not look like a valid VM ID\n")
		return 0, false
	}
	return n, true
}

func noConfig(inv *shell.Invocation, node string, vmid int, kind string) int {
	dir := "lxc"
	if kind == GuestVM {
		dir = "qemu-server"
	}
	fmt.Fprintf(inv.Stderr, "Configuration file 'nodes/%s/%s/%d.conf' does not exist\n", node, dir, vmid)
	return exitNoConfig
}

// enterGuest applies a guest's fault to a command entering it. It returns false when the
// command must not run (hung until the session ended, or the connection was dropped).
func (s *Sim) enterGuest(ctx context.Context, g *guestRT) (Fault, bool) {
	s.mu.Lock()
	f := g.fault
	s.mu.Unlock()
	return f, f.wait(ctx)
}

func (s *Sim) pct(ctx context.Context, inv *shell.Invocation, host string) int {
	if len(inv.Args) < 2 {
		fmt.Fprint(inv.Stderr, "ERROR: no command specified\nUSAGE: pct <COMMAND> [ARGS] [OPTIONS]\n")
		return exitPVE
	}
	sub := inv.Args[1]
	a := parsePVEArgs(inv.Args[2:], map[string]bool{"verbose": true, "purge": true, "force": true, "skiplock": true})
	h := s.hosts[host]
	node := h.cfg.Node
	if sub == "list" {
		s.mu.Lock()
		var rows []pctRow
		for _, g := range h.sortedGuests() {
			if g.cfg.Kind == GuestLXC {
				rows = append(rows, pctRow{VMID: g.cfg.VMID, Status: g.cfg.Status, Lock: g.lock, Name: g.displayName()})
			}
		}
		s.mu.Unlock()
		io.WriteString(inv.Stdout, formatPctList(rows))
		return 0
	}
	switch sub {
	case "status", "config", "exec", "start", "stop", "shutdown", "destroy", "reboot", "create", "enter":
	default:
		fmt.Fprintf(inv.Stderr, "ERROR: unknown command 'pct %s'\nUSAGE: pct <COMMAND> [ARGS] [OPTIONS]\n", sub)
		return exitPVE
	}
	if len(a.pos) == 0 {
		fmt.Fprintf(inv.Stderr, "400 not enough arguments\npct %s <vmid>\n", sub)
		return exitPVE
	}
	vmid, ok := parseVMID(inv, a.pos[0])
	if !ok {
		return exitPVE
	}
	if sub == "create" {
		return s.pctCreate(inv, host, vmid, a)
	}
	_, g, ok := s.guest(host, vmid, GuestLXC)
	if !ok {
		return noConfig(inv, node, vmid, GuestLXC)
	}
	now := s.opts.Clock()
	switch sub {
	case "status":
		s.mu.Lock()
		st := g.cfg.Status
		if st == StatusRunning && !g.seenRunning(h.fault, strings.Join(inv.Args, " ")) {
			st = StatusStopped
		}
		s.mu.Unlock()
		fmt.Fprintf(inv.Stdout, "status: %s\n", st)
		return 0
	case "config":
		s.mu.Lock()
		out := configLines(s.lxcConfig(g))
		s.mu.Unlock()
		io.WriteString(inv.Stdout, out)
		return 0
	case "start":
		s.mu.Lock()
		defer s.mu.Unlock()
		if g.running() {
			fmt.Fprintf(inv.Stderr, "CT %d already running\n", vmid)
			return exitPVE
		}
		g.setRunning(true, now)
		return 0
	case "stop", "shutdown":
		s.mu.Lock()
		defer s.mu.Unlock()
		if !g.running() {
			fmt.Fprintf(inv.Stderr, "CT %d not running\n", vmid)
			return exitPVE
		}
		g.setRunning(false, now)
		return 0
	case "reboot":
		s.mu.Lock()
		defer s.mu.Unlock()
		if !g.running() {
			fmt.Fprintf(inv.Stderr, "CT %d not running\n", vmid)
			return exitPVE
		}
		g.setRunning(false, now)
		g.setRunning(true, now)
		return 0
	case "destroy":
		return s.destroyGuest(inv, h, g, GuestLXC)
	}
	// exec (and enter, which needs a terminal the lab does not have)
	s.mu.Lock()
	running := g.seenRunning(h.fault, strings.Join(inv.Args, " "))
	s.mu.Unlock()
	if !running {
		fmt.Fprintf(inv.Stderr, "container '%d' not running!\n", vmid)
		return exitPVE
	}
	if sub == "enter" {
		fmt.Fprintln(inv.Stderr, "lxc-attach: no terminal available")
		return exitPVE
	}
	argv := a.extra
	if !a.dash {
		argv = a.pos[1:]
	}
	if len(argv) == 0 {
		fmt.Fprintln(inv.Stderr, "missing command")
		return exitPVE
	}
	f, ok := s.enterGuest(ctx, g)
	if !ok {
		return 130
	}
	stdio := shell.Stdio{Stdin: inv.Stdin, Stdout: inv.Stdout, Stderr: inv.Stderr}
	if f.DisconnectMidOutput {
		var out bytes.Buffer
		stdio.Stdout, stdio.Stderr = &out, io.Discard
		g.m.sh.RunArgv(ctx, argv, stdio)
		writeHalfAndDrop(inv.Stdout, out.Bytes(), func() { dropConn(ctx) })
		return exitPVE
	}
	return g.m.sh.RunArgv(ctx, argv, stdio)
}

// lxcConfig is a container's configuration as pct config shows it; the caller holds s.mu.
func (s *Sim) lxcConfig(g *guestRT) map[string]string {
	mem := g.cfg.MemoryMB
	if mem <= 0 {
		mem = 512
	}
	cores := g.cfg.Cores
	if cores <= 0 {
		cores = 1
	}
	disk := g.cfg.DiskGB
	if disk <= 0 {
		disk = 8
	}
	swap := g.swap
	if swap == 0 {
		swap = 512
	}
	kv := map[string]string{
		"arch": "amd64", "cores": strconv.Itoa(cores), "hostname": g.displayName(), "memory": strconv.Itoa(mem),
		"net0": g.net0, "ostype": g.ostype, "swap": strconv.Itoa(swap),
		"rootfs": fmt.Sprintf("%s:vm-%d-disk-0,size=%dG", g.storage, g.cfg.VMID, disk),
	}
	if g.cfg.Unprivileged {
		kv["unprivileged"] = "1"
	}
	bootAndTags(g, kv)
	if g.features != "" {
		kv["features"] = g.features
	}
	if g.lock != "" {
		kv["lock"] = g.lock
	}
	if g.descr != "" {
		kv["description"] = g.descr
	}
	return kv
}

// qemuConfig is a VM's configuration as qm config shows it; the caller holds s.mu.
func (s *Sim) qemuConfig(g *guestRT) map[string]string {
	mem := g.cfg.MemoryMB
	if mem <= 0 {
		mem = 2048
	}
	cores := g.cfg.Cores
	if cores <= 0 {
		cores = 2
	}
	kv := map[string]string{
		"boot": "order=scsi0;net0", "cores": strconv.Itoa(cores), "cpu": "x86-64-v2-AES", "memory": strconv.Itoa(mem),
		"name": g.displayName(), "net0": g.net0, "numa": "0", "ostype": g.ostype, "scsihw": "virtio-scsi-single",
		"scsi0":   fmt.Sprintf("%s:vm-%d-disk-0,iothread=1,size=%dG", g.storage, g.cfg.VMID, vmDiskGB(g)),
		"sockets": "1",
	}
	if g.cfg.GuestAgent {
		kv["agent"] = "1"
	}
	bootAndTags(g, kv)
	return kv
}

// bootAndTags adds what both config formats show only when set.
func bootAndTags(g *guestRT, kv map[string]string) {
	if g.cfg.OnBoot {
		kv["onboot"] = "1"
	}
	if len(g.cfg.Tags) > 0 {
		kv["tags"] = strings.Join(g.cfg.Tags, ";")
	}
}

func vmDiskGB(g *guestRT) int {
	if g.cfg.DiskGB > 0 {
		return g.cfg.DiskGB
	}
	return 32
}

func (s *Sim) destroyGuest(inv *shell.Invocation, h *hostRT, g *guestRT, kind string) int {
	s.mu.Lock()
	if g.running() {
		s.mu.Unlock()
		if kind == GuestLXC {
			fmt.Fprintf(inv.Stderr, "unable to destroy CT %d - container is running\n", g.cfg.VMID)
		} else {
			fmt.Fprintf(inv.Stderr, "VM %d is running - destroy failed\n", g.cfg.VMID)
		}
		return exitPVE
	}
	delete(h.guests, g.cfg.VMID)
	storage := g.storage
	s.mu.Unlock()
	g.m.fs.Close()
	dir := s.guestDir(h.cfg.Name, g.cfg.VMID)
	if err := os.RemoveAll(dir); err != nil {
		s.log.Error().Err(err).Str("dir", dir).Msg("remove guest directory")
	}
	if strings.HasSuffix(storage, "lvm") {
		fmt.Fprintf(inv.Stdout, "  Logical volume \"vm-%d-disk-0\" successfully removed.\n", g.cfg.VMID)
	}
	return 0
}

// pctCreate implements `pct create <vmid> <storage>:vztmpl/<template> [OPTIONS]`.
func (s *Sim) pctCreate(inv *shell.Invocation, host string, vmid int, a pveArgs) int {
	h := s.hosts[host]
	if len(a.pos) < 2 {
		fmt.Fprint(inv.Stderr, "400 not enough arguments\npct create <vmid> <ostemplate> [OPTIONS]\n")
		return exitPVE
	}
	known := map[string]bool{
		"hostname": true, "unprivileged": true, "features": true, "memory": true, "cores": true, "storage": true,
		"rootfs": true, "swap": true, "password": true, "ssh-public-keys": true, "start": true, "onboot": true,
		"ostype": true, "description": true, "nameserver": true, "searchdomain": true, "tags": true, "arch": true,
		"cmode": true, "console": true, "tty": true, "pool": true, "unique": true, "timezone": true,
		"protection": true, "cpulimit": true, "cpuunits": true, "force": true,
	}
	for _, k := range a.order {
		if !known[k] && !(strings.HasPrefix(k, "net") && len(k) > 3) && !(strings.HasPrefix(k, "mp") && len(k) > 2) {
			fmt.Fprintf(inv.Stderr, "Unknown option: %s\n400 unable to parse option\npct create <vmid> <ostemplate> [OPTIONS]\n", k)
			return exitPVE
		}
	}
	var verrs []string
	intOpt := func(k string, def int) int {
		v, ok := a.opts[k]
		if !ok {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			verrs = append(verrs, fmt.Sprintf("%s: type check ('integer') failed - got '%s'", k, v))
			return def
		}
		return n
	}
	boolOpt := func(k string) bool {
		v, ok := a.opts[k]
		if !ok {
			return false
		}
		b, ok := pveBool(v)
		if !ok {
			verrs = append(verrs, fmt.Sprintf("%s: type check ('boolean') failed - got '%s'", k, v))
		}
		return b
	}
	memory, cores, swap := intOpt("memory", 512), intOpt("cores", 1), intOpt("swap", 512)
	unprivileged, start := boolOpt("unprivileged"), boolOpt("start")
	features := a.opts["features"]
	for _, f := range strings.Split(features, ",") {
		if f == "" {
			continue
		}
		k, v, ok := strings.Cut(f, "=")
		if _, bok := pveBool(v); !ok || !bok || (k != "nesting" && k != "keyctl" && k != "fuse" && k != "mknod" && k != "mount" && k != "force_rw_sys") {
			verrs = append(verrs, fmt.Sprintf("features: invalid format - format error\nfeatures.%s: property is not defined in schema and the schema does not allow additional properties", k))
		}
	}
	net0 := a.opts["net0"]
	ipv4, gw, netErr := parseNet0(net0)
	if netErr != "" {
		verrs = append(verrs, netErr)
	}
	hostname := a.opts["hostname"]
	if hostname != "" && !validHostname(hostname) {
		verrs = append(verrs, "hostname: invalid format - value does not look like a valid DNS name")
	}
	if len(verrs) > 0 {
		fmt.Fprintf(inv.Stderr, "400 Parameter verification failed.\n%s\npct create <vmid> <ostemplate> [OPTIONS]\n", strings.Join(verrs, "\n"))
		return exitPVE
	}
	storage := a.opts["storage"]
	if storage == "" {
		storage = "local"
	}
	if !storages[storage] {
		fmt.Fprintf(inv.Stderr, "unable to create CT %d - storage '%s' does not exist\n", vmid, storage)
		return exitPVE
	}
	ostemplate := a.pos[1]
	store, _, _ := strings.Cut(ostemplate, ":")
	if !strings.Contains(ostemplate, ":") || !storages[store] {
		fmt.Fprintf(inv.Stderr, "unable to create CT %d - storage '%s' does not exist\n", vmid, store)
		return exitPVE
	}
	var tmpl *template
	for i := range s.templates {
		if s.templates[i].Volid == ostemplate {
			tmpl = &s.templates[i]
		}
	}
	if tmpl == nil {
		fmt.Fprintf(inv.Stderr, "unable to create CT %d - volume '%s' does not exist\n", vmid, ostemplate)
		return exitPVE
	}
	// The VMID namespace is cluster-wide.
	s.mu.Lock()
	for _, other := range s.hosts {
		if other != h && (h.cfg.Cluster == "" || other.cfg.Cluster != h.cfg.Cluster) {
			continue
		}
		if g, ok := other.guests[vmid]; ok {
			s.mu.Unlock()
			what := "CT"
			if g.cfg.Kind == GuestVM {
				what = "VM"
			}
			fmt.Fprintf(inv.Stderr, "unable to create CT %d - %s %d already exists on node '%s'\n", vmid, what, vmid, other.cfg.Node)
			return exitPVE
		}
	}
	netDown := false
	if gw != "" {
		netDown = true
		for _, known := range h.cfg.Gateways {
			if known == gw {
				netDown = false
			}
		}
	}
	ostype := a.opts["ostype"]
	if ostype == "" {
		ostype = "debian"
		if strings.Contains(ostemplate, "ubuntu") {
			ostype = "ubuntu"
		} else if strings.Contains(ostemplate, "alpine") {
			ostype = "alpine"
		}
	}
	disk := 8
	if rootfs := a.opts["rootfs"]; rootfs != "" {
		if _, size, ok := strings.Cut(rootfs, ":"); ok {
			if n, err := strconv.Atoi(strings.TrimSuffix(size, "G")); err == nil && n > 0 {
				disk = n
			}
		}
	}
	name := hostname
	g := &guestRT{
		cfg: Guest{VMID: vmid, Kind: GuestLXC, Name: name, Hostname: hostname, Status: StatusStopped,
			MemoryMB: memory, Cores: cores, DiskGB: disk, OSType: ostype, Unprivileged: unprivileged},
		storage: storage, features: features, swap: swap, template: ostemplate, ostype: ostype, descr: a.opts["description"],
		ipv4: ipv4, gateway: gw, netDown: netDown,
	}
	if net0 == "" {
		g.net0 = ""
	} else {
		g.net0 = completeNet0(net0, vmid)
	}
	if g.ipv4 == "" {
		g.ipv4 = guestIP(vmid)
	}
	if g.gateway == "" && len(h.cfg.Gateways) > 0 {
		g.gateway = h.cfg.Gateways[0]
	}
	// Reserve the vmid while the sandbox is prepared.
	g.lock = "create"
	h.guests[vmid] = g
	s.mu.Unlock()
	if err := s.attachGuestMachine(h, g, true); err != nil {
		s.mu.Lock()
		delete(h.guests, vmid)
		s.mu.Unlock()
		fmt.Fprintf(inv.Stderr, "unable to create CT %d - %v\n", vmid, err)
		return exitPVE
	}
	s.mu.Lock()
	g.lock = ""
	if start {
		g.setRunning(true, s.opts.Clock())
	}
	s.mu.Unlock()
	file := ostemplate[strings.Index(ostemplate, "/")+1:]
	if strings.HasSuffix(storage, "lvm") {
		fmt.Fprintf(inv.Stdout, "  Logical volume \"vm-%d-disk-0\" created.\n", vmid)
	}
	blocks := disk * 262144
	fmt.Fprintf(inv.Stdout, "Creating filesystem with %d 4k blocks and %d inodes\n", blocks, blocks/4)
	fmt.Fprintf(inv.Stdout, "extracting archive '/var/lib/vz/template/cache/%s'\n", file)
	fmt.Fprintf(inv.Stdout, "Total bytes read: %d (%dMiB, 312MiB/s)\n", int64(tmpl.SizeMB*4*1024*1024), int64(tmpl.SizeMB*4))
	fmt.Fprintf(inv.Stdout, "Detected container architecture: amd64\nCreating SSH host keys from the container template\n")
	return 0
}

func validHostname(h string) bool {
	if len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// parseNet0 validates a net0 value and returns its static address and gateway; the third
// result is a PVE-style verification error.
func parseNet0(v string) (ip, gw, verr string) {
	if v == "" {
		return "", "", ""
	}
	fields := map[string]string{}
	for _, part := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(part, "=")
		if !ok {
			return "", "", "net0: invalid format - format error\nnet0." + part + ": property is missing a value"
		}
		fields[k] = val
	}
	if fields["name"] == "" {
		return "", "", "net0: invalid format - format error\nnet0.name: property is missing and it is not optional"
	}
	switch addr := fields["ip"]; addr {
	case "", "dhcp", "manual":
	default:
		p, err := netip.ParsePrefix(addr)
		if err != nil || !p.Addr().Is4() {
			return "", "", "net0: invalid format - format error\nnet0.ip: invalid format - invalid IPv4 network configuration '" + addr + "'"
		}
		ip = p.Addr().String()
	}
	if g := fields["gw"]; g != "" {
		if !validIPv4(g) {
			return "", "", "net0: invalid format - format error\nnet0.gw: invalid format - value does not look like a valid IPv4 address"
		}
		gw = g
	}
	return ip, gw, ""
}

// completeNet0 adds what Proxmox fills in (hwaddr, type) to a user's net0.
func completeNet0(v string, vmid int) string {
	if !strings.Contains(v, "hwaddr=") {
		v += fmt.Sprintf(",hwaddr=BC:24:11:%02X:%02X:%02X", (vmid>>16)&0xff, (vmid>>8)&0xff, vmid&0xff)
	}
	if !strings.Contains(v, "type=") {
		v += ",type=veth"
	}
	return v
}

func (s *Sim) qm(ctx context.Context, inv *shell.Invocation, host string) int {
	if len(inv.Args) < 2 {
		fmt.Fprint(inv.Stderr, "ERROR: no command specified\nUSAGE: qm <COMMAND> [ARGS] [OPTIONS]\n")
		return exitPVE
	}
	sub := inv.Args[1]
	rest := inv.Args[2:]
	h := s.hosts[host]
	node := h.cfg.Node
	if sub == "list" {
		s.mu.Lock()
		var rows []qmRow
		for _, g := range h.sortedGuests() {
			if g.cfg.Kind != GuestVM {
				continue
			}
			mem := g.cfg.MemoryMB
			if mem <= 0 {
				mem = 2048
			}
			rows = append(rows, qmRow{VMID: g.cfg.VMID, Name: g.displayName(), Status: g.cfg.Status, MemMB: mem,
				BootDiskGB: float64(vmDiskGB(g)), PID: g.pid})
		}
		s.mu.Unlock()
		io.WriteString(inv.Stdout, formatQmList(rows))
		return 0
	}
	if sub == "guest" {
		if len(rest) == 0 || rest[0] != "exec" {
			fmt.Fprintln(inv.Stderr, "ERROR: unknown command 'qm guest'")
			return exitPVE
		}
		return s.qmGuestExec(ctx, inv, host, rest[1:])
	}
	switch sub {
	case "status", "config", "start", "stop", "shutdown", "reboot", "destroy", "reset":
	default:
		fmt.Fprintf(inv.Stderr, "ERROR: unknown command 'qm %s'\nUSAGE: qm <COMMAND> [ARGS] [OPTIONS]\n", sub)
		return exitPVE
	}
	a := parsePVEArgs(rest, map[string]bool{"verbose": true, "purge": true, "skiplock": true, "forceStop": true})
	if len(a.pos) == 0 {
		fmt.Fprintf(inv.Stderr, "400 not enough arguments\nqm %s <vmid>\n", sub)
		return exitPVE
	}
	vmid, ok := parseVMID(inv, a.pos[0])
	if !ok {
		return exitPVE
	}
	_, g, ok := s.guest(host, vmid, GuestVM)
	if !ok {
		return noConfig(inv, node, vmid, GuestVM)
	}
	now := s.opts.Clock()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch sub {
	case "status":
		st := g.cfg.Status
		if st == StatusRunning && !g.seenRunning(h.fault, strings.Join(inv.Args, " ")) {
			st = StatusStopped
		}
		fmt.Fprintf(inv.Stdout, "status: %s\n", st)
	case "config":
		io.WriteString(inv.Stdout, configLines(s.qemuConfig(g)))
	case "start":
		if g.running() {
			fmt.Fprintf(inv.Stderr, "VM %d already running\n", vmid)
			return exitPVE
		}
		g.setRunning(true, now)
	case "stop", "shutdown":
		if !g.running() {
			if sub == "stop" {
				return 0
			}
			fmt.Fprintf(inv.Stderr, "VM %d not running\n", vmid)
			return exitPVE
		}
		g.setRunning(false, now)
	case "reboot", "reset":
		if !g.running() {
			fmt.Fprintf(inv.Stderr, "VM %d not running\n", vmid)
			return exitPVE
		}
		g.setRunning(false, now)
		g.setRunning(true, now)
	case "destroy":
		s.mu.Unlock()
		code := s.destroyGuest(inv, h, g, GuestVM)
		s.mu.Lock()
		return code
	}
	return 0
}

func (s *Sim) qmGuestExec(ctx context.Context, inv *shell.Invocation, host string, args []string) int {
	a := parsePVEArgs(args, nil)
	if len(a.pos) == 0 {
		fmt.Fprint(inv.Stderr, "400 not enough arguments\nqm guest exec <vmid> [<extra-args>] [OPTIONS]\n")
		return exitPVE
	}
	vmid, ok := parseVMID(inv, a.pos[0])
	if !ok {
		return exitPVE
	}
	argv := a.extra
	if !a.dash {
		argv = a.pos[1:]
	}
	timeout := 30 * time.Second
	if v, ok := a.opts["timeout"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			fmt.Fprintf(inv.Stderr, "400 Parameter verification failed.\ntimeout: type check ('integer') failed - got '%s'\n", v)
			return exitPVE
		}
		timeout = time.Duration(n) * time.Second
	}
	passStdin := false
	if v, ok := a.opts["pass-stdin"]; ok {
		passStdin, _ = pveBool(v)
	}
	if v, ok := a.opts["synchronous"]; ok {
		if sync, _ := pveBool(v); !sync {
			timeout = -1
		}
	}
	h, g, ok := s.guest(host, vmid, GuestVM)
	if !ok {
		return noConfig(inv, h.cfg.Node, vmid, GuestVM)
	}
	s.mu.Lock()
	running, agent, agentDown := g.seenRunning(h.fault, strings.Join(inv.Args, " ")), g.cfg.GuestAgent, g.fault.GuestAgentDown
	s.mu.Unlock()
	switch {
	case !running:
		fmt.Fprintf(inv.Stderr, "VM %d is not running\n", vmid)
		return exitPVE
	case !agent:
		fmt.Fprintln(inv.Stderr, "No QEMU guest agent configured")
		return exitPVE
	case agentDown:
		fmt.Fprintln(inv.Stderr, "QEMU guest agent is not running")
		return exitPVE
	case len(argv) == 0:
		fmt.Fprint(inv.Stderr, "400 Parameter verification failed.\nextra-args: No command given\n")
		return exitPVE
	}
	f, ok := s.enterGuest(ctx, g)
	if !ok {
		return 130
	}
	if _, found := g.m.sh.Lookup(argv[0], nil, "/"); !found {
		fmt.Fprintf(inv.Stderr, "Agent error: Failed to execute child process “%s” (No such file or directory)\n", argv[0])
		return exitPVE
	}
	var stdin io.Reader = strings.NewReader("")
	if passStdin {
		data, err := io.ReadAll(io.LimitReader(inv.Stdin, 1<<20+1))
		if err != nil || len(data) > 1<<20 {
			fmt.Fprintln(inv.Stderr, "'input-data' (STDIN) is limited to 1 MiB, aborting")
			return exitPVE
		}
		stdin = bytes.NewReader(data)
	}
	// The agent runs the command on its own: it keeps going after qm gives up waiting.
	var out, errb cappedBuffer
	done := make(chan int, 1)
	pid := 1000 + vmid%9000
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			if r := recover(); r != nil {
				s.log.Error().Interface("panic", r).Msg("guest exec panicked")
				done <- 255
			}
		}()
		done <- g.m.sh.RunArgv(s.ctx, argv, shell.Stdio{Stdin: stdin, Stdout: &out, Stderr: &errb})
	}()
	var waitC <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		waitC = t.C
	} else if timeout < 0 {
		io.WriteString(inv.Stdout, formatGuestExecPid(pid))
		return 0
	}
	var code int
	select {
	case code = <-done:
	case <-waitC:
		fmt.Fprintln(inv.Stderr, "timeout reached, returning pid")
		io.WriteString(inv.Stdout, formatGuestExecPid(pid))
		return 0
	case <-ctx.Done():
		return 130
	}
	res := guestExecResult{ExitCode: code, Stdout: out.Bytes(), Stderr: errb.Bytes(), OutTruncated: out.truncated, ErrTruncated: errb.truncated}
	text := formatGuestExec(res)
	if f.DisconnectMidOutput {
		writeHalfAndDrop(inv.Stdout, []byte(text), func() { dropConn(ctx) })
		return exitPVE
	}
	io.WriteString(inv.Stdout, text)
	return 0
}

// cappedBuffer collects output up to the guest agent's limit. It is safe for the concurrent
// writes a command's pipeline may make.
type cappedBuffer struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	truncated bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := maxAgentBytes - c.buf.Len()
	if room <= 0 {
		c.truncated = true
		return len(p), nil
	}
	if len(p) > room {
		c.buf.Write(p[:room])
		c.truncated = true
		return len(p), nil
	}
	c.buf.Write(p)
	return len(p), nil
}

func (c *cappedBuffer) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf.Bytes()...)
}

func (s *Sim) pveam(_ context.Context, inv *shell.Invocation, _ string) int {
	if len(inv.Args) < 2 {
		fmt.Fprint(inv.Stderr, "ERROR: no command specified\nUSAGE: pveam <COMMAND> [ARGS] [OPTIONS]\n")
		return exitPVE
	}
	switch inv.Args[1] {
	case "list":
		if len(inv.Args) < 3 {
			fmt.Fprint(inv.Stderr, "400 not enough arguments\npveam list <storage> [OPTIONS]\n")
			return exitPVE
		}
		storage := inv.Args[2]
		if !storages[storage] {
			fmt.Fprintf(inv.Stderr, "storage '%s' does not exist\n", storage)
			return exitPVE
		}
		var ts []template
		for _, t := range s.templates {
			if strings.HasPrefix(t.Volid, storage+":") {
				ts = append(ts, t)
			}
		}
		io.WriteString(inv.Stdout, formatPveamList(ts))
		return 0
	case "update":
		fmt.Fprintln(inv.Stdout, "update successful")
		return 0
	case "available":
		fmt.Fprintf(inv.Stdout, "%-15s %s\n", "system", "debian-12-standard_12.7-1_amd64.tar.zst")
		fmt.Fprintf(inv.Stdout, "%-15s %s\n", "system", "debian-13-standard_13.1-2_amd64.tar.zst")
		fmt.Fprintf(inv.Stdout, "%-15s %s\n", "system", "ubuntu-24.04-standard_24.04-2_amd64.tar.zst")
		return 0
	}
	fmt.Fprintf(inv.Stderr, "ERROR: unknown command 'pveam %s'\n", inv.Args[1])
	return exitPVE
}

// guestResource is one guest's figures for pvesh.
func (s *Sim) guestResource(h *hostRT, g *guestRT, now time.Time, clusterView bool) map[string]any {
	maxmem := int64(g.cfg.MemoryMB) << 20
	if maxmem == 0 {
		maxmem = 512 << 20
	}
	disk := g.cfg.DiskGB
	if disk <= 0 {
		disk = 8
		if g.cfg.Kind == GuestVM {
			disk = 32
		}
	}
	maxdisk := int64(disk) << 30
	cores := g.cfg.Cores
	if cores <= 0 {
		cores = 1
	}
	status := g.cfg.Status
	if h.fault.Down && clusterView {
		status = "unknown"
	}
	r := map[string]any{
		"vmid": g.cfg.VMID, "status": status, "name": g.displayName(), "cpus": cores, "maxmem": maxmem,
		"maxdisk": maxdisk, "cpu": 0, "mem": 0, "disk": 0, "netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0, "uptime": 0,
	}
	if g.cfg.Kind == GuestLXC {
		r["type"] = "lxc"
		r["swap"] = 0
		r["maxswap"] = int64(512 << 20)
	}
	if g.running() {
		up := int64(now.Sub(g.startedAt).Seconds())
		seed := int64(g.cfg.VMID)
		r["uptime"] = up
		r["pid"] = g.pid
		r["cpu"] = float64(5+(seed*7+up/60)%40) / 1000
		r["mem"] = maxmem * (20 + (seed*13)%30) / 100
		r["disk"] = maxdisk * (15 + (seed*11)%25) / 100
		r["netin"] = up * (1000 + seed%500)
		r["netout"] = up * (400 + seed%300)
		r["diskread"] = up * 2048
		r["diskwrite"] = up * 4096
	}
	if g.lock != "" {
		r["lock"] = g.lock
	}
	if clusterView {
		kind := "lxc"
		if g.cfg.Kind == GuestVM {
			kind = "qemu"
		}
		r["type"] = kind
		r["id"] = fmt.Sprintf("%s/%d", kind, g.cfg.VMID)
		r["node"] = h.cfg.Node
		r["maxcpu"] = cores
		r["template"] = 0
		delete(r, "cpus")
		delete(r, "pid")
		delete(r, "swap")
		delete(r, "maxswap")
	}
	return r
}

func (s *Sim) pvesh(_ context.Context, inv *shell.Invocation, host string) int {
	if len(inv.Args) < 3 || inv.Args[1] != "get" {
		if len(inv.Args) >= 2 && inv.Args[1] != "get" {
			fmt.Fprintf(inv.Stderr, "ERROR: the lab only supports 'pvesh get'\n")
			return exitPVE
		}
		fmt.Fprint(inv.Stderr, "400 not enough arguments\npvesh get <api_path> [OPTIONS] [FORMAT_OPTIONS]\n")
		return exitPVE
	}
	a := parsePVEArgs(inv.Args[2:], map[string]bool{"noborder": true, "noheader": true, "human-readable": true})
	if len(a.pos) == 0 {
		fmt.Fprint(inv.Stderr, "400 not enough arguments\npvesh get <api_path> [OPTIONS] [FORMAT_OPTIONS]\n")
		return exitPVE
	}
	p, query, _ := strings.Cut(a.pos[0], "?")
	p = "/" + strings.Trim(p, "/")
	typeFilter := a.opts["type"]
	for _, kv := range strings.Split(query, "&") {
		if v, ok := strings.CutPrefix(kv, "type="); ok {
			typeFilter = v
		}
	}
	now := s.opts.Clock()
	h := s.hosts[host]
	var result any
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	s.mu.Lock()
	switch {
	case p == "/cluster/resources":
		var items []any
		for _, name := range s.order {
			other := s.hosts[name]
			if other != h && (h.cfg.Cluster == "" || other.cfg.Cluster != h.cfg.Cluster) {
				continue
			}
			if other.cfg.Kind != KindProxmox {
				continue
			}
			if typeFilter == "" || typeFilter == "node" {
				status := "online"
				if other.fault.Down {
					status = "offline"
				}
				items = append(items, map[string]any{"id": "node/" + other.cfg.Node, "type": "node", "node": other.cfg.Node,
					"status": status, "maxcpu": max(other.cfg.Cores, 1), "maxmem": int64(max(other.cfg.MemoryMB, 1024)) << 20})
			}
			if typeFilter == "" || typeFilter == "vm" {
				for _, g := range other.sortedGuests() {
					items = append(items, s.guestResource(other, g, now, true))
				}
			}
		}
		if items == nil {
			items = []any{}
		}
		result = items
	case len(parts) == 3 && parts[0] == "nodes" && (parts[2] == "lxc" || parts[2] == "qemu"):
		target := s.nodeHost(h, parts[1])
		if target == nil {
			s.mu.Unlock()
			fmt.Fprintf(inv.Stderr, "hostname lookup '%s' failed - failed to get address info for: %s: Name or service not known\n", parts[1], parts[1])
			return exitPVE
		}
		want := GuestLXC
		if parts[2] == "qemu" {
			want = GuestVM
		}
		items := []any{}
		for _, g := range target.sortedGuests() {
			if g.cfg.Kind == want {
				items = append(items, s.guestResource(target, g, now, false))
			}
		}
		result = items
	case len(parts) == 6 && parts[0] == "nodes" && (parts[2] == "lxc" || parts[2] == "qemu") && parts[4] == "status" && parts[5] == "current":
		target := s.nodeHost(h, parts[1])
		vmid, _ := strconv.Atoi(parts[3])
		var g *guestRT
		if target != nil {
			g = target.guests[vmid]
		}
		want := GuestLXC
		if parts[2] == "qemu" {
			want = GuestVM
		}
		if g == nil || g.cfg.Kind != want {
			s.mu.Unlock()
			node := parts[1]
			if target != nil {
				node = target.cfg.Node
			}
			return noConfig(inv, node, vmid, want)
		}
		result = s.guestResource(target, g, now, false)
	case p == "/cluster/nextid":
		// The lowest free vmid from 100 over the cluster (Proxmox answers it as a string).
		used := map[int]bool{}
		for _, name := range s.order {
			other := s.hosts[name]
			if other.cfg.Kind == KindProxmox && (other == h || (h.cfg.Cluster != "" && other.cfg.Cluster == h.cfg.Cluster)) {
				for vmid := range other.guests {
					used[vmid] = true
				}
			}
		}
		next := 100
		for used[next] {
			next++
		}
		result = strconv.Itoa(next)
	case p == "/nodes":
		items := []any{}
		for _, name := range s.order {
			other := s.hosts[name]
			if other.cfg.Kind == KindProxmox && (other == h || (h.cfg.Cluster != "" && other.cfg.Cluster == h.cfg.Cluster)) {
				items = append(items, map[string]any{"node": other.cfg.Node, "status": map[bool]string{true: "offline", false: "online"}[other.fault.Down], "type": "node"})
			}
		}
		result = items
	default:
		s.mu.Unlock()
		fmt.Fprintf(inv.Stderr, "No '%s' handler defined for '%s'\n", "get", p)
		return exitPVE
	}
	s.mu.Unlock()
	switch a.opts["output-format"] {
	case "json-pretty":
		io.WriteString(inv.Stdout, perlPretty(result))
	default:
		// The lab renders the default text format as JSON as well: its consumers parse JSON.
		out, err := compactJSON(result)
		if err != nil {
			fmt.Fprintf(inv.Stderr, "unable to render result: %v\n", err)
			return exitPVE
		}
		io.WriteString(inv.Stdout, out)
	}
	return 0
}

// nodeHost finds the host serving node name within h's cluster; the caller holds s.mu.
func (s *Sim) nodeHost(h *hostRT, node string) *hostRT {
	if h.cfg.Node == node {
		return h
	}
	if h.cfg.Cluster == "" {
		return nil
	}
	for _, other := range s.hosts {
		if other.cfg.Node == node && other.cfg.Cluster == h.cfg.Cluster && other.cfg.Kind == KindProxmox {
			return other
		}
	}
	return nil
}
