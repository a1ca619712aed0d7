// Package apiclient is the Go client of the Oikos api: api.gen.go is generated from
// api/openapi.yaml by oapi-codegen (scripts/gen-api-client.sh; never edit it by hand), and
// this file is the thin layer beside it that every caller shares (the CLI, the agent, the
// end-to-end tests): a constructor with the base URL, a bearer token and an http.Client,
// request editors for the per-call headers (token, correlation id, any other), and one error
// type, *APIError, for every answer outside 2xx (the api's problem+json, decoded).
//
// The generated *Client returns the raw *http.Response of each operation; Read, Decode and
// Expect turn it into the answer or an *APIError:
//
//	c, _ := apiclient.New(base, apiclient.Options{Token: tok})
//	ex, err := apiclient.Decode[apiclient.Execution](c.GetExecution(ctx, id))
//
// Streams (text/event-stream) are not read here: their readers stay with their callers.
package apiclient

//go:generate ../../scripts/gen-api-client.sh

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// MaxBody bounds what Read reads of one answer.
const MaxBody = 32 << 20

// Options are what New needs besides the base URL.
type Options struct {
	// Token is sent as `Authorization: Bearer <Token>` with every request (none when empty;
	// a per-call WithToken overrides it).
	Token string
	// HTTP sends the requests (nil: a plain http.Client). Its timeout is the caller's.
	HTTP HttpRequestDoer
	// Header is sent with every request (e.g. an identity header); per-call editors run
	// after it and may override it.
	Header http.Header
}

// New returns the generated client for the api at base (http(s)://host[:port], any trailing
// slash dropped). Every request asks for JSON unless an editor says otherwise.
func New(base string, o Options) (*Client, error) {
	base = strings.TrimRight(base, "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("api url %q: want http(s)://host:port", base)
	}
	opts := []ClientOption{WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		if req.Header.Get("Accept") == "" {
			req.Header.Set("Accept", "application/json")
		}
		for k, vs := range o.Header {
			req.Header[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
		}
		if o.Token != "" {
			req.Header.Set("Authorization", "Bearer "+o.Token)
		}
		return nil
	})}
	if o.HTTP != nil {
		opts = append(opts, WithHTTPClient(o.HTTP))
	}
	return NewClient(base, opts...)
}

// WithToken sends token as the bearer token of one call (none when empty: the client's own,
// if any, stays).
func WithToken(token string) RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		return nil
	}
}

// WithCorrelation sends id as X-Correlation-ID (nothing when empty): the api puts it on the
// audit row and the events of what the call changes.
func WithCorrelation(id string) RequestEditorFn { return WithHeader("X-Correlation-ID", id) }

// WithHeader sets one header on one call (nothing when value is empty).
func WithHeader(name, value string) RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		if value != "" {
			req.Header.Set(name, value)
		}
		return nil
	}
}

// APIError is an api answer outside 2xx: its problem+json (RFC 9457) decoded, or, when the body
// is not one, the status's text and the body as the detail.
type APIError struct {
	Status int    `json:"status"`
	Type   string `json:"type,omitempty"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
	// Field is the (first) field at fault, when the api named one.
	Field  string       `json:"field,omitempty"`
	Errors []FieldIssue `json:"errors,omitempty"`
	// The extensions some problems carry: a machine-readable code, the pending approval a
	// change waits on, the risk class that decided it.
	Code          string `json:"code,omitempty"`
	ApprovalID    string `json:"approval_id,omitempty"`
	RiskClass     string `json:"risk_class,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
	// Body is the answer as it came (bounded by MaxBody).
	Body []byte `json:"-"`
}

// Error is "STATUS Title: detail (field F)".
func (e *APIError) Error() string {
	msg := fmt.Sprintf("%d %s", e.Status, e.Title)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Field != "" {
		msg += " (field " + e.Field + ")"
	}
	return msg
}

// ProblemOf decodes the answer of a status outside 2xx.
func ProblemOf(status int, body []byte) *APIError {
	e := &APIError{}
	if json.Unmarshal(body, e) != nil || e.Title == "" {
		e = &APIError{Title: http.StatusText(status), Detail: strings.TrimSpace(string(body))}
	}
	e.Status, e.Body = status, body
	return e
}

// StatusOf returns the api status of err (0 when err is not an api answer).
func StatusOf(err error) int {
	var e *APIError
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// ReadLimit returns the body of a 2xx answer (at most limit bytes; MaxBody when limit is 0) and
// closes it; any other answer is an *APIError. A transport error (err) comes back as it is.
func ReadLimit(resp *http.Response, err error, limit int64) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if limit <= 0 {
		limit = MaxBody
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, fmt.Errorf("read the answer of %s: %w", describe(resp), err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return raw, ProblemOf(resp.StatusCode, raw)
	}
	return raw, nil
}

// Read is ReadLimit with MaxBody.
func Read(resp *http.Response, err error) ([]byte, error) { return ReadLimit(resp, err, 0) }

// Decode reads a 2xx answer (see Read) and decodes its JSON into a T (an empty body leaves
// T's zero value).
func Decode[T any](resp *http.Response, err error) (T, error) {
	raw, err := Read(resp, err)
	if err != nil {
		var zero T
		return zero, err
	}
	return DecodeBody[T](resp, raw)
}

// DecodeBody decodes raw, the body of the 2xx answer resp (as Read or ReadLimit returned
// it), into a T; an empty body leaves T's zero value. For a client that reads the answer
// its own way (its own bound, its own error words) and decodes it like Decode.
func DecodeBody[T any](resp *http.Response, raw []byte) (T, error) {
	var out T
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			return out, fmt.Errorf("decode answer of %s: %w", describe(resp), err)
		}
	}
	return out, nil
}

// Expect reads a 2xx answer (see Read) and discards it.
func Expect(resp *http.Response, err error) error {
	_, err = Read(resp, err)
	return err
}

// describe is "METHOD /path?query" of the request resp answers.
func describe(resp *http.Response) string {
	if resp == nil || resp.Request == nil || resp.Request.URL == nil {
		return "the request"
	}
	return resp.Request.Method + " " + resp.Request.URL.RequestURI()
}

// Ptr is a pointer to v, for the generated models' optional fields and parameters.
func Ptr[T any](v T) *T { return &v }

// Opt is a pointer to v, or nil when v is its type's zero value (an optional field left out).
func Opt[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

// ContentJSON is the content type of the generated ...WithBody calls' JSON bodies.
const ContentJSON = "application/json"

// JSONBody is v as a JSON request body for a generated ...WithBody call, for a body built at
// run time (a map); a value that cannot be encoded fails the request with the encoding error.
func JSONBody(v any) io.Reader {
	b, err := json.Marshal(v)
	if err != nil {
		return errReader{fmt.Errorf("encode request: %w", err)}
	}
	return bytes.NewReader(b)
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
