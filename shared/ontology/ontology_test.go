package ontology

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// testOntology is small but exercises every inheritance rule: an abstract root with
// lifecycle and monitoring, children that add attributes, override monitoring, declare none,
// and override states.
const testOntology = `
entity_types:
  - name: machine
    abstract: true
    description: runs an OS
    attributes:
      lan_ipv4: {type: string}
      ssh_port: {type: integer}
      os: {type: string, enum: [linux, darwin]}
    states: &st [planned, active, deprecated, destroyed]
    default_state: active
    transitions: &tr
      - {from: planned, to: active}
      - {from: active, to: deprecated}
      - {from: deprecated, to: active}
      - {from: active, to: destroyed, preconditions: [no_live_dependents]}
      - {from: "*", to: destroyed, preconditions: ["has_attribute:retired_at"]}
    monitoring:
      - {kind: ssh-script, script: cpu, interval: 60s}
      - {kind: ssh-script, script: disk, interval: 5m, timeout: 20s}
  - name: host
    parent: machine
    attributes:
      role: {type: string}
      retired_at: {type: string}
  - name: proxmox-host
    parent: machine
    attributes:
      node: {type: string}
      ssh_port: {type: number, description: overridden}
    required: [node]
  - name: workstation
    parent: machine
    monitoring:
      - {kind: ssh-script, script: cpu, interval: 5m}
  - name: guest
    abstract: true
    attributes:
      vmid: {type: integer}
      host: {type: string}
      tags: {type: array}
      extra: {type: object}
      on: {type: boolean}
    required: [vmid]
    states: *st
    default_state: active
    transitions: *tr
    monitoring:
      - {kind: proxmox-guest}
  - name: lxc
    parent: guest
  - name: vm
    parent: guest
    attributes:
      qemu_guest_agent: {type: boolean}
    monitoring:
      - {kind: proxmox-guest}
      - {kind: ssh-script, script: memory, requires_all: [qemu_guest_agent]}
  - name: service
    attributes:
      unit: {type: string}
      url: {type: string}
      public_host: {type: string}
      weight: {type: number}
    states: [active, retired]
    default_state: active
    transitions:
      - {from: active, to: retired}
    monitoring:
      - {kind: ssh-script, script: process, requires_all: [unit]}
      - {kind: http, requires_any: [url, public_host]}
  - name: reverse-proxy
    parent: service
  - name: network
    abstract: true
    states: [active]
    default_state: active
    monitoring: none
  - name: site
    parent: network
  - name: cluster
    parent: network
relationship_types:
  - {name: hosts, sources: [proxmox-host], targets: [guest]}
  - {name: runs-on, sources: [service], targets: [machine, guest]}
  - {name: depends-on, sources: ["*"], targets: ["*"]}
  - {name: located-in, sources: [machine], targets: [site]}
`

