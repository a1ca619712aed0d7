package chatapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/request"
)

// CheckTimeout bounds POST /llm/check: the agent's probes are each bounded (45 s by
// default, timeout_s at most 300), and a slow local model may need several of them.
const CheckTimeout = 10 * time.Minute

// checkBody is POST /llm/check: the overrides of the agent's configured model server, every
// field optional (docs/llm-providers.md, "Doctor").
type checkBody struct {
	BaseURL       string  `json:"base_url,omitempty"`
	Model         string  `json:"model,omitempty"`
	Provider      string  `json:"provider,omitempty"`
	APIKey        string  `json:"api_key,omitempty"`
	ContextTokens int     `json:"context_tokens,omitempty"`
	TimeoutS      float64 `json:"timeout_s,omitempty"`
}

// llmCheck asks the agent to probe its model server (POST /internal/llm/check) and answers
// its report. It is a POST under the write permission, and so under the session cookie's
// Origin check, because it makes the agent send requests to the model; it changes no state,
// so it is neither audited nor an event.
func (a *API) llmCheck(c echo.Context) error {
	var b checkBody
	if err := request.DecodeJSON(c, &b); err != nil {
		return err
	}
	switch {
	case b.ContextTokens < 0:
		return request.Unprocessable("context_tokens", "context_tokens must be positive")
	case b.TimeoutS < 0 || b.TimeoutS > 300:
		return request.Unprocessable("timeout_s", "timeout_s must be between 0 (the agent's default) and 300")
	case strings.ContainsAny(b.BaseURL, " \t\r\n"):
		return request.Unprocessable("base_url", "base_url must be a URL")
	}
	if a.d.AgentToken == "" {
		return request.Unavailable("the model configuration is the agent's, and the api has no OIKOS_AGENT_TOKEN to reach it with")
	}
	body, err := json.Marshal(b)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), CheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.agent.String()+"/internal/llm/check", bytes.NewReader(body))
	if err != nil {
		return request.BadRequest("", "cannot pass this request on to the agent: %v", err)
	}
	a.agentHeaders(req, request.MetaOf(c))
	req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	req.Header.Set("Accept", echo.MIMEApplicationJSON)
	resp, err := a.checkClient().Do(req)
	if err != nil {
		if c.Request().Context().Err() != nil {
			return c.Request().Context().Err()
		}
		return request.Unavailable("the agent is unreachable (%s): %v", a.agent.Redacted(), unwrapURL(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxProxyBody))
	if err != nil {
		return request.Unavailable("reading the agent's report failed: %v", err)
	}
	switch st := resp.StatusCode; {
	case st == http.StatusUnauthorized || st == http.StatusForbidden:
		return request.Unavailable("the agent refused the api's token (%d); OIKOS_AGENT_TOKEN must be the same for the api and the agent", st)
	case st == http.StatusNotFound:
		return request.Unavailable("the agent has no model check (an older oikos-agent?)")
	case st >= 400:
		return agentError(st, data)
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, data)
}

// checkClient is the client of the check: the agent answers once every probe ran, later than
// the session client's 30 s wait for response headers, so the check's own deadline bounds it.
func (a *API) checkClient() *http.Client {
	if a.d.Client != nil && a.d.Client.Transport != nil {
		if t, ok := a.d.Client.Transport.(*http.Transport); ok && t.ResponseHeaderTimeout > 0 {
			t = t.Clone()
			t.ResponseHeaderTimeout = 0
			return &http.Client{Transport: t}
		}
		return a.d.Client
	}
	return &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}}
}
