package secrets

//lint:file-ignore ST1005 its errors start with the product name Infisical, a proper noun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// The Infisical API as used here (https://infisical.com/docs/api-reference):
//
//	POST /api/v1/auth/universal-auth/login {"clientId","clientSecret"}
//	  → {"accessToken","expiresIn" (seconds),"accessTokenMaxTTL","tokenType":"Bearer"}
//	GET  /api/v4/secrets?projectId=&environment=&secretPath=/&viewSecretValue=
//	  → {"secrets":[{"secretKey","secretValue","secretValueHidden",…}],"imports":[…]}
//
// Servers older than /api/v4/secrets answer it 404; they are asked the deprecated
// GET /api/v3/secrets/raw?workspaceId=&environment=&secretPath=/ instead (same answer).
const (
	infisicalLoginPath  = "/api/v1/auth/universal-auth/login"
	infisicalListPath   = "/api/v4/secrets"
	infisicalLegacyPath = "/api/v3/secrets/raw"
)

// infisicalTimeout bounds one request to Infisical.
const infisicalTimeout = 15 * time.Second

// maxInfisicalBody bounds an answer of Infisical.
const maxInfisicalBody = 16 << 20

// infisical is the Infisical backend.
type infisical struct {
	base         string // scheme://host[:port][/prefix], without "/api"
	clientID     string
	clientSecret string
	projectID    string
	env          string
	client       *http.Client
	now          func() time.Time

	mu      sync.Mutex
	token   string
	expires time.Time // the cached token is used before this
	legacy  bool      // the server has no /api/v4/secrets
}

func newInfisical(rawURL, clientID, clientSecret, projectID, env string) (*infisical, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: %s=%q is not an http(s) URL such as https://app.infisical.com", ErrConfig, infisicalURLVar, rawURL)
	}
	base := strings.TrimRight(u.Scheme+"://"+u.Host+u.EscapedPath(), "/")
	base = strings.TrimSuffix(base, "/api")
	return &infisical{
		base: base, clientID: clientID, clientSecret: clientSecret, projectID: projectID, env: env,
		client: &http.Client{Timeout: infisicalTimeout}, now: time.Now,
	}, nil
}

func (b *infisical) Name() string { return "infisical" }

// tokenMargin is how long before its expiry a cached token is replaced.
func tokenMargin(ttl time.Duration) time.Duration { return min(time.Minute, ttl/10) }

// accessToken returns the cached token or logs in. Holding the lock through the login makes
// concurrent callers share one.
func (b *infisical) accessToken(ctx context.Context) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.token != "" && b.now().Before(b.expires) {
		return b.token, nil
	}
	b.token = ""
	tok, ttl, err := b.login(ctx)
	if err != nil {
		return "", err
	}
	if ttl > 0 {
		b.token, b.expires = tok, b.now().Add(ttl-tokenMargin(ttl))
	}
	return tok, nil
}

// dropToken forgets tok if it is still the cached one (the server refused it).
func (b *infisical) dropToken(tok string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.token == tok {
		b.token = ""
	}
}

