package app

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"

	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// writeKey writes a new SSH key for a scheduler under test and returns its file.
func writeKey(t *testing.T) string {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, _ := ssh.MarshalPrivateKey(priv, "")
	key := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(key, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	return key
}

// The scheduler outlives its database (issue #32): with Postgres halted under it, run keeps
// running, /healthz answers 503 saying since when and why; once Postgres is back /healthz
// answers 200 and the scheduler holds its units again, by itself.
func TestSurvivesADatabaseOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, _ := pgtest.Private(t, 2)
	url := c.URL("postgres")
	key := writeKey(t)
	cfg, err := LoadConfig(func(k string) string {
		return map[string]string{"OIKOS_DATABASE_URL": url, "OIKOS_SSH_KEY_FILE": key,
			"OIKOS_SCHEDULER_ADDR": "127.0.0.1:0", "OIKOS_SCHEMA_WAIT": "10s"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	base := serve(t, func(ctx context.Context, ready func(net.Addr)) error { return run(ctx, cfg, zerolog.Nop(), ready) })
	owns := func() bool {
		resp, err := http.Get(base + "/status")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var st struct {
			Owned []string `json:"owned"`
		}
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&st) == nil && slices.Contains(st.Owned, "net")
	}
	within := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 60 s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	within("the scheduler holds the net unit", owns)

	if err := c.Halt(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatalf("/healthz during the outage: %v", err)
	}
	var h struct {
		Status   string               `json:"status"`
		Database pg.AvailabilityState `json:"database"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || h.Database.Reachable || h.Database.UnreachableSince == nil || h.Database.LastError == "" {
		t.Fatalf("/healthz during the outage: %d %+v", resp.StatusCode, h)
	}
	if err := c.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	within("/healthz answers 200 again", func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	within("the scheduler holds the net unit again", owns)
}
