package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"unicode"

	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/checksync"
	"github.com/oikos-hq/oikos/api/internal/storage/graphstore"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/ontology"
)

// Types that have their own write path and are refused by CreateEntity.
const (
	knowledgeRoot = "knowledge"
	checkType     = checksync.CheckType
)

// Relationship types whose live sources block a no_live_dependents transition.
var dependentEdgeTypes = []string{"depends-on", "runs-on", "routes-to"}

// GetEntity returns an entity by slug or id, with its health.
func (s *Service) GetEntity(ctx context.Context, ref string) (Entity, error) {
	return s.store.GetEntity(ctx, ref, false)
}

// snapshot is the audited view of an entity, as its audit rows and entity.created events
// carry it: the store's Entity (id, slug, type, name, state, attributes, version) without
// its health, which the scheduler owns and changes without an audit row, and without its
// timestamps, which the audit row and the event have of their own. The shadowing members
// below are always nil, so encoding/json leaves those members out.
type snapshot struct {
	storage.Entity
	CreatedAt    *struct{} `json:"created_at,omitempty"`
	UpdatedAt    *struct{} `json:"updated_at,omitempty"`
	Health       *struct{} `json:"health,omitempty"`
	HealthReason *struct{} `json:"health_reason,omitempty"`
	LastCheckAt  *struct{} `json:"last_check_at,omitempty"`
}

func snap(e Entity) snapshot { return snapshot{Entity: e} }

// ValidateName checks an entity name: non-empty, at most 200 characters, and free of
// whitespace, control characters and URL delimiters, since the slug appears in paths.
func ValidateName(name string) error {
	switch {
	case name == "":
		return invalid("name", ErrInvalid, "name is required")
	case len(name) > 200:
		return invalid("name", ErrInvalid, "name is longer than 200 characters")
	case strings.IndexFunc(name, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || strings.ContainsRune("/?#%\\", r)
	}) >= 0:
		return invalid("name", ErrInvalid, "name %q contains whitespace, a control character or one of / ? # %% \\", name)
	}
	return nil
}

// refuseSchedulerOwned refuses any scheduler-owned key in attrs.
func refuseSchedulerOwned(attrs map[string]any) error {
	for _, k := range SchedulerOwnedKeys {
		if _, ok := attrs[k]; ok {
			return &ValidationError{Field: "attributes." + k, Reason: ErrSchedulerOwned.Error(), Err: ErrSchedulerOwned}
		}
	}
	return nil
}

// typeError maps an ontology type error to the field "type".
func typeError(err error) error {
	return &ValidationError{Field: "type", Reason: err.Error(), Err: err}
}

// attributeError maps ValidateAttributes' joined FieldErrors to a ValidationError naming
// the first offending attribute (the reason lists them all).
func attributeError(err error) error {
	if errors.Is(err, ontology.ErrUnknownType) || errors.Is(err, ontology.ErrAbstractType) {
		return typeError(err)
	}
	var fe *ontology.FieldError
	if errors.As(err, &fe) {
		reason := err.Error()
		return &ValidationError{Field: "attributes." + fe.Field, Reason: strings.ReplaceAll(reason, "\n", "; "), Err: err}
	}
	return &ValidationError{Field: "attributes", Reason: err.Error(), Err: err}
}

// ValidateCreate checks a create against the ontology exactly as CreateEntity will, without
// touching the database (the seed ingest checks a whole file before writing anything).
func ValidateCreate(o *ontology.Ontology, in CreateEntityInput) error {
	_, err := validateCreate(o, in)
	return err
}

// validateCreate checks a create against the ontology and returns the state to store.
func validateCreate(o *ontology.Ontology, in CreateEntityInput) (string, error) {
	if in.Type == "" {
		return "", invalid("type", ErrInvalid, "type is required")
	}
	t, ok := o.Type(in.Type)
	if !ok {
		return "", typeError(fmt.Errorf("%w: %q", ontology.ErrUnknownType, in.Type))
	}
	if t.Abstract {
		return "", typeError(fmt.Errorf("%w: %q cannot be instantiated; use one of its subtypes", ontology.ErrAbstractType, in.Type))
	}
	if in.Type == checkType {
		return "", invalid("type", ErrInvalid, "check entities are derived from the monitoring the ontology declares; "+
			"set the entity's attributes (or its `monitoring` attribute) instead of creating a check")
	}
	if o.IsA(in.Type, knowledgeRoot) {
		return "", invalid("type", ErrInvalid, "%s entities are written with the knowledge upsert (by slug), not created here", in.Type)
	}
	if err := ValidateName(in.Name); err != nil {
		return "", err
	}
	if err := refuseSchedulerOwned(in.Attributes); err != nil {
		return "", err
	}
	state := in.State
	if state == "" {
		state = t.DefaultState
	} else if err := o.ValidateState(in.Type, state); err != nil {
		return "", &ValidationError{Field: "state", Reason: err.Error(), Err: err}
	}
	if err := o.ValidateAttributes(in.Type, in.Attributes, true); err != nil {
		return "", attributeError(err)
	}
	return state, nil
}

