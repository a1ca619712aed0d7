package checks

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/shared/ontology"
)

// testOntology is a small ontology shaped like seeds/ontology.yaml: an abstract machine
// base whose monitoring is inherited, a subtype that replaces it, guests probed through
// their host, specs with requires_*, and logical types declaring none.
const testOntology = `
entity_types:
  - name: machine
    abstract: true
    attributes:
      public_ipv4: {type: string}
      mesh_ipv4:   {type: string}
      lan_ipv4:    {type: string}
      os:          {type: string, enum: [linux, darwin]}
      port:        {type: integer}
    states: [planned, active, maintenance, deprecated, destroyed]
    default_state: active
    monitoring:
      - {kind: ssh-script, script: cpu, interval: 60s, timeout: 15s}
      - {kind: ssh-script, script: memory, interval: 60s}
      - {kind: ssh-script, script: disk, interval: 5m, timeout: 20s}
  - name: host
    parent: machine
  - name: proxmox-host
    parent: machine
  - name: workstation
    parent: machine
    monitoring:
      - {kind: ssh-script, script: cpu, interval: 5m, timeout: 20s}
  - name: guest
    abstract: true
    attributes:
      vmid: {type: integer}
      host: {type: string}
    states: [planned, active, deprecated, destroyed]
    default_state: active
    monitoring:
      - {kind: proxmox-guest, interval: 60s, timeout: 15s}
      - {kind: ssh-script, script: cpu, interval: 60s, timeout: 20s}
  - name: lxc
    parent: guest
  - name: vm
    parent: guest
    attributes:
      qemu_guest_agent: {type: boolean}
    monitoring:
      - {kind: proxmox-guest, interval: 60s, timeout: 15s}
      - {kind: ssh-script, script: cpu, interval: 60s, timeout: 30s, requires_all: [qemu_guest_agent]}
  - name: service
    attributes:
      unit:        {type: string}
      url:         {type: string}
      public_host: {type: string}
    states: [planned, active, deprecated, destroyed]
    default_state: active
    monitoring:
      - {kind: ssh-script, script: process, interval: 60s, timeout: 20s}
      - {kind: http, interval: 60s, timeout: 10s, requires_any: [url, public_host]}
  - name: web-app
    parent: service
  - name: ingress-route
    attributes:
      public_host: {type: string}
      url:         {type: string}
    states: [planned, active, deprecated, destroyed]
    default_state: active
    monitoring:
      - {kind: http}
  - name: backup-target
    attributes:
      path:            {type: string}
      max_age_minutes: {type: integer}
    states: [planned, active, deprecated, destroyed]
    default_state: active
    monitoring:
      - {kind: backup-freshness, interval: 15m, timeout: 60s, requires_all: [path]}
  - name: nfs-export
    attributes:
      host: {type: string}
      port: {type: integer}
    states: [planned, active, deprecated, destroyed]
    default_state: active
    monitoring:
      - {kind: tcp, interval: 60s, timeout: 5s, requires_all: [port]}
  - name: network
    abstract: true
    states: [planned, active, deprecated, destroyed]
    default_state: active
    monitoring: none
  - name: site
    parent: network
  - name: note
    states: [active, destroyed]
    default_state: active
relationship_types:
  - {name: hosts, sources: [proxmox-host], targets: [guest]}
  - {name: backs-up-to, sources: [machine], targets: [backup-target]}
`

func mustOntology(t *testing.T) *ontology.Ontology {
	t.Helper()
	o, err := ontology.Parse([]byte(testOntology))
	if err != nil {
		t.Fatalf("parse test ontology: %v", err)
	}
	return o
}

// graph is an in-memory Lookup keyed by target slug.
type graph struct {
	hosts   map[string]Target
	holders map[string]Target
}

func (g graph) HostOf(t Target) (Target, bool) {
	h, ok := g.hosts[t.Slug]
	return h, ok
}

func (g graph) BackupHolder(t Target) (Target, bool) {
	h, ok := g.holders[t.Slug]
	return h, ok
}

func ent(typ, name string, attrs map[string]any) Target {
	return Target{ID: "id-" + typ + "-" + name, Slug: typ + ":" + name, Type: typ, Name: name, State: "active", Attributes: attrs}
}

func withState(t Target, state string) Target {
	t.State = state
	return t
}

var (
	atlas  = ent("proxmox-host", "atlas", map[string]any{"lan_ipv4": "127.0.10.1", "os": "linux"})
	mac    = ent("workstation", "mac-mini", map[string]any{"lan_ipv4": "127.0.12.1", "os": "darwin"})
	nas    = ent("host", "nas", map[string]any{"lan_ipv4": "127.0.11.2"})
	fleet  = graph{hosts: map[string]Target{}, holders: map[string]Target{}}
	sec    = time.Second
	minute = time.Minute
)

