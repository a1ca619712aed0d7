package proxmox

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/oikos-hq/oikos/testkit/labsim/fleet"
	"github.com/oikos-hq/oikos/testkit/labsim/lab"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

func (pt *Tools) pct(ctx context.Context, inv *shell.Invocation, host string) int {
	if len(inv.Args) < 2 {
		return noCommand(inv, "pct")
	}
	sub := inv.Args[1]
	a := parsePVEArgs(inv.Args[2:], map[string]bool{"verbose": true, "purge": true, "force": true, "skiplock": true})
	h := pt.lab.Host(host)
	node := h.Cfg.Node
	if sub == "list" {
		pt.lab.Mu.Lock()
		var rows []pctRow
		for _, g := range h.SortedGuests() {
			if g.Cfg.Kind == fleet.GuestLXC {
				rows = append(rows, pctRow{VMID: g.Cfg.VMID, Status: g.Cfg.Status, Lock: g.Lock, Name: g.DisplayName()})
			}
		}
		pt.lab.Mu.Unlock()
		io.WriteString(inv.Stdout, formatPctList(rows))
		return 0
	}
	if sub == "migrate" {
		return pt.migrateCmd(inv, host, fleet.GuestLXC, inv.Args[2:])
	}
	switch sub {
	case "status", "config", "exec", "start", "stop", "shutdown", "destroy", "reboot", "create", "enter":
	default:
		return unknownCommand(inv, "pct", sub)
	}
	vmid, ok := vmidArg(inv, "pct", sub, a)
	if !ok {
		return exitPVE
	}
	if sub == "create" {
		return pt.pctCreate(inv, host, vmid, a)
	}
	_, g, ok := pt.guest(host, vmid, fleet.GuestLXC)
	if !ok {
		return noConfig(inv, node, vmid, fleet.GuestLXC)
	}
	now := pt.lab.Now()
	switch sub {
	case "status":
		pt.lab.Mu.Lock()
		st := g.Cfg.Status
		if st == fleet.StatusRunning && !g.SeenRunning(h.Fault, strings.Join(inv.Args, " ")) {
			st = fleet.StatusStopped
		}
		pt.lab.Mu.Unlock()
		fmt.Fprintf(inv.Stdout, "status: %s\n", st)
		return 0
	case "config":
		pt.lab.Mu.Lock()
		out := configLines(pt.lxcConfig(g))
		pt.lab.Mu.Unlock()
		io.WriteString(inv.Stdout, out)
		return 0
	case "start":
		pt.lab.Mu.Lock()
		defer pt.lab.Mu.Unlock()
		if g.Running() {
			fmt.Fprintf(inv.Stderr, "CT %d already running\n", vmid)
			return exitPVE
		}
		g.SetRunning(true, now)
		return 0
	case "stop", "shutdown", "reboot":
		pt.lab.Mu.Lock()
		defer pt.lab.Mu.Unlock()
		if !g.Running() {
			fmt.Fprintf(inv.Stderr, "CT %d not running\n", vmid)
			return exitPVE
		}
		g.SetRunning(false, now)
		if sub == "reboot" {
			g.SetRunning(true, now)
		}
		return 0
	case "destroy":
		return pt.destroyGuest(inv, h, g, fleet.GuestLXC)
	}
	// exec (and enter, which needs a terminal the lab does not have)
	pt.lab.Mu.Lock()
	running := g.SeenRunning(h.Fault, strings.Join(inv.Args, " "))
	pt.lab.Mu.Unlock()
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
	f, ok := pt.enterGuest(ctx, g)
	if !ok {
		return 130
	}
	stdio := shell.Stdio{Stdin: inv.Stdin, Stdout: inv.Stdout, Stderr: inv.Stderr}
	if f.DisconnectMidOutput {
		var out bytes.Buffer
		stdio.Stdout, stdio.Stderr = &out, io.Discard
		g.M.Sh.RunArgv(ctx, argv, stdio)
		lab.WriteHalfAndDrop(inv.Stdout, out.Bytes(), func() { lab.DropConn(ctx) })
		return exitPVE
	}
	return g.M.Sh.RunArgv(ctx, argv, stdio)
}