func mustParse(t *testing.T, src string) *Ontology {
	t.Helper()
	o, err := Parse([]byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return o
}

func TestIsAAndDescendants(t *testing.T) {
	t.Parallel()
	o := mustParse(t, testOntology)
	isa := []struct {
		typ, anc string
		want     bool
	}{
		{"lxc", "guest", true},
		{"lxc", "lxc", true},
		{"vm", "guest", true},
		{"proxmox-host", "machine", true},
		{"lxc", "machine", false},
		{"machine", "host", false},
		{"reverse-proxy", "service", true},
		{"site", "network", true},
		{"nope", "guest", false},
		{"lxc", "nope", false},
	}
	for _, c := range isa {
		if got := o.IsA(c.typ, c.anc); got != c.want {
			t.Errorf("IsA(%q, %q) = %v, want %v", c.typ, c.anc, got, c.want)
		}
	}
	desc := []struct {
		typ  string
		want []string
	}{
		{"guest", []string{"guest", "lxc", "vm"}},
		{"machine", []string{"host", "machine", "proxmox-host", "workstation"}},
		{"lxc", []string{"lxc"}},
		{"network", []string{"cluster", "network", "site"}},
		{"nope", nil},
	}
	for _, c := range desc {
		if got := o.Descendants(c.typ); !slices.Equal(got, c.want) {
			t.Errorf("Descendants(%q) = %v, want %v", c.typ, got, c.want)
		}
	}
	if got := o.Ancestors("reverse-proxy"); !slices.Equal(got, []string{"service"}) {
		t.Errorf("Ancestors(reverse-proxy) = %v", got)
	}
	var names []string
	for _, ty := range o.Types() {
		names = append(names, ty.Name)
	}
	if !slices.IsSorted(names) || len(names) != 12 {
		t.Errorf("Types() = %v, want 12 sorted names", names)
	}
}

func TestInheritance(t *testing.T) {
	t.Parallel()
	o := mustParse(t, testOntology)

	ph, ok := o.Type("proxmox-host")
	if !ok {
		t.Fatal("proxmox-host missing")
	}
	if ph.Abstract {
		t.Error("abstract must not be inherited")
	}
	if got := ph.Attributes["lan_ipv4"].Type; got != AttrString {
		t.Errorf("inherited lan_ipv4 type = %q", got)
	}
	if got := ph.Attributes["ssh_port"]; got.Type != AttrNumber || got.Description != "overridden" {
		t.Errorf("child override of ssh_port = %+v", got)
	}
	if !slices.Equal(ph.Required, []string{"node"}) {
		t.Errorf("required = %v", ph.Required)
	}
	if !slices.Equal(ph.States, []string{"planned", "active", "deprecated", "destroyed"}) || ph.DefaultState != "active" {
		t.Errorf("states = %v default %q", ph.States, ph.DefaultState)
	}
	if len(ph.Transitions) != 5 {
		t.Errorf("transitions = %v", ph.Transitions)
	}
	m, none := o.Monitoring("proxmox-host")
	if none || len(m) != 2 || m[0].Script != ScriptCPU || m[1].Script != ScriptDisk {
		t.Fatalf("inherited monitoring = %+v none=%v", m, none)
	}
	if m[0].Interval != time.Minute || m[0].Timeout != DefaultTimeout || m[1].Interval != 5*time.Minute || m[1].Timeout != 20*time.Second {
		t.Errorf("intervals/timeouts = %+v", m)
	}

	// The parent's attributes map is not shared with the child's override.
	mach, _ := o.Type("machine")
	if mach.Attributes["ssh_port"].Type != AttrInteger {
		t.Errorf("child override leaked into parent: %+v", mach.Attributes["ssh_port"])
	}
	if _, ok := mach.Attributes["node"]; ok {
		t.Error("child attribute leaked into parent")
	}

	ws, _ := o.Monitoring("workstation")
	if len(ws) != 1 || ws[0].Interval != 5*time.Minute {
		t.Errorf("workstation override = %+v", ws)
	}
	vm, _ := o.Type("vm")
	if !slices.Equal(vm.Required, []string{"vmid"}) || vm.Attributes["qemu_guest_agent"].Type != AttrBoolean || vm.Attributes["vmid"].Type != AttrInteger {
		t.Errorf("vm = %+v", vm)
	}
	rp, _ := o.Monitoring("reverse-proxy")
	if len(rp) != 2 || rp[0].Script != ScriptProcess || rp[1].Kind != KindHTTP {
		t.Errorf("reverse-proxy monitoring = %+v", rp)
	}

	for _, typ := range []string{"network", "site", "cluster"} {
		specs, none := o.Monitoring(typ)
		if !none || len(specs) != 0 {
			t.Errorf("Monitoring(%s) = %v, none=%v; want declared none", typ, specs, none)
		}
	}
	if specs, none := o.Monitoring("nope"); specs != nil || none {
		t.Errorf("unknown type monitoring = %v %v", specs, none)
	}
}

func TestAccessorsReturnCopies(t *testing.T) {
	t.Parallel()
	o := mustParse(t, testOntology)
	ty, _ := o.Type("vm")
	ty.Attributes["vmid"] = AttributeSpec{Type: AttrString}
	ty.States[0] = "mangled"
	ty.Monitoring[0].Kind = "mangled"
	ty.Transitions[3].Preconditions[0] = "mangled"
	again, _ := o.Type("vm")
	if again.Attributes["vmid"].Type != AttrInteger || again.States[0] != "planned" ||
		again.Monitoring[0].Kind != KindProxmoxGuest || again.Transitions[3].Preconditions[0] != PreconditionNoLiveDependents {
		t.Errorf("mutating a returned type changed the ontology: %+v", again)
	}
	specs, _ := o.Monitoring("vm")
	specs[1].RequiresAll[0] = "mangled"
	if s, _ := o.Monitoring("vm"); s[1].RequiresAll[0] != "qemu_guest_agent" {
		t.Error("Monitoring returned shared slices")
	}
}

func TestValidateEdge(t *testing.T) {
	t.Parallel()
	o := mustParse(t, testOntology)
	cases := []struct {
		rel, src, dst string
		want          error
	}{
		{"hosts", "proxmox-host", "lxc", nil},
		{"hosts", "proxmox-host", "vm", nil},
		{"hosts", "host", "lxc", ErrEdgeNotAllowed},
		{"hosts", "proxmox-host", "service", ErrEdgeNotAllowed},
		{"runs-on", "reverse-proxy", "lxc", nil},   // source through is-a
		{"runs-on", "service", "workstation", nil}, // target through is-a
		{"runs-on", "service", "site", ErrEdgeNotAllowed},
		{"depends-on", "site", "reverse-proxy", nil},
		{"located-in", "vm", "site", ErrEdgeNotAllowed},
		{"no-such-rel", "lxc", "lxc", ErrUnknownRelationshipType},
		{"no-such-rel", "lxc", "lxc", ErrEdgeNotAllowed},
		{"hosts", "proxmox-host", "nope", ErrUnknownType},
		{"hosts", "nope", "lxc", ErrUnknownType},
	}
	for _, c := range cases {
		err := o.ValidateEdge(c.rel, c.src, c.dst)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("ValidateEdge(%s, %s, %s) = %v, want %v", c.rel, c.src, c.dst, err, c.want)
		}
	}
	if err := o.ValidateEdge("hosts", "host", "lxc"); err == nil || !strings.Contains(err.Error(), "hosts") || !strings.Contains(err.Error(), "host") {
		t.Errorf("message should name relationship and type: %v", err)
	}
}