func init() {
	for _, g := range []string{"lxc:jellyfin", "vm:homeassistant", "vm:windows", "lxc:web"} {
		fleet.hosts[g] = atlas
	}
	fleet.holders["backup-target:time-machine"] = mac
	fleet.holders["backup-target:pg-dump"] = nas
}

func ssh(target Target, script, os string, args []string, interval, timeout time.Duration) Def {
	name := target.Type + "." + target.Name + ".ssh-script." + script
	if args == nil {
		args = []string{}
	}
	return Def{Slug: "check:" + name, Name: name, Kind: "ssh-script",
		Config:   map[string]any{"script": script, "args": args, "os": os},
		Interval: interval, Timeout: timeout}
}

func def(target Target, kind string, cfg map[string]any, interval, timeout time.Duration) Def {
	name := target.Type + "." + target.Name + "." + kind
	return Def{Slug: "check:" + name, Name: name, Kind: kind, Config: cfg, Interval: interval, Timeout: timeout}
}

type skipWant struct{ kind, script, reasonHas string }

func TestDerive(t *testing.T) {
	t.Parallel()
	o := mustOntology(t)

	hostPlain := ent("host", "nas", map[string]any{"lan_ipv4": "127.0.11.2"})
	jellyfin := ent("lxc", "jellyfin", map[string]any{"vmid": float64(101), "host": "atlas"})
	orphan := ent("lxc", "orphan", map[string]any{"vmid": 150})
	novmid := ent("lxc", "web", map[string]any{})
	haNoAgent := ent("vm", "homeassistant", map[string]any{"vmid": json.Number("200")})
	winAgent := ent("vm", "windows", map[string]any{"vmid": 201, "qemu_guest_agent": true})
	svc := ent("service", "jellyfin", map[string]any{"unit": "jellyfin.service", "port": 8096})
	svcNoUnit := ent("service", "grafana", map[string]any{})
	webApp := ent("web-app", "api", map[string]any{
		"unit": "api.service", "url": "http://127.0.0.1:8096/health", "expect_status": float64(204), "body_match": "ok",
	})
	badURL := ent("service", "ftp", map[string]any{"unit": "vsftpd.service", "url": "ftp://files.lab.example/"})
	route := ent("ingress-route", "jellyfin.lab.example", map[string]any{"public_host": "jellyfin.lab.example"})
	routeBare := ent("ingress-route", "empty.lab.example", map[string]any{})
	tm := ent("backup-target", "time-machine", map[string]any{"path": "/Volumes/Backup/TM"})
	pgDump := ent("backup-target", "pg-dump", map[string]any{"path": "/srv/pgdump", "max_age_minutes": json.Number("90")})
	lonely := ent("backup-target", "lonely", map[string]any{"path": "/srv/lonely", "max_age_minutes": 60})
	nfs := ent("nfs-export", "media", map[string]any{"host": "127.0.11.5", "port": float64(2049)})
	nfsNoHost := ent("nfs-export", "orphaned", map[string]any{"port": 2049})
	nfsBadPort := ent("nfs-export", "badport", map[string]any{"host": "127.0.11.5", "port": 70000})
	site := ent("site", "home", map[string]any{})

	overridden := ent("host", "vps", map[string]any{
		"public_ipv4": "127.0.13.1", "lan_ipv4": "127.0.11.1", "port": 22,
		"monitoring": []any{
			map[string]any{"kind": "ssh-script", "script": "disk", "disabled": true},
			map[string]any{"kind": "ssh-script", "script": "cpu", "interval": "30s"},
			map[string]any{"kind": "tcp", "interval": float64(120)},
		},
	})
	intervals := ent("host", "docker", map[string]any{
		"check_interval": "2m",
		"monitoring":     []map[string]any{{"kind": "ssh-script", "script": "cpu", "interval": "30s"}},
	})
	shortInterval := ent("host", "pi", map[string]any{"check_interval": 5})
	badInterval := ent("host", "odd", map[string]any{"check_interval": "soon"})
	longTimeout := ent("host", "slow", map[string]any{
		"monitoring": []any{map[string]any{"kind": "ssh-script", "script": "memory", "interval": "20s", "timeout": "45s"}},
	})
	none := ent("host", "quiet", map[string]any{"monitoring": "none"})
	siteTCP := ent("site", "colo", map[string]any{
		"host_address": "127.0.13.9", "port": 443,
		"monitoring": []any{map[string]any{"kind": "tcp"}},
	})
	malformed := ent("host", "typo", map[string]any{
		"lan_ipv4": "127.0.11.9",
		"monitoring": []any{
			map[string]any{"kind": "ping"},
			map[string]any{"kind": "ssh-script"},
			map[string]any{"kind": "http", "script": "cpu"},
			map[string]any{"kind": "ssh-script", "script": "disk", "disabled": "yes"},
			map[string]any{"kind": "ssh-script", "script": "cpu", "intervall": "5m"},
			"cpu",
			map[string]any{"kind": "ssh-script", "script": "load", "disabled": true},
			map[string]any{"kind": "ssh-script", "script": "memory", "interval": "90s"},
			map[string]any{"kind": "ssh-script", "script": "memory", "interval": "10m"},
		},
	})
	guestTCP := ent("lxc", "web", map[string]any{
		"vmid": 102, "host": "atlas", "port": 80,
		"monitoring": []any{map[string]any{"kind": "tcp"}, map[string]any{"kind": "ssh-script", "script": "cpu", "disabled": true}},
	})
	processArgs := ent("service", "nginx", map[string]any{
		"monitoring": []any{map[string]any{"kind": "ssh-script", "script": "process", "args": []any{"nginx.service"}}},
	})
	vmLoad := ent("vm", "homeassistant", map[string]any{
		"vmid": 200, "monitoring": []any{map[string]any{"kind": "ssh-script", "script": "load"}},
	})
	hostAsGuest := ent("host", "metal", map[string]any{
		"vmid": 5, "monitoring": []any{map[string]any{"kind": "proxmox-guest"}, map[string]any{"kind": "backup-freshness"}},
	})

	cases := []struct {
		name     string
		target   Target
		lookup   Lookup
		defs     []Def
		skips    []skipWant
		none     bool
		warnings []string
	}{
		{
			name:   "host inherits machine monitoring through is-a",
			target: hostPlain, lookup: fleet,
			defs: []Def{
				ssh(hostPlain, "cpu", "linux", nil, 60*sec, 15*sec),
				ssh(hostPlain, "disk", "linux", nil, 5*minute, 20*sec),
				ssh(hostPlain, "memory", "linux", nil, 60*sec, 10*sec),
			},
		},
		{
			name:   "subtype monitoring replaces the parent's; darwin os passed on",
			target: mac, lookup: fleet,
			defs: []Def{ssh(mac, "cpu", "darwin", nil, 5*minute, 20*sec)},
		},
		{
			name:   "unknown os is refused, not guessed",
			target: ent("workstation", "win", map[string]any{"os": "windows"}), lookup: fleet,
			skips: []skipWant{{"ssh-script", "cpu", "`os` windows is not linux or darwin"}},
		},
		{
			name:   "lxc: proxmox-guest via owning host, ssh-script via host-hop",
			target: jellyfin, lookup: fleet,
			defs: []Def{
				def(jellyfin, "proxmox-guest", map[string]any{"vmid": 101, "guest_kind": "lxc", "host": "proxmox-host:atlas"}, 60*sec, 15*sec),
				ssh(jellyfin, "cpu", "linux", nil, 60*sec, 20*sec),
			},
		},
		{
			name:   "guest without owning host is skipped with the reason",
			target: orphan, lookup: fleet,
			skips: []skipWant{
				{"proxmox-guest", "", "no owning Proxmox host"},
				{"ssh-script", "cpu", "no owning Proxmox host"},
			},
		},
		{
			name:   "nil lookup behaves as finding nothing",
			target: jellyfin, lookup: nil,
			skips: []skipWant{
				{"proxmox-guest", "", "no owning Proxmox host"},
				{"ssh-script", "cpu", "no owning Proxmox host"},
			},
		},
		{
			name:   "guest without vmid: no proxmox-guest check",
			target: novmid, lookup: fleet,
			defs:  []Def{ssh(novmid, "cpu", "linux", nil, 60*sec, 20*sec)},
			skips: []skipWant{{"proxmox-guest", "", "needs a `vmid` attribute"}},
		},
		{
			name:   "vm without guest agent: status only, cpu not applicable",
			target: haNoAgent, lookup: fleet,
			defs:  []Def{def(haNoAgent, "proxmox-guest", map[string]any{"vmid": 200, "guest_kind": "vm", "host": "proxmox-host:atlas"}, 60*sec, 15*sec)},
			skips: []skipWant{{"ssh-script", "cpu", "not applicable"}},
		},
		{
			name:   "vm with guest agent gets in-guest probes",
			target: winAgent, lookup: fleet,
			defs: []Def{
				def(winAgent, "proxmox-guest", map[string]any{"vmid": 201, "guest_kind": "vm", "host": "proxmox-host:atlas"}, 60*sec, 15*sec),
				ssh(winAgent, "cpu", "linux", nil, 60*sec, 30*sec),
			},
		},
		{
			name:   "process check receives its unit as argument",
			target: svc, lookup: fleet,
			defs:  []Def{ssh(svc, "process", "linux", []string{"jellyfin.service"}, 60*sec, 20*sec)},
			skips: []skipWant{{"http", "", "not applicable"}},
		},
		{
			name:   "process check without unit is skipped, never run argument-less",
			target: svcNoUnit, lookup: fleet,
			skips: []skipWant{{"http", "", "not applicable"}, {"ssh-script", "process", "no `unit` attribute"}},
		},
		{
			name:   "process args from an entity override when there is no unit",
			target: processArgs, lookup: fleet,
			defs:  []Def{ssh(processArgs, "process", "linux", []string{"nginx.service"}, 60*sec, 20*sec)},
			skips: []skipWant{{"http", "", "not applicable"}},
		},
		{
			name:   "http: url wins, expect_status and body_match carried (inherited by subtype)",
			target: webApp, lookup: fleet,
			defs: []Def{
				def(webApp, "http", map[string]any{"url": "http://127.0.0.1:8096/health", "expect_status": 204, "body_match": "ok"}, 60*sec, 10*sec),
				ssh(webApp, "process", "linux", []string{"api.service"}, 60*sec, 20*sec),
			},
		},
		{
			name:   "http: non-http url skipped with reason",
			target: badURL, lookup: fleet,
			defs:  []Def{ssh(badURL, "process", "linux", []string{"vsftpd.service"}, 60*sec, 20*sec)},
			skips: []skipWant{{"http", "", "not an absolute http(s) URL"}},
		},
		{
			name:   "http: public_host fallback with spec defaults",
			target: route, lookup: fleet,
			defs: []Def{def(route, "http", map[string]any{"url": "https://jellyfin.lab.example/", "expect_status": 200}, 60*sec, 10*sec)},
		},
		{
			name:   "http: neither url nor public_host",
			target: routeBare, lookup: fleet,
			skips: []skipWant{{"http", "", "neither"}},
		},
		{
			name:   "backup-freshness on the holder found by backs-up-to, darwin, default max age",
			target: tm, lookup: fleet,
			defs: []Def{def(tm, "backup-freshness", map[string]any{
				"path": "/Volumes/Backup/TM", "max_age_minutes": 1560, "holder": "workstation:mac-mini", "os": "darwin",
			}, 15*minute, 60*sec)},
		},
		{
			name:   "backup-freshness with its own max age on a linux holder",
			target: pgDump, lookup: fleet,
			defs: []Def{def(pgDump, "backup-freshness", map[string]any{
				"path": "/srv/pgdump", "max_age_minutes": 90, "holder": "host:nas", "os": "linux",
			}, 15*minute, 60*sec)},
		},
		{
			name:   "backup-freshness without a holder is skipped",
			target: lonely, lookup: fleet,
			skips: []skipWant{{"backup-freshness", "", "no backs-up-to edge"}},
		},
		{
			name:   "tcp: host and port attributes",
			target: nfs, lookup: fleet,
			defs: []Def{def(nfs, "tcp", map[string]any{"host": "127.0.11.5", "port": 2049}, 60*sec, 5*sec)},
		},
		{
			name:   "tcp: no address",
			target: nfsNoHost, lookup: fleet,
			skips: []skipWant{{"tcp", "", "needs an address"}},
		},
		{
			name:   "tcp: port out of range",
			target: nfsBadPort, lookup: fleet,
			skips: []skipWant{{"tcp", "", "`port` 70000 is not a port number"}},
		},
		{
			name:   "tcp on a guest ignores `host` (the Proxmox host's name)",
			target: guestTCP, lookup: fleet,
			defs: []Def{def(guestTCP, "proxmox-guest", map[string]any{"vmid": 102, "guest_kind": "lxc", "host": "proxmox-host:atlas"}, 60*sec, 15*sec)},
			skips: []skipWant{
				{"ssh-script", "cpu", "disabled by the entity's monitoring attribute"},
				{"tcp", "", "needs an address"},
			},
		},
		{
			name:   "overrides: disable, replace interval, add a kind; public address preferred",
			target: overridden, lookup: fleet,
			defs: []Def{
				ssh(overridden, "cpu", "linux", nil, 30*sec, 15*sec),
				ssh(overridden, "memory", "linux", nil, 60*sec, 10*sec),
				def(overridden, "tcp", map[string]any{"host": "127.0.13.1", "port": 22}, 120*sec, 10*sec),
			},
			skips: []skipWant{{"ssh-script", "disk", "disabled by the entity's monitoring attribute"}},
		},
		{
			name:   "check_interval applies where no per-check interval is set",
			target: intervals, lookup: fleet,
			defs: []Def{
				ssh(intervals, "cpu", "linux", nil, 30*sec, 15*sec),
				ssh(intervals, "disk", "linux", nil, 2*minute, 20*sec),
				ssh(intervals, "memory", "linux", nil, 2*minute, 10*sec),
			},
		},
		{
			name:   "check_interval in seconds; timeouts cut to the interval",
			target: shortInterval, lookup: fleet,
			defs: []Def{
				ssh(shortInterval, "cpu", "linux", nil, 5*sec, 5*sec),
				ssh(shortInterval, "disk", "linux", nil, 5*sec, 5*sec),
				ssh(shortInterval, "memory", "linux", nil, 5*sec, 5*sec),
			},
		},
		{
			name:   "invalid check_interval is ignored with a warning",
			target: badInterval, lookup: fleet,
			defs: []Def{
				ssh(badInterval, "cpu", "linux", nil, 60*sec, 15*sec),
				ssh(badInterval, "disk", "linux", nil, 5*minute, 20*sec),
				ssh(badInterval, "memory", "linux", nil, 60*sec, 10*sec),
			},
			warnings: []string{"check_interval soon ignored"},
		},
		{
			name:   "explicit timeout longer than interval is cut with a warning",
			target: longTimeout, lookup: fleet,
			defs: []Def{
				ssh(longTimeout, "cpu", "linux", nil, 60*sec, 15*sec),
				ssh(longTimeout, "disk", "linux", nil, 5*minute, 20*sec),
				ssh(longTimeout, "memory", "linux", nil, 20*sec, 20*sec),
			},
			warnings: []string{"timeout 45s cut to its interval 20s"},
		},
		{
			name:   "entity monitoring none disables everything",
			target: none, lookup: fleet, none: true,
			skips: []skipWant{
				{"ssh-script", "cpu", "monitoring attribute is none"},
				{"ssh-script", "disk", "monitoring attribute is none"},
				{"ssh-script", "memory", "monitoring attribute is none"},
			},
		},
		{
			name:   "type declaring none (through is-a) derives nothing",
			target: site, lookup: fleet, none: true,
		},
		{
			name:   "entity may add a check to a none type",
			target: siteTCP, lookup: fleet,
			defs: []Def{def(siteTCP, "tcp", map[string]any{"host": "127.0.13.9", "port": 443}, 60*sec, 10*sec)},
		},
		{
			name:   "type without any monitoring declaration",
			target: ent("note", "todo", nil), lookup: fleet,
		},
		{
			name:   "destroyed entity derives nothing",
			target: withState(jellyfin, "destroyed"), lookup: fleet,
			skips: []skipWant{{"proxmox-guest", "", "entity is destroyed"}, {"ssh-script", "cpu", "entity is destroyed"}},
		},
		{
			name:   "deprecated entity derives nothing",
			target: withState(route, "deprecated"), lookup: fleet,
			skips: []skipWant{{"http", "", "entity is deprecated"}},
		},
		{
			name:   "planned entity derives nothing until it is live",
			target: withState(jellyfin, "planned"), lookup: fleet,
			skips: []skipWant{{"proxmox-guest", "", "it is not live yet"}, {"ssh-script", "cpu", "it is not live yet"}},
		},
		{
			name:   "unknown type",
			target: ent("toaster", "kitchen", nil), lookup: fleet,
			warnings: []string{`entity type "toaster" is not in the ontology`},
		},
		{
			name:   "malformed overrides are dropped with warnings, valid ones kept",
			target: malformed, lookup: fleet,
			defs: []Def{
				ssh(malformed, "cpu", "linux", nil, 60*sec, 15*sec),
				ssh(malformed, "disk", "linux", nil, 5*minute, 20*sec),
				ssh(malformed, "memory", "linux", nil, 90*sec, 10*sec),
			},
			warnings: []string{
				`monitoring entry 0 ignored: kind "ping"`,
				"monitoring entry 1 ignored: ssh-script needs a script",
				"monitoring entry 2 ignored: kind http takes no script",
				"monitoring entry 3 ignored: disabled must be true or false",
				`monitoring entry 4 ignored: unknown key "intervall"`,
				"monitoring entry 5 ignored: expected an object",
				"disables ssh-script load, which the type does not declare",
				"ssh-script memory listed twice",
			},
		},
		{
			name:   "in-guest probe on a vm without agent is skipped even when added by override",
			target: vmLoad, lookup: fleet,
			defs: []Def{def(vmLoad, "proxmox-guest", map[string]any{"vmid": 200, "guest_kind": "vm", "host": "proxmox-host:atlas"}, 60*sec, 15*sec)},
			skips: []skipWant{
				{"ssh-script", "cpu", "not applicable"},
				{"ssh-script", "load", "no QEMU guest agent"},
			},
		},
		{
			name:   "kinds that do not fit the entity are skipped with reasons",
			target: hostAsGuest, lookup: fleet,
			defs: []Def{
				ssh(hostAsGuest, "cpu", "linux", nil, 60*sec, 15*sec),
				ssh(hostAsGuest, "disk", "linux", nil, 5*minute, 20*sec),
				ssh(hostAsGuest, "memory", "linux", nil, 60*sec, 10*sec),
			},
			skips: []skipWant{
				{"backup-freshness", "", "needs a `path` attribute"},
				{"proxmox-guest", "", "neither an lxc nor a vm"},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := Derive(tc.target, o, tc.lookup)
			if !reflect.DeepEqual(r.Defs, tc.defs) {
				t.Errorf("defs:\n got  %s\n want %s", dump(r.Defs), dump(tc.defs))
			}
			if len(r.Skipped) != len(tc.skips) {
				t.Fatalf("skipped: got %+v, want %+v", r.Skipped, tc.skips)
			}
			for i, w := range tc.skips {
				s := r.Skipped[i]
				if s.Kind != w.kind || s.Script != w.script || !strings.Contains(s.Reason, w.reasonHas) {
					t.Errorf("skip %d: got %+v, want kind %q script %q reason containing %q", i, s, w.kind, w.script, w.reasonHas)
				}
			}
			if r.MonitoringNone != tc.none {
				t.Errorf("MonitoringNone = %v, want %v", r.MonitoringNone, tc.none)
			}
			if len(r.Warnings) != len(tc.warnings) {
				t.Fatalf("warnings: got %q, want %q", r.Warnings, tc.warnings)
			}
			for i, w := range tc.warnings {
				if !strings.Contains(r.Warnings[i], w) {
					t.Errorf("warning %d: got %q, want it to contain %q", i, r.Warnings[i], w)
				}
			}
			for _, d := range r.Defs {
				if d.Timeout > d.Interval || d.Timeout <= 0 {
					t.Errorf("%s: timeout %s not in (0, interval %s]", d.Slug, d.Timeout, d.Interval)
				}
			}
		})
	}
}

