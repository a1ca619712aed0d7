// Package incidents_test runs a host outage end to end: the lab simulator, the scheduler's
// check runner and incident engine (wired as the daemon wires them), the api with its
// notifier, and an HMAC-signed webhook receiver on loopback. One host down is one incident
// and one notification; its recovery is one more.
package incidents_test

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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

// fleet is created through the api as an operator would, and served by labsim.
const fleet = `
entities:
  - {type: proxmox-host, name: atlas, attributes: {lan_ipv4: 127.0.10.1, ssh_port: 2222, user: root, node: atlas, os: linux}}
  - {type: proxmox-host, name: boreas, attributes: {lan_ipv4: 127.0.10.2, ssh_port: 2222, user: root, node: boreas, os: linux}}
  - {type: lxc, name: web, attributes: {vmid: 101, host: atlas, hostname: web}}
  - {type: lxc, name: media, attributes: {vmid: 102, host: atlas, hostname: media}}
  - {type: lxc, name: db, attributes: {vmid: 201, host: boreas, hostname: db}}
  - {type: service, name: nginx, attributes: {unit: nginx.service}}
  - {type: service, name: jellyfin, attributes: {unit: jellyfin.service}}
  - {type: service, name: postgres, attributes: {unit: postgresql.service}}
relationships:
  - {type: hosts, source: "proxmox-host:atlas", target: "lxc:web"}
  - {type: hosts, source: "proxmox-host:atlas", target: "lxc:media"}
  - {type: hosts, source: "proxmox-host:boreas", target: "lxc:db"}
  - {type: runs-on, source: "service:nginx", target: "lxc:web"}
  - {type: runs-on, source: "service:jellyfin", target: "lxc:media"}
  - {type: runs-on, source: "service:postgres", target: "lxc:db"}
  - {type: depends-on, source: "service:nginx", target: "service:postgres"}
`

// receiver is the webhook endpoint: it verifies every delivery's signature and keeps them.
type receiver struct {
	secret string
	mu     sync.Mutex
	got    []delivery
	bad    []string
}