func TestValidateTransition(t *testing.T) {
	t.Parallel()
	o := mustParse(t, testOntology)
	cases := []struct {
		typ, from, to string
		pre           []string
		want          error
	}{
		{"lxc", "planned", "active", []string{}, nil},
		{"lxc", "active", "destroyed", []string{PreconditionNoLiveDependents}, nil},                // exact beats wildcard
		{"lxc", "deprecated", "destroyed", []string{PreconditionHasAttribute + "retired_at"}, nil}, // wildcard
		{"lxc", "active", "active", []string{}, nil},
		{"lxc", "active", "planned", nil, ErrIllegalTransition},
		{"lxc", "destroyed", "active", nil, ErrIllegalTransition},
		{"lxc", "active", "running", nil, ErrUndeclaredState},
		{"lxc", "running", "active", nil, ErrUndeclaredState},
		{"service", "active", "retired", []string{}, nil},
		{"service", "retired", "active", nil, ErrIllegalTransition},
		{"nope", "a", "b", nil, ErrUnknownType},
	}
	for _, c := range cases {
		pre, err := o.ValidateTransition(c.typ, c.from, c.to)
		if c.want != nil {
			if !errors.Is(err, c.want) {
				t.Errorf("ValidateTransition(%s, %s→%s) err = %v, want %v", c.typ, c.from, c.to, err, c.want)
			}
			continue
		}
		if err != nil || !slices.Equal(pre, c.pre) {
			t.Errorf("ValidateTransition(%s, %s→%s) = %v, %v; want %v", c.typ, c.from, c.to, pre, err, c.pre)
		}
	}
	_, err := o.ValidateTransition("lxc", "active", "planned")
	if err == nil || !strings.Contains(err.Error(), "deprecated") {
		t.Errorf("illegal transition message should list the allowed targets: %v", err)
	}
}

func TestValidateState(t *testing.T) {
	t.Parallel()
	o := mustParse(t, testOntology)
	if err := o.ValidateState("lxc", "deprecated"); err != nil {
		t.Errorf("inherited state refused: %v", err)
	}
	if err := o.ValidateState("service", "deprecated"); !errors.Is(err, ErrUndeclaredState) {
		t.Errorf("service has its own states; got %v", err)
	}
	if err := o.ValidateState("nope", "active"); !errors.Is(err, ErrUnknownType) {
		t.Errorf("unknown type: %v", err)
	}
}