func dump(defs []Def) string {
	var b strings.Builder
	for _, d := range defs {
		cfg, _ := json.Marshal(d.Config)
		fmt.Fprintf(&b, "\n   %s kind=%s every=%s timeout=%s config=%s", d.Slug, d.Kind, d.Interval, d.Timeout, cfg)
	}
	return b.String()
}

// TestSlugsDistinct guards the shortSlug bug: truncated slugs made 21 ingress routes one
// check and let service:jellyfin overwrite lxc:jellyfin.
func TestSlugsDistinct(t *testing.T) {
	t.Parallel()
	o := mustOntology(t)

	t.Run("21 ingress routes give 21 checks", func(t *testing.T) {
		t.Parallel()
		seen := map[string]string{}
		for i := 1; i <= 21; i++ {
			name := fmt.Sprintf("app%02d.lab.example", i)
			r := Derive(ent("ingress-route", name, map[string]any{"public_host": name}), o, fleet)
			if len(r.Defs) != 1 {
				t.Fatalf("%s: %d defs, want 1 (%+v)", name, len(r.Defs), r.Skipped)
			}
			d := r.Defs[0]
			if want := "check:ingress-route." + name + ".http"; d.Slug != want {
				t.Errorf("slug %q, want %q", d.Slug, want)
			}
			if d.Slug != SlugPrefix+d.Name {
				t.Errorf("slug %q is not check: + name %q", d.Slug, d.Name)
			}
			if prev, dup := seen[d.Slug]; dup {
				t.Errorf("%s and %s share slug %s", prev, name, d.Slug)
			}
			seen[d.Slug] = name
		}
		if len(seen) != 21 {
			t.Errorf("%d distinct slugs, want 21", len(seen))
		}
	})

	t.Run("same name on different types and long shared suffixes never collide", func(t *testing.T) {
		t.Parallel()
		targets := []Target{
			ent("lxc", "jellyfin", map[string]any{"vmid": 101}),
			ent("service", "jellyfin", map[string]any{"unit": "jellyfin.service", "url": "http://127.0.0.1:8096/"}),
			ent("web-app", "jellyfin", map[string]any{"unit": "jellyfin.service", "url": "http://127.0.0.1:8096/"}),
			ent("host", "storage-node-a.network", nil),
			ent("host", "storage-node-b.network", nil),
		}
		lookup := graph{hosts: map[string]Target{"lxc:jellyfin": atlas}}
		owner := map[string]string{}
		total := 0
		for _, tg := range targets {
			r := Derive(tg, o, lookup)
			if len(r.Defs) == 0 {
				t.Fatalf("%s derived nothing: %+v", tg.Slug, r.Skipped)
			}
			for _, d := range r.Defs {
				total++
				if !strings.HasPrefix(d.Name, tg.Type+"."+tg.Name+".") {
					t.Errorf("%s: name %q does not carry the full target", tg.Slug, d.Name)
				}
				if prev, dup := owner[d.Slug]; dup {
					t.Errorf("slug %s derived for both %s and %s", d.Slug, prev, tg.Slug)
				}
				owner[d.Slug] = tg.Slug
			}
		}
		if len(owner) != total {
			t.Errorf("%d distinct slugs for %d defs", len(owner), total)
		}
	})
}