// normalizeAttrs round-trips attributes through JSON so they compare equal to what jsonb
// gives back (float64 numbers, []any lists), whoever built them.
func normalizeAttrs(attrs map[string]any) (map[string]any, error) {
	if attrs == nil {
		return map[string]any{}, nil
	}
	b, err := json.Marshal(attrs)
	if err != nil {
		return nil, invalid("attributes", ErrInvalid, "attributes cannot be encoded as JSON: %v", err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("normalize attributes: %w", err)
	}
	return out, nil
}

// CreateEntity validates and creates an entity, writes its audit row and entity.created
// event, derives its checks, and, with an idempotency key, records the response, all in one
// transaction. A replay of the same key and body returns the stored response instead.
func (s *Service) CreateEntity(ctx context.Context, m Meta, in CreateEntityInput) (Entity, *Replay, error) {
	if err := checkMeta(m); err != nil {
		return Entity{}, nil, err
	}
	var out Entity
	var replay *Replay
	err := s.inTx(ctx, func(st *graphstore.Store) error {
		var idem *idempotency
		if m.IdempotencyKey != "" {
			var err error
			idem, replay, err = beginIdempotent(ctx, st, m, in)
			if err != nil || replay != nil {
				return err
			}
		}
		var err error
		if out, err = s.createEntity(ctx, st, m, in); err != nil {
			return err
		}
		if idem != nil {
			return idem.finish(ctx, st, 201, out)
		}
		return nil
	})
	if err != nil {
		return Entity{}, nil, err
	}
	return out, replay, nil
}

// CreateEntityTx is CreateEntity (without idempotency) inside the caller's transaction, for
// services whose own rows must commit together with the entity (executions).
func (s *Service) CreateEntityTx(ctx context.Context, tx storage.DB, m Meta, in CreateEntityInput) (Entity, error) {
	return s.createEntity(ctx, s.on(tx), m, in)
}

func (s *Service) createEntity(ctx context.Context, st *graphstore.Store, m Meta, in CreateEntityInput) (Entity, error) {
	if err := checkMeta(m); err != nil {
		return Entity{}, err
	}
	o := s.Ontology()
	state, err := validateCreate(o, in)
	if err != nil {
		return Entity{}, err
	}
	attrs, err := normalizeAttrs(in.Attributes)
	if err != nil {
		return Entity{}, err
	}
	id, err := newID()
	if err != nil {
		return Entity{}, err
	}
	slug := in.Type + ":" + in.Name
	if err := st.InsertEntity(ctx, id, slug, in.Type, in.Name, state, attrs); err != nil {
		if errors.Is(err, ErrDuplicate) {
			return Entity{}, &ValidationError{Field: "name", Reason: fmt.Sprintf("an entity %s already exists", slug), Err: ErrDuplicate}
		}
		return Entity{}, err
	}
	created, err := st.GetEntity(ctx, id, false)
	if err != nil {
		return Entity{}, err
	}
	if err := writeAudit(ctx, st, m, "entity.create", id, nil, snap(created)); err != nil {
		return Entity{}, err
	}
	if err := appendEvent(ctx, st, m, "entity.created", id, snap(created)); err != nil {
		return Entity{}, err
	}
	if err := s.syncChecks(ctx, st, m, o, created); err != nil {
		return Entity{}, err
	}
	// Re-read: check derivation may have given it an entity_status row.
	return st.GetEntity(ctx, id, false)
}

// UpdateAttributes shallow-merges attrs into the entity's attributes (a null value deletes
// the key). With expectedVersion, a different current version is ErrVersionConflict. An
// update that changes nothing writes nothing.
//
// It runs in its own transaction in two round trips to the database
// (graphstore.Store.UpdateAttributes): the first begins the transaction, locks and reads the
// entity and reads its check definitions; the second writes the entity, its audit row, its
// re-derived checks and its events, and commits. The outbox lock (ADR 0002) is so held only
// while the server executes the end of the second batch.
func (s *Service) UpdateAttributes(ctx context.Context, m Meta, ref string, attrs map[string]any, expectedVersion *int64) (Entity, error) {
	if err := checkMeta(m); err != nil {
		return Entity{}, err
	}
	if err := refuseSchedulerOwned(attrs); err != nil {
		return Entity{}, err
	}
	return s.updateAttributes(ctx, s.store, m, ref, attrs, expectedVersion)
}

// UpdateAttributesTx is UpdateAttributes inside the caller's transaction (the outbox lock is
// then held until the caller commits).
func (s *Service) UpdateAttributesTx(ctx context.Context, tx storage.DB, m Meta, ref string, attrs map[string]any, expectedVersion *int64) (Entity, error) {
	if err := checkMeta(m); err != nil {
		return Entity{}, err
	}
	if err := refuseSchedulerOwned(attrs); err != nil {
		return Entity{}, err
	}
	return s.updateAttributes(ctx, s.on(tx), m, ref, attrs, expectedVersion)
}

// updateAttributes is the one implementation of an attribute update: st pipelines it (on
// the pool, in a transaction of its own; on a transaction, in it) and this decides, between
// its round trips, what the locked entity becomes.
func (s *Service) updateAttributes(ctx context.Context, st *graphstore.Store, m Meta, ref string, attrs map[string]any, expectedVersion *int64) (Entity, error) {
	patch, err := normalizeAttrs(attrs)
	if err != nil {
		return Entity{}, err
	}
	o := s.Ontology()
	// An update that may change the checks of the backup targets the entity holds locks
	// them with it, in id order.
	lockHeld := touchesAny(attrs, checks.HolderAttributes)
	return st.UpdateAttributes(ctx, o, ref, lockHeld, func(l graphstore.Locked) (*graphstore.AttrUpdate, error) {
		cur := l.Entity
		if expectedVersion != nil && *expectedVersion != cur.Version {
			return nil, fmt.Errorf("%w: %s is at version %d, not %d", ErrVersionConflict, cur.Slug, cur.Version, *expectedVersion)
		}
		if cur.Type == checkType {
			return nil, invalid("type", ErrInvalid, "check entities are derived; change the monitored entity instead")
		}
		if err := o.ValidateAttributes(cur.Type, patch, false); err != nil {
			return nil, attributeError(err)
		}
		merged := maps.Clone(cur.Attributes)
		for k, v := range patch {
			if v == nil {
				delete(merged, k)
			} else {
				merged[k] = v
			}
		}
		if reflect.DeepEqual(merged, cur.Attributes) {
			return nil, nil // nothing changes: no version bump, no audit, no event
		}
		next := cur
		next.Attributes, next.Version, next.UpdatedAt = merged, cur.Version+1, l.Now
		payload := map[string]any{"slug": cur.Slug, "type": cur.Type, "version": next.Version, "attributes": patch}
		return &graphstore.AttrUpdate{Next: next, Audit: auditOf(m, "entity.update", cur.ID, snap(cur), snap(next)),
			Event: eventOf(m, "entity.updated", cur.ID), Payload: payload, Checks: eventOf(m, "checks.changed", cur.ID)}, nil
	})
}

// touchesAny reports whether attrs names one of keys.
func touchesAny(attrs map[string]any, keys []string) bool {
	for _, k := range keys {
		if _, ok := attrs[k]; ok {
			return true
		}
	}
	return false
}

// SetState moves the entity to state along a declared transition whose preconditions hold
// (evaluated in the transaction). Moving to the current state is a no-op.
func (s *Service) SetState(ctx context.Context, m Meta, ref, state string, expectedVersion *int64) (Entity, error) {
	if err := checkMeta(m); err != nil {
		return Entity{}, err
	}
	if state == "" {
		return Entity{}, invalid("state", ErrInvalid, "state is required")
	}
	var out Entity
	err := s.inTx(ctx, func(st *graphstore.Store) error {
		var err error
		out, err = s.setState(ctx, st, m, ref, state, expectedVersion)
		return err
	})
	if err != nil {
		return Entity{}, err
	}
	return out, nil
}

// SetStateTx is SetState inside the caller's transaction.
func (s *Service) SetStateTx(ctx context.Context, tx storage.DB, m Meta, ref, state string, expectedVersion *int64) (Entity, error) {
	return s.setState(ctx, s.on(tx), m, ref, state, expectedVersion)
}

func (s *Service) setState(ctx context.Context, st *graphstore.Store, m Meta, ref, state string, expectedVersion *int64) (Entity, error) {
	if err := checkMeta(m); err != nil {
		return Entity{}, err
	}
	if state == "" {
		return Entity{}, invalid("state", ErrInvalid, "state is required")
	}
	o := s.Ontology()
	cur, err := st.GetEntity(ctx, ref, true)
	if err != nil {
		return Entity{}, err
	}
	if expectedVersion != nil && *expectedVersion != cur.Version {
		return Entity{}, fmt.Errorf("%w: %s is at version %d, not %d", ErrVersionConflict, cur.Slug, cur.Version, *expectedVersion)
	}
	pre, err := o.ValidateTransition(cur.Type, cur.State, state)
	if err != nil {
		return Entity{}, &ValidationError{Field: "state", Reason: err.Error(), Err: err}
	}
	if cur.State == state {
		return cur, nil
	}
	if err := checkPreconditions(ctx, st, cur, state, pre); err != nil {
		return Entity{}, err
	}
	next := cur
	next.Version, next.UpdatedAt, err = st.SetState(ctx, cur.ID, state, cur.Version)
	if errors.Is(err, ErrVersionConflict) {
		return Entity{}, fmt.Errorf("%w: %s changed concurrently", ErrVersionConflict, cur.Slug)
	}
	if err != nil {
		return Entity{}, fmt.Errorf("set state of %s: %w", cur.Slug, err)
	}
	next.State = state
	if err := writeAudit(ctx, st, m, "entity.state", cur.ID, snap(cur), snap(next)); err != nil {
		return Entity{}, err
	}
	payload := map[string]any{"slug": cur.Slug, "type": cur.Type, "version": next.Version, "from": cur.State, "to": state}
	if err := appendEvent(ctx, st, m, "entity.state_changed", cur.ID, payload); err != nil {
		return Entity{}, err
	}
	if err := s.syncChecks(ctx, st, m, o, next); err != nil {
		return Entity{}, err
	}
	return st.GetEntity(ctx, cur.ID, false)
}

// checkPreconditions evaluates a transition's preconditions inside the transaction, so no
// dependent can appear between the check and the change.
func checkPreconditions(ctx context.Context, st *graphstore.Store, e Entity, to string, pre []string) error {
	for _, p := range pre {
		switch {
		case p == ontology.PreconditionNoLiveDependents:
			live, err := st.LiveDependents(ctx, e.ID, dependentEdgeTypes)
			if err != nil {
				return fmt.Errorf("check dependents of %s: %w", e.Slug, err)
			}
			deps := make([]string, len(live))
			for i, d := range live {
				deps[i] = d.Slug + " " + d.Type + " it"
			}
			if len(deps) > 0 {
				return &ValidationError{Field: "state", Err: ErrPreconditionFailed,
					Reason: fmt.Sprintf("%s cannot become %s: precondition %s failed: %s (end those relationships or retire the dependents first)",
						e.Slug, to, p, strings.Join(deps, ", "))}
			}
		case strings.HasPrefix(p, ontology.PreconditionHasAttribute):
			name := strings.TrimPrefix(p, ontology.PreconditionHasAttribute)
			if v, ok := e.Attributes[name]; !ok || v == nil || v == "" {
				return &ValidationError{Field: "state", Err: ErrPreconditionFailed,
					Reason: fmt.Sprintf("%s cannot become %s: precondition %s failed: attribute %q is not set", e.Slug, to, p, name)}
			}
		default:
			// An unknown precondition must fail closed: the ontology promised a check the
			// api cannot make.
			return &ValidationError{Field: "state", Err: ErrPreconditionFailed,
				Reason: fmt.Sprintf("%s cannot become %s: precondition %q is not understood by this api", e.Slug, to, p)}
		}
	}
	return nil
}

// target converts an entity for check derivation.
func target(e Entity) checks.Target {
	return checks.Target{ID: e.ID, Slug: e.Slug, Type: e.Type, Name: e.Name, State: e.State, Attributes: e.Attributes}
}

// syncChecks re-derives the checks of es in st's transaction and, when definitions changed,
// appends a checks.changed event and NOTIFYs oikos_checks (delivered at commit).
func (s *Service) syncChecks(ctx context.Context, st *graphstore.Store, m Meta, o *ontology.Ontology, es ...Entity) error {
	all, err := s.deriveChecks(ctx, st, o, es...)
	if err != nil {
		return err
	}
	entityID := ""
	if len(es) == 1 {
		entityID = es[0].ID
	}
	return st.AnnounceChecks(ctx, eventOf(m, "checks.changed", entityID), all)
}

// deriveChecks re-derives and writes the checks of es without announcing them, so a caller
// can append its own event first.
func (s *Service) deriveChecks(ctx context.Context, st *graphstore.Store, o *ontology.Ontology, es ...Entity) (checksync.Changes, error) {
	ts := make([]checks.Target, len(es))
	for i, e := range es {
		ts[i] = target(e)
	}
	return st.SyncChecks(ctx, o, ts...)
}
