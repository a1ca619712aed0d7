package stack

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

// Client is where the api is (URL) and how to reach it (HTTP); API gives the generated
// client (shared/apiclient) for one token, and Answer and OK read its answers.
type Client struct {
	URL  string
	HTTP *http.Client
}

// API is the generated client of the api (shared/apiclient) at c.URL, with token as its
// bearer token (none when empty), over c.HTTP.
func (c *Client) API(tb testing.TB, token string) *apiclient.Client {
	tb.Helper()
	a, err := apiclient.New(c.URL, apiclient.Options{Token: token, HTTP: c.HTTP})
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// Answer reads the answer of one call of the generated client:
//
//	st, raw := stack.Answer(t, &out)(client.API(t, token).GetEntity(ctx, ref))
//
// is its status and body, the JSON decoded into out when the status is 2xx and out is not
// nil. An api that cannot be reached fails the test.
func Answer(tb testing.TB, out any) func(*http.Response, error) (int, []byte) {
	return func(resp *http.Response, err error) (int, []byte) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			tb.Fatal(err)
		}
		if out != nil && resp.StatusCode < 300 {
			if err := json.Unmarshal(raw, out); err != nil {
				tb.Fatalf("%s %s: decode %s: %v", resp.Request.Method, resp.Request.URL.RequestURI(), raw, err)
			}
		}
		return resp.StatusCode, raw
	}
}

// OK is Answer that fails the test unless the api answers 2xx.
func OK(tb testing.TB, out any) func(*http.Response, error) {
	return func(resp *http.Response, err error) {
		tb.Helper()
		if st, raw := Answer(tb, out)(resp, err); st < 200 || st > 299 {
			tb.Fatalf("%s %s: %d %s", resp.Request.Method, resp.Request.URL.RequestURI(), st, raw)
		}
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