// TestDeriveDeterministic: a re-seed re-derives the same slugs in the same order, so the
// caller's upsert never duplicates.
func TestDeriveDeterministic(t *testing.T) {
	t.Parallel()
	o := mustOntology(t)
	tg := ent("host", "vps", map[string]any{
		"public_ipv4": "127.0.13.1", "port": 22, "check_interval": "90s",
		"monitoring": []any{
			map[string]any{"kind": "tcp"},
			map[string]any{"kind": "ssh-script", "script": "load"},
			map[string]any{"kind": "ssh-script", "script": "process", "args": []any{"caddy.service"}},
		},
	})
	first := Derive(tg, o, fleet)
	if len(first.Defs) != 6 {
		t.Fatalf("got %d defs, want 6: %s", len(first.Defs), dump(first.Defs))
	}
	if !sort.SliceIsSorted(first.Defs, func(i, j int) bool { return first.Defs[i].Slug < first.Defs[j].Slug }) {
		t.Errorf("defs not sorted by slug: %s", dump(first.Defs))
	}
	for i := 0; i < 20; i++ {
		if again := Derive(tg, o, fleet); !reflect.DeepEqual(again, first) {
			t.Fatalf("derivation %d differs:\n%s\nvs\n%s", i, dump(again.Defs), dump(first.Defs))
		}
	}
}

