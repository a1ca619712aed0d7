package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/testkit/labsim"
	"github.com/oikos-hq/oikos/testkit/syncbuf"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseConfig(t *testing.T) {
	t.Parallel()
	if c, err := parseConfig(nil, env(nil)); err != nil || c.inventory != "" {
		t.Fatalf("no inventory means the embedded seeds: %+v %v", c, err)
	}
	c, err := parseConfig(nil, env(map[string]string{"LABSIM_INVENTORY": "inv.yaml", "LABSIM_CONTROL": ""}))
	if err != nil || c.inventory != "inv.yaml" || c.stateDir != "./.local/labsim" || c.control != "127.0.0.1:7070" || c.https != "127.0.20.1:8443" {
		t.Fatalf("env defaults: %+v %v", c, err)
	}
	if c, err := parseConfig(nil, env(map[string]string{"LABSIM_HTTPS": "127.0.0.9:9443"})); err != nil || c.https != "127.0.0.9:9443" {
		t.Fatalf("LABSIM_HTTPS: %+v %v", c, err)
	}
	if c, err := parseConfig([]string{"--https", "127.0.0.8:443"}, env(map[string]string{"LABSIM_HTTPS": "127.0.0.9:9443"})); err != nil || c.https != "127.0.0.8:443" {
		t.Fatalf("--https overrides LABSIM_HTTPS: %+v %v", c, err)
	}
	c, err = parseConfig([]string{"--inventory", "x.yaml", "--control", "", "--state-dir", "/s"}, env(map[string]string{"LABSIM_INVENTORY": "inv.yaml"}))
	if err != nil || c.inventory != "x.yaml" || c.control != "" || c.stateDir != "/s" {
		t.Fatalf("flags override env: %+v %v", c, err)
	}
	if _, err := parseConfig([]string{"--inventory", "x", "--control", "0.0.0.0:7070"}, env(nil)); err == nil {
		t.Fatal("a control API off loopback must be refused")
	}
}

func TestReadAuthorizedKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "keys")
	key := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGR/z8cOvKNVdcXqzZ1+HF7/GcnJnnZXGQRPC6GzjwdU test@lab\n"
	if err := os.WriteFile(good, []byte("# comment\n"+key), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := readAuthorizedKeys(good)
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys: %v %v", keys, err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("# nothing\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readAuthorizedKeys(empty); err == nil {
		t.Fatal("a file without keys must be refused")
	}
	if keys, err := readAuthorizedKeys(""); err != nil || keys != nil {
		t.Fatalf("no file means any key: %v %v", keys, err)
	}
}

func TestRunStartsAndStops(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	inv := filepath.Join(dir, "inventory.yaml")
	data := "entities:\n  - {type: host, name: solo, attributes: {lan_ipv4: 127.0.0.1, ssh_port: 0}}\n" +
		"  - {type: service, name: wiki, attributes: {url: \"https://wiki.lab.example/\"}}\n" +
		"relationships:\n  - {type: runs-on, source: \"service:wiki\", target: \"host:solo\"}\n"
	if err := os.WriteFile(inv, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var logs syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--inventory", inv, "--state-dir", filepath.Join(dir, "state"), "--control", "127.0.0.1:0", "--http", "127.0.0.1:0", "--https", "127.0.0.1:0"}, env(nil), &logs)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "ingress listening") {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("never listened; logs:\n%s", logs.String())
		}
		select {
		case err := <-done:
			t.Fatalf("run returned early: %v\n%s", err, logs.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	// The logged CA file is what a client trusts to reach the logged https address.
	httpsAddr, caFile := loggedIngress(t, logs.String())
	if want := filepath.Join(dir, "state", labsim.CAFileName); caFile != want {
		t.Errorf("ca_file %q, want %q", caFile, want)
	}
	if code := getTrusting(t, caFile, httpsAddr, "https://wiki.lab.example/"); code != http.StatusOK {
		t.Errorf("https route: %d", code)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not stop")
	}
	if !strings.Contains(logs.String(), `"message":"lab simulator stopped"`) {
		t.Fatalf("logs are not JSON or lack the stop:\n%s", logs.String())
	}
}

func TestEmbeddedSeedsBuildAFleet(t *testing.T) {
	t.Parallel()
	fleet, err := labsim.FleetFromInventory(seeds.Inventory())
	if err != nil {
		t.Fatalf("embedded inventory: %v", err)
	}
	if len(fleet.Hosts) == 0 {
		t.Fatal("embedded inventory has no hosts")
	}
}

// loggedIngress finds the https address and CA file in the "ingress listening" log line.
func loggedIngress(t *testing.T, logs string) (addr, caFile string) {
	t.Helper()
	for _, line := range strings.Split(logs, "\n") {
		var rec struct {
			Message string `json:"message"`
			HTTPS   string `json:"https"`
			CAFile  string `json:"ca_file"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || !strings.HasPrefix(rec.Message, "ingress listening") {
			continue
		}
		if rec.HTTPS == "" || rec.CAFile == "" {
			t.Fatalf("ingress log line lacks https or ca_file: %s", line)
		}
		return rec.HTTPS, rec.CAFile
	}
	t.Fatalf("no ingress log line:\n%s", logs)
	return "", ""
}

// getTrusting GETs url over TLS at addr with caFile as the only root.
func getTrusting(t *testing.T, caFile, addr, url string) int {
	t.Helper()
	pemData, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemData) {
		t.Fatalf("%s holds no certificate", caFile)
	}
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
