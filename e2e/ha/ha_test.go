// Package ha_test runs a Proxmox node failure with HA guests end to end: the fleet created
// through the api (a three-node cluster), the lab simulator recovering the HA guests on the
// surviving nodes after its configured delay (as ha-manager fences and recovers), and the
// scheduler's check runner and incident engine wired as the daemon wires them. The node's
// incident is the only one; the HA guests come back up on their new nodes and the incident,
// as the api answers it, lists them as moved.
package ha_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/ssh"

	apiapp "github.com/oikos-hq/oikos/api/app"
	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
	"github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/testkit/labsim"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { e2estack.Main(m) }

// fleet is created through the api as an operator would, and served by labsim: web (with
// nginx) and the VM hass are HA-managed, media is not.
const fleet = `
entities:
  - {type: cluster, name: olympus, attributes: {quorum_votes: 2}}
  - {type: proxmox-host, name: atlas, attributes: {lan_ipv4: 127.0.10.1, ssh_port: 2222, user: root, node: atlas, os: linux}}
  - {type: proxmox-host, name: boreas, attributes: {lan_ipv4: 127.0.10.2, ssh_port: 2222, user: root, node: boreas, os: linux}}
  - {type: proxmox-host, name: ceres, attributes: {lan_ipv4: 127.0.10.3, ssh_port: 2222, user: root, node: ceres, os: linux}}
  - {type: lxc, name: web, attributes: {vmid: 101, host: atlas, hostname: web, ha: true}}
  - {type: vm, name: hass, attributes: {vmid: 150, host: atlas, hostname: hass, qemu_guest_agent: true, ha: true}}
  - {type: lxc, name: media, attributes: {vmid: 102, host: atlas, hostname: media}}
  - {type: lxc, name: db, attributes: {vmid: 201, host: boreas, hostname: db}}
  - {type: service, name: nginx, attributes: {unit: nginx.service}}
relationships:
  - {type: member-of, source: "proxmox-host:atlas", target: "cluster:olympus"}
  - {type: member-of, source: "proxmox-host:boreas", target: "cluster:olympus"}
  - {type: member-of, source: "proxmox-host:ceres", target: "cluster:olympus"}
  - {type: hosts, source: "proxmox-host:atlas", target: "lxc:web"}
  - {type: hosts, source: "proxmox-host:atlas", target: "vm:hass"}
  - {type: hosts, source: "proxmox-host:atlas", target: "lxc:media"}
  - {type: hosts, source: "proxmox-host:boreas", target: "lxc:db"}
  - {type: runs-on, source: "service:nginx", target: "lxc:web"}
`

// haDelay is the lab's ha-manager recovery delay: long enough that the node's incident
// (checks every second, a failure threshold of two runs) is open with the HA guests in it
// before they are recovered, as with ha-manager's two minutes.
const haDelay = 15 * time.Second

type incident struct {
	ID            string    `json:"id"`
	Root          string    `json:"root"`
	Status        string    `json:"status"`
	AffectedCount int       `json:"affected_count"`
	OpenedAt      time.Time `json:"opened_at"`
	Affected      []struct {
		Entity  string     `json:"entity"`
		Health  string     `json:"health"`
		LeftAt  *time.Time `json:"left_at"`
		MovedTo *string    `json:"moved_to"`
	} `json:"affected"`
}

