package request

import (
	"encoding/base64"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/shared/duration"
)

// Paging bounds of every list endpoint (limit=).
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// Param returns a path parameter, unescaped (a slug may carry %2F); a malformed or empty one
// is a 400 naming it.
func Param(c echo.Context, name string) (string, error) {
	v, err := url.PathUnescape(c.Param(name))
	if err != nil || v == "" {
		return "", BadRequest(name, "malformed path parameter")
	}
	return v, nil
}

// ListParam splits a comma-separated query parameter, dropping empty parts; it also accepts
// the parameter repeated.
func ListParam(c echo.Context, name string) []string {
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

// OneOf checks that every value is allowed; the first that is not is a 422 naming field.
func OneOf(field string, values, allowed []string) error {
	for _, v := range values {
		ok := false
		for _, a := range allowed {
			ok = ok || a == v
		}
		if !ok {
			return Unprocessable(field, "%q is not one of %s", v, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// IntParam parses an optional integer query parameter within [lo, hi]; def when absent.
func IntParam(c echo.Context, name string, def, lo, hi int64) (int64, error) {
	v := c.QueryParam(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, BadRequest(name, "must be an integer from %d to %d", lo, hi)
	}
	return n, nil
}

// BoolParam parses an optional boolean query parameter; false when absent.
func BoolParam(c echo.Context, name string) (bool, error) {
	v := c.QueryParam(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, BadRequest(name, "must be true or false")
	}
	return b, nil
}

// DurationParam parses an optional duration query parameter the one way durations are
// read across Oikos (duration.Parse: "7d", "12h", "90m"; positive); def when absent.
// A bad one is a 400 naming it and saying what is accepted.
func DurationParam(c echo.Context, name string, def time.Duration) (time.Duration, error) {
	v := c.QueryParam(name)
	if v == "" {
		return def, nil
	}
	d, err := duration.Parse(v)
	if err != nil {
		return 0, BadRequest(name, "%v", err)
	}
	return d, nil
}

// SinceParam parses an optional point in time given as a duration back from now ("7d":
// seven days before now) or an RFC 3339 time; ok is false when the parameter is absent. A
// bad one is a 400 naming it.
func SinceParam(c echo.Context, name string, now time.Time) (t time.Time, ok bool, err error) {
	v := c.QueryParam(name)
	if v == "" {
		return time.Time{}, false, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, true, nil
	}
	d, err := duration.Parse(v)
	if err != nil {
		return time.Time{}, false, BadRequest(name, "%v, nor an RFC 3339 time", err)
	}
	return now.Add(-d), true, nil
}

// Page reads limit and cursor. The cursor is opaque to clients: base64url of the sort key of
// the last item seen, as ListOf wrote it; after is that key ("" for the first page).
func Page(c echo.Context) (limit int, after string, err error) {
	l, err := IntParam(c, "limit", DefaultLimit, 1, MaxLimit)
	if err != nil {
		return 0, "", err
	}
	if cur := c.QueryParam("cursor"); cur != "" {
		b, err := base64.RawURLEncoding.DecodeString(cur)
		if err != nil || len(b) == 0 {
			return 0, "", BadRequest("cursor", "malformed cursor; pass next_cursor from the previous page unchanged")
		}
		after = string(b)
	}
	return int(l), after, nil
}

// List is the shape of every list answer: the items (never null) and the cursor of the next
// page (null on the last).
type List[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// ListOf wraps a page's items, encoding next (the sort key of the last item, "" when there
// is no further page) as the cursor Page reads back.
func ListOf[T any](items []T, next string) List[T] {
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
