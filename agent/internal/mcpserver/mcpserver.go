// Package mcpserver serves the agent's tool registry at /mcp over MCP's Streamable HTTP
// transport (github.com/modelcontextprotocol/go-sdk), for external agents such as Claude Code
// and Codex (docs/behaviours.md A13).
//
// The bearer token is an Oikos api token: the api verifies it (GET /api/v1/whoami) and every
// api call a tool makes carries it, so the api's roles, gate and audit apply to the caller
// itself. A readonly token is offered only the read tools. One MCP session is one Oikos
// session: plan-first, the retry cap, the approval flood rule and approval windows apply per
// MCP session exactly as they do to a Nomos chat session. The SDK binds a session to the
// token's name, so another token cannot ride it.
package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/agent/internal/apiclient"
	"github.com/oikos-hq/oikos/agent/internal/tools"
)

// RenderMeta is the result _meta key that carries the dashboard's renderer hint.
const RenderMeta = "oikos/render"

// Options configure the server.
type Options struct {
	Version string
	// VerifyTTL is how long a verified token is trusted before the api is asked again
	// (default 30 s: a revoked token stops working within it).
	VerifyTTL time.Duration
	// SessionTimeout closes MCP sessions idle this long (default 2 h).
	SessionTimeout time.Duration
	Log            zerolog.Logger
}

// Server is the /mcp handler.
type Server struct {
	reg  *tools.Registry
	api  *apiclient.Client
	opts Options
	h    http.Handler

	mu    sync.Mutex
	cache map[[32]byte]verified

	// servers holds one MCP server per role. The SDK asks for a server on every HTTP
	// request (not only for a new session), and building one registers every tool: reusing
	// it per role keeps a request's cost to the call itself.
	serversMu sync.Mutex
	servers   map[string]*mcp.Server
}

type verified struct {
	id  apiclient.Identity
	exp time.Time
}

// New builds the handler.
func New(reg *tools.Registry, api *apiclient.Client, opts Options) *Server {
	if opts.VerifyTTL <= 0 {
		opts.VerifyTTL = 30 * time.Second
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 2 * time.Hour
	}
	s := &Server{reg: reg, api: api, opts: opts, cache: map[[32]byte]verified{}, servers: map[string]*mcp.Server{}}
	stream := mcp.NewStreamableHTTPHandler(s.serverFor, &mcp.StreamableHTTPOptions{
		SessionTimeout: opts.SessionTimeout,
		// The agent listens on a homelab address and clients name it by host name; the
		// bearer token, not the Host header, is what admits a request.
		DisableLocalhostProtection: true,
	})
	s.h = s.authenticate(auth.RequireBearerToken(s.verifySDK, nil)(stream))
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.h.ServeHTTP(w, r) }

// authenticate answers a missing or bad token with 401 problem JSON before the SDK sees the
// request (the SDK's own answer is plain text).
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r)
		if !ok {
			unauthorized(w, "no bearer token: send Authorization: Bearer <an Oikos api token>")
			return
		}
		if _, err := s.verify(r.Context(), token); err != nil {
			if errors.Is(err, auth.ErrInvalidToken) {
				unauthorized(w, "the bearer token is not a valid Oikos api token")
				return
			}
			if apiclient.StatusOf(err) == http.StatusServiceUnavailable {
				// The api is up but cannot verify now (its database is away): the client
				// should retry, as it would the api itself.
				w.Header().Set("Retry-After", "2")
				problem(w, http.StatusServiceUnavailable, "Service Unavailable",
					"the api cannot verify the token now (its database is unreachable); retry shortly")
				return
			}
			problem(w, http.StatusBadGateway, "Bad Gateway", "could not verify the token with the api: "+err.Error())
			return
		}
		next.ServeHTTP(w, r)
	})
}

