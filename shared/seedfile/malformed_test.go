package seedfile

import (
	"errors"
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/shared/ontology"
)

const testOntology = `
entity_types:
  - name: machine
    abstract: true
    attributes:
      lan_ipv4: {type: string}
      ssh_port: {type: integer}
    states: [active, maintenance, destroyed]
    default_state: active
    transitions: [{from: active, to: destroyed}]
    monitoring: [{kind: ssh-script, script: cpu}]
  - {name: proxmox-host, parent: machine, attributes: {node: {type: string}}, required: [node]}
  - name: lxc
    attributes: {vmid: {type: integer}, host: {type: string}, expires: {type: string}}
    required: [vmid]
    states: [active, destroyed]
    default_state: active
    monitoring: [{kind: proxmox-guest}]
  - name: service
    attributes: {unit: {type: string}}
    states: [active]
    default_state: active
    monitoring: none
  - name: knowledge
    abstract: true
    states: [published]
    default_state: published
    monitoring: none
  - {name: document, parent: knowledge}
  - {name: runbook, parent: knowledge}
relationship_types:
  - {name: hosts, sources: [proxmox-host], targets: [lxc]}
  - {name: runs-on, sources: [service], targets: [machine, lxc]}
  - {name: about, sources: [knowledge], targets: ["*"]}
`

const goodInventory = `entities:
  - type: proxmox-host
    name: atlas
    attributes: {lan_ipv4: 127.0.10.1, ssh_port: 2222, node: atlas}
  - type: lxc
    name: jellyfin
    attributes: {vmid: 101, host: atlas}
  - type: service
    name: jellyfin
    attributes: {unit: jellyfin.service}
relationships:
  - {type: hosts, source: "proxmox-host:atlas", target: "lxc:jellyfin"}
  - {type: runs-on, source: "service:jellyfin", target: "lxc:jellyfin"}
`

