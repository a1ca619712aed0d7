package httpapi

import (
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/request"
)

// meta builds the graph service's Meta for this request: who, through what, and the
// correlation id, so the audit row and the event name the request.
func meta(c echo.Context) graph.Meta {
	m := request.MetaOf(c)
	return graph.Meta{Actor: m.Actor, Role: m.Role, Method: m.Method, Path: m.Path, CorrelationID: m.CorrelationID}
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
		return nil, request.BadRequest("If-Match", "If-Match must be the entity's version as an ETag, e.g. \"3\"")
	}
	if body != nil && *body != v {
		return nil, request.BadRequest("expected_version", "expected_version %d disagrees with If-Match %d", *body, v)
	}
	return &v, nil
}
