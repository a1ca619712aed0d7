package httpapi

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/api/internal/storage/readmodel"
)

// meta builds the graph service's Meta for this request: who, through what, and the
// correlation id, so the audit row and the event name the request.
func meta(c echo.Context) graph.Meta {
	m := request.MetaOf(c)
	return graph.Meta{Actor: m.Actor, Role: m.Role, Method: m.Method, Path: m.Path, CorrelationID: m.CorrelationID}
}

// answerPage answers a read's page in the list envelope, or its error.
func answerPage[T any](c echo.Context, p readmodel.Page[T], err error) error {
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, request.ListOf(p.Items, p.Next))
}

// refPage reads the :ref path parameter and the page (limit, cursor) of a list about it.
func refPage(c echo.Context) (ref string, limit int, after string, err error) {
	if ref, err = request.Param(c, "ref"); err != nil {
		return "", 0, "", err
	}
	limit, after, err = request.Page(c)
	return ref, limit, after, err
}

// idPage reads the page of a list whose cursor is an event or audit id (0 on the first).
func idPage(c echo.Context) (limit int, id int64, err error) {
	limit, after, err := request.Page(c)
	if err != nil {
		return 0, 0, err
	}
	id, err = idCursor(after)
	return limit, id, err
}

// entityParam resolves the optional ?entity= (slug or id) of a filter to the entity's id; ""
// when there is none.
func (s *Server) entityParam(c echo.Context) (string, error) {
	ref := c.QueryParam("entity")
	if ref == "" {
		return "", nil
	}
	return s.reader.ResolveID(c.Request().Context(), ref)
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
