// Package fleet describes a simulated homelab: its machines, their guests and the HTTP
// routes, as Go values or read from an inventory file (FromInventory). It is data only:
// nothing here listens or runs.
package fleet

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Machine kinds of a Host.
const (
	KindProxmox = "proxmox"
	KindLinux   = "linux"
	KindDarwin  = "darwin"
)

// Guest kinds.
const (
	GuestLXC = "lxc"
	GuestVM  = "vm"
)

// Guest statuses.
const (
	StatusRunning = "running"
	StatusStopped = "stopped"
)

// DefaultHTTPAddr is where the ingress HTTP listener binds when the fleet names none.
const DefaultHTTPAddr = "127.0.20.1:8080"

// DefaultHTTPSAddr is where the ingress HTTPS listener binds when the fleet names none: the
// same address as DefaultHTTPAddr, so a name map entry "*.lab.example=127.0.20.1:8443"
// sends a check's port 443 to it.
const DefaultHTTPSAddr = "127.0.20.1:8443"

// Fleet is the simulated homelab: machines reachable over SSH and the HTTP ingress routes.
type Fleet struct {
	Hosts []Host
	// HTTPAddr is the ingress listener ("ip:port"); empty means DefaultHTTPAddr.
	HTTPAddr string
	// HTTPSAddr is the ingress listener serving the same routes over TLS ("ip:port") with
	// the certificate of labsim.Sim.CAFile; empty means DefaultHTTPSAddr.
	HTTPSAddr string
	// Routes maps an HTTP Host name (an ingress route's public_host or the host of a
	// service's url) to what serves it.
	Routes map[string]RouteTarget
	// TCPListeners are extra "ip:port" addresses that accept TCP connections and close them:
	// the ports the seeded tcp checks look at that no simulated program serves over SSH (the
	// NFS exports' 2049).
	TCPListeners []string
	// Templates are extra container templates (volids such as
	// "local:vztmpl/alpine-3.20-default_20240908_amd64.tar.xz") in every Proxmox host's cache,
	// on top of the built-in Debian and Ubuntu ones.
	Templates []string
}

// Host is one machine with its own SSH listener.
type Host struct {
	Name string
	// Kind is KindProxmox, KindLinux or KindDarwin.
	Kind string
	// Addr is the declared "ip:port" clients dial.
	Addr string
	// Node is the Proxmox node name (defaults to Name).
	Node string
	// User is the login user (defaults to root).
	User     string
	Guests   []Guest
	Units    []string
	Cores    int
	MemoryMB int
	// Gateways are the addresses that answer ping from this host (and from its guests).
	// None answer unless configured.
	Gateways []string
	// Cluster groups Proxmox hosts whose guests /cluster/resources lists together (empty:
	// the host is a cluster of its own).
	Cluster string
	// Listeners are the TCP ports ss shows (besides sshd).
	Listeners []Listener
	// BackupDirs are directories where the simulator keeps a freshly written backup file, as
	// the backup targets this machine holds (its backs-up-to edges) expect.
	BackupDirs []string
	// Containers are docker container names running on the machine.
	Containers []string
}

// Guest is an LXC container or a QEMU VM on a Proxmox host.
type Guest struct {
	VMID int
	// Kind is GuestLXC or GuestVM.
	Kind     string
	Name     string
	Hostname string
	// Status is StatusRunning or StatusStopped.
	Status     string
	GuestAgent bool
	Units      []string
	MemoryMB   int
	Cores      int
	DiskGB     int
	// OSType is the Proxmox ostype (debian, ubuntu, alpine, l26, …).
	OSType       string
	Unprivileged bool
	// OnBoot and Tags are shown by pct config / qm config (onboot: 1, tags: a;b).
	OnBoot    bool
	Tags      []string
	Listeners []Listener
	// BackupDirs are as Host's, for a guest that holds backups (lxc:pbs).
	BackupDirs []string
	Containers []string
	// HA marks a guest managed by ha-manager (inventory attribute `ha: true`): the lab
	// recovers it on a surviving node of its cluster after its node goes down.
	HA bool
}

// Listener is a TCP port a machine listens on and the unit that owns it.
type Listener struct {
	Port int
	Unit string
}

// RouteTarget is what serves an HTTP route: a guest (VMID > 0) on Host, or Host itself.
type RouteTarget struct {
	Host string
	VMID int
	// Unit, when set, must be active on the target for the route to answer 200.
	Unit string
}

// ErrInventory is wrapped by every inventory parsing error.
var ErrInventory = errors.New("labsim: invalid inventory")

