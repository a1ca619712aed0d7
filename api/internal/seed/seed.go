// Package seed loads the seed files (ontology, inventory, knowledge) into the graph and
// reports drift between the seeds and the database (docs/behaviours.md G9).
//
// Ingest is idempotent by construction: it reads what the database holds once, computes
// the difference, and writes only that difference through the graph service's bulk path
// (audit row and event per change, checks re-derived, all in one transaction). A second
// ingest of the same seeds therefore writes nothing at all: no row, edge, audit entry or
// event. The original re-seed aborted on a check row pointing at an id that was never
// stored; here check writes are upserts by slug that reuse the stored id.
//
// Seeds never take facts away: an attribute the seed does not mention is kept (it may have
// been learned at run time), a seed value is written only where it differs, and an entity's
// state is seeded only when the entity is created (afterwards it follows its lifecycle).
package seed

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/graphstore"
	"github.com/oikos-hq/oikos/api/internal/storage/readmodel"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/seedfile"
)

// DefaultActor is the audit actor of seed writes.
const DefaultActor = "seed"

// seedLockKey serialises ingests: two api processes starting together must not both
// create the same entities.
const seedLockKey = 0x6f696b6f73_5eed

// Options configure an ingest.
type Options struct {
	// Actor names the writer in audit rows and events; DefaultActor when empty.
	Actor  string
	Logger zerolog.Logger
}

// Report says what an ingest did.
type Report struct {
	// Created counts entities and knowledge documents created.
	Created int `json:"created"`
	// Updated counts entities whose attributes, and documents whose text, changed.
	Updated int `json:"updated"`
	// Unchanged counts seeded entities and documents that needed no write.
	Unchanged int `json:"unchanged"`
	// EdgesCreated counts relationships (about edges included) created.
	EdgesCreated int `json:"edges_created"`
	// ChecksChanged counts check definitions added, updated or disabled.
	ChecksChanged int `json:"checks_changed"`
	// OntologyChanged says whether entity_types / relationship_types were written.
	OntologyChanged bool `json:"ontology_changed"`
	// Duration of the ingest.
	Duration time.Duration `json:"duration"`
}

// String renders the report for the CLI and logs.
func (r Report) String() string {
	return fmt.Sprintf("created %d, updated %d, unchanged %d, edges created %d, checks changed %d, ontology changed %t (%s)",
		r.Created, r.Updated, r.Unchanged, r.EdgesCreated, r.ChecksChanged, r.OntologyChanged, r.Duration.Round(time.Millisecond))
}

// Validate checks the seeds against the ontology and against the rules the graph service
// applies on write, so that a bad seed fails before anything is written, with every problem
// named by file, line, entity and field. Problems are *seedfile.Error values (matching
// seedfile.ErrInvalidSeed), joined.
func Validate(o *ontology.Ontology, inv *seedfile.Inventory, kn *seedfile.KnowledgeSet) error {
	if o == nil {
		return errors.New("seed: no ontology")
	}
	inv, kn = orEmpty(inv, kn)
	if err := errors.Join(inv.Validate(o), kn.Validate(o, inv)); err != nil {
		return err
	}
	var errs []error
	file := fileName(inv.File, seedfile.DefaultInventoryFile)
	for _, e := range inv.Entities {
		in := graph.CreateEntityInput{Type: e.Type, Name: e.Name, State: e.State, Attributes: e.Attributes}
		if err := graph.ValidateCreate(o, in); err != nil {
			errs = append(errs, seedError(file, e.Line, e.Slug(), err))
		}
	}
	file = fileName(kn.File, seedfile.DefaultKnowledgeFile)
	for _, d := range kn.Documents {
		in := graph.KnowledgeInput{Slug: d.Slug, Kind: d.Kind, Title: d.Title, Body: d.Body, Tags: d.Tags}
		if err := graph.ValidateKnowledge(o, in); err != nil {
			errs = append(errs, seedError(file, d.Line, d.Slug, err))
		}
	}
	return errors.Join(errs...)
}

func seedError(file string, line int, entity string, err error) error {
	e := &seedfile.Error{File: file, Line: line, Entity: entity, Reason: err.Error(), Err: err}
	var ve *graph.ValidationError
	if errors.As(err, &ve) {
		e.Field, e.Reason = ve.Field, ve.Reason
	}
	return e
}

