package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// oikos schedulers lists the live schedulers with their units, and the leases no live one
// holds.
func TestRunSchedulers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	ts, tok := serveReadAPI(t, db.Pool)
	run := func() (int, string, string) {
		vars := map[string]string{"OIKOS_API_URL": ts.URL, "OIKOS_TOKEN": tok}
		var out, errOut bytes.Buffer
		e := &cliEnv{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] },
			HTTP: &http.Client{Timeout: 30 * time.Second}}
		return runSchedulers(ctx, e, nil), out.String(), errOut.String()
	}
	if code, out, _ := run(); code != 0 || !strings.Contains(out, "no scheduler has started") {
		t.Fatalf("none: %d %q", code, out)
	}
	if _, err := db.Pool.Exec(ctx, `
INSERT INTO scheduler_members (id, expires_at) VALUES ('sched-a', now() + interval '15 seconds'), ('sched-b', now() - interval '1 minute');
INSERT INTO scheduler_leases (resource, holder, expires_at) VALUES
  ('host:proxmox-host:atlas', 'sched-a', now() + interval '15 seconds'), ('net', 'sched-a', now() + interval '15 seconds'),
  ('host:proxmox-host:boreas', 'sched-b', now() - interval '50 seconds')`); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run()
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"sched-a", "live", "2: proxmox-host:atlas net", "sched-b", "gone",
		"1 unit(s) held by no live scheduler", "host:proxmox-host:boreas", "last held by sched-b"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