type invEntity struct {
	Type       string         `yaml:"type"`
	Name       string         `yaml:"name"`
	State      string         `yaml:"state"`
	Attributes map[string]any `yaml:"attributes"`
}

type invRelationship struct {
	Type   string `yaml:"type"`
	Source string `yaml:"source"`
	Target string `yaml:"target"`
}

type inventoryDoc struct {
	Entities      []invEntity       `yaml:"entities"`
	Relationships []invRelationship `yaml:"relationships"`
}

func (e invEntity) slug() string { return e.Type + ":" + e.Name }

func (e invEntity) str(key string) string {
	v, ok := e.Attributes[key]
	if !ok || v == nil {
		return ""
	}
	switch t := v.(type) {
	case string:
		return t
	default:
		return fmt.Sprint(t)
	}
}

// intAttr accepts an integer or a numeric string.
func (e invEntity) intAttr(key string) (int, bool) {
	switch t := e.Attributes[key].(type) {
	case int:
		return t, true
	case int64:
		return int(t), true
	case float64:
		return int(t), t == float64(int(t))
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(t))
		return n, err == nil
	}
	return 0, false
}

// boolAttr accepts true/false, 1/0 and their string forms, as the original system's flexBool.
func (e invEntity) boolAttr(key string) (bool, bool) {
	switch t := e.Attributes[key].(type) {
	case bool:
		return t, true
	case int:
		return t != 0, true
	case string:
		switch strings.ToLower(strings.TrimSpace(t)) {
		case "1", "true", "yes", "on":
			return true, true
		case "0", "false", "no", "off", "":
			return false, true
		}
	}
	return false, false
}

func (e invEntity) strList(key string) []string {
	switch t := e.Attributes[key].(type) {
	case string:
		if t == "" {
			return nil
		}
		return []string{t}
	case []any:
		var out []string
		for _, v := range t {
			out = append(out, fmt.Sprint(v))
		}
		return out
	}
	return nil
}

func isGuestType(t string) bool { return t == "lxc" || t == "vm" }

func isMachine(e invEntity) bool {
	if isGuestType(e.Type) {
		return false
	}
	for _, k := range []string{"ssh_port", "public_ipv4", "mesh_ipv4", "lan_ipv4"} {
		if _, ok := e.Attributes[k]; ok {
			return true
		}
	}
	return false
}

