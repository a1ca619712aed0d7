package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/testkit/syncbuf"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseConfig(t *testing.T) {
	t.Parallel()
	c, err := parseConfig(nil, env(nil))
	if err != nil || c.addr != "127.0.0.1:8099" || len(c.scripts) != 0 || c.apiKey != "" || c.chunkSize != 0 || c.logLevel != "info" {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	c, err = parseConfig(nil, env(map[string]string{"LLMSIM_SCRIPT": "a.yaml, dir", "LLMSIM_API_KEY": "k", "LLMSIM_CHUNK_SIZE": "4", "LLMSIM_ADDR": ":9"}))
	if err != nil || strings.Join(c.scripts, "|") != "a.yaml|dir" || c.apiKey != "k" || c.chunkSize != 4 || c.addr != ":9" {
		t.Fatalf("environment: %+v %v", c, err)
	}
	c, err = parseConfig([]string{"--script", "x.yaml", "--script", "y.yaml", "--api-key", "", "--chunk-size", "7"}, env(map[string]string{"LLMSIM_SCRIPT": "a.yaml", "LLMSIM_API_KEY": "k"}))
	if err != nil || strings.Join(c.scripts, "|") != "x.yaml|y.yaml" || c.apiKey != "" || c.chunkSize != 7 {
		t.Fatalf("flags override the environment: %+v %v", c, err)
	}
	for _, args := range [][]string{{"--chunk-size", "-1"}, {"extra"}, {"--nope"}} {
		if _, err := parseConfig(args, env(nil)); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
	if _, err := parseConfig(nil, env(map[string]string{"LLMSIM_CHUNK_SIZE": "x"})); err == nil {
		t.Error("a bad LLMSIM_CHUNK_SIZE was accepted")
	}
}

// The run tests are not parallel: logging.New sets zerolog's global time format.

func TestRunServesUntilCancelled(t *testing.T) {
	script := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(script, []byte("model: m\nfallback: {content: \"hello from a file\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs syncbuf.Buffer
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", "127.0.0.1:0", "--script", script, "--api-key", "k"}, env(nil), &logs, func(u string) { ready <- u })
	}()
	var base string
	select {
	case base = <-ready:
	case err := <-done:
		t.Fatalf("run ended: %v", err)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Choices []struct {
			Message struct{ Content string }
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 || out.Choices[0].Message.Content != "hello from a file" {
		t.Fatalf("answer: %d %+v %v", resp.StatusCode, out, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, want := range []string{`"message":"script loaded"`, `"message":"listening"`, `"rule":"fallback"`, `"message":"stopping"`, `"daemon":"llmsim"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %s:\n%s", want, logs.String())
		}
	}
	if _, err := http.Get(strings.TrimSuffix(base, "/v1") + "/healthz"); err == nil {
		t.Fatal("still serving after the context ended")
	}
}

func TestRunDefaultsToTheDemo(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", "127.0.0.1:0"}, env(nil), &syncbuf.Buffer{}, func(u string) { ready <- u })
	}()
	var base string
	select {
	case base = <-ready:
	case err := <-done:
		t.Fatalf("run ended: %v", err)
	}
	resp, err := http.Get(base + "/models")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Data []struct{ ID string } }
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || len(list.Data) != 1 || list.Data[0].ID != "nomos-sim" {
		t.Fatalf("models: %+v %v", list, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), []string{"--script", filepath.Join(t.TempDir(), "missing.yaml")}, env(nil), &syncbuf.Buffer{}, nil); err == nil {
		t.Fatal("a missing script must fail")
	}
}
