package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/eventbus"
)

// Client calls the api at URL over HTTP.
type Client struct {
	URL  string
	HTTP *http.Client
}

// Do calls the api with token and decodes a JSON answer into out (when non-nil); it returns
// the status and the raw body.
func (c *Client) Do(tb testing.TB, method, path, token string, body, out any) (int, []byte) {
	tb.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			tb.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.URL+path, r)
	if err != nil {
		tb.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			tb.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, raw
}

// OK is Do that fails the test unless the api answers 2xx.
func (c *Client) OK(tb testing.TB, method, path, token string, body, out any) {
	tb.Helper()
	if st, raw := c.Do(tb, method, path, token, body, out); st < 200 || st > 299 {
		tb.Fatalf("%s %s: %d %s", method, path, st, raw)
	}
}

// Eventually re-checks cond on every outbox notification of the database at dbURL (and at
// least every poll) until it holds, or fails the test after within.
func Eventually(tb testing.TB, dbURL string, within, poll time.Duration, what string, cond func() (bool, string)) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+eventbus.ChannelEvents); err != nil {
		tb.Fatal(err)
	}
	for {
		if ok, _ := cond(); ok {
			return
		}
		wctx, wcancel := context.WithTimeout(ctx, poll)
		_, _ = conn.WaitForNotification(wctx)
		wcancel()
		if ctx.Err() != nil {
			ok, got := cond()
			if ok {
				return
			}
			tb.Fatalf("%s: not within %s (last: %s)", what, within, got)
		}
	}
}
