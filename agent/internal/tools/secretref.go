package tools

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/oikos-hq/oikos/agent/internal/secrets"
	"github.com/oikos-hq/oikos/shared/redact"
	"github.com/oikos-hq/oikos/shared/secretbox"
)

// Secrets by reference (issue #31): a tool argument names a secret as secret:NAME, the
// handler resolves it at the point of use (resolve, below), and every result is redacted in
// Registry.Call before it is recorded or handed to the model: the values of the secrets the
// call resolved and of every secret the backends list, and the well-known credential formats
// of shared/redact. The model, the transcript (tool_calls, session_messages) and the logs
// only ever see "secret:NAME" or "[redacted: …]".

// valuesTTL is how long the listed secrets' values are kept for redaction before they are
// read again (a rotated secret's new value is redacted at once where a call used it).
const valuesTTL = 30 * time.Second

// redactor caches the configured secrets' values.
type redactor struct {
	mu     sync.Mutex
	at     time.Time
	values map[string]string
}

// values returns the configured secrets' values, read at most every valuesTTL.
func (r *Registry) secretValues(ctx context.Context) map[string]string {
	if r.deps.Secrets == nil {
		return nil
	}
	r.red.mu.Lock()
	defer r.red.mu.Unlock()
	if r.red.values != nil && time.Since(r.red.at) < valuesTTL {
		return r.red.values
	}
	v, err := secrets.Values(ctx, r.deps.Secrets)
	if err != nil {
		// Keep the previous values: redacting with a stale list beats redacting with none.
		r.deps.Log.Warn().Err(err).Str("backend", r.deps.Secrets.Name()).Msg("list secrets for redaction")
		if r.red.values != nil {
			return r.red.values
		}
		return map[string]string{}
	}
	r.red.values, r.red.at = v, time.Now()
	return v
}

// redact takes secrets and credentials out of a result's text.
func (r *Registry) redact(ctx context.Context, c *Call, text string) string {
	values := map[string]string{}
	for n, v := range r.secretValues(ctx) {
		values[n] = v
	}
	c.mu.Lock()
	for n, v := range c.resolved {
		values[n] = v
	}
	c.mu.Unlock()
	out, found := redact.New(values).String(text)
	if len(found) > 0 {
		ev := r.deps.Log.Info().Str("tool", c.Tool.Name).Str("session", c.Session.ID)
		for _, f := range found {
			ev = ev.Int("redacted_"+strings.ReplaceAll(f.What, " ", "_"), f.Count)
		}
		ev.Msg("redacted a tool result")
	}
	return out
}

// resolve returns the value of the secret name for use by this call, remembered so that the
// call's result is redacted of it. Its errors name the secret, never a value.
func (c *Call) resolve(ctx context.Context, name string) (string, error) {
	if c.deps.Secrets == nil {
		return "", secrets.ErrNotConfigured
	}
	n, err := secretbox.Name(name)
	if err != nil {
		return "", err
	}
	v, err := c.deps.Secrets.Resolve(ctx, n)
	if err != nil {
		if errors.Is(err, secrets.ErrNotFound) {
			return "", fmt.Errorf("no secret named %q (list_secrets shows the names)", n)
		}
		return "", fmt.Errorf("secret %q: %v", n, err)
	}
	c.mu.Lock()
	if c.resolved == nil {
		c.resolved = map[string]string{}
	}
	c.resolved[n] = v
	c.mu.Unlock()
	return v, nil
}

// maxHeaders bounds the headers a call may send.
const maxHeaders = 32

var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")

// reservedHeaders are set by the transport or the fetcher, never by a caller.
var reservedHeaders = map[string]bool{"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Upgrade": true, "Te": true, "Trailer": true, "Keep-Alive": true, "Proxy-Authorization": true, "Proxy-Connection": true,
	"User-Agent": true, "Accept-Encoding": true}

// headers builds a request's headers from the arguments: each word of a value written
// secret:NAME is replaced by the secret's value ("Bearer secret:grafana_token").
func (c *Call) headers(ctx context.Context, in map[string]string) (http.Header, error) {
	if len(in) == 0 {
		return nil, nil
	}
	if len(in) > maxHeaders {
		return nil, fmt.Errorf("%d headers; at most %d", len(in), maxHeaders)
	}
	h := http.Header{}
	for k, v := range in {
		if !headerName.MatchString(k) {
			return nil, fmt.Errorf("header %q: not a valid header name", k)
		}
		ck := http.CanonicalHeaderKey(k)
		if reservedHeaders[ck] {
			return nil, fmt.Errorf("header %s is set by Oikos and cannot be given", ck)
		}
		words := strings.Split(v, " ")
		for i, w := range words {
			name, ok, err := secretbox.Ref(w)
			if !ok {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("header %s: %v", ck, err)
			}
			if words[i], err = c.resolve(ctx, name); err != nil {
				return nil, fmt.Errorf("header %s: %v", ck, err)
			}
		}
		val := strings.Join(words, " ")
		if strings.ContainsAny(val, "\r\n\x00") {
			// Said without the value: it may be a secret's.
			return nil, fmt.Errorf("header %s: the value holds a line break or NUL", ck)
		}
		h.Set(ck, val)
	}
	return h, nil
}