func bearer(r *http.Request) (string, bool) {
	const p = "bearer "
	h := r.Header.Get("Authorization")
	if len(h) <= len(p) || !equalFold(h[:len(p)], p) {
		return "", false
	}
	return h[len(p):], true
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func unauthorized(w http.ResponseWriter, detail string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="oikos"`)
	problem(w, http.StatusUnauthorized, "Unauthorized", detail)
}

func problem(w http.ResponseWriter, status int, title, detail string) {
	b, _ := json.Marshal(map[string]any{"type": "about:blank", "title": title, "status": status, "detail": detail})
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// verify asks the api who token is, caching the answer for VerifyTTL.
func (s *Server) verify(ctx context.Context, token string) (apiclient.Identity, error) {
	key := sha256.Sum256([]byte(token))
	now := time.Now()
	s.mu.Lock()
	v, ok := s.cache[key]
	s.mu.Unlock()
	if ok && now.Before(v.exp) {
		return v.id, nil
	}
	id, err := s.api.WhoAmI(ctx, token)
	if err != nil {
		if st := apiclient.StatusOf(err); st == http.StatusUnauthorized || st == http.StatusForbidden {
			return id, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		return id, err
	}
	s.mu.Lock()
	if len(s.cache) > 10000 {
		for k, e := range s.cache {
			if now.After(e.exp) {
				delete(s.cache, k)
			}
		}
	}
	s.cache[key] = verified{id: id, exp: now.Add(s.opts.VerifyTTL)}
	s.mu.Unlock()
	return id, nil
}

// verifySDK is the SDK's TokenVerifier: the identity travels to the tool handlers in the
// TokenInfo, and UserID binds the MCP session to the token's name.
func (s *Server) verifySDK(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	id, err := s.verify(ctx, token)
	if err != nil {
		return nil, err
	}
	return &auth.TokenInfo{UserID: id.Name, Expiration: time.Now().Add(s.opts.VerifyTTL),
		Extra: map[string]any{"token": token, "name": id.Name, "role": id.Role}}, nil
}

// serverFor answers the MCP server for a request's token role (built once per role).
func (s *Server) serverFor(r *http.Request) *mcp.Server {
	role := ""
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		role, _ = ti.Extra["role"].(string)
	}
	s.serversMu.Lock()
	defer s.serversMu.Unlock()
	if srv, ok := s.servers[role]; ok {
		return srv
	}
	srv := s.build(role)
	s.servers[role] = srv
	return srv
}

// build makes the MCP server offering the tools role may use.
func (s *Server) build(role string) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "oikos", Title: "Oikos", Version: s.opts.Version}, &mcp.ServerOptions{
		Instructions: "Oikos operates a homelab. Start a task with set_goal, research with read-only tools, " +
			"propose_plan before any change, run commands with run (the risk gate decides; some need the operator's approval), " +
			"write back what you learned (upsert_knowledge, update_entity_attributes), then complete_task.",
	})
	offered := map[string]bool{}
	for _, t := range s.reg.For(role) {
		offered[t.Name] = true
		srv.AddTool(mcpTool(t), s.handler(t.Name))
	}
	// A call to a tool this session was not offered (unknown, or not for this role) is
	// answered by the registry as a tool error, not a protocol error, so the client sees why.
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				if ctr, ok := req.(*mcp.CallToolRequest); ok && ctr.Params != nil && !offered[ctr.Params.Name] {
					return s.handler(ctr.Params.Name)(ctx, ctr)
				}
			}
			return next(ctx, method, req)
		}
	})
	return srv
}

func mcpTool(t *tools.Tool) *mcp.Tool {
	destructive := t.Hints.Destructive
	open := t.Hints.OpenWorld
	return &mcp.Tool{
		Name:        t.Name,
		Description: t.Description,
		InputSchema: t.Schema,
		Annotations: &mcp.ToolAnnotations{
			ReadOnlyHint:    t.Hints.ReadOnly,
			DestructiveHint: &destructive,
			IdempotentHint:  t.Hints.Idempotent,
			OpenWorldHint:   &open,
		},
	}
}

// handler runs a tool for the session's caller.
func (s *Server) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		caller := tools.Caller{Source: "mcp"}
		if req.Session != nil {
			caller.Session = req.Session.ID()
		}
		if req.Extra != nil && req.Extra.TokenInfo != nil {
			x := req.Extra.TokenInfo.Extra
			caller.Token, _ = x["token"].(string)
			caller.Actor, _ = x["name"].(string)
			caller.Role, _ = x["role"].(string)
		}
		var args json.RawMessage
		if req.Params != nil {
			args = req.Params.Arguments
		}
		res := s.reg.Call(ctx, caller, name, args)
		return &mcp.CallToolResult{
			Content: []mcp.Content{&mcp.TextContent{Text: res.Text}},
			IsError: res.IsError,
			Meta:    mcp.Meta{RenderMeta: res.Render},
		}, nil
	}
}
