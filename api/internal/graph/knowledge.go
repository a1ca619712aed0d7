package graph

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/graphstore"
	"github.com/oikos-hq/oikos/shared/ontology"
)

// KnowledgeKinds are the kinds a knowledge entity may have; each is also its entity type.
var KnowledgeKinds = storage.KnowledgeKinds

// aboutEdge is the relationship from knowledge to what it is about.
const aboutEdge = storage.AboutEdge

// knowledgeDoc is the audited view of a knowledge entity.
type knowledgeDoc struct {
	ID      string   `json:"id"`
	Slug    string   `json:"slug"`
	Kind    string   `json:"kind"`
	Title   string   `json:"title"`
	Body    string   `json:"body"`
	Tags    []string `json:"tags"`
	Version int64    `json:"version"`
}

// ValidateKnowledge checks a knowledge upsert exactly as UpsertKnowledge will, without
// touching the database.
func ValidateKnowledge(o *ontology.Ontology, in KnowledgeInput) error {
	_, err := validateKnowledge(o, in)
	return err
}

// validateKnowledge checks a knowledge upsert and returns the name part of the slug.
func validateKnowledge(o *ontology.Ontology, in KnowledgeInput) (string, error) {
	if !slices.Contains(KnowledgeKinds, in.Kind) {
		return "", invalid("kind", ErrInvalid, "kind %q is not one of %s", in.Kind, strings.Join(KnowledgeKinds, ", "))
	}
	prefix, name, ok := strings.Cut(in.Slug, ":")
	if !ok || prefix != in.Kind {
		return "", invalid("slug", ErrInvalid, "slug %q must be %s:<name>", in.Slug, in.Kind)
	}
	if err := ValidateName(name); err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			ve.Field = "slug"
		}
		return "", err
	}
	if t, ok := o.Type(in.Kind); !ok || t.Abstract {
		return "", typeError(fmt.Errorf("%w: the ontology has no concrete type %q", ontology.ErrUnknownType, in.Kind))
	}
	if strings.TrimSpace(in.Title) == "" {
		return "", invalid("title", ErrInvalid, "title is required")
	}
	for i, t := range in.Tags {
		if strings.TrimSpace(t) == "" {
			return "", invalid(fmt.Sprintf("tags[%d]", i), ErrInvalid, "tags must not be empty")
		}
	}
	return name, nil
}

// UpsertKnowledge creates or updates a document, investigation or runbook by slug. A new
// title (or body, or tags) updates the same entity in place; an unchanged document writes
// nothing. With About, an about edge to that entity is created when missing.
func (s *Service) UpsertKnowledge(ctx context.Context, m Meta, in KnowledgeInput) (Knowledge, bool, error) {
	if err := checkMeta(m); err != nil {
		return Knowledge{}, false, err
	}
	o := s.Ontology()
	name, err := validateKnowledge(o, in)
	if err != nil {
		return Knowledge{}, false, err
	}
	if in.Tags == nil {
		in.Tags = []string{}
	}
	var out Knowledge
	var created bool
	err = s.inTx(ctx, func(st *graphstore.Store) error {
		// The document and the entity it is about are locked together in id order (as
		// every path that locks two entities does), so this never deadlocks with a
		// relationship change or a seed ingest holding one of them.
		if err := st.LockSlugs(ctx, []string{in.Slug, in.About}); err != nil {
			return fmt.Errorf("lock %s: %w", in.Slug, err)
		}
		var about Entity
		if in.About != "" {
			// Locked now, before the document's event takes the outbox lock: the about edge
			// re-derives the checks of its ends under their row locks, and waiting for one
			// while holding the outbox lock could deadlock with a PATCH of that entity.
			if about, err = st.GetEntity(ctx, in.About, true); err != nil {
				return fieldNotFound("about", err)
			}
			if err := o.ValidateEdge(aboutEdge, in.Kind, about.Type); err != nil {
				return &ValidationError{Field: "about", Reason: err.Error(), Err: err}
			}
		}
		cur, err := st.GetKnowledge(ctx, in.Slug, true)
		switch {
		case errors.Is(err, ErrNotFound):
			created = true
			if err := s.insertKnowledge(ctx, st, m, o, in, name); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			if err := s.updateKnowledge(ctx, st, m, cur, in); err != nil {
				return err
			}
		}
		doc, err := st.GetEntity(ctx, in.Slug, false)
		if err != nil {
			return err
		}
		if in.About != "" {
			if _, _, err := s.insertEdge(ctx, st, m, aboutEdge, doc, about, map[string]any{}); err != nil {
				return err
			}
		}
		out, err = st.GetKnowledge(ctx, in.Slug, false)
		return err
	})
	if err != nil {
		return Knowledge{}, false, err
	}
	return out, created, nil
}

func (s *Service) insertKnowledge(ctx context.Context, st *graphstore.Store, m Meta, o *ontology.Ontology, in KnowledgeInput, name string) error {
	id, err := newID()
	if err != nil {
		return err
	}
	t, _ := o.Type(in.Kind)
	if err := st.InsertKnowledge(ctx, id, in.Slug, name, t.DefaultState, knowledgeText(in)); err != nil {
		if errors.Is(err, ErrDuplicate) {
			return &ValidationError{Field: "slug", Reason: fmt.Sprintf("%s was created concurrently", in.Slug), Err: ErrDuplicate}
		}
		return err
	}
	after := knowledgeDoc{ID: id, Slug: in.Slug, Kind: in.Kind, Title: in.Title, Body: in.Body, Tags: in.Tags, Version: 1}
	if err := writeAudit(ctx, st, m, "knowledge.upsert", id, nil, after); err != nil {
		return err
	}
	return appendEvent(ctx, st, m, "knowledge.upserted", id, knowledgeEvent(after, true))
}

// knowledgeText is the text an upsert writes.
func knowledgeText(in KnowledgeInput) graphstore.KnowledgeText {
	return graphstore.KnowledgeText{Kind: in.Kind, Title: in.Title, Body: in.Body, Tags: in.Tags}
}

func (s *Service) updateKnowledge(ctx context.Context, st *graphstore.Store, m Meta, cur Knowledge, in KnowledgeInput) error {
	if cur.Type != in.Kind {
		return invalid("kind", ErrInvalid, "%s is a %s, not a %s", cur.Slug, cur.Type, in.Kind)
	}
	if cur.Title == in.Title && cur.Body == in.Body && slices.Equal(cur.Tags, in.Tags) && cur.Kind == in.Kind {
		return nil
	}
	version, err := st.UpdateKnowledge(ctx, cur.ID, cur.Slug, knowledgeText(in))
	if err != nil {
		return err
	}
	before := knowledgeDoc{ID: cur.ID, Slug: cur.Slug, Kind: cur.Kind, Title: cur.Title, Body: cur.Body, Tags: cur.Tags, Version: cur.Version}
	after := knowledgeDoc{ID: cur.ID, Slug: cur.Slug, Kind: in.Kind, Title: in.Title, Body: in.Body, Tags: in.Tags, Version: version}
	if err := writeAudit(ctx, st, m, "knowledge.upsert", cur.ID, before, after); err != nil {
		return err
	}
	return appendEvent(ctx, st, m, "knowledge.upserted", cur.ID, knowledgeEvent(after, false))
}

// knowledgeEvent is the knowledge.upserted payload; the body stays out of the outbox.
func knowledgeEvent(d knowledgeDoc, created bool) map[string]any {
	return map[string]any{"slug": d.Slug, "kind": d.Kind, "title": d.Title, "tags": d.Tags, "version": d.Version, "created": created}
}