func testOnto(t *testing.T) *ontology.Ontology {
	t.Helper()
	o, err := ontology.Parse([]byte(testOntology))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestGoodInventory(t *testing.T) {
	t.Parallel()
	inv, err := ParseInventory([]byte(goodInventory))
	if err != nil {
		t.Fatal(err)
	}
	if err := inv.Validate(testOnto(t)); err != nil {
		t.Fatal(err)
	}
	if len(inv.Entities) != 3 || len(inv.Relationships) != 2 {
		t.Fatalf("parsed %d entities, %d edges", len(inv.Entities), len(inv.Relationships))
	}
	e := inv.Entities[1]
	if e.Slug() != "lxc:jellyfin" || e.Line != 5 || e.Attributes["vmid"] != 101 || e.Attributes["host"] != "atlas" {
		t.Errorf("entity = %+v", e)
	}
	if r := inv.Relationships[1]; r.Line != 13 || r.Source != "service:jellyfin" || r.Target != "lxc:jellyfin" {
		t.Errorf("edge = %+v", r)
	}
	if got, ok := inv.Entity("service:jellyfin"); !ok || got.Attributes["unit"] != "jellyfin.service" {
		t.Errorf("Entity(service:jellyfin) = %+v %v", got, ok)
	}
}

func TestAttributeValues(t *testing.T) {
	t.Parallel()
	inv, err := ParseInventory([]byte(`entities:
  - type: lxc
    name: a
    attributes:
      vmid: 7
      expires: 2027-03-14
      ratio: 0.5
      on: true
      none: null
      list: [1, two]
      nested: {k: v}
      anchor: &x [1]
      alias: *x
`))
	if err != nil {
		t.Fatal(err)
	}
	a := inv.Entities[0].Attributes
	checks := map[string]bool{
		"vmid int":            a["vmid"] == 7,
		"timestamp stays str": a["expires"] == "2027-03-14",
		"float":               a["ratio"] == 0.5,
		"bool":                a["on"] == true,
		"null":                a["none"] == nil,
		"list":                len(a["list"].([]any)) == 2 && a["list"].([]any)[1] == "two",
		"map":                 a["nested"].(map[string]any)["k"] == "v",
		"alias":               len(a["alias"].([]any)) == 1,
	}
	for name, ok := range checks {
		if !ok {
			t.Errorf("%s: attributes = %#v", name, a)
		}
	}
	if err := inv.Validate(testOnto(t)); err != nil {
		t.Errorf("unquoted date must validate as a string attribute: %v", err)
	}
}

// malformedCase is one broken seed and the error it must produce.
type malformedCase struct {
	name     string
	src      string
	parseErr bool // fails in Parse rather than in Validate
	line     int
	entity   string
	field    string
	reason   string
	sentinel error
}

// TestMalformedInventory: each broken seed fails with file, line, entity, field and reason.
func TestMalformedInventory(t *testing.T) {
	t.Parallel()
	o := testOnto(t)
	// Rows that add to the good inventory keep their expected line numbers easy to read:
	// added entities start at line 11, added edges at line 14.
	entities := func(extra string) string {
		return strings.Replace(goodInventory, "relationships:\n", extra+"relationships:\n", 1)
	}
	edges := func(extra string) string { return goodInventory + extra }
	cases := []malformedCase{
		{name: "bad yaml", parseErr: true, src: "entities:\n  - type: lxc\n    name: a: b\n",
			line: 3, reason: "invalid YAML"},
		{name: "unknown key", parseErr: true, src: "entities:\n  - type: lxc\n    name: a\n    attribute: {vmid: 1}\n",
			line: 4, field: "attribute", reason: "unknown key"},
		{name: "unknown top-level key", parseErr: true, src: "entities: []\nedges: []\n",
			line: 2, field: "edges", reason: "unknown key"},
		{name: "attributes not a mapping", parseErr: true, src: "entities:\n  - type: lxc\n    name: a\n    attributes: [1]\n",
			line: 4, entity: "lxc:a", field: "attributes", reason: "expected a mapping"},
		{name: "unknown type", src: entities("  - {type: lxcc, name: x}\n"),
			line: 11, entity: "lxcc:x", field: "type", reason: `unknown entity type "lxcc"`, sentinel: ontology.ErrUnknownType},
		{name: "abstract type", src: entities("  - {type: machine, name: x}\n"),
			line: 11, entity: "machine:x", field: "type", reason: "abstract", sentinel: ontology.ErrAbstractType},
		{name: "duplicate slug", src: entities("  - {type: lxc, name: jellyfin, attributes: {vmid: 102}}\n"),
			line: 11, entity: "lxc:jellyfin", field: "name", reason: "duplicate slug lxc:jellyfin (first declared at line 5)"},
		{name: "wrong attribute type", src: entities("  - type: lxc\n    name: x\n    attributes:\n      host: atlas\n      vmid: \"102\"\n"),
			line: 15, entity: "lxc:x", field: "attributes.vmid", reason: "expected integer, got string", sentinel: ontology.ErrInvalidAttribute},
		{name: "missing required attribute", src: entities("  - {type: proxmox-host, name: boreas, attributes: {lan_ipv4: 127.0.10.2}}\n"),
			line: 11, entity: "proxmox-host:boreas", field: "attributes.node", reason: "required", sentinel: ontology.ErrInvalidAttribute},
		{name: "undeclared state", src: entities("  - {type: lxc, name: x, state: maintenance, attributes: {vmid: 5}}\n"),
			line: 11, entity: "lxc:x", field: "state", reason: `state "maintenance" is not declared`, sentinel: ontology.ErrUndeclaredState},
		{name: "missing name", src: entities("  - {type: lxc}\n"),
			line: 11, entity: "lxc:", field: "name", reason: "no name"},
		{name: "forbidden edge", src: edges("  - {type: hosts, source: \"proxmox-host:atlas\", target: \"service:jellyfin\"}\n"),
			line: 14, entity: "proxmox-host:atlas -hosts-> service:jellyfin", field: "type", reason: "forbids", sentinel: ontology.ErrEdgeNotAllowed},
		{name: "edge to unknown slug", src: edges("  - {type: runs-on, source: \"service:jellyfin\", target: \"lxc:jelyfin\"}\n"),
			line: 14, entity: "service:jellyfin -runs-on-> lxc:jelyfin", field: "target", reason: `target "lxc:jelyfin" is not an entity declared`},
		{name: "unknown relationship type", src: edges("  - {type: runs_on, source: \"service:jellyfin\", target: \"lxc:jellyfin\"}\n"),
			line: 14, entity: "service:jellyfin -runs_on-> lxc:jellyfin", field: "type", reason: "unknown relationship type", sentinel: ontology.ErrUnknownRelationshipType},
		{name: "duplicate edge", src: edges("  - {type: hosts, source: \"proxmox-host:atlas\", target: \"lxc:jellyfin\"}\n"),
			line: 14, entity: "proxmox-host:atlas -hosts-> lxc:jellyfin", reason: "declared twice (first at line 12)"},
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			inv, err := ParseInventoryFile("seeds/inventory.yaml", []byte(c.src))
			if c.parseErr {
				if err == nil {
					t.Fatal("parse accepted a malformed inventory")
				}
			} else {
				if err != nil {
					t.Fatalf("parse: %v", err)
				}
				err = inv.Validate(o)
				if err == nil {
					t.Fatal("Validate accepted a malformed inventory")
				}
			}
			assertSeedError(t, err, "seeds/inventory.yaml", c.line, c.entity, c.field, c.reason, c.sentinel)
		})
	}
}

