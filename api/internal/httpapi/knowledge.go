package httpapi

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/api/internal/storage/readmodel"
)

// maxQueryLen bounds a search query; longer ones are not searches but pasted documents.
const maxQueryLen = 500

func (s *Server) searchKnowledge(c echo.Context) error {
	q := strings.TrimSpace(c.QueryParam("q"))
	if q == "" {
		return request.BadRequest("q", "q is required: the words to search for")
	}
	if len(q) > maxQueryLen {
		return request.BadRequest("q", "at most %d characters", maxQueryLen)
	}
	limit, after, err := request.Page(c)
	if err != nil {
		return err
	}
	f := readmodel.SearchFilter{Q: q, Kinds: request.ListParam(c, "kind"), Limit: limit}
	if err := request.OneOf("kind", f.Kinds, readmodel.KnowledgeKinds); err != nil {
		return err
	}
	if after != "" {
		cur, err := readmodel.ParseSearchCursor(after)
		if err != nil {
			return request.BadRequest("cursor", "malformed cursor")
		}
		f.After = &cur
	}
	p, err := s.reader.SearchKnowledge(c.Request().Context(), f)
	return answerPage(c, p, err)
}

func (s *Server) getKnowledge(c echo.Context) error {
	slug, err := request.Param(c, "slug")
	if err != nil {
		return err
	}
	k, err := s.reader.GetKnowledge(c.Request().Context(), slug)
	if err != nil {
		return err
	}
	setETag(c, k.Version)
	return c.JSON(http.StatusOK, k)
}

// upsertKnowledgeBody is the body of PUT /knowledge/{slug}. Kind defaults to the slug's
// prefix (runbook:x is a runbook).
type upsertKnowledgeBody struct {
	Kind  string   `json:"kind"`
	Title string   `json:"title"`
	Body  string   `json:"body"`
	Tags  []string `json:"tags"`
	// About is an optional entity slug the knowledge is about (an about edge is created).
	About string `json:"about"`
}

// upsertKnowledge answers 201 when the document was created and 200 when it was updated in
// place.
func (s *Server) upsertKnowledge(c echo.Context) error {
	slug, err := request.Param(c, "slug")
	if err != nil {
		return err
	}
	var b upsertKnowledgeBody
	if err := request.DecodeJSON(c, &b); err != nil {
		return err
	}
	if b.Kind == "" {
		b.Kind, _, _ = strings.Cut(slug, ":")
	}
	k, created, err := s.deps.Graph.UpsertKnowledge(c.Request().Context(), meta(c), graph.KnowledgeInput{
		Slug: slug, Kind: b.Kind, Title: b.Title, Body: b.Body, Tags: b.Tags, About: b.About})
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	setETag(c, k.Version)
	return c.JSON(status, k)
}

func (s *Server) listKnowledge(c echo.Context) error {
	limit, after, err := request.Page(c)
	if err != nil {
		return err
	}
	kind := c.QueryParam("kind")
	switch kind {
	case "", "document", "investigation", "runbook":
	default:
		return request.BadRequest("kind", "%q is not one of document, investigation, runbook", kind)
	}
	p, err := s.reader.ListKnowledge(c.Request().Context(), kind, after, limit)
	return answerPage(c, p, err)
}

func (s *Server) entityKnowledge(c echo.Context) error {
	ref, limit, after, err := refPage(c)
	if err != nil {
		return err
	}
	id, err := s.reader.ResolveID(c.Request().Context(), ref)
	if err != nil {
		return err
	}
	p, err := s.reader.KnowledgeAbout(c.Request().Context(), id, after, limit)
	return answerPage(c, p, err)
}