// TestDeriveDoesNotMutate: Derive must leave the caller's attributes and the ontology's
// specs alone (the api reuses both within a transaction).
func TestDeriveDoesNotMutate(t *testing.T) {
	t.Parallel()
	o := mustOntology(t)
	tg := ent("service", "nginx", map[string]any{
		"monitoring": []any{map[string]any{"kind": "ssh-script", "script": "process", "args": []any{"nginx.service"}}},
	})
	before, _ := json.Marshal(tg.Attributes)
	specsBefore, _ := o.Monitoring("service")
	r := Derive(tg, o, fleet)
	r.Defs[0].Config["args"].([]string)[0] = "changed"
	after, _ := json.Marshal(tg.Attributes)
	if string(before) != string(after) {
		t.Errorf("attributes changed: %s -> %s", before, after)
	}
	specsAfter, _ := o.Monitoring("service")
	if !reflect.DeepEqual(specsBefore, specsAfter) {
		t.Errorf("ontology specs changed")
	}
	if again := Derive(tg, o, fleet); again.Defs[0].Config["args"].([]string)[0] != "nginx.service" {
		t.Errorf("args shared between derivations: %v", again.Defs[0].Config["args"])
	}
}

// TestConfigJSON: the runner reads Config back from JSON; every key documented for the kind
// must survive the round trip with a usable value.
func TestConfigJSON(t *testing.T) {
	t.Parallel()
	o := mustOntology(t)
	wantKeys := map[string][]string{
		"ssh-script":       {KeyScript, KeyArgs, KeyOS},
		"http":             {KeyURL, KeyExpectStatus},
		"tcp":              {KeyHost, KeyPort},
		"backup-freshness": {KeyPath, KeyMaxAgeMinutes, KeyHolder, KeyOS},
		"proxmox-guest":    {KeyVMID, KeyGuestKind, KeyHost},
	}
	targets := []Target{
		ent("lxc", "jellyfin", map[string]any{"vmid": 101, "host": "atlas"}),
		ent("service", "jellyfin", map[string]any{"unit": "jellyfin.service", "public_host": "media.lab.example"}),
		ent("nfs-export", "media", map[string]any{"host": "127.0.11.5", "port": 2049}),
		ent("backup-target", "time-machine", map[string]any{"path": "/Volumes/Backup/TM"}),
	}
	seen := map[string]bool{}
	for _, tg := range targets {
		for _, d := range Derive(tg, o, fleet).Defs {
			seen[d.Kind] = true
			raw, err := json.Marshal(d.Config)
			if err != nil {
				t.Fatalf("%s: marshal config: %v", d.Slug, err)
			}
			var back map[string]any
			if err := json.Unmarshal(raw, &back); err != nil {
				t.Fatalf("%s: unmarshal config: %v", d.Slug, err)
			}
			for _, k := range wantKeys[d.Kind] {
				if v, ok := back[k]; !ok || v == nil || v == "" {
					t.Errorf("%s: key %q missing or empty after JSON: %s", d.Slug, k, raw)
				}
			}
		}
	}
	for k := range wantKeys {
		if !seen[k] {
			t.Errorf("no def of kind %s derived; the test does not cover it", k)
		}
	}
}