// FromInventory builds a fleet from an inventory file in the seeds/inventory.yaml format:
// every entity with an SSH address becomes a Host (proxmox-host → KindProxmox, os darwin →
// KindDarwin, else KindLinux); lxc and vm entities become Guests of the Proxmox host named by
// their `host` attribute (a name or a full slug) or, failing that, by a `hosts` edge; units
// come from `runs-on` edges of entities with a `unit` attribute; ingress routes follow
// routes-to and runs-on to the guest or host serving them. Destroyed entities are skipped.
func FromInventory(inv []byte) (Fleet, error) {
	var doc inventoryDoc
	if err := yaml.Unmarshal(inv, &doc); err != nil {
		return Fleet{}, fmt.Errorf("%w: %w", ErrInventory, err)
	}
	bySlug := map[string]invEntity{}
	for _, e := range doc.Entities {
		if e.Type == "" || e.Name == "" {
			return Fleet{}, fmt.Errorf("%w: entity without type or name", ErrInventory)
		}
		if e.State == "destroyed" {
			continue
		}
		bySlug[e.slug()] = e
	}
	runsOn := map[string][]string{} // target slug → sources
	runsOnOf := map[string]string{} // source slug → target
	hostsEdge := map[string]string{}
	routesTo := map[string]string{}
	clusterOf := map[string]string{}
	backupsOf := map[string][]string{} // holder slug → backup directories
	for _, r := range doc.Relationships {
		if _, ok := bySlug[r.Source]; !ok {
			continue
		}
		if _, ok := bySlug[r.Target]; !ok {
			continue
		}
		switch r.Type {
		case "runs-on":
			runsOn[r.Target] = append(runsOn[r.Target], r.Source)
			runsOnOf[r.Source] = r.Target
		case "hosts":
			hostsEdge[r.Target] = r.Source
		case "routes-to":
			routesTo[r.Source] = r.Target
		case "backs-up-to":
			if t := bySlug[r.Target]; t.Type == "backup-target" && t.str("path") != "" {
				backupsOf[r.Source] = append(backupsOf[r.Source], t.str("path"))
			}
		case "member-of":
			if strings.HasPrefix(r.Target, "cluster:") {
				clusterOf[r.Source] = strings.TrimPrefix(r.Target, "cluster:")
			}
		}
	}

	var fleet Fleet
	hostIndex := map[string]int{} // host name → index
	hostSlug := map[string]string{}
	slugs := make([]string, 0, len(bySlug))
	for s := range bySlug {
		slugs = append(slugs, s)
	}
	sort.Strings(slugs)
	// Keep the inventory's order for hosts and guests: it is how people read the file.
	for _, e := range doc.Entities {
		if _, ok := bySlug[e.slug()]; !ok || !isMachine(e) {
			continue
		}
		h, err := hostFromEntity(e)
		if err != nil {
			return Fleet{}, err
		}
		if _, dup := hostIndex[h.Name]; dup {
			return Fleet{}, fmt.Errorf("%w: two machines named %q", ErrInventory, h.Name)
		}
		h.Cluster = clusterOf[e.slug()]
		h.Units, h.Listeners, h.Containers = servicesOn(e.slug(), bySlug, runsOn)
		h.BackupDirs = backupsOf[e.slug()]
		hostIndex[h.Name] = len(fleet.Hosts)
		hostSlug[e.slug()] = h.Name
		fleet.Hosts = append(fleet.Hosts, h)
	}
	guestHost := map[string]string{} // guest slug → host name
	for _, e := range doc.Entities {
		if _, ok := bySlug[e.slug()]; !ok || !isGuestType(e.Type) {
			continue
		}
		owner := e.str("host")
		if owner == "" {
			if src, ok := hostsEdge[e.slug()]; ok {
				owner = src
			}
		}
		if name, ok := hostSlug[owner]; ok {
			owner = name
		}
		if _, after, ok := strings.Cut(owner, ":"); ok && strings.HasPrefix(owner, "proxmox-host:") {
			owner = after
		}
		idx, ok := hostIndex[owner]
		if !ok {
			return Fleet{}, fmt.Errorf("%w: %s: owning Proxmox host %q not found", ErrInventory, e.slug(), owner)
		}
		if fleet.Hosts[idx].Kind != KindProxmox {
			return Fleet{}, fmt.Errorf("%w: %s: host %q is not a Proxmox host", ErrInventory, e.slug(), owner)
		}
		g, err := guestFromEntity(e)
		if err != nil {
			return Fleet{}, err
		}
		for _, other := range fleet.Hosts[idx].Guests {
			if other.VMID == g.VMID {
				return Fleet{}, fmt.Errorf("%w: %s: vmid %d used twice on %s", ErrInventory, e.slug(), g.VMID, owner)
			}
		}
		g.Units, g.Listeners, g.Containers = servicesOn(e.slug(), bySlug, runsOn)
		g.BackupDirs = backupsOf[e.slug()]
		fleet.Hosts[idx].Guests = append(fleet.Hosts[idx].Guests, g)
		guestHost[e.slug()] = owner
	}

	// resolveTarget follows runs-on from a service (through containers) to a machine or guest.
	resolveTarget := func(slug string) (RouteTarget, bool) {
		unit := bySlug[slug].str("unit")
		for i := 0; i < 8; i++ {
			e, ok := bySlug[slug]
			if !ok {
				return RouteTarget{}, false
			}
			if isGuestType(e.Type) {
				vmid, _ := e.intAttr("vmid")
				return RouteTarget{Host: guestHost[slug], VMID: vmid, Unit: unit}, guestHost[slug] != ""
			}
			if name, ok := hostSlug[slug]; ok {
				return RouteTarget{Host: name, Unit: unit}, true
			}
			next, ok := runsOnOf[slug]
			if !ok {
				return RouteTarget{}, false
			}
			slug = next
		}
		return RouteTarget{}, false
	}
	fleet.Routes = map[string]RouteTarget{}
	for _, s := range slugs {
		e := bySlug[s]
		switch {
		case e.Type == "ingress-route":
			host := e.str("public_host")
			if host == "" {
				host = e.Name
			}
			if svc, ok := routesTo[s]; ok {
				if t, ok := resolveTarget(svc); ok {
					fleet.Routes[strings.ToLower(host)] = t
				}
			}
		case e.str("url") != "":
			u, err := url.Parse(e.str("url"))
			if err != nil || u.Hostname() == "" {
				continue
			}
			if _, taken := fleet.Routes[strings.ToLower(u.Hostname())]; taken {
				continue
			}
			if t, ok := resolveTarget(s); ok {
				fleet.Routes[strings.ToLower(u.Hostname())] = t
			}
		case net.ParseIP(e.str("host")) != nil && (e.Type == "nfs-export" || e.Attributes["port"] != nil):
			// What the graph declares at an address is served: an export's NFS port, a
			// switch's or a UPS's management port accepts connections.
			port, ok := e.intAttr("port")
			if !ok {
				port = 2049
			}
			addr := net.JoinHostPort(e.str("host"), strconv.Itoa(port))
			if !slices.Contains(fleet.TCPListeners, addr) {
				fleet.TCPListeners = append(fleet.TCPListeners, addr)
			}
		case e.Type == "lxc-template":
			if v := e.str("volid"); v != "" {
				fleet.Templates = append(fleet.Templates, v)
			}
		}
	}
	return fleet, nil
}

