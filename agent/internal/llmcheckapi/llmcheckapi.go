// Package llmcheckapi is the agent's side of the model doctor: POST /internal/llm/check,
// which only the api calls (with the agent's own token; the api authenticates the client and
// applies the CSRF and role rules of POST /api/v1/llm/check), runs agent/internal/llmcheck
// against the configured model server, or against the one the body names, and answers the
// report (shared/llmcheck.Report) as JSON. It changes nothing: it sends requests to the
// model server, which is why the api treats it as a mutation-class route.
package llmcheckapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/agent/internal/chatapi"
	"github.com/oikos-hq/oikos/agent/internal/llm"
	"github.com/oikos-hq/oikos/agent/internal/llmcheck"
)

// maxBody bounds a request.
const maxBody = 16 << 10

// MaxTimeout bounds what a request may ask each probe to wait.
const MaxTimeout = 5 * time.Minute

// Handler serves /internal/llm/check.
type Handler struct {
	// Target is the model server the agent is configured with.
	Target llmcheck.Target
	// Token is the agent's own token, which the api presents.
	Token string
	// HTTP sends the probes' requests (nil: a default client).
	HTTP *http.Client
	Log  zerolog.Logger
}

// Request is the body, every field optional: the overrides of the configured target.
type Request struct {
	BaseURL  string `json:"base_url"`
	Model    string `json:"model"`
	Provider string `json:"provider"`
	// APIKey is sent to the overriding base URL; the configured key is sent only to the
	// configured base URL, never to one a request names.
	APIKey        string  `json:"api_key"`
	ContextTokens int     `json:"context_tokens"`
	TimeoutS      float64 `json:"timeout_s"`
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		chatapi.Problem(w, http.StatusMethodNotAllowed, "POST a check", "")
		return
	}
	if !chatapi.Authorized(r, h.Token) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="oikos-agent"`)
		chatapi.Problem(w, http.StatusUnauthorized, "only the api may ask for a model check (with the agent's token)", "")
		return
	}
	var req Request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		chatapi.Problem(w, http.StatusBadRequest, "the check request is not valid JSON: "+err.Error(), "")
		return
	}
	t, timeout, field, msg := h.target(req)
	if field != "" {
		chatapi.Problem(w, http.StatusUnprocessableEntity, msg, field)
		return
	}
	// The check goes on if the client leaves only as long as its own probes are bounded;
	// the request's context ends it with the client.
	rep := llmcheck.Run(r.Context(), t, llmcheck.Options{HTTP: h.HTTP, Timeout: timeout, Log: h.Log})
	h.Log.Info().Str("base_url", rep.BaseURL).Str("model", rep.Model).Str("detected", rep.Detected).Bool("ok", rep.OK).
		Str("actor", r.Header.Get("X-Oikos-Actor")).Msg("model server checked")
	b, err := json.Marshal(rep)
	if err != nil {
		chatapi.Problem(w, http.StatusInternalServerError, "encode the report: "+err.Error(), "")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// target is the configured target with the request's overrides, or the field at fault.
func (h *Handler) target(req Request) (t llmcheck.Target, timeout time.Duration, field, msg string) {
	t = h.Target
	if base := strings.TrimRight(strings.TrimSpace(req.BaseURL), "/"); base != "" {
		u, err := url.Parse(base)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return t, 0, "base_url", "base_url must be an http(s) URL without credentials, e.g. http://127.0.0.1:11434/v1"
		}
		if base != strings.TrimRight(h.Target.BaseURL, "/") {
			// Another server: the configured key is not its to see.
			t.APIKey = ""
		}
		t.BaseURL = base
	}
	if req.APIKey != "" {
		t.APIKey = req.APIKey
	}
	if m := strings.TrimSpace(req.Model); m != "" {
		t.Model = m
	}
	if p := strings.TrimSpace(req.Provider); p != "" {
		if _, err := llm.LookupPreset(p); err != nil {
			return t, 0, "provider", err.Error()
		}
		t.Provider = strings.ToLower(p)
	}
	if req.ContextTokens < 0 {
		return t, 0, "context_tokens", "context_tokens must be positive"
	} else if req.ContextTokens > 0 {
		t.ContextTokens = req.ContextTokens
	}
	if req.TimeoutS < 0 || time.Duration(req.TimeoutS*float64(time.Second)) > MaxTimeout {
		return t, 0, "timeout_s", "timeout_s must be between 0 (the default) and 300"
	}
	return t, time.Duration(req.TimeoutS * float64(time.Second)), "", ""
}