// fixedLookup answers every question with the same entities.
type fixedLookup struct{ host, holder Target }

func (l fixedLookup) HostOf(Target) (Target, bool)       { return l.host, true }
func (l fixedLookup) BackupHolder(Target) (Target, bool) { return l.holder, true }

// TestLookedUpEntitiesReadOnly: of an entity a Lookup returns, Derive reads the slug and, of
// a backup holder, HolderAttributes. Every other attribute and the state of the looked-up
// entity are varied here and must leave the derived checks as they were: a PATCH of a holder
// re-derives the backup targets it holds only when one of HolderAttributes changes, and a
// PATCH of a host re-derives no guest, so reading anything else would leave checks stale.
// If this fails because derivation now reads more, extend HolderAttributes (or, for hosts,
// make the api re-derive hosted guests) rather than the test.
func TestLookedUpEntitiesReadOnly(t *testing.T) {
	t.Parallel()
	o := mustOntology(t)
	targets := []Target{
		ent("lxc", "web", map[string]any{"vmid": 101, "host": "atlas"}),
		ent("vm", "db", map[string]any{"vmid": 102, "qemu_guest_agent": true}),
		ent("backup-target", "tm", map[string]any{"path": "/Backups", "max_age_minutes": 90}),
	}
	base := fixedLookup{host: atlas, holder: mac}
	// Values chosen to change a derivation that read them: each is what some check of the
	// looked-up entity's own kind would pick up.
	vary := map[string]any{
		"monitoring": "none", "check_interval": "5m", "unit": "other.service", "url": "https://x.example/",
		"public_host": "x.example", "expect_status": 204, "body_match": "ok", "host_address": "127.0.0.9",
		"host": "boreas", "port": 2222, "path": "/elsewhere", "max_age_minutes": 5, "vmid": 999,
		"qemu_guest_agent": false, "public_ipv4": "127.0.0.7", "mesh_ipv4": "127.0.0.8", "lan_ipv4": "127.0.0.6",
		"os": "plan9", "role": "anything",
	}
	perturb := func(e Target, key string, v any, keep []string) (Target, bool) {
		for _, k := range keep {
			if k == key {
				return e, false
			}
		}
		attrs := map[string]any{}
		for k, x := range e.Attributes {
			attrs[k] = x
		}
		attrs[key] = v
		e.Attributes = attrs
		return e, true
	}
	for _, tg := range targets {
		want := Derive(tg, o, base)
		if len(want.Defs) == 0 {
			t.Fatalf("%s derives nothing; the test would prove nothing", tg.Slug)
		}
		for key, v := range vary {
			if h, ok := perturb(atlas, key, v, nil); ok {
				if got := Derive(tg, o, fixedLookup{host: h, holder: mac}); !reflect.DeepEqual(got.Defs, want.Defs) {
					t.Errorf("%s: the host's %s changes the derived checks:\n got %+v\nwant %+v", tg.Slug, key, got.Defs, want.Defs)
				}
			}
			if h, ok := perturb(mac, key, v, HolderAttributes); ok {
				if got := Derive(tg, o, fixedLookup{host: atlas, holder: h}); !reflect.DeepEqual(got.Defs, want.Defs) {
					t.Errorf("%s: the holder's %s changes the derived checks:\n got %+v\nwant %+v", tg.Slug, key, got.Defs, want.Defs)
				}
			}
		}
		for _, state := range []string{StateDestroyed, StatePlanned, "maintenance"} {
			if got := Derive(tg, o, fixedLookup{host: withState(atlas, state), holder: withState(mac, state)}); !reflect.DeepEqual(got.Defs, want.Defs) {
				t.Errorf("%s: the looked-up entities' state %s changes the derived checks", tg.Slug, state)
			}
		}
	}
	// The listed attributes are read: a holder's os reaches its targets' checks.
	linuxMac, _ := perturb(mac, "os", "linux", nil)
	if a, b := Derive(targets[2], o, base), Derive(targets[2], o, fixedLookup{host: atlas, holder: linuxMac}); reflect.DeepEqual(a.Defs, b.Defs) {
		t.Errorf("the holder's os does not reach the backup check; HolderAttributes lists an attribute derivation does not read")
	}
}

// A guest the graph says is stopped on purpose carries that into its Proxmox status check,
// so stopped is its expected state; any other guest's check says nothing of it.
func TestExpectedStatusStopped(t *testing.T) {
	t.Parallel()
	o := mustOntology(t)
	for _, tc := range []struct {
		attrs map[string]any
		want  any
	}{
		{map[string]any{"vmid": 351, "host": "atlas", "expected_status": "stopped"}, "stopped"},
		{map[string]any{"vmid": 351, "host": "atlas", "expected_status": " Stopped "}, "stopped"},
		{map[string]any{"vmid": 351, "host": "atlas", "expected_status": "running"}, nil},
		{map[string]any{"vmid": 351, "host": "atlas"}, nil},
	} {
		var got any = "no proxmox-guest check"
		for _, d := range Derive(ent("vm", "homeassistant", tc.attrs), o, fleet).Defs {
			if d.Kind == "proxmox-guest" {
				got = d.Config[KeyExpectedStatus]
			}
		}
		if got != tc.want {
			t.Errorf("%v: expected_status %v, want %v", tc.attrs, got, tc.want)
		}
	}
}