func TestNodeDownWithHAGuests(t *testing.T) {
	ctx := context.Background()
	log := zerolog.Nop()
	db := pgtest.New(t)
	api, apiURL, err := e2estack.StartAPI(ctx, t, apiapp.Config{DatabaseURL: db.URL, PublicURL: "http://127.0.0.1:8080"}, log)
	if err != nil {
		t.Fatal(err)
	}
	var operator string
	if err := e2estack.MintTokens(ctx, api, e2estack.Token{Name: "operator", Role: "operator", Into: &operator}); err != nil {
		t.Fatal(err)
	}
	op := (&e2estack.Client{URL: apiURL, HTTP: http.DefaultClient}).API(t, operator)

	var inv struct {
		Entities []struct {
			Type, Name string
			Attributes map[string]any
		}
		Relationships []struct{ Type, Source, Target string }
	}
	if err := yaml.Unmarshal([]byte(fleet), &inv); err != nil {
		t.Fatal(err)
	}
	for _, e := range inv.Entities {
		attrs := apiclient.Attributes(e.Attributes)
		e2estack.OK(t, nil)(op.CreateEntity(ctx, nil, apiclient.CreateEntity{Type: e.Type, Name: e.Name, Attributes: &attrs}))
	}
	for _, r := range inv.Relationships {
		e2estack.OK(t, nil)(op.CreateRelationship(ctx, apiclient.CreateRelationship{Type: r.Type, Source: r.Source, Target: r.Target}))
	}

	// labsim, with its control api and ha-manager's delay, and the scheduler's runner and
	// engine.
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := ssh.NewSignerFromKey(priv)
	fl, err := labsim.FleetFromInventory([]byte(fleet))
	if err != nil {
		t.Fatal(err)
	}
	var recMu sync.Mutex
	var recoveredAt time.Time
	var recovered []labsim.Placement
	sim, err := labsim.New(fl, labsim.Options{StateDir: t.TempDir(), Listen: func(string) string { return "127.0.0.1:0" },
		ControlAddr: "127.0.0.1:0", AuthorizedKeys: []ssh.PublicKey{signer.PublicKey()}, Logger: log, HARecoveryDelay: haDelay,
		OnHARecovery: func(_ string, moved []labsim.Placement) {
			recMu.Lock()
			recoveredAt, recovered = time.Now(), moved
			recMu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Stop) // after the runner's stop (e2estack.RunChecks)
	e2estack.RunChecks(ctx, t, db, sim, signer, log)

	health := func(slug string) string {
		var e struct {
			Health string `json:"health"`
		}
		e2estack.OK(t, &e)(op.GetEntity(ctx, apiclient.EntityRef(slug)))
		return e.Health
	}
	observed := []string{"proxmox-host:atlas", "proxmox-host:boreas", "proxmox-host:ceres", "lxc:web", "vm:hass", "lxc:media", "lxc:db", "service:nginx"}
	allUp := func() (bool, string) {
		for _, s := range observed {
			if h := health(s); h != "up" {
				return false, s + " is " + h
			}
		}
		return true, ""
	}
	e2estack.Eventually(t, db.URL, 30*time.Second, 100*time.Millisecond, "the fleet up", allUp)
	listOpen := func() []incident {
		var list struct {
			Items []incident `json:"items"`
		}
		e2estack.OK(t, &list)(op.ListIncidents(ctx, nil))
		return list.Items
	}
	if got := listOpen(); len(got) != 0 {
		t.Fatalf("a healthy fleet has incidents: %+v", got)
	}

	// atlas goes down, through the lab's control api.
	req, _ := http.NewRequest(http.MethodPut, "http://"+sim.ControlAddr()+"/faults/hosts/atlas", bytes.NewReader([]byte(`{"down": true}`)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("down atlas: %v %v", resp, err)
	}
	resp.Body.Close()
	downAt := time.Now()

	e2estack.Eventually(t, db.URL, haDelay, 100*time.Millisecond, "atlas's incident open with its guests, before ha-manager recovers them", func() (bool, string) {
		got := listOpen()
		return len(got) == 1 && got[0].Root == "proxmox-host:atlas" && got[0].AffectedCount == 4, fmt.Sprintf("%+v", got)
	})
	opened := listOpen()[0]
	t.Logf("incident open %.1f s after the fault", time.Since(downAt).Seconds())

	// ha-manager recovers web and hass after its delay; they come back up elsewhere and the
	// incident lists them as moved.
	var in incident
	e2estack.Eventually(t, db.URL, haDelay+30*time.Second, 200*time.Millisecond, "the HA guests up elsewhere, listed as moved", func() (bool, string) {
		for _, s := range []string{"lxc:web", "vm:hass", "service:nginx"} {
			if h := health(s); h != "up" {
				return false, s + " is " + h
			}
		}
		e2estack.OK(t, &in)(op.GetIncident(ctx, opened.ID))
		moved := 0
		for _, m := range in.Affected {
			if m.MovedTo != nil && m.LeftAt != nil {
				moved++
			}
		}
		return moved == 2, fmt.Sprintf("%+v", in.Affected)
	})
	recMu.Lock()
	dest := map[string]string{}
	for _, p := range recovered {
		dest[p.Kind+":"+p.Name] = "proxmox-host:" + p.Host
	}
	at := recoveredAt
	recMu.Unlock()
	if at.Before(opened.OpenedAt) {
		t.Fatalf("ha-manager recovered the guests (%s) before the incident opened (%s)", at, opened.OpenedAt)
	}
	t.Logf("recovered %.1f s after the fault; guests up and listed as moved %.1f s after the recovery", at.Sub(downAt).Seconds(), time.Since(at).Seconds())
	for _, m := range in.Affected {
		want, isHA := dest[m.Entity]
		switch {
		case isHA && (m.MovedTo == nil || *m.MovedTo != want || m.Health != "up"):
			t.Errorf("%s: moved to %v (%s), want %s", m.Entity, m.MovedTo, m.Health, want)
		case !isHA && m.MovedTo != nil:
			t.Errorf("%s listed as moved to %s", m.Entity, *m.MovedTo)
		case m.Entity == "lxc:media" && m.LeftAt != nil:
			t.Errorf("media (not HA, still on the dead node) left the incident")
		}
	}
	if len(dest) != 2 || in.Status == "resolved" {
		t.Errorf("recovered %v; incident %s", dest, in.Status)
	}
	if got := listOpen(); len(got) != 1 {
		t.Errorf("incidents after the recovery: %+v", got)
	}

	// atlas returns: its incident resolves, and it was the only one.
	req, _ = http.NewRequest(http.MethodPut, "http://"+sim.ControlAddr()+"/faults/hosts/atlas", bytes.NewReader([]byte(`{}`)))
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("restore atlas: %v %v", resp, err)
	}
	resp.Body.Close()
	e2estack.Eventually(t, db.URL, 30*time.Second, 100*time.Millisecond, "atlas's incident resolved", func() (bool, string) {
		got := listOpen()
		return len(got) == 1 && got[0].Status == "resolved", fmt.Sprintf("%+v", got)
	})
	e2estack.Eventually(t, db.URL, 30*time.Second, 100*time.Millisecond, "the fleet up again", allUp)
	var events struct {
		Items []json.RawMessage `json:"items"`
	}
	e2estack.OK(t, &events)(op.ListEvents(ctx, &apiclient.ListEventsParams{Types: apiclient.Ptr(apiclient.EventTypes("incident.opened"))}))
	if len(events.Items) != 1 {
		t.Errorf("%d incident.opened events, want atlas's only", len(events.Items))
	}
}
