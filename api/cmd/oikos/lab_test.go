package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// oikos lab drives labsim's control API: a fault by name on a host named bare or by slug,
// clear, and clear errors for a bad fault, an unknown host and a simulator that is not there.
func TestLab(t *testing.T) {
	var (
		mu  sync.Mutex
		got []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		raw, _ := json.Marshal(body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+string(raw))
		mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/nowhere") {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"labsim: unknown host \"nowhere\""}`))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	run := func(url string, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		env := &cliEnv{Stdout: &out, Stderr: &errOut, HTTP: srv.Client(),
			Getenv: func(k string) string {
				if k == "OIKOS_LAB_URL" {
					return url
				}
				return ""
			}}
		return runLab(context.Background(), env, args), out.String(), errOut.String()
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"fault", "atlas", "down"}, `PUT /faults/hosts/atlas {"down":true}`},
		{[]string{"fault", "proxmox-host:boreas", "flap"}, `PUT /faults/hosts/boreas {"flap":true}`},
		{[]string{"fault", "atlas", "slow"}, `PUT /faults/hosts/atlas {"delay":"3s"}`},
		{[]string{"clear"}, `DELETE /faults null`},
	} {
		mu.Lock()
		got = nil
		mu.Unlock()
		if code, _, errOut := run(srv.URL, tc.args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, errOut)
		}
		mu.Lock()
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%v sent %v, want %s", tc.args, got, tc.want)
		}
		mu.Unlock()
	}
	if code, _, errOut := run(srv.URL, "fault", "atlas", "melt"); code != 2 || !strings.Contains(errOut, `unknown fault "melt"`) {
		t.Errorf("bad fault: %d %s", code, errOut)
	}
	if code, _, errOut := run(srv.URL, "fault", "nowhere", "down"); code != 1 || !strings.Contains(errOut, `unknown host`) {
		t.Errorf("unknown host: %d %s", code, errOut)
	}
	if code, _, errOut := run("http://127.0.0.1:1", "clear"); code != 1 || !strings.Contains(errOut, "does not answer") {
		t.Errorf("no simulator: %d %s", code, errOut)
	}
	if code, _, _ := run(srv.URL); code != 2 {
		t.Errorf("no arguments: exit %d", code)
	}
}
