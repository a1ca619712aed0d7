package llmcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Identity is what a server said of itself.
type Identity struct {
	// Server is the preset name of the server (llm.Presets), "" when none identified itself.
	Server  string
	Version string
	// Source is the endpoint that told (for logs and the report).
	Source string
}

// DetectTimeout bounds the whole detection: a handful of GETs to a local server.
const DetectTimeout = 3 * time.Second

// maxIdentity bounds what is read of an identity answer (llama-server's /props holds the
// chat template).
const maxIdentity = 1 << 20

// Root is the server's root URL: the OpenAI-compatible base without its /v1, where the
// servers' own endpoints live.
func Root(baseURL string) string {
	b := strings.TrimRight(baseURL, "/")
	return strings.TrimSuffix(b, "/v1")
}

// Detect asks the identity endpoints of each server Nomos has a preset for, in an order where
// no server answers another's: llama-server's /props, LM Studio's /api/v0/models, Ollama's
// /api/version, vLLM's /version (docs/llm-providers.md, "Doctor", for the sources). A hosted
// API is known by its host. It never fails: a server that answers none is "" (OpenAI or
// another compatible server), and the caller goes on without a preset.
func Detect(ctx context.Context, hc *http.Client, baseURL, apiKey string) Identity {
	if hc == nil {
		hc = http.DefaultClient
	}
	if u, err := url.Parse(baseURL); err == nil && strings.EqualFold(u.Hostname(), "api.openai.com") {
		return Identity{Server: "openai", Source: "host api.openai.com"}
	}
	ctx, cancel := context.WithTimeout(ctx, DetectTimeout)
	defer cancel()
	root := Root(baseURL)
	g := getter{hc: hc, key: apiKey}
	var props struct {
		Settings *struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
		BuildInfo string `json:"build_info"`
	}
	if g.json(ctx, root+"/props", &props) == nil && props.Settings != nil {
		return Identity{Server: "llamacpp", Version: props.BuildInfo, Source: "GET /props"}
	}
	var lms struct {
		Object string `json:"object"`
		Data   []struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"data"`
	}
	if g.json(ctx, root+"/api/v0/models", &lms) == nil && lms.Object == "list" {
		return Identity{Server: "lmstudio", Source: "GET /api/v0/models"}
	}
	var ver struct {
		Version string `json:"version"`
	}
	if g.json(ctx, root+"/api/version", &ver) == nil && ver.Version != "" {
		return Identity{Server: "ollama", Version: ver.Version, Source: "GET /api/version"}
	}
	ver.Version = ""
	if g.json(ctx, root+"/version", &ver) == nil && ver.Version != "" {
		return Identity{Server: "vllm", Version: ver.Version, Source: "GET /version"}
	}
	return Identity{}
}

// getter sends the probes' GETs.
type getter struct {
	hc  *http.Client
	key string
}

// json GETs url and decodes a 200 answer into v.
func (g getter) json(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	return g.do(req, v)
}

func (g getter) do(req *http.Request, v any) error {
	if g.key != "" {
		req.Header.Set("Authorization", "Bearer "+g.key)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := g.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxIdentity))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d", req.URL.Path, resp.StatusCode)
	}
	return json.Unmarshal(body, v)
}