// lxcConfig is a container's configuration as pct config shows it; the caller holds pt.lab.Mu.
func (pt *Tools) lxcConfig(g *lab.Guest) map[string]string {
	mem, cores, disk := positiveOr(g.Cfg.MemoryMB, 512), positiveOr(g.Cfg.Cores, 1), positiveOr(g.Cfg.DiskGB, 8)
	swap := cmp.Or(g.Swap, 512)
	kv := map[string]string{
		"arch": "amd64", "cores": strconv.Itoa(cores), "hostname": g.DisplayName(), "memory": strconv.Itoa(mem),
		"net0": g.Net0, "ostype": g.OSType, "swap": strconv.Itoa(swap),
		"rootfs": fmt.Sprintf("%s:vm-%d-disk-0,size=%dG", g.Storage, g.Cfg.VMID, disk),
	}
	if g.Cfg.Unprivileged {
		kv["unprivileged"] = "1"
	}
	bootAndTags(g, kv)
	if g.Features != "" {
		kv["features"] = g.Features
	}
	if g.Lock != "" {
		kv["lock"] = g.Lock
	}
	if g.Descr != "" {
		kv["description"] = g.Descr
	}
	return kv
}

// pctCreate implements `pct create <vmid> <storage>:vztmpl/<template> [OPTIONS]`.
func (pt *Tools) pctCreate(inv *shell.Invocation, host string, vmid int, a pveArgs) int {
	h := pt.lab.Host(host)
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
	for i := range pt.templates {
		if pt.templates[i].Volid == ostemplate {
			tmpl = &pt.templates[i]
		}
	}
	if tmpl == nil {
		fmt.Fprintf(inv.Stderr, "unable to create CT %d - volume '%s' does not exist\n", vmid, ostemplate)
		return exitPVE
	}
	// The VMID namespace is cluster-wide.
	pt.lab.Mu.Lock()
	for _, other := range pt.lab.Hosts() {
		if !h.SameCluster(other) {
			continue
		}
		if g, ok := other.Guests[vmid]; ok {
			pt.lab.Mu.Unlock()
			what := "CT"
			if g.Cfg.Kind == fleet.GuestVM {
				what = "VM"
			}
			fmt.Fprintf(inv.Stderr, "unable to create CT %d - %s %d already exists on node '%s'\n", vmid, what, vmid, other.Cfg.Node)
			return exitPVE
		}
	}
	netDown := false
	if gw != "" {
		netDown = true
		for _, known := range h.Cfg.Gateways {
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
	g := &lab.Guest{
		Cfg: fleet.Guest{VMID: vmid, Kind: fleet.GuestLXC, Name: name, Hostname: hostname, Status: fleet.StatusStopped,
			MemoryMB: memory, Cores: cores, DiskGB: disk, OSType: ostype, Unprivileged: unprivileged},
		Storage: storage, Features: features, Swap: swap, Template: ostemplate, OSType: ostype, Descr: a.opts["description"],
		IPv4: ipv4, Gateway: gw, NetDown: netDown,
	}
	if net0 == "" {
		g.Net0 = ""
	} else {
		g.Net0 = completeNet0(net0, vmid)
	}
	if g.IPv4 == "" {
		g.IPv4 = lab.GuestIP(vmid)
	}
	if g.Gateway == "" && len(h.Cfg.Gateways) > 0 {
		g.Gateway = h.Cfg.Gateways[0]
	}
	// Reserve the vmid while the sandbox is prepared.
	g.Lock = "create"
	g.Place(h)
	h.Guests[vmid] = g
	pt.lab.Mu.Unlock()
	if err := pt.lab.AttachGuestMachine(h, g, true); err != nil {
		pt.lab.Mu.Lock()
		delete(h.Guests, vmid)
		pt.lab.Mu.Unlock()
		fmt.Fprintf(inv.Stderr, "unable to create CT %d - %v\n", vmid, err)
		return exitPVE
	}
	pt.lab.Mu.Lock()
	g.Lock = ""
	if start {
		g.SetRunning(true, pt.lab.Now())
	}
	pt.lab.Mu.Unlock()
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
		v += ",hwaddr=" + lab.MAC(vmid)
	}
	if !strings.Contains(v, "type=") {
		v += ",type=veth"
	}
	return v
}

// validIPv4 reports whether s is a dotted IPv4 address.
func validIPv4(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is4()
}