func (b *infisical) login(ctx context.Context) (string, time.Duration, error) {
	body, err := json.Marshal(map[string]string{"clientId": b.clientID, "clientSecret": b.clientSecret})
	if err != nil {
		return "", 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.base+infisicalLoginPath, bytes.NewReader(body))
	if err != nil {
		return "", 0, fmt.Errorf("Infisical login: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("Infisical login at %s: %w", b.base, b.scrub(err, ""))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxInfisicalBody))
	if err != nil {
		return "", 0, fmt.Errorf("Infisical login at %s: reading the answer: %w", b.base, b.scrub(err, ""))
	}
	if resp.StatusCode/100 != 2 {
		return "", 0, fmt.Errorf("Infisical login at %s (universal auth, client %s): %s", b.base, b.clientID, b.apiError(resp, data, ""))
	}
	var out struct {
		AccessToken string `json:"accessToken"`
		ExpiresIn   int64  `json:"expiresIn"`
		TokenType   string `json:"tokenType"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return "", 0, fmt.Errorf("Infisical login at %s: the answer is not the expected JSON: %w", b.base, err)
	}
	if out.AccessToken == "" {
		return "", 0, fmt.Errorf("Infisical login at %s answered without an access token", b.base)
	}
	if out.TokenType != "" && !strings.EqualFold(out.TokenType, "Bearer") {
		return "", 0, fmt.Errorf("Infisical login at %s answered a %q token; want Bearer", b.base, out.TokenType)
	}
	return out.AccessToken, time.Duration(out.ExpiresIn) * time.Second, nil
}

// infisicalSecret is one secret of a list answer.
type infisicalSecret struct {
	Key    string `json:"secretKey"`
	Value  string `json:"secretValue"`
	Hidden bool   `json:"secretValueHidden"`
}

// secrets lists the environment's secrets at "/", with their values if withValues. A
// refused token is replaced once; a server without /api/v4/secrets is asked the legacy path.
func (b *infisical) secrets(ctx context.Context, withValues bool) ([]infisicalSecret, error) {
	relogged := false
	for {
		tok, err := b.accessToken(ctx)
		if err != nil {
			return nil, err
		}
		b.mu.Lock()
		legacy := b.legacy
		b.mu.Unlock()
		status, list, err := b.list(ctx, tok, legacy, withValues)
		if status == http.StatusUnauthorized && !relogged {
			b.dropToken(tok)
			relogged = true
			continue
		}
		if status == http.StatusNotFound && !legacy {
			if st, l, lerr := b.list(ctx, tok, true, withValues); lerr == nil {
				b.mu.Lock()
				b.legacy = true
				b.mu.Unlock()
				return l, nil
			} else if st == http.StatusUnauthorized && !relogged {
				b.dropToken(tok)
				relogged = true
				continue
			}
		}
		return list, err
	}
}

// list does one list request; status is the HTTP status (0 without an answer).
func (b *infisical) list(ctx context.Context, tok string, legacy, withValues bool) (int, []infisicalSecret, error) {
	q := url.Values{"environment": {b.env}, "secretPath": {"/"}, "viewSecretValue": {fmt.Sprint(withValues)}}
	path := infisicalListPath
	if legacy {
		path = infisicalLegacyPath
		q.Set("workspaceId", b.projectID)
	} else {
		q.Set("projectId", b.projectID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return 0, nil, fmt.Errorf("listing Infisical secrets: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("listing Infisical secrets at %s: %w", b.base, b.scrub(err, tok))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxInfisicalBody))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("listing Infisical secrets at %s: reading the answer: %w", b.base, b.scrub(err, tok))
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, nil, fmt.Errorf("listing Infisical secrets of project %s, environment %s at %s: %s",
			b.projectID, b.env, b.base, b.apiError(resp, data, tok))
	}
	var out struct {
		Secrets []infisicalSecret `json:"secrets"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		// Not wrapped: the JSON error could quote a value.
		return resp.StatusCode, nil, fmt.Errorf("listing Infisical secrets at %s: the answer is not the expected JSON", b.base)
	}
	return resp.StatusCode, out.Secrets, nil
}

// apiError is the status and Infisical's message ({"statusCode","message","error"}), the
// credentials scrubbed from it.
func (b *infisical) apiError(resp *http.Response, data []byte, tok string) string {
	var e struct {
		Message string `json:"message"`
		Error   string `json:"error"`
	}
	msg := ""
	if json.Unmarshal(data, &e) == nil {
		msg = e.Message
		if msg == "" {
			msg = e.Error
		}
	}
	if msg == "" && !strings.Contains(resp.Header.Get("Content-Type"), "json") {
		msg = strings.TrimSpace(string(data))
	}
	msg = b.scrubText(msg, tok)
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	if msg == "" {
		return resp.Status
	}
	return resp.Status + ": " + msg
}

// scrubText removes the client secret and the access token tok (if any) from a server's
// message. It takes no lock: login runs under b.mu.
func (b *infisical) scrubText(s, tok string) string {
	return Redact(s, map[string]string{infisicalSecretVar: b.clientSecret, "infisical_access_token": tok})
}

func (b *infisical) scrub(err error, tok string) error {
	if err == nil {
		return nil
	}
	if s := b.scrubText(err.Error(), tok); s != err.Error() {
		return errors.New(s)
	}
	return err
}

func (b *infisical) List(ctx context.Context) ([]string, error) {
	list, err := b.secrets(ctx, false)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list))
	for _, s := range list {
		if n := canonical(s.Key); n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

func (b *infisical) Resolve(ctx context.Context, name string) (string, error) {
	n := canonical(name)
	if n == "" {
		return "", fmt.Errorf("%w: no secret name given", ErrNotFound)
	}
	list, err := b.secrets(ctx, true)
	if err != nil {
		return "", err
	}
	var found []infisicalSecret
	for _, s := range list {
		if canonical(s.Key) == n {
			found = append(found, s)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%w: no secret named %q in Infisical project %s, environment %s, path /", ErrNotFound, name, b.projectID, b.env)
	case 1:
	default:
		keys := make([]string, len(found))
		for i, s := range found {
			keys[i] = s.Key
		}
		return "", fmt.Errorf("secret %q is ambiguous: Infisical has %s, which differ only in case", name, joinAnd(keys))
	}
	if found[0].Hidden {
		return "", fmt.Errorf("Infisical hides the value of %s from this machine identity: give it permission to read secret values", found[0].Key)
	}
	return found[0].Value, nil
}
