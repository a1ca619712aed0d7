package request

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// MaxBodyBytes caps a request body; a larger one is refused with 413 before it is parsed.
const MaxBodyBytes = 1 << 20

// Bounds on reading what is left of a refused body (discardBody).
const (
	drainBytes   = 8 << 20
	drainTimeout = 5 * time.Second
)

// LimitBody refuses bodies over MaxBodyBytes: at once when Content-Length says so, else when
// reading passes the limit (DecodeJSON maps that to 413). It guards every body, whatever
// reads it; DecodeJSON caps its own read too, so a route mounted without LimitBody is still
// bounded. Render answers the 413 (see discardBody).
func LimitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Request().ContentLength > MaxBodyBytes {
			return &http.MaxBytesError{Limit: MaxBodyBytes}
		}
		limitBody(c.Request())
		return next(c)
	}
}

// limitedBody is a request body cut off at MaxBodyBytes, like http.MaxBytesReader, that keeps
// the connection's own body so that discardBody can read past the limit.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
	err  error
}

// limitBody caps r's body at MaxBodyBytes (once) and returns it; nil for a request without
// a body.
func limitBody(r *http.Request) *limitedBody {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	if b, ok := r.Body.(*limitedBody); ok {
		return b
	}
	b := &limitedBody{rc: r.Body, left: MaxBodyBytes}
	r.Body = b
	return b
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	// One byte more than is left tells the limit reached from the limit passed.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	if int64(n) <= b.left {
		b.left -= int64(n)
		b.err = err
		return n, err
	}
	n, b.left = int(b.left), 0
	b.err = &http.MaxBytesError{Limit: MaxBodyBytes}
	return n, b.err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// discardBody reads what is left of a refused body, up to drainBytes and for at most
// drainTimeout, and asks for the connection to be closed after the answer. A server that
// answers and closes while the client is still sending makes the client's kernel receive a
// reset, which discards the answer unread (ECONNRESET): read to the end, the close is a
// clean one and the client reads its 413. A body longer than the bound is not read further
// (net/http then half-closes and waits briefly before the close, which usually suffices).
func discardBody(c echo.Context) {
	req := c.Request()
	c.Response().Header().Set(echo.HeaderConnection, "close")
	if req.Body == nil || req.Body == http.NoBody {
		return
	}
	var body io.Reader = req.Body
	if b, ok := req.Body.(*limitedBody); ok {
		body = b.rc
	}
	rc := http.NewResponseController(c.Response())
	_ = rc.SetReadDeadline(time.Now().Add(drainTimeout))
	_, _ = io.CopyN(io.Discard, body, drainBytes)
	_ = rc.SetReadDeadline(time.Time{})
}

// DecodeJSON reads the request body into dst strictly: the body must be one JSON value of
// the right shape, with no unknown fields and nothing after it, at most MaxBodyBytes long.
// A body that is not JSON is a 415, malformed JSON a 400; an unknown field or a value of the
// wrong type is a 422 naming the field and the JSON kind expected.
func DecodeJSON(c echo.Context, dst any) error {
	req := c.Request()
	if ct := req.Header.Get(echo.HeaderContentType); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return UnsupportedMediaType(ct)
		}
	}
	if req.Body == nil || req.Body == http.NoBody {
		return BadRequest("", "a JSON request body is required")
	}
	body, err := io.ReadAll(limitBody(req))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return mbe
		}
		return BadRequest("", "read body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return BadRequest("", "a JSON request body is required")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return BadRequest("", "the body must hold a single JSON value; found more after it")
	}
	return nil
}

// jsonError turns an encoding/json error into a problem naming the field where it can.
func jsonError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return BadRequest("", "malformed JSON at byte %d: %v", se.Offset, err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return BadRequest("", "malformed JSON: the body ends early")
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return Unprocessable("", "the body must be a JSON object, got %s", te.Value)
		}
		return Unprocessable(field, "expected %s, got %s", jsonKind(te.Type.Kind().String()), te.Value)
	}
	// encoding/json has no type for an unknown field; its message is the only place the
	// name is.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return Unprocessable(name, "unknown field %q", name)
	}
	return BadRequest("", "malformed JSON: %v", err)
}

// jsonKind names a Go kind the way a JSON client thinks of it.
func jsonKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"):
		return "integer"
	case strings.HasPrefix(k, "float"):
		return "number"
	case k == "map", k == "struct":
		return "object"
	case k == "slice", k == "array":
		return "array"
	case k == "bool":
		return "boolean"
	}
	return k
}
