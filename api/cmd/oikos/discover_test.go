package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// discoverAPI is a stand-in api answering the two discovery routes as the real one does
// (api/internal/discover's tests and e2e/discover run the real one), recording what it got.
type discoverAPI struct {
	mu       sync.Mutex
	queries  []string
	accepted [][]acceptService
}

func (a *discoverAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == "POST" && r.URL.EscapedPath() == "/api/v1/entities/lxc:media/discover/services":
		a.queries = append(a.queries, r.URL.RawQuery)
		_, _ = io.WriteString(w, `{"target":"lxc:media","proposals":[
			{"name":"caddy","unit":"caddy.service","description":"Caddy","ports":[443],"port":443,"exists":true,"entity":"reverse-proxy:caddy"},
			{"name":"jellyfin","unit":"jellyfin.service","description":"Jellyfin Media Server","ports":[8096,8920],"port":8096,"exists":false},
			{"name":"nginx-media","unit":"nginx.service","description":"nginx","ports":[8081],"port":8081,"exists":false,
			 "note":"service:nginx already exists (runs on lxc:web), so this one is proposed as nginx-media"},
			{"name":"redis","unit":"redis.service","description":"Redis","ports":[],"port":null,"exists":false}],
			"plumbing":["cron.service","ssh.service"],
			"unmatched_listeners":[{"address":"0.0.0.0","port":8123,"process":"python3","pid":930}],
			"executions":[{"id":"0190a000-0000-7000-8000-000000000001","command":"systemctl list-units","status":"completed"},
			{"id":"0190a000-0000-7000-8000-000000000002","command":"ss -Hltnp","status":"completed"}]}`)
	case r.Method == "POST" && r.URL.EscapedPath() == "/api/v1/entities/lxc:media/services":
		var b struct {
			Services []acceptService `json:"services"`
		}
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a.accepted = append(a.accepted, b.Services)
		type created struct {
			Slug   string `json:"slug"`
			Unit   string `json:"unit,omitempty"`
			Port   *int   `json:"port,omitempty"`
			RunsOn string `json:"runs_on"`
		}
		out := map[string]any{"target": "lxc:media", "created": []created{}, "skipped": []any{}, "checks_changed": len(b.Services)}
		var cs []created
		for _, s := range b.Services {
			cs = append(cs, created{Slug: "service:" + s.Name, Unit: s.Unit, Port: s.Port, RunsOn: "lxc:media"})
		}
		out["created"] = cs
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(out)
	case r.Method == "POST" && r.URL.EscapedPath() == "/api/v1/entities/lxc:down/discover/services":
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, `{"type":"urn:oikos:problem:guest-not-running","title":"Bad Gateway","status":502,
			"detail":"lxc:down is not running, so nothing was discovered","errors":[]}`)
	default:
		http.NotFound(w, r)
	}
}

func TestDiscoverCommand(t *testing.T) {
	t.Parallel()
	api := &discoverAPI{}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		vars := map[string]string{"OIKOS_API_URL": srv.URL, "OIKOS_TOKEN": "tok"}
		env := &cliEnv{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] },
			HTTP: &http.Client{Timeout: 5 * time.Second}}
		code := runDiscover(context.Background(), env, args)
		return code, out.String(), errOut.String()
	}

	// The proposals as a table, ending with the exact command that accepts the new ones.
	code, out, errOut := run("services", "lxc:media")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"services running on lxc:media (executions 0190a000-0000-7000-8000-000000000001, 0190a000-0000-7000-8000-000000000002)",
		"NAME         UNIT              PORTS      EXISTS",
		"caddy        caddy.service     443        yes (reverse-proxy:caddy)",
		"jellyfin     jellyfin.service  8096,8920  no",
		"redis        redis.service     -          no",
		"note: nginx.service: service:nginx already exists",
		"left out as base-system plumbing: cron.service, ssh.service",
		"listening, but matching no unit: 0.0.0.0:8123 (python3)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasSuffix(out, "accept them with:\n  oikos discover services lxc:media --accept jellyfin,nginx-media,redis\n") {
		t.Errorf("output does not end with the accept command:\n%s", out)
	}
	if len(api.queries) != 1 || api.queries[0] != "timeout=1m0s" || len(api.accepted) != 0 {
		t.Errorf("queries %v, accepted %v", api.queries, api.accepted)
	}

	// --accept all sends every proposal not in the graph, with its unit and port; flags may
	// come before the slug too.
	code, out, errOut = run("services", "--timeout", "20s", "lxc:media", "--accept", "all")
	if code != 0 {
		t.Fatalf("accept all: exit %d: %s", code, errOut)
	}
	if api.queries[1] != "timeout=20s" || len(api.accepted) != 1 {
		t.Fatalf("queries %v accepted %v", api.queries, api.accepted)
	}
	got, _ := json.Marshal(api.accepted[0])
	if string(got) != `[{"name":"jellyfin","unit":"jellyfin.service","port":8096},{"name":"nginx-media","unit":"nginx.service","port":8081},{"name":"redis","unit":"redis.service"}]` {
		t.Errorf("accepted %s", got)
	}
	for _, want := range []string{
		"created service:jellyfin (jellyfin.service, port 8096) -runs-on-> lxc:media",
		"created service:redis (redis.service) -runs-on-> lxc:media",
		"3 created, 0 skipped, 3 checks derived",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("accept output lacks %q:\n%s", want, out)
		}
	}

	// --accept NAME,NAME sends those.
	if code, _, errOut = run("services", "lxc:media", "--accept", "jellyfin"); code != 0 {
		t.Fatalf("accept one: %d %s", code, errOut)
	}
	if len(api.accepted) != 2 || len(api.accepted[1]) != 1 || api.accepted[1][0].Name != "jellyfin" {
		t.Errorf("accepted %v", api.accepted)
	}
	// A name that is no proposal is refused before anything is created.
	if code, _, errOut = run("services", "lxc:media", "--accept", "jellyfin,plex"); code != 1 || !strings.Contains(errOut, `no proposal is named "plex"`) {
		t.Errorf("unknown name: %d %s", code, errOut)
	}
	if len(api.accepted) != 2 {
		t.Errorf("an accept was sent: %v", api.accepted)
	}

	// --json prints the api's answers.
	code, out, _ = run("services", "lxc:media", "--json")
	var v map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v["target"] != "lxc:media" {
		t.Errorf("--json: %d %s", code, out)
	}
	code, out, _ = run("services", "lxc:media", "--json", "--accept", "redis")
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v["accepted"] == nil || v["discovery"] == nil {
		t.Errorf("--json --accept: %d %s", code, out)
	}

	// The api's problem is the error.
	if code, _, errOut = run("services", "lxc:down"); code != 1 || !strings.Contains(errOut, "502 Bad Gateway: lxc:down is not running") {
		t.Errorf("stopped guest: %d %s", code, errOut)
	}
	// Usage.
	for _, args := range [][]string{{}, {"units", "lxc:media"}, {"services"}, {"services", "a", "b"}, {"services", "lxc:media", "--bogus"}} {
		if code, _, _ := run(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

func TestShellWord(t *testing.T) {
	for in, want := range map[string]string{"lxc:media": "lxc:media", "jellyfin,postgresql@16-main": "jellyfin,postgresql@16-main",
		"it's": `'it'\''s'`, "a$b": "'a$b'"} {
		if got := shellWord(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