func TestValidateAttributes(t *testing.T) {
	t.Parallel()
	o := mustParse(t, testOntology)
	cases := []struct {
		name   string
		typ    string
		attrs  map[string]any
		create bool
		want   error
		fields []string // offending fields, in order
	}{
		{"valid lxc", "lxc", map[string]any{"vmid": 101, "host": "atlas", "tags": []any{"a"}, "extra": map[string]any{"k": 1}, "on": true}, true, nil, nil},
		{"json float vmid", "lxc", map[string]any{"vmid": float64(101)}, true, nil, nil},
		{"json.Number vmid", "lxc", map[string]any{"vmid": json.Number("101")}, true, nil, nil},
		{"undeclared allowed", "lxc", map[string]any{"vmid": 1, "learned_fact": "x"}, true, nil, nil},
		{"string slice is array", "lxc", map[string]any{"vmid": 1, "tags": []string{"a"}}, true, nil, nil},
		{"missing required", "lxc", map[string]any{"host": "atlas"}, true, ErrInvalidAttribute, []string{"vmid"}},
		{"inherited required on patch not needed", "lxc", map[string]any{"host": "atlas"}, false, nil, nil},
		{"wrong types", "lxc", map[string]any{"vmid": "101", "host": 3, "on": "yes", "tags": "a", "extra": []any{}}, true, ErrInvalidAttribute, []string{"extra", "host", "on", "tags", "vmid"}},
		{"fractional integer", "lxc", map[string]any{"vmid": 1.5}, true, ErrInvalidAttribute, []string{"vmid"}},
		{"enum", "host", map[string]any{"os": "windows"}, true, ErrInvalidAttribute, []string{"os"}},
		{"enum ok", "host", map[string]any{"os": "darwin"}, true, nil, nil},
		{"number accepts int", "service", map[string]any{"weight": 3}, true, nil, nil},
		{"number refuses string", "service", map[string]any{"weight": "3"}, true, ErrInvalidAttribute, []string{"weight"}},
		{"child override type", "proxmox-host", map[string]any{"node": "atlas", "ssh_port": 22.5}, true, nil, nil},
		{"remove required on patch", "lxc", map[string]any{"vmid": nil}, false, ErrInvalidAttribute, []string{"vmid"}},
		{"null optional on patch", "lxc", map[string]any{"host": nil}, false, nil, nil},
		{"abstract on create", "guest", map[string]any{"vmid": 1}, true, ErrAbstractType, nil},
		{"unknown type", "nope", nil, true, ErrUnknownType, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := o.ValidateAttributes(c.typ, c.attrs, c.create)
			if c.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if c.fields == nil {
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != c.fields[0] || fe.Reason == "" {
				t.Fatalf("errors.As FieldError = %+v (err %v), want field %q", fe, err, c.fields[0])
			}
			var got []string
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				got = append(got, e.(*FieldError).Field)
			}
			if !slices.Equal(got, c.fields) {
				t.Errorf("fields = %v, want %v (%v)", got, c.fields, err)
			}
		})
	}
}

