package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/api/internal/storage/readmodel"
)

// attrPrefix marks an attribute filter in the entity list's query: attr.vmid=101.
const attrPrefix = "attr."

func (s *Server) listEntities(c echo.Context) error {
	limit, after, err := request.Page(c)
	if err != nil {
		return err
	}
	f := readmodel.EntityFilter{Limit: limit, After: after, States: request.ListParam(c, "state"), Q: c.QueryParam("q")}
	if f.Types, err = s.reader.ExpandTypes("type", request.ListParam(c, "type")); err != nil {
		return err
	}
	if f.NotTypes, err = s.reader.ExpandTypes("not_type", request.ListParam(c, "not_type")); err != nil {
		return err
	}
	f.Health = request.ListParam(c, "health")
	if err := request.OneOf("health", f.Health, readmodel.HealthStates); err != nil {
		return err
	}
	for key, values := range c.QueryParams() {
		name, ok := strings.CutPrefix(key, attrPrefix)
		if !ok {
			continue
		}
		if name == "" {
			return request.BadRequest(key, "attribute filter needs a name: attr.<name>=<value>")
		}
		for _, v := range values {
			f.Attrs = append(f.Attrs, readmodel.AttrMatch{Key: name, Value: v})
		}
	}
	with := request.ListParam(c, "with")
	if err := request.OneOf("with", with, []string{withLastAudited}); err != nil {
		return err
	}
	if len(with) > 0 {
		p, err := s.reader.ListEntitiesAudited(c.Request().Context(), f)
		return answerPage(c, p, err)
	}
	p, err := s.reader.ListEntities(c.Request().Context(), f)
	return answerPage(c, p, err)
}

// withLastAudited is the entity list's with= value that adds last_audited_at to each item.
const withLastAudited = "last_audited"

func (s *Server) getEntity(c echo.Context) error {
	ref, err := request.Param(c, "ref")
	if err != nil {
		return err
	}
	e, err := s.reader.GetEntity(c.Request().Context(), ref)
	if err != nil {
		return err
	}
	setETag(c, e.Version)
	return c.JSON(http.StatusOK, e)
}

func setETag(c echo.Context, version int64) {
	c.Response().Header().Set("ETag", `"`+strconv.FormatInt(version, 10)+`"`)
}

// createEntityBody is the body of POST /entities.
type createEntityBody struct {
	Type       string         `json:"type"`
	Name       string         `json:"name"`
	State      string         `json:"state"`
	Attributes map[string]any `json:"attributes"`
}

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 200

func (s *Server) createEntity(c echo.Context) error {
	var b createEntityBody
	if err := request.DecodeJSON(c, &b); err != nil {
		return err
	}
	m := meta(c)
	m.IdempotencyKey = c.Request().Header.Get("Idempotency-Key")
	if len(m.IdempotencyKey) > maxIdempotencyKey {
		return request.BadRequest("Idempotency-Key", "at most %d characters", maxIdempotencyKey)
	}
	e, replay, err := s.deps.Graph.CreateEntity(c.Request().Context(), m,
		graph.CreateEntityInput{Type: b.Type, Name: b.Name, State: b.State, Attributes: b.Attributes})
	if err != nil {
		return err
	}
	if replay != nil {
		c.Response().Header().Set("Idempotency-Replayed", "true")
		return c.JSONBlob(replay.Status, replay.Body)
	}
	c.Response().Header().Set(echo.HeaderLocation, "/api/v1/entities/"+url.PathEscape(e.Slug))
	setETag(c, e.Version)
	return c.JSON(http.StatusCreated, e)
}

// patchEntityBody is the body of PATCH /entities/{ref}: a shallow merge of attributes (a
// null value deletes the key) with an optional expected version.
type patchEntityBody struct {
	Attributes      map[string]any `json:"attributes"`
	ExpectedVersion *int64         `json:"expected_version"`
}

func (s *Server) patchEntity(c echo.Context) error {
	ref, err := request.Param(c, "ref")
	if err != nil {
		return err
	}
	var b patchEntityBody
	if err := request.DecodeJSON(c, &b); err != nil {
		return err
	}
	if b.Attributes == nil {
		return request.Unprocessable("attributes", "attributes is required: the keys to set (null deletes a key)")
	}
	ver, err := versionPrecondition(c, b.ExpectedVersion)
	if err != nil {
		return err
	}
	e, err := s.deps.Graph.UpdateAttributes(c.Request().Context(), meta(c), ref, b.Attributes, ver)
	if err != nil {
		return err
	}
	setETag(c, e.Version)
	return c.JSON(http.StatusOK, e)
}

// stateBody is the body of POST /entities/{ref}/state.
type stateBody struct {
	State           string `json:"state"`
	ExpectedVersion *int64 `json:"expected_version"`
}

func (s *Server) setState(c echo.Context) error {
	ref, err := request.Param(c, "ref")
	if err != nil {
		return err
	}
	var b stateBody
	if err := request.DecodeJSON(c, &b); err != nil {
		return err
	}
	if b.State == "" {
		return request.Unprocessable("state", "state is required")
	}
	ver, err := versionPrecondition(c, b.ExpectedVersion)
	if err != nil {
		return err
	}
	e, err := s.deps.Graph.SetState(c.Request().Context(), meta(c), ref, b.State, ver)
	if err != nil {
		return err
	}
	setETag(c, e.Version)
	return c.JSON(http.StatusOK, e)
}
