package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
)

// MaxBodyBytes caps a request body; a larger one is refused with 413 before it is parsed.
const MaxBodyBytes = 1 << 20

// Pagination bounds.
const (
	defaultLimit = 50
	maxLimit     = 500
)

// decodeJSON reads the request body into dst strictly: the body must be one JSON value of
// the right shape, with no unknown fields and nothing after it. Malformed JSON is a 400;
// an unknown field or a value of the wrong type is a 422 naming the field.
func decodeJSON(c echo.Context, dst any) error {
	req := c.Request()
	if ct := req.Header.Get(echo.HeaderContentType); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return &apiError{status: http.StatusUnsupportedMediaType, kind: "unsupported-media-type",
				detail: fmt.Sprintf("Content-Type %q: send application/json", ct)}
		}
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return mbe
		}
		return badRequest("", "read body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("", "a JSON request body is required")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("", "the body must hold a single JSON value; found more after it")
	}
	return nil
}

// jsonError turns an encoding/json error into a problem naming the field where it can.
func jsonError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return badRequest("", "malformed JSON at byte %d: %v", se.Offset, err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "malformed JSON: the body ends early")
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return unprocessable("", "the body must be a JSON object, got %s", te.Value)
		}
		return unprocessable(field, "expected %s, got %s", jsonKind(te.Type.Kind().String()), te.Value)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return unprocessable(name, "unknown field %q", name)
	}
	return badRequest("", "malformed JSON: %v", err)
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

// param returns a path parameter, unescaped (a slug may carry %2F).
func param(c echo.Context, name string) (string, error) {
	v, err := url.PathUnescape(c.Param(name))
	if err != nil || v == "" {
		return "", badRequest(name, "malformed path parameter")
	}
	return v, nil
}

// listParam splits a comma-separated query parameter, dropping empty parts; it also accepts
// the parameter repeated.
func listParam(c echo.Context, name string) []string {
	var out []string
	for _, v := range c.QueryParams()[name] {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// oneOf checks that every value is allowed.
func oneOf(field string, values, allowed []string) error {
	for _, v := range values {
		ok := false
		for _, a := range allowed {
			ok = ok || a == v
		}
		if !ok {
			return unprocessable(field, "%q is not one of %s", v, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// intParam parses an optional integer query parameter within [lo, hi].
func intParam(c echo.Context, name string, def, lo, hi int64) (int64, error) {
	v := c.QueryParam(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, badRequest(name, "must be an integer from %d to %d", lo, hi)
	}
	return n, nil
}

// boolParam parses an optional boolean query parameter.
func boolParam(c echo.Context, name string) (bool, error) {
	v := c.QueryParam(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest(name, "must be true or false")
	}
	return b, nil
}

// page reads limit and cursor. The cursor is opaque to clients: base64url of the sort key
// of the last item seen.
func page(c echo.Context) (limit int, after string, err error) {
	l, err := intParam(c, "limit", defaultLimit, 1, maxLimit)
	if err != nil {
		return 0, "", err
	}
	if cur := c.QueryParam("cursor"); cur != "" {
		b, err := base64.RawURLEncoding.DecodeString(cur)
		if err != nil || len(b) == 0 {
			return 0, "", badRequest("cursor", "malformed cursor; pass next_cursor from the previous page unchanged")
		}
		after = string(b)
	}
	return int(l), after, nil
}

// List is the shape of every list answer.
type List[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// listOf wraps a page's items, encoding the next key as a cursor.
func listOf[T any](items []T, next string) List[T] {
	l := List[T]{Items: items}
	if l.Items == nil {
		l.Items = []T{}
	}
	if next != "" {
		cur := base64.RawURLEncoding.EncodeToString([]byte(next))
		l.NextCursor = &cur
	}
	return l
}

// versionPrecondition reads the expected version from If-Match ("3", W/"3" or 3) and the
// body's expected_version; both may be given only if they agree.
func versionPrecondition(c echo.Context, body *int64) (*int64, error) {
	h := strings.TrimSpace(c.Request().Header.Get("If-Match"))
	if h == "" {
		return body, nil
	}
	h = strings.Trim(strings.TrimPrefix(h, "W/"), `"`)
	v, err := strconv.ParseInt(h, 10, 64)
	if err != nil || v < 1 {
		return nil, badRequest("If-Match", "If-Match must be the entity's version as an ETag, e.g. \"3\"")
	}
	if body != nil && *body != v {
		return nil, badRequest("expected_version", "expected_version %d disagrees with If-Match %d", *body, v)
	}
	return &v, nil
}
