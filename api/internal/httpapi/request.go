package httpapi

import (
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/request"
)

// The handlers' short names for api/internal/request, which holds the one copy of these
// rules for every HTTP surface of the api. They keep the handler files (some edited by
// others in parallel) unchanged; each only forwards.

func badRequest(field, format string, args ...any) error {
	return request.BadRequest(field, format, args...)
}

func unprocessable(field, format string, args ...any) error {
	return request.Unprocessable(field, format, args...)
}

func decodeJSON(c echo.Context, dst any) error { return request.DecodeJSON(c, dst) }

func param(c echo.Context, name string) (string, error) { return request.Param(c, name) }

func listParam(c echo.Context, name string) []string { return request.ListParam(c, name) }

func oneOf(field string, values, allowed []string) error {
	return request.OneOf(field, values, allowed)
}

func intParam(c echo.Context, name string, def, lo, hi int64) (int64, error) {
	return request.IntParam(c, name, def, lo, hi)
}

func boolParam(c echo.Context, name string) (bool, error) { return request.BoolParam(c, name) }

func page(c echo.Context) (limit int, after string, err error) { return request.Page(c) }

func listOf[T any](items []T, next string) request.List[T] { return request.ListOf(items, next) }

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
		return nil, badRequest("If-Match", "If-Match must be the entity's version as an ETag, e.g. \"3\"")
	}
	if body != nil && *body != v {
		return nil, badRequest("expected_version", "expected_version %d disagrees with If-Match %d", *body, v)
	}
	return &v, nil
}