func assertSeedError(t *testing.T, err error, file string, line int, entity, field, reason string, sentinel error) {
	t.Helper()
	if !errors.Is(err, ErrInvalidSeed) {
		t.Errorf("error is not ErrInvalidSeed: %v", err)
	}
	var se *Error
	if !errors.As(err, &se) {
		t.Fatalf("error %v is not a *seedfile.Error", err)
	}
	if se.File != file || se.Line != line || se.Entity != entity || se.Field != field || !strings.Contains(se.Reason, reason) {
		t.Errorf("got %s:%d entity %q field %q reason %q\nwant %s:%d entity %q field %q reason containing %q",
			se.File, se.Line, se.Entity, se.Field, se.Reason, file, line, entity, field, reason)
	}
	if sentinel != nil && !errors.Is(err, sentinel) {
		t.Errorf("error does not wrap %v: %v", sentinel, err)
	}
	msg := err.Error()
	for _, part := range []string{file, reason} {
		if !strings.Contains(msg, part) {
			t.Errorf("message %q lacks %q", msg, part)
		}
	}
	if entity != "" && !strings.Contains(msg, entity) {
		t.Errorf("message %q does not name the entity %q", msg, entity)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	src := strings.Replace(goodInventory, "relationships:\n", `  - {type: nope, name: a}
  - {type: lxc, name: b, attributes: {vmid: x}}
relationships:
`, 1) + `  - {type: hosts, source: "proxmox-host:atlas", target: "service:jellyfin"}
`
	inv, err := ParseInventory([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	err = inv.Validate(testOnto(t))
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok || len(joined.Unwrap()) != 3 {
		t.Fatalf("want 3 problems, got %v", err)
	}
	var lines []int
	for _, e := range joined.Unwrap() {
		lines = append(lines, e.(*Error).Line)
	}
	if lines[0] != 11 || lines[1] != 12 || lines[2] != 16 {
		t.Errorf("lines = %v, want [11 12 16]", lines)
	}
}

const goodKnowledge = `documents:
  - slug: runbook:restart
    kind: runbook
    title: Restart
    tags: [ops]
    about: [service:jellyfin, lxc:jellyfin]
    body: |
      # Restart
      systemctl restart jellyfin
  - slug: document:notes
    kind: document
    title: Notes
    about: [runbook:restart]
    body: "# Notes"
`

func TestKnowledge(t *testing.T) {
	t.Parallel()
	o := testOnto(t)
	inv, err := ParseInventory([]byte(goodInventory))
	if err != nil {
		t.Fatal(err)
	}
	ks, err := ParseKnowledge([]byte(goodKnowledge))
	if err != nil {
		t.Fatal(err)
	}
	if err := ks.Validate(o, inv); err != nil {
		t.Fatal(err)
	}
	d := ks.Documents[0]
	if d.Line != 2 || d.Name() != "restart" || d.Body != "# Restart\nsystemctl restart jellyfin\n" || len(d.About) != 2 || d.Tags[0] != "ops" {
		t.Errorf("doc = %+v", d)
	}
	if ks.Documents[1].Tags == nil {
		t.Error("missing tags must decode as an empty list, not nil")
	}

	doc := func(extra string) string { return goodKnowledge + extra }
	cases := []malformedCase{
		{name: "bad yaml", src: "documents:\n  - slug: a: b\n", parseErr: true, line: 2, reason: "invalid YAML"},
		{name: "unknown key", src: doc("  - {slug: runbook:x, kind: runbook, title: X, body: y, author: me}\n"), parseErr: true,
			line: 15, field: "author", reason: "unknown key"},
		{name: "kind mismatch", src: doc("  - {slug: runbook:x, kind: document, title: X, body: y}\n"),
			line: 15, entity: "runbook:x", field: "slug", reason: `slug prefix "runbook" does not match kind "document"`},
		{name: "unknown kind", src: doc("  - {slug: memo:x, kind: memo, title: X, body: y}\n"),
			line: 15, entity: "memo:x", field: "kind", reason: `kind "memo" is not one of`},
		{name: "duplicate slug", src: doc("  - {slug: runbook:restart, kind: runbook, title: Again, body: y}\n"),
			line: 15, entity: "runbook:restart", field: "slug", reason: "duplicate slug (first declared at line 2)"},
		{name: "empty body", src: doc("  - {slug: runbook:x, kind: runbook, title: X, body: \"  \"}\n"),
			line: 15, entity: "runbook:x", field: "body", reason: "body is empty"},
		{name: "about unknown entity", src: doc("  - {slug: runbook:x, kind: runbook, title: X, body: y, about: [lxc:nope]}\n"),
			line: 15, entity: "runbook:x", field: "about", reason: `"lxc:nope" is not declared`},
		{name: "bad slug", src: doc("  - {slug: restart, kind: runbook, title: X, body: y}\n"),
			line: 15, entity: "restart", field: "slug", reason: "<kind>:<name>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ks, err := ParseKnowledgeFile("seeds/knowledge.yaml", []byte(c.src))
			if c.parseErr {
				if err == nil {
					t.Fatal("parse accepted malformed knowledge")
				}
			} else {
				if err != nil {
					t.Fatalf("parse: %v", err)
				}
				if err = ks.Validate(o, inv); err == nil {
					t.Fatal("Validate accepted malformed knowledge")
				}
			}
			assertSeedError(t, err, "seeds/knowledge.yaml", c.line, c.entity, c.field, c.reason, c.sentinel)
		})
	}

	t.Run("slug clashes with an inventory entity", func(t *testing.T) {
		t.Parallel()
		withDoc, err := ParseInventory([]byte(strings.Replace(goodInventory, "relationships:\n", "  - {type: document, name: notes}\nrelationships:\n", 1)))
		if err != nil {
			t.Fatal(err)
		}
		err = ks.Validate(o, withDoc)
		assertSeedError(t, err, DefaultKnowledgeFile, 10, "document:notes", "slug", "also declared as an entity", nil)
	})
	t.Run("about checked for shape only without an inventory", func(t *testing.T) {
		t.Parallel()
		if err := ks.Validate(o, nil); err != nil {
			t.Errorf("Validate(nil inventory) = %v", err)
		}
	})
}

func TestSplitSlug(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in, typ, name string
		ok            bool
	}{
		{"lxc:jellyfin", "lxc", "jellyfin", true},
		{"ingress-route:jellyfin.lab.example", "ingress-route", "jellyfin.lab.example", true},
		{"document:nomos/2026:notes", "document", "nomos/2026:notes", true},
		{"jellyfin", "", "", false},
		{":x", "", "", false},
		{"lxc:", "", "", false},
	}
	for _, c := range cases {
		typ, name, ok := SplitSlug(c.in)
		if typ != c.typ || name != c.name || ok != c.ok {
			t.Errorf("SplitSlug(%q) = %q %q %v", c.in, typ, name, ok)
		}
	}
}
