package tools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/oikos-hq/oikos/agent/internal/apiclient"
	"github.com/oikos-hq/oikos/agent/internal/secrets"
	"github.com/oikos-hq/oikos/agent/internal/webfetch"
)

type httpGetIn struct {
	URL     string            `json:"url" jsonschema:"http(s) URL of a public page or API"`
	Headers map[string]string `json:"headers,omitempty" jsonschema:"request headers; a credential is named, never written: secret:NAME (or \"Bearer secret:NAME\") is replaced by the secret's value, which you never see"`
}

type serviceIn struct {
	Ref string `json:"ref" jsonschema:"entity slug of the service (its url or public_host attribute is probed)"`
}

func netTools() []*Tool {
	return []*Tool{
		def("http_get", "Fetch a public web page or API over HTTP(S) as text (size-capped; private addresses refused); headers may name secrets as secret:NAME.",
			Hints{ReadOnly: true, Idempotent: true, OpenWorld: true}, "web",
			func(s *jsonschema.Schema) { maxLen(s, "url", 2048) },
			func(ctx context.Context, c *Call, in httpGetIn) Result {
				if c.deps.Fetch == nil {
					return Errorf("http_get is not configured on this agent")
				}
				h, err := c.headers(ctx, in.Headers)
				if err != nil {
					return Errorf("http_get: %v", err)
				}
				r, err := c.deps.Fetch.GetWith(ctx, in.URL, h)
				if err != nil {
					return Errorf("http_get %s: %v", in.URL, err)
				}
				return Result{Data: fetched(r, true)}
			}),
		def("ping", "Check the connection to Oikos: answers the server's identity and your session, without touching the database.",
			Hints{ReadOnly: true, Idempotent: true}, "text", nil,
			func(ctx context.Context, c *Call, _ noArgs) Result {
				return Result{Data: map[string]any{"server": "oikos-agent", "version": c.deps.Version, "session": c.Session.ID,
					"caller": c.Actor, "role": c.Role, "tools": len(c.reg.For(c.Role))}}
			}),
		def("ping_service", "Probe a service live with an HTTP HEAD to its url from the graph; answers status and time.",
			Hints{ReadOnly: true, Idempotent: true, OpenWorld: true}, "probe", nil,
			func(ctx context.Context, c *Call, in serviceIn) Result {
				if c.deps.Probe == nil {
					return Errorf("ping_service is not configured on this agent")
				}
				e, err := apiclient.Decode[struct {
					Slug       string         `json:"slug"`
					Attributes map[string]any `json:"attributes"`
					Health     any            `json:"health"`
				}](c.deps.API.API().GetEntity(ctx, in.Ref, c.as()...))
				if err != nil {
					return apiError(err)
				}
				u := serviceURL(e.Attributes)
				if u == "" {
					return Errorf("ping_service: %s has no url or public_host attribute; record one with update_entity_attributes", e.Slug)
				}
				start := time.Now()
				r, err := c.deps.Probe.Head(ctx, u, true)
				if err != nil {
					return Result{IsError: true, Render: "probe", Entity: e.Slug, Data: map[string]any{"entity": e.Slug, "url": u, "reachable": false,
						"error": err.Error(), "scheduler_health": e.Health}}
				}
				return Result{Render: "probe", Entity: e.Slug, Data: map[string]any{"entity": e.Slug, "url": u, "reachable": true,
					"result": fetched(r, false), "elapsed_ms": time.Since(start).Milliseconds(), "scheduler_health": e.Health}}
			}),
	}
}

// fetched is a fetch as a tool answers it.
func fetched(r webfetch.Result, text bool) map[string]any {
	m := map[string]any{"url": r.URL, "final_url": r.FinalURL, "status": r.Status, "content_type": r.ContentType,
		"bytes": r.Bytes, "truncated": r.Truncated, "redirects": r.Redirects}
	if text {
		m["text"] = r.Text
	}
	return m
}

// serviceURL is the URL ping_service probes: attributes.url, else https://public_host.
func serviceURL(attrs map[string]any) string {
	if u, _ := attrs["url"].(string); strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") {
		return u
	}
	if h, _ := attrs["public_host"].(string); h != "" && !strings.ContainsAny(h, "/ ") {
		return "https://" + h + "/"
	}
	return ""
}

func secretTools() []*Tool {
	return []*Tool{
		def("list_secrets", "List the names of the secrets Oikos can use by reference; values are never shown.",
			Hints{ReadOnly: true, Idempotent: true}, "secrets", nil,
			func(ctx context.Context, c *Call, _ noArgs) Result {
				if c.deps.Secrets == nil {
					return Errorf("%v", secrets.ErrNotConfigured)
				}
				names, err := c.deps.Secrets.List(ctx)
				if errors.Is(err, secrets.ErrNotConfigured) {
					return Errorf("%v", err)
				}
				if err != nil {
					return Errorf("list secrets (%s): %v", c.deps.Secrets.Name(), err)
				}
				if names == nil {
					names = []string{}
				}
				b, _ := json.Marshal(map[string]any{"backend": c.deps.Secrets.Name(), "names": names})
				return Result{Data: json.RawMessage(b)}
			}),
	}
}