func fileName(f, def string) string {
	if f == "" {
		return def
	}
	return f
}

func orEmpty(inv *seedfile.Inventory, kn *seedfile.KnowledgeSet) (*seedfile.Inventory, *seedfile.KnowledgeSet) {
	if inv == nil {
		inv = &seedfile.Inventory{File: seedfile.DefaultInventoryFile}
	}
	if kn == nil {
		kn = &seedfile.KnowledgeSet{File: seedfile.DefaultKnowledgeFile}
	}
	return inv, kn
}

// Ingest stores the ontology and brings the graph up to the seeds in one transaction:
// missing entities, edges and documents are created, differing seeded attributes and
// document text updated, and the checks of every seeded entity re-derived. It validates
// everything first and changes nothing when any seed is invalid. Afterwards svc validates
// against o.
func Ingest(ctx context.Context, svc *graph.Service, o *ontology.Ontology, inv *seedfile.Inventory, kn *seedfile.KnowledgeSet, opts Options) (Report, error) {
	start := time.Now()
	if err := Validate(o, inv, kn); err != nil {
		return Report{}, err
	}
	inv, kn = orEmpty(inv, kn)
	corr, err := graph.NewID()
	if err != nil {
		return Report{}, err
	}
	actor := opts.Actor
	if actor == "" {
		actor = DefaultActor
	}
	m := graph.Meta{Actor: actor, CorrelationID: corr}
	var rep Report
	err = storage.InTx(ctx, svc.Pool(), func(tx storage.DB) error {
		st := graphstore.On(tx)
		if err := st.AdvisoryLock(ctx, int64(seedLockKey)); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
		var err error
		if rep.OntologyChanged, err = svc.SyncOntologyTx(ctx, tx, o); err != nil {
			return err
		}
		slugs := seedSlugs(inv, kn)
		// Every existing entity the ingest may write, or re-derive the checks of, is locked
		// first, in one id-ordered statement: a concurrent mutation either finishes before
		// the ingest reads it or waits for the ingest, so the ingest never derives checks from
		// a stale read, and its row locks are never taken in an order that could deadlock
		// against a mutation holding the outbox lock.
		if err := st.LockSlugs(ctx, slugs); err != nil {
			return fmt.Errorf("seed: lock entities: %w", err)
		}
		state, err := readState(ctx, readmodel.New(tx, nil), slugs)
		if err != nil {
			return err
		}
		p := compare(inv, kn, state)
		res, err := svc.ApplyBulk(ctx, tx, m, o, p.bulk)
		if err != nil {
			return fmt.Errorf("seed: %w", err)
		}
		entities := make([]string, 0, len(inv.Entities))
		for _, e := range inv.Entities {
			entities = append(entities, e.Slug())
		}
		if rep.ChecksChanged, err = svc.SyncChecksBulk(ctx, tx, m, o, entities); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
		rep.Created = res.Created + res.KnowledgeCreated
		rep.Updated = res.Updated + res.KnowledgeUpdated
		rep.Unchanged = len(inv.Entities) + len(kn.Documents) - rep.Created - rep.Updated
		rep.EdgesCreated = res.EdgesCreated
		return nil
	})
	if err != nil {
		return Report{}, err
	}
	svc.SetOntology(o)
	rep.Duration = time.Since(start)
	opts.Logger.Info().Int("created", rep.Created).Int("updated", rep.Updated).Int("unchanged", rep.Unchanged).
		Int("edges_created", rep.EdgesCreated).Int("checks_changed", rep.ChecksChanged).
		Bool("ontology_changed", rep.OntologyChanged).Dur("took", rep.Duration).Msg("seed ingested")
	return rep, nil
}

// seedSlugs lists every slug the seeds mention (entities, documents, about targets).
func seedSlugs(inv *seedfile.Inventory, kn *seedfile.KnowledgeSet) []string {
	set := map[string]bool{}
	for _, e := range inv.Entities {
		set[e.Slug()] = true
	}
	for _, e := range inv.Relationships {
		set[e.Source], set[e.Target] = true, true
	}
	for _, d := range kn.Documents {
		set[d.Slug] = true
		for _, a := range d.About {
			set[a] = true
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	return out
}