type delivery struct {
	Kind, ID string
	Payload  map[string]any
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	mac := hmac.New(sha256.New, []byte(rc.secret))
	mac.Write([]byte(r.Header.Get("X-Oikos-Timestamp") + "." + string(body)))
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	var d struct {
		ID      string         `json:"id"`
		Kind    string         `json:"kind"`
		Payload map[string]any `json:"payload"`
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !hmac.Equal([]byte(want), []byte(r.Header.Get("X-Oikos-Signature"))) || json.Unmarshal(body, &d) != nil {
		rc.bad = append(rc.bad, string(body))
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	rc.got = append(rc.got, delivery{Kind: d.Kind, ID: d.ID, Payload: d.Payload})
	w.WriteHeader(http.StatusNoContent)
}

func (rc *receiver) kinds() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []string
	for _, d := range rc.got {
		out = append(out, d.Kind)
	}
	return out
}

func TestHostDownIsOneIncidentAndOneNotification(t *testing.T) {
	ctx := context.Background()
	log := zerolog.Nop()
	db := pgtest.New(t)
	api, apiURL, err := e2estack.StartAPI(ctx, t, apiapp.Config{DatabaseURL: db.URL, PublicURL: "http://127.0.0.1:8080",
		NotifyEnabled: true, NotifyRetry: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}}, log)
	if err != nil {
		t.Fatal(err)
	}
	var operator string
	if err := e2estack.MintTokens(ctx, api, e2estack.Token{Name: "operator", Role: "operator", Into: &operator}); err != nil {
		t.Fatal(err)
	}
	client := &e2estack.Client{URL: apiURL, HTTP: http.DefaultClient}
	op := client.API(t, operator)

	// The fleet, through the api (the graph service derives the checks).
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

	// The webhook, subscribed to incidents opening and resolving.
	rc := &receiver{secret: "a-webhook-secret-of-some-length"}
	hook := httptest.NewServer(rc)
	defer hook.Close()
	e2estack.OK(t, nil)(op.CreateNotificationChannel(ctx, apiclient.CreateNotificationChannel{
		Name: "pager", Kind: apiclient.Ptr(apiclient.CreateNotificationChannelKind("webhook")), Url: apiclient.Ptr(hook.URL + "/oikos"),
		Secret: &rc.secret, Rules: &[]apiclient.NotificationRuleOfChannel{{Kinds: []string{"incident.opened", "incident.resolved"}}},
	}))

	// labsim and the scheduler's runner and engine.
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := ssh.NewSignerFromKey(priv)
	fl, err := labsim.FleetFromInventory([]byte(fleet))
	if err != nil {
		t.Fatal(err)
	}
	sim, err := labsim.New(fl, labsim.Options{StateDir: t.TempDir(), Listen: func(string) string { return "127.0.0.1:0" },
		AuthorizedKeys: []ssh.PublicKey{signer.PublicKey()}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Stop) // after the runner's stop (e2estack.RunChecks)
	e2estack.RunChecks(ctx, t, db, sim, signer, log)

	type summary struct {
		Counts map[string]int `json:"counts"`
	}
	e2estack.Eventually(t, db.URL, 30*time.Second, 100*time.Millisecond, "the fleet up", func() (bool, string) {
		var s summary
		e2estack.OK(t, &s)(op.HealthSummary(ctx, nil))
		return s.Counts["up"] == len(inv.Entities), fmt.Sprint(s.Counts)
	})
	time.Sleep(2 * time.Second)
	if k := rc.kinds(); len(k) != 0 {
		t.Fatalf("a healthy fleet notified: %v", k)
	}

	if err := sim.SetHostFault("atlas", labsim.Fault{Down: true}); err != nil {
		t.Fatal(err)
	}
	faulted := time.Now()
	e2estack.Eventually(t, db.URL, 30*time.Second, 100*time.Millisecond, "one notification of atlas's incident", func() (bool, string) {
		k := rc.kinds()
		return len(k) == 1 && k[0] == "incident.opened", fmt.Sprint(k)
	})
	t.Logf("notified %.1f s after the fault (checks every 1 s)", time.Since(faulted).Seconds())
	rc.mu.Lock()
	opened := rc.got[0].Payload
	rc.mu.Unlock()
	// The notification goes out when the root's failure opens the incident; an entity whose
	// own check had not run again by then (a busy machine) joins at its next run, so the
	// count it gives is at most the four.
	if n, _ := opened["affected_count"].(float64); opened["root"] != "proxmox-host:atlas" || n < 1 || n > 4 {
		t.Errorf("the notification names %v with %v affected, want proxmox-host:atlas with 1 to 4", opened["root"], opened["affected_count"])
	}
	e2estack.Eventually(t, db.URL, 30*time.Second, 100*time.Millisecond, "one open incident, atlas's, with its four affected", func() (bool, string) {
		var list struct {
			Items []struct {
				ID, Root      string
				AffectedCount int `json:"affected_count"`
			} `json:"items"`
		}
		e2estack.OK(t, &list)(op.ListIncidents(ctx, &apiclient.ListIncidentsParams{Status: apiclient.Ptr(apiclient.ListIncidentsParamsStatus("open"))}))
		if len(list.Items) > 1 || (len(list.Items) == 1 && list.Items[0].Root != "proxmox-host:atlas") {
			t.Fatalf("open incidents: %+v, want atlas's alone", list.Items)
		}
		return len(list.Items) == 1 && list.Items[0].AffectedCount == 4, fmt.Sprintf("%+v", list.Items)
	})
	time.Sleep(3 * time.Second) // more failed runs: still one incident, one notification
	if k := rc.kinds(); len(k) != 1 {
		t.Fatalf("while atlas stays down: %v", k)
	}

	if err := sim.SetHostFault("atlas", labsim.Fault{}); err != nil {
		t.Fatal(err)
	}
	e2estack.Eventually(t, db.URL, 30*time.Second, 100*time.Millisecond, "one notification of the resolution", func() (bool, string) {
		k := rc.kinds()
		return len(k) == 2 && k[1] == "incident.resolved", fmt.Sprint(k)
	})
	time.Sleep(2 * time.Second)
	kinds := rc.kinds()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.got) != 2 || len(rc.bad) != 0 {
		t.Errorf("deliveries %v, %d with a bad signature", kinds, len(rc.bad))
	}
	if rc.got[0].ID == rc.got[1].ID {
		t.Errorf("two deliveries share the idempotency key %s", rc.got[0].ID)
	}
}
