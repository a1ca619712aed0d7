package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/labsim"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseConfig(t *testing.T) {
	t.Parallel()
	if c, err := parseConfig(nil, env(nil)); err != nil || c.inventory != "" {
		t.Fatalf("no inventory means the embedded seeds: %+v %v", c, err)
	}
	c, err := parseConfig(nil, env(map[string]string{"LABSIM_INVENTORY": "inv.yaml", "LABSIM_CONTROL": ""}))
	if err != nil || c.inventory != "inv.yaml" || c.stateDir != "./.local/labsim" || c.control != "127.0.0.1:7070" {
		t.Fatalf("env defaults: %+v %v", c, err)
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

// syncBuffer is a log sink the simulator writes from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunStartsAndStops(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	inv := filepath.Join(dir, "inventory.yaml")
	data := "entities:\n  - {type: host, name: solo, attributes: {lan_ipv4: 127.0.0.1, ssh_port: 0}}\n"
	if err := os.WriteFile(inv, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var logs syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--inventory", inv, "--state-dir", filepath.Join(dir, "state"), "--control", "127.0.0.1:0", "--http", "127.0.0.1:0"}, env(nil), &logs)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "host listening") {
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