func hostFromEntity(e invEntity) (Host, error) {
	addr := e.str("public_ipv4")
	if addr == "" {
		addr = e.str("mesh_ipv4")
	}
	if addr == "" {
		addr = e.str("lan_ipv4")
	}
	if addr == "" {
		return Host{}, fmt.Errorf("%w: %s has no public_ipv4, mesh_ipv4 or lan_ipv4", ErrInventory, e.slug())
	}
	port := 22
	if p, ok := e.intAttr("ssh_port"); ok {
		port = p
	} else if _, present := e.Attributes["ssh_port"]; present {
		return Host{}, fmt.Errorf("%w: %s: ssh_port is not an integer", ErrInventory, e.slug())
	}
	kind := KindLinux
	switch {
	case e.Type == "proxmox-host":
		kind = KindProxmox
	case strings.EqualFold(e.str("os"), "darwin"):
		kind = KindDarwin
	}
	h := Host{
		Name: e.Name, Kind: kind, Addr: net.JoinHostPort(addr, strconv.Itoa(port)),
		Node: e.str("node"), User: e.str("user"), Gateways: append(e.strList("gateways"), e.strList("gateway")...),
	}
	if h.Node == "" {
		h.Node = h.Name
	}
	if h.User == "" {
		h.User = "root"
	}
	h.Cores, _ = e.intAttr("cores")
	h.MemoryMB, _ = e.intAttr("memory_mb")
	return h, nil
}

func guestFromEntity(e invEntity) (Guest, error) {
	vmid, ok := e.intAttr("vmid")
	if !ok || vmid <= 0 {
		return Guest{}, fmt.Errorf("%w: %s: vmid missing or not an integer", ErrInventory, e.slug())
	}
	g := Guest{VMID: vmid, Kind: e.Type, Name: e.Name, Hostname: e.str("hostname"), OSType: e.str("ostype")}
	if g.Hostname == "" {
		g.Hostname = g.Name
	}
	g.GuestAgent, _ = e.boolAttr("qemu_guest_agent")
	g.Unprivileged, _ = e.boolAttr("unprivileged")
	g.MemoryMB, _ = e.intAttr("memory_mb")
	g.Cores, _ = e.intAttr("cores")
	g.DiskGB, _ = e.intAttr("disk_gb")
	g.OnBoot, _ = e.boolAttr("onboot")
	g.Tags = e.strList("tags")
	g.HA, _ = e.boolAttr("ha")
	g.Status = StatusRunning
	switch s := e.str("status"); {
	case s == StatusRunning || s == StatusStopped:
		g.Status = s
	case e.State == "planned":
		g.Status = StatusStopped
	default:
		if onboot, ok := e.boolAttr("onboot"); ok && !onboot {
			g.Status = StatusStopped
		}
	}
	return g, nil
}

// servicesOn collects the units, listening ports and docker containers of whatever runs on
// the entity slug.
func servicesOn(slug string, bySlug map[string]invEntity, runsOn map[string][]string) (units []string, listeners []Listener, containers []string) {
	sources := append([]string(nil), runsOn[slug]...)
	sort.Strings(sources)
	for _, src := range sources {
		e := bySlug[src]
		if e.Type == "container" {
			name := e.str("container_name")
			if name == "" {
				name = e.Name
			}
			containers = append(containers, name)
			continue
		}
		unit := e.str("unit")
		if unit != "" {
			units = append(units, unit)
		}
		if p, ok := e.intAttr("port"); ok && p > 0 {
			listeners = append(listeners, Listener{Port: p, Unit: unit})
		}
	}
	if len(containers) > 0 {
		hasDocker := false
		for _, u := range units {
			if u == "docker.service" {
				hasDocker = true
			}
		}
		if !hasDocker {
			units = append(units, "docker.service")
		}
	}
	return units, listeners, containers
}
