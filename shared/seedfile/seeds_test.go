package seedfile

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/shared/ontology"
)

// seedDir holds the files the seeds package embeds (//go:embed reads these same bytes).
// They are read from disk so that the shared module does not depend on the seeds module.
const seedDir = "../../seeds"

func readSeed(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(seedDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type seedSet struct {
	o   *ontology.Ontology
	inv *Inventory
	ks  *KnowledgeSet
}

func loadSeeds(t *testing.T) seedSet {
	t.Helper()
	o, err := ontology.Parse(readSeed(t, "ontology.yaml"))
	if err != nil {
		t.Fatalf("ontology.yaml: %v", err)
	}
	inv, err := ParseInventory(readSeed(t, "inventory.yaml"))
	if err != nil {
		t.Fatalf("inventory.yaml: %v", err)
	}
	ks, err := ParseKnowledge(readSeed(t, "knowledge.yaml"))
	if err != nil {
		t.Fatalf("knowledge.yaml: %v", err)
	}
	return seedSet{o: o, inv: inv, ks: ks}
}

func TestSeedsValidate(t *testing.T) {
	t.Parallel()
	s := loadSeeds(t)
	if err := s.inv.Validate(s.o); err != nil {
		t.Fatalf("inventory does not validate:\n%v", err)
	}
	if err := s.ks.Validate(s.o, s.inv); err != nil {
		t.Fatalf("knowledge does not validate:\n%v", err)
	}
}

func count(inv *Inventory, o *ontology.Ontology, typ string) []EntitySeed {
	var out []EntitySeed
	for _, e := range inv.Entities {
		if o.IsA(e.Type, typ) {
			out = append(out, e)
		}
	}
	return out
}

func TestSeedInventoryShape(t *testing.T) {
	t.Parallel()
	s := loadSeeds(t)
	o, inv := s.o, s.inv
	bySlug := map[string]EntitySeed{}
	for _, e := range inv.Entities {
		bySlug[e.Slug()] = e
	}
	edges := func(rel string) []EdgeSeed {
		var out []EdgeSeed
		for _, r := range inv.Relationships {
			if r.Type == rel {
				out = append(out, r)
			}
		}
		return out
	}

	if n := len(count(inv, o, "proxmox-host")); n != 3 {
		t.Errorf("%d Proxmox hosts, want 3", n)
	}
	if n := len(count(inv, o, "lxc")); n < 25 {
		t.Errorf("%d LXCs, want at least 25", n)
	}
	vms := count(inv, o, "vm")
	noAgent := 0
	for _, v := range vms {
		if v.Attributes["qemu_guest_agent"] == false {
			noAgent++
		}
	}
	if len(vms) < 3 || noAgent < 1 {
		t.Errorf("%d VMs, %d without guest agent; want >= 3 and >= 1", len(vms), noAgent)
	}
	routes := count(inv, o, "ingress-route")
	if len(routes) != 21 {
		t.Errorf("%d ingress routes, want exactly 21", len(routes))
	}
	for _, slug := range []string{"lxc:jellyfin", "service:jellyfin", "lxc:nfs-export", "workstation:studio", "vps:edge"} {
		if _, ok := bySlug[slug]; !ok {
			t.Errorf("%s missing", slug)
		}
	}
	if n := len(count(inv, o, "nfs-export")); n < 2 {
		t.Errorf("%d NFS exports, want some", n)
	}

	// Exactly one reverse proxy, and every route depends on it and routes to a service.
	proxies := count(inv, o, "reverse-proxy")
	if len(proxies) != 1 || proxies[0].Name != "caddy" {
		t.Fatalf("reverse proxies = %v, want only caddy", proxies)
	}
	for _, r := range routes {
		var routesTo, dependsOnProxy bool
		for _, e := range inv.Relationships {
			if e.Source != r.Slug() {
				continue
			}
			if e.Type == "routes-to" && o.IsA(bySlug[e.Target].Type, "service") {
				routesTo = true
			}
			if e.Type == "depends-on" && e.Target == proxies[0].Slug() {
				dependsOnProxy = true
			}
		}
		if !routesTo || !dependsOnProxy {
			t.Errorf("%s: routes-to service %v, depends-on caddy %v", r.Slug(), routesTo, dependsOnProxy)
		}
		if !strings.HasSuffix(r.Name, ".lab.example") || r.Attributes["public_host"] != r.Name {
			t.Errorf("%s: public_host %v", r.Slug(), r.Attributes["public_host"])
		}
	}

	// Every guest resolves to its Proxmox host, vmids are unique per host (and cluster-wide),
	// the host attribute agrees with the hosts edge, and one guest relies on the edge alone.
	hostedBy := map[string]string{}
	for _, e := range edges("hosts") {
		if prev, dup := hostedBy[e.Target]; dup {
			t.Errorf("%s hosted by both %s and %s", e.Target, prev, e.Source)
		}
		hostedBy[e.Target] = e.Source
	}
	vmids := map[int]string{}
	withoutHostAttr := 0
	for _, g := range count(inv, o, "guest") {
		edgeHost, ok := hostedBy[g.Slug()]
		if !ok {
			t.Errorf("%s has no hosts edge", g.Slug())
			continue
		}
		switch h := g.Attributes["host"].(type) {
		case nil:
			withoutHostAttr++
		case string:
			if h != edgeHost && "proxmox-host:"+h != edgeHost {
				t.Errorf("%s: host attribute %q disagrees with hosts edge from %s", g.Slug(), h, edgeHost)
			}
		default:
			t.Errorf("%s: host attribute %v is not a string", g.Slug(), h)
		}
		vmid, ok := g.Attributes["vmid"].(int)
		if !ok {
			t.Errorf("%s: vmid %v is not an integer", g.Slug(), g.Attributes["vmid"])
			continue
		}
		if prev, dup := vmids[vmid]; dup {
			t.Errorf("vmid %d used by %s and %s", vmid, prev, g.Slug())
		}
		vmids[vmid] = g.Slug()
	}
	if withoutHostAttr != 1 {
		t.Errorf("%d guests without a host attribute, want exactly 1 (hosts-edge fallback)", withoutHostAttr)
	}
	hostForms := map[bool]bool{}
	for _, g := range count(inv, o, "guest") {
		if h, ok := g.Attributes["host"].(string); ok {
			hostForms[strings.HasPrefix(h, "proxmox-host:")] = true
		}
	}
	if !hostForms[true] || !hostForms[false] {
		t.Error("guests should use both host forms (name and full slug)")
	}

	// Every service runs somewhere; every service has a unit or a url to be probed by.
	runsOn := map[string]bool{}
	for _, e := range edges("runs-on") {
		runsOn[e.Source] = true
	}
	units := 0
	for _, svc := range count(inv, o, "service") {
		if !runsOn[svc.Slug()] {
			t.Errorf("%s has no runs-on edge", svc.Slug())
		}
		if u, ok := svc.Attributes["unit"].(string); ok {
			units++
			if !strings.Contains(u, ".service") {
				t.Errorf("%s: unit %q", svc.Slug(), u)
			}
		} else if svc.Attributes["url"] == nil {
			t.Errorf("%s has neither unit nor url", svc.Slug())
		}
	}
	if units < 20 {
		t.Errorf("only %d services carry a unit", units)
	}

	// Backup targets: each held by a machine through backs-up-to, one on the macOS workstation.
	heldBy := map[string]string{}
	for _, e := range edges("backs-up-to") {
		heldBy[e.Target] = e.Source
	}
	onMac := false
	for _, bt := range count(inv, o, "backup-target") {
		holder, ok := heldBy[bt.Slug()]
		if !ok {
			t.Errorf("%s has no backs-up-to holder", bt.Slug())
			continue
		}
		h := bySlug[holder]
		if h.Type == "workstation" && h.Attributes["os"] == "darwin" && h.Attributes["user"] == "dana" && holder == "workstation:studio" {
			onMac = true
		}
	}
	if !onMac {
		t.Error("no backup target held by workstation:studio (darwin, user dana)")
	}

	// The VPS is reachable by its public address only.
	vps := bySlug["vps:edge"]
	if vps.Attributes["public_ipv4"] != "127.0.13.1" || vps.Attributes["lan_ipv4"] != nil || vps.Attributes["mesh_ipv4"] != nil {
		t.Errorf("vps:edge addresses = %v", vps.Attributes)
	}
	// Address ranges per machine kind, and SSH on 2222 everywhere.
	ranges := map[string]string{"proxmox-host": "127.0.10.", "host": "127.0.11.", "nas": "127.0.11.", "sbc": "127.0.11.", "workstation": "127.0.12.", "vps": "127.0.13."}
	for _, m := range count(inv, o, "machine") {
		if m.Attributes["ssh_port"] != 2222 {
			t.Errorf("%s: ssh_port %v, want 2222", m.Slug(), m.Attributes["ssh_port"])
		}
		found := false
		for _, k := range []string{"public_ipv4", "mesh_ipv4", "lan_ipv4"} {
			if a, ok := m.Attributes[k].(string); ok {
				found = true
				if !strings.HasPrefix(a, ranges[m.Type]) {
					t.Errorf("%s: %s %s outside %s*", m.Slug(), k, a, ranges[m.Type])
				}
			}
		}
		if !found {
			t.Errorf("%s has no address", m.Slug())
		}
	}
	for i, ph := range []string{"atlas", "boreas", "ceres"} {
		e := bySlug["proxmox-host:"+ph]
		if e.Attributes["lan_ipv4"] != "127.0.10."+string(rune('1'+i)) || e.Attributes["node"] != ph {
			t.Errorf("proxmox-host:%s = %v", ph, e.Attributes)
		}
	}
}

// nameKeys hold network names or addresses; their values must stay in the lab.
var nameKeys = []string{"public_host", "fqdn", "common_name", "sans", "clients", "value"}

func TestSeedAddressesStayInTheLab(t *testing.T) {
	t.Parallel()
	s := loadSeeds(t)
	for _, e := range s.inv.Entities {
		if strings.Contains(e.Name, ".") && !strings.HasSuffix(e.Name, ".example") {
			t.Errorf("%s: dotted name outside .example", e.Slug())
		}
		walkStrings(e.Attributes, "", func(key, v string) {
			if reason := labViolation(key, v); reason != "" {
				t.Errorf("%s: attribute %s = %q: %s", e.Slug(), key, v, reason)
			}
		})
	}
	// Knowledge bodies may show guest addresses from the documentation range, nothing else.
	ipLike := regexp.MustCompile(`\b\d{1,3}(\.\d{1,3}){3}\b`)
	urlLike := regexp.MustCompile(`https?://([A-Za-z0-9.-]+)`)
	realTLD := regexp.MustCompile(`\b[a-z0-9-]+(\.[a-z0-9-]+)*\.(com|net|org|io|dev|local|lan|home|internal|network|cloud)\b`)
	for _, d := range s.ks.Documents {
		for _, ip := range ipLike.FindAllString(d.Body, -1) {
			p := net.ParseIP(ip)
			if p == nil || !(loopback.Contains(p) || docNet.Contains(p)) {
				t.Errorf("%s: body mentions address %s outside 127.0.0.0/8 and 192.0.2.0/24", d.Slug, ip)
			}
		}
		for _, m := range urlLike.FindAllStringSubmatch(d.Body, -1) {
			if reason := hostViolation(m[1]); reason != "" {
				t.Errorf("%s: body URL %s: %s", d.Slug, m[0], reason)
			}
		}
		for _, name := range realTLD.FindAllString(d.Body, -1) {
			t.Errorf("%s: body mentions %s, a name outside .example", d.Slug, name)
		}
	}
}

var (
	loopback = mustCIDR("127.0.0.0/8")
	docNet   = mustCIDR("192.0.2.0/24")
)

func mustCIDR(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}

func walkStrings(v any, key string, f func(key, v string)) {
	switch x := v.(type) {
	case string:
		f(key, x)
	case []any:
		for _, item := range x {
			walkStrings(item, key, f)
		}
	case map[string]any:
		for k, item := range x {
			walkStrings(item, k, f)
		}
	}
}

// labViolation says why a string attribute could reach outside the lab, or "".
func labViolation(key, v string) string {
	if ip := net.ParseIP(v); ip != nil {
		// Gateways live only inside the simulated guest network (pct_create pings them from
		// the simulated host); they are data, never dialled, and stay in the documentation range.
		if key == "gateways" && docNet.Contains(ip) {
			return ""
		}
		if !loopback.Contains(ip) {
			return "address outside 127.0.0.0/8"
		}
		return ""
	}
	if ip, _, err := net.ParseCIDR(v); err == nil && !loopback.Contains(ip) {
		return "range outside 127.0.0.0/8"
	}
	if strings.Contains(v, "://") {
		u, err := url.Parse(v)
		if err != nil {
			return "unparsable URL"
		}
		return hostViolation(u.Hostname())
	}
	if strings.HasSuffix(key, "_ipv4") || key == "host" && strings.Count(v, ".") == 3 {
		return "not an IPv4 address"
	}
	if slices.Contains(nameKeys, key) && strings.Contains(v, ".") {
		for _, h := range strings.Split(v, ",") {
			if r := hostViolation(strings.TrimSpace(h)); r != "" {
				return r
			}
		}
	}
	return ""
}

func hostViolation(h string) string {
	if ip := net.ParseIP(h); ip != nil {
		if !loopback.Contains(ip) {
			return "address outside 127.0.0.0/8"
		}
		return ""
	}
	h = strings.TrimPrefix(h, "*.")
	if h != "example" && !strings.HasSuffix(h, ".example") {
		return "name outside .example"
	}
	return ""
}

func TestSeedKnowledge(t *testing.T) {
	t.Parallel()
	s := loadSeeds(t)
	if n := len(s.ks.Documents); n < 20 {
		t.Errorf("%d knowledge documents, want at least 20", n)
	}
	kinds := map[string]int{}
	slugs := map[string]DocSeed{}
	for _, d := range s.ks.Documents {
		kinds[d.Kind]++
		slugs[d.Slug] = d
		if len(strings.Fields(d.Body)) < 80 {
			t.Errorf("%s: body is only %d words; seed knowledge should be usable", d.Slug, len(strings.Fields(d.Body)))
		}
		if !strings.HasPrefix(strings.TrimSpace(d.Body), "# ") {
			t.Errorf("%s: body should start with a markdown heading", d.Slug)
		}
	}
	for _, k := range knowledgeKinds {
		if kinds[k] < 3 {
			t.Errorf("only %d of kind %s", kinds[k], k)
		}
	}
	// The graph audit and the change notes name these by slug.
	for _, slug := range []string{
		"runbook:nfs-exported-dir-mutation-hang", "runbook:netbird-mgmt-oidc-race-after-upgrade",
		"runbook:orphan-check", "runbook:check-on-destroyed-entity", "runbook:stuck-probe",
		"runbook:unmonitored-type", "runbook:edge-to-destroyed", "runbook:knowledge-graph-audit",
		"runbook:drift-remediation", "runbook:restart-a-service", "runbook:restore-from-backup",
		"runbook:certificate-renewal", "runbook:proxmox-host-maintenance", "runbook:create-lxc",
	} {
		if _, ok := slugs[slug]; !ok {
			t.Errorf("%s missing", slug)
		}
	}
	nfs := slugs["runbook:nfs-exported-dir-mutation-hang"].Body
	for _, step := range []string{"exportfs -u", "exportfs -a", "killall", "D"} {
		if !strings.Contains(nfs, step) {
			t.Errorf("NFS runbook lacks %q", step)
		}
	}
	oidc := slugs["runbook:netbird-mgmt-oidc-race-after-upgrade"].Body
	for _, step := range []string{"docker restart netbird-mgmt", "30 seconds", "traefik", "authentik"} {
		if !strings.Contains(oidc, step) {
			t.Errorf("OIDC runbook lacks %q", step)
		}
	}
	// Slugs cited inside bodies must exist, so following a reference never dead-ends.
	cited := regexp.MustCompile("`((?:runbook|document|investigation):[a-z0-9.-]+)`")
	for _, d := range s.ks.Documents {
		for _, m := range cited.FindAllStringSubmatch(d.Body, -1) {
			if _, ok := slugs[m[1]]; !ok {
				t.Errorf("%s cites %s, which does not exist", d.Slug, m[1])
			}
		}
	}
}