func TestAppliesTo(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		spec  MonitoringSpec
		attrs map[string]any
		want  bool
	}{
		{"no requirements", MonitoringSpec{Kind: KindSSHScript}, nil, true},
		{"all present", MonitoringSpec{RequiresAll: []string{"host", "port"}}, map[string]any{"host": "127.0.0.1", "port": 2049}, true},
		{"all, one missing", MonitoringSpec{RequiresAll: []string{"host", "port"}}, map[string]any{"host": "127.0.0.1"}, false},
		{"false counts as unset", MonitoringSpec{RequiresAll: []string{"qemu_guest_agent"}}, map[string]any{"qemu_guest_agent": false}, false},
		{"true is set", MonitoringSpec{RequiresAll: []string{"qemu_guest_agent"}}, map[string]any{"qemu_guest_agent": true}, true},
		{"empty string unset", MonitoringSpec{RequiresAny: []string{"url", "public_host"}}, map[string]any{"url": ""}, false},
		{"any, second present", MonitoringSpec{RequiresAny: []string{"url", "public_host"}}, map[string]any{"public_host": "a.lab.example"}, true},
		{"any, none present", MonitoringSpec{RequiresAny: []string{"url", "public_host"}}, map[string]any{"unit": "x"}, false},
		{"zero number is set", MonitoringSpec{RequiresAll: []string{"port"}}, map[string]any{"port": 0}, true},
		{"both kinds", MonitoringSpec{RequiresAll: []string{"unit"}, RequiresAny: []string{"url"}}, map[string]any{"unit": "a"}, false},
	}
	for _, c := range cases {
		if got := c.spec.AppliesTo(c.attrs); got != c.want {
			t.Errorf("%s: AppliesTo = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestEntityTypeJSONRoundTrip(t *testing.T) {
	t.Parallel()
	seed, err := os.ReadFile("../../seeds/ontology.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{testOntology, string(seed)} {
		o := mustParse(t, src)
		for _, ty := range o.Types() {
			data, err := json.Marshal(ty)
			if err != nil {
				t.Fatalf("%s: %v", ty.Name, err)
			}
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(data, &raw); err != nil {
				t.Fatal(err)
			}
			// The original stored null here because it read the wrong key.
			for _, key := range []string{"attributes", "required", "states", "transitions", "monitoring"} {
				if v, ok := raw[key]; !ok || string(v) == "null" {
					t.Errorf("%s: JSON %q = %s, want a value", ty.Name, key, v)
				}
			}
			if _, ok := raw["line"]; ok {
				t.Errorf("%s: the source line must not be stored", ty.Name)
			}
			var back EntityType
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatalf("%s: %v", ty.Name, err)
			}
			if !reflect.DeepEqual(normalize(back), normalize(*ty)) {
				t.Errorf("%s: round trip differs:\n got %+v\nwant %+v", ty.Name, back, *ty)
			}
		}
	}
	// Durations are readable strings in storage.
	o := mustParse(t, testOntology)
	ty, _ := o.Type("machine")
	data, _ := json.Marshal(ty.Monitoring[1])
	if !strings.Contains(string(data), `"interval":"5m0s"`) || !strings.Contains(string(data), `"timeout":"20s"`) {
		t.Errorf("monitoring JSON = %s", data)
	}
	if string(mustJSON(t, ty.Attributes["os"])) != `{"type":"string","enum":["linux","darwin"]}` {
		t.Errorf("attribute JSON = %s", mustJSON(t, ty.Attributes["os"]))
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// normalize maps empty slices to nil so omitempty round trips compare equal, and drops
// the source line, which is deliberately not stored.
func normalize(t EntityType) EntityType {
	t.Line = 0
	for k, v := range t.Attributes {
		if len(v.Enum) == 0 {
			v.Enum = nil
		}
		t.Attributes[k] = v
	}
	for i := range t.Transitions {
		if len(t.Transitions[i].Preconditions) == 0 {
			t.Transitions[i].Preconditions = nil
		}
	}
	for i := range t.Monitoring {
		m := &t.Monitoring[i]
		if len(m.Args) == 0 {
			m.Args = nil
		}
		if len(m.RequiresAll) == 0 {
			m.RequiresAll = nil
		}
		if len(m.RequiresAny) == 0 {
			m.RequiresAny = nil
		}
	}
	return t
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	const base = `entity_types:
  - name: root
    states: [active, gone]
    default_state: active
`
	cases := []struct {
		name   string
		src    string
		line   int
		typ    string
		reason string
	}{
		{"bad yaml", "entity_types:\n  - name: a\n    x: y: z\n", 3, "", "invalid YAML"},
		{"empty", "", 0, "", "empty"},
		{"no types", "relationship_types: []\n", 1, "", "no entity_types"},
		{"unknown top key", base + "relations: []\n", 5, "", `unknown key "relations"`},
		{"attribute_schema is not attributes", base + "  - name: a\n    parent: root\n    attribute_schema: {x: {type: string}}\n", 7, "a", `unknown key "attribute_schema"`},
		{"unknown parent", base + "  - name: child\n    parent: rot\n", 5, "child", `parent "rot" is not declared`},
		{"cycle", "entity_types:\n  - {name: a, parent: b, states: [s], default_state: s}\n  - {name: b, parent: a}\n", 2, "a", "cycle"},
		{"duplicate type", base + "  - name: root\n", 5, "root", "declared twice"},
		{"bad name", base + "  - name: Bad_Name\n    parent: root\n", 5, "Bad_Name", "kebab"},
		{"default not a state", "entity_types:\n  - {name: a, states: [x], default_state: y}\n", 2, "a", `default_state "y" is not among`},
		{"transition to undeclared", base + "    transitions: [{from: active, to: nowhere}]\n", 2, "root", `transition to undeclared state "nowhere"`},
		{"transition from undeclared", base + "    transitions: [{from: nowhere, to: gone}]\n", 2, "root", `transition from undeclared state "nowhere"`},
		{"unknown precondition", base + "    transitions: [{from: active, to: gone, preconditions: [is_quiet]}]\n", 2, "root", `unknown precondition "is_quiet"`},
		{"inherited transitions vs new states", base + "    transitions: [{from: active, to: gone}]\n  - {name: c, parent: root, states: [active], default_state: active}\n", 6, "c", `transition to undeclared state "gone"`},
		{"concrete without states", "entity_types:\n  - name: a\n", 2, "a", "no lifecycle states"},
		{"unknown monitoring kind", base + "    monitoring: [{kind: ping}]\n", 5, "root", `monitoring kind "ping" is unknown`},
		{"ssh-script without script", base + "    monitoring: [{kind: ssh-script}]\n", 5, "root", "ssh-script needs a script"},
		{"script on http", base + "    monitoring: [{kind: http, script: cpu}]\n", 5, "root", "takes no script"},
		{"timeout beyond interval", base + "    monitoring: [{kind: tcp, interval: 5s, timeout: 10s}]\n", 5, "root", "longer than its interval"},
		{"bad interval", base + "    monitoring: [{kind: tcp, interval: soon}]\n", 5, "root", "not a positive duration"},
		{"empty monitoring list", base + "    monitoring: []\n", 5, "root", "monitoring: none"},
		{"monitoring word", base + "    monitoring: nothing\n", 5, "root", "the word none"},
		{"requires undeclared attribute", base + "    monitoring: [{kind: tcp, requires_all: [host]}]\n", 2, "root", `requires attribute "host"`},
		{"bad attribute type", base + "    attributes: {x: {type: str}}\n", 5, "root", `type "str" is not one of`},
		{"enum on integer", base + "    attributes: {x: {type: integer, enum: [a]}}\n", 5, "root", "enum is only allowed on string"},
		{"required not declared", base + "    required: [x]\n", 2, "root", `required attribute "x" is not declared`},
		{"abstract not boolean", base + "    abstract: maybe\n", 5, "root", "expected true or false"},
		{"relationship unknown endpoint", base + "relationship_types:\n  - {name: hosts, sources: [root], targets: [gust]}\n", 6, "hosts", `entity type "gust" is not declared`},
		{"relationship without targets", base + "relationship_types:\n  - {name: hosts, sources: [root]}\n", 6, "hosts", "targets must list"},
		{"relationship duplicate", base + "relationship_types:\n  - {name: r, sources: ['*'], targets: ['*']}\n  - {name: r, sources: ['*'], targets: ['*']}\n", 7, "r", "declared twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			o, err := Parse([]byte(c.src))
			if err == nil || o != nil {
				t.Fatalf("Parse accepted a broken ontology (o=%v)", o)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			if pe.Line != c.line || pe.Type != c.typ || !strings.Contains(pe.Reason, c.reason) {
				t.Errorf("got line %d type %q reason %q; want line %d type %q reason containing %q (full: %v)",
					pe.Line, pe.Type, pe.Reason, c.line, c.typ, c.reason, err)
			}
			if c.line > 0 && !strings.Contains(err.Error(), "line ") {
				t.Errorf("message does not name the line: %v", err)
			}
		})
	}
}

func TestParseReportsAllProblems(t *testing.T) {
	t.Parallel()
	src := `entity_types:
  - {name: a, parent: missing}
  - {name: b, states: [x], default_state: y}
  - {name: c, states: [x], default_state: x, monitoring: [{kind: ping}]}
`
	_, err := Parse([]byte(src))
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok || len(joined.Unwrap()) != 3 {
		t.Fatalf("want 3 problems in one error, got %v", err)
	}
	var lines []int
	for _, e := range joined.Unwrap() {
		lines = append(lines, e.(*ParseError).Line)
	}
	if !slices.Equal(lines, []int{2, 3, 4}) {
		t.Errorf("problems not in line order: %v", lines)
	}
}

func TestSeedOntology(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../seeds/ontology.yaml")
	if err != nil {
		t.Fatal(err)
	}
	o, err := Parse(data)
	if err != nil {
		t.Fatalf("seed ontology: %v", err)
	}
	if n := len(o.Types()); n < 55 || n > 70 {
		t.Errorf("seed ontology has %d types, want about 60", n)
	}
	for _, typ := range []string{"machine", "guest", "network", "knowledge", "storage"} {
		ty, ok := o.Type(typ)
		if !ok || !ty.Abstract {
			t.Errorf("%s should be an abstract base", typ)
		}
	}
	for typ, anc := range map[string]string{
		"host": "machine", "proxmox-host": "machine", "workstation": "machine", "vps": "machine",
		"lxc": "guest", "vm": "guest", "reverse-proxy": "service", "document": "knowledge",
		"investigation": "knowledge", "runbook": "knowledge", "nfs-export": "storage",
	} {
		if !o.IsA(typ, anc) {
			t.Errorf("%s should be a %s", typ, anc)
		}
	}
	for _, typ := range []string{"site", "lan", "mesh", "cluster", "vlan", "check", "execution", "task", "agent", "document"} {
		if _, none := o.Monitoring(typ); !none {
			t.Errorf("%s should declare monitoring: none", typ)
		}
	}
	// Every concrete type either declares none or warrants something.
	for _, ty := range o.Types() {
		if !ty.Abstract && !ty.MonitoringNone && len(ty.Monitoring) == 0 {
			t.Errorf("%s neither declares monitoring nor none", ty.Name)
		}
	}
	kinds := func(typ string) []string {
		specs, _ := o.Monitoring(typ)
		var out []string
		for _, s := range specs {
			out = append(out, strings.TrimSuffix(s.Kind+":"+s.Script, ":"))
		}
		return out
	}
	expect := map[string][]string{
		"proxmox-host":  {"ssh-script:cpu", "ssh-script:memory", "ssh-script:disk", "ssh-script:load"},
		"lxc":           {"proxmox-guest", "ssh-script:cpu", "ssh-script:memory", "ssh-script:disk"},
		"service":       {"ssh-script:process", "http"},
		"database":      {"ssh-script:process", "http"},
		"ingress-route": {"http"},
		"backup-target": {"backup-freshness"},
		"nfs-export":    {"tcp"},
	}
	for typ, want := range expect {
		if got := kinds(typ); !slices.Equal(got, want) {
			t.Errorf("monitoring of %s = %v, want %v", typ, got, want)
		}
	}
	edges := []struct{ rel, src, dst string }{
		{"hosts", "proxmox-host", "lxc"},
		{"hosts", "proxmox-host", "vm"},
		{"runs-on", "service", "lxc"},
		{"runs-on", "reverse-proxy", "vm"},
		{"routes-to", "ingress-route", "service"},
		{"backs-up-to", "workstation", "backup-target"},
		{"protects", "backup-target", "database"},
		{"about", "runbook", "lxc"},
		{"targets", "lxc", "execution"},
		{"involves", "task", "execution"},
		{"member-of", "proxmox-host", "cluster"},
		{"exports", "lxc", "nfs-export"},
		{"mounts", "vm", "nfs-export"},
		{"monitors", "check", "vm"},
	}
	for _, e := range edges {
		if err := o.ValidateEdge(e.rel, e.src, e.dst); err != nil {
			t.Errorf("seed ontology should allow %s %s→%s: %v", e.rel, e.src, e.dst, err)
		}
	}
	if err := o.ValidateEdge("hosts", "host", "lxc"); !errors.Is(err, ErrEdgeNotAllowed) {
		t.Errorf("only Proxmox hosts host guests: %v", err)
	}
	pre, err := o.ValidateTransition("lxc", "active", "destroyed")
	if err != nil || !slices.Equal(pre, []string{PreconditionNoLiveDependents}) {
		t.Errorf("destroying a live guest needs no_live_dependents: %v %v", pre, err)
	}
}
