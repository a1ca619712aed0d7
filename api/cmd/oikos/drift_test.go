package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestDriftCommand(t *testing.T) {
	t.Parallel()
	var gotQuery, gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/clusters" {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"items": []map[string]any{{"name": "olympus", "entity": "cluster:olympus",
				"in_graph": false, "vouched_by": "proxmox-host:atlas", "nodes": []map[string]any{
					{"node": "atlas", "address": "127.0.10.1:2222", "host": "proxmox-host:atlas"},
					{"node": "boreas", "address": "127.0.10.2:2222", "host": ""}}}}})
			return
		}
		if r.URL.Path != "/api/v1/audit/drift" {
			http.NotFound(w, r)
			return
		}
		gotQuery, gotAuth = r.URL.RawQuery, r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "r1", "status": "completed", "trigger": "requested", "finished_at": "2026-11-30T12:00:00Z", "age_seconds": 90,
			"hosts": []map[string]any{{"host": "proxmox-host:atlas", "reachable": true, "lxc": 3},
				{"host": "proxmox-host:ceres", "reachable": false, "error": "host unreachable"}},
			"missing":   []map[string]any{{"host": "proxmox-host:atlas", "kind": "lxc", "vmid": 150, "name": "stray", "status": "running"}},
			"ghost":     []map[string]any{{"entity": "lxc:db", "host": "proxmox-host:atlas", "kind": "lxc", "vmid": 102, "state": "active"}},
			"unchecked": []map[string]any{{"entity": "lxc:far", "reason": "its host proxmox-host:ceres could not be listed"}},
		})
	}))
	t.Cleanup(srv.Close)
	env := func(out, errOut *bytes.Buffer) *cliEnv {
		vars := map[string]string{"OIKOS_API_URL": srv.URL, "OIKOS_TOKEN": "tok"}
		return &cliEnv{Stdout: out, Stderr: errOut, Getenv: func(k string) string { return vars[k] },
			HTTP: &http.Client{Timeout: 5 * time.Second}}
	}

	var out, errOut bytes.Buffer
	if code := runDrift(context.Background(), env(&out, &errOut), []string{"--refresh", "--timeout", "20s"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if gotQuery != "refresh=true&timeout=20s" || gotAuth != "Bearer tok" {
		t.Errorf("query %q auth %q", gotQuery, gotAuth)
	}
	for _, want := range []string{"1 missing, 1 ghost, 1 unchecked", "stray", "lxc:db", "1m30s ago", "proxmox-host:ceres (host unreachable)",
		// A report without clusters: the clusters the adds found, and the nodes the graph lacks.
		"cluster cluster:olympus (not in the graph, found through proxmox-host:atlas)", "boreas           127.0.10.2:2222       not in the graph"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	if code := runDrift(context.Background(), env(&out, &errOut), []string{"--json"}); code != 0 || gotQuery != "" {
		t.Fatalf("exit %d query %q", code, gotQuery)
	}
	var v map[string]any
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v["id"] != "r1" {
		t.Errorf("--json: %v %v", v, err)
	}
	if code := runDrift(context.Background(), env(&out, &errOut), []string{"extra"}); code != 2 {
		t.Errorf("stray argument: exit %d", code)
	}
}

// oikos drift adopt sends the vmids and the host, whichever order the flags come in.
func TestDriftAdoptArgs(t *testing.T) {
	t.Parallel()
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/audit/drift/adopt" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		_ = json.NewDecoder(r.Body).Decode(&got)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"report_id":"r","adopted":[{"entity":"lxc:web","host":"proxmox-host:pve","kind":"lxc","vmid":101}],"skipped":[]}`)
	}))
	defer srv.Close()
	vars := map[string]string{"OIKOS_API_URL": srv.URL, "OIKOS_TOKEN": "t"}
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		e := &cliEnv{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] },
			HTTP: &http.Client{Timeout: 5 * time.Second}}
		return runDrift(context.Background(), e, args), out.String(), errOut.String()
	}
	for _, args := range [][]string{{"adopt", "101", "102", "--host", "pve"}, {"adopt", "--host", "pve", "101", "102"}} {
		code, out, errs := run(args...)
		if code != 0 || !strings.Contains(out, "adopted 1 guest(s)") {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errs)
		}
		if fmt.Sprint(got["vmids"]) != "[101 102]" || got["host"] != "pve" || got["all"] != false {
			t.Fatalf("%v sent %v", args, got)
		}
	}
	if code, _, _ := run("adopt", "--all", "101"); code != 2 {
		t.Fatalf("--all with vmids: exit %d, want 2", code)
	}
}

// A report that asks each cluster once (scheduler/internal/drift) lists the clusters and the
// guests of nodes the graph lacks by node.
func TestDriftCommandClusters(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/audit/drift" {
			http.NotFound(w, r) // GET /clusters is not needed: the report has them
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "r2", "status": "completed", "trigger": "requested", "finished_at": "2026-11-30T12:00:00Z",
			"hosts": []map[string]any{{"host": "proxmox-host:atlas", "reachable": true, "lxc": 1}},
			"clusters": []map[string]any{{"name": "cluster:olympus", "nodes": []map[string]any{
				{"node": "atlas", "address": "127.0.10.1", "online": true, "host": "proxmox-host:atlas"},
				{"node": "boreas", "address": "127.0.10.2", "online": true, "host": ""},
				{"node": "ceres", "address": "127.0.10.3", "online": false, "host": ""}}}},
			"missing": []map[string]any{{"host": "", "node": "boreas", "cluster": "cluster:olympus", "kind": "lxc", "vmid": 201,
				"name": "git", "status": "running"}},
		})
	}))
	t.Cleanup(srv.Close)
	vars := map[string]string{"OIKOS_API_URL": srv.URL, "OIKOS_TOKEN": "tok"}
	var out, errOut bytes.Buffer
	env := &cliEnv{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] }, HTTP: &http.Client{Timeout: 5 * time.Second}}
	if code := runDrift(context.Background(), env, nil); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"cluster cluster:olympus:", "boreas           127.0.10.2            online  not in the graph",
		"ceres            127.0.10.3            offline", "node boreas              lxc 201    git"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
