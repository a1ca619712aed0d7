// Package placement is the api's worker that keeps the graph where the guests really run
// (issue #30): whenever the scheduler stores a drift report or a placement sweep that lists
// `moved` guests (a cluster runs them on another node than the graph's host: a migration by
// hand or through Oikos, or HA recovering them), it moves each one in the graph. The
// scheduler never writes the graph; this is the api's half of that contract, as the
// execution registrar is for executions.
//
// A move is one transaction: the guest's current hosts edge ends and one opens from the new
// proxmox-host (through the graph service, so the checks are re-derived through the new
// node's host-hop), the guest's host attribute is rewritten when the guest uses one (drift and
// the resolver read it before the edge), an audit row "guest.move" with actor "drift", and
// exactly one guest.moved event {slug, from, to}. It applies only while the graph still puts
// the guest on the report's `from`, so re-applying a report, or an older report after a
// newer move, changes nothing. A `to` that is not in the graph (a node not added yet) is
// skipped: the report keeps saying so.
package placement

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/placementstore"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/startstop"
)

// Events the follower reads and writes.
const (
	// EventReported and EventPlacement are the scheduler's (scheduler/internal/drift): a
	// drift report, and a placement sweep that found moves, were stored.
	EventReported  = "drift.reported"
	EventPlacement = "drift.placement"
	// EventMoved is appended once per guest moved.
	EventMoved = "guest.moved"
)

// Actor is who the follower's audit rows and events name.
const Actor = "drift"

// hostType is the type a guest's host must be.
const hostType = "proxmox-host"

// Graph is what the follower needs of the graph service; *graph.Service implements it.
type Graph interface {
	Ontology() *ontology.Ontology
	CreateRelationshipTx(ctx context.Context, tx storage.DB, m graph.Meta, typ, source, target string, attrs map[string]any) (graph.Relationship, bool, error)
	EndRelationshipTx(ctx context.Context, tx storage.DB, m graph.Meta, id string) (graph.Relationship, error)
	UpdateAttributesTx(ctx context.Context, tx storage.DB, m graph.Meta, ref string, attrs map[string]any, expectedVersion *int64) (graph.Entity, error)
}

// Options configure a Follower.
type Options struct {
	Bus    *eventbus.Bus
	Pool   *storage.Pool
	Graph  Graph
	Logger zerolog.Logger
	// CatchUp is how far back Start looks for reports with moves (default 2 h): reports stored
	// while the api was down are followed when it starts.
	CatchUp time.Duration
}

// Follower applies the moves of stored drift reports. Start once; Stop is safe twice.
type Follower struct {
	opts  Options
	store *placementstore.Store
	log   zerolog.Logger
	life  startstop.Lifecycle
}

// New builds a Follower; Start subscribes it to the bus.
func New(opts Options) (*Follower, error) {
	if opts.Bus == nil || opts.Pool == nil || opts.Graph == nil {
		return nil, errors.New("placement: Bus, Pool and Graph are required")
	}
	if opts.CatchUp <= 0 {
		opts.CatchUp = 2 * time.Hour
	}
	return &Follower{opts: opts, store: placementstore.New(opts.Pool), log: opts.Logger.With().Str("component", "placement").Logger()}, nil
}

// Start subscribes to the reports' events, follows the recent reports' moves, then each new
// report's, until Stop.
func (f *Follower) Start(ctx context.Context) error {
	sub := f.opts.Bus.Subscribe(64, EventReported, EventPlacement)
	err := f.life.Start(ctx, f.log, "placement", func(ctx context.Context) {
		defer sub.Close()
		f.catchUp(ctx)
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-sub.C:
				if !ok {
					return
				}
				var p struct {
					ReportID string `json:"report_id"`
				}
				if err := json.Unmarshal(ev.Payload, &p); err != nil || p.ReportID == "" {
					continue
				}
				if _, err := f.ApplyReport(ctx, p.ReportID); err != nil && ctx.Err() == nil {
					f.log.Error().Err(err).Str("report", p.ReportID).Msg("follow a drift report's moves")
				}
			}
		}
	})
	if err != nil {
		sub.Close()
	}
	return err
}

// Stop ends the follower. Safe twice.
func (f *Follower) Stop() { f.life.Stop() }

// catchUp follows the moves of the reports finished within CatchUp, oldest first (each move
// applies only from where the graph still has the guest, so order settles any overlap).
func (f *Follower) catchUp(ctx context.Context) {
	ids, err := f.store.ReportsToFollow(ctx, time.Now().Add(-f.opts.CatchUp))
	if err != nil {
		if ctx.Err() == nil {
			f.log.Error().Err(err).Msg("read the drift reports to follow")
		}
		return
	}
	for _, id := range ids {
		if _, err := f.ApplyReport(ctx, id); err != nil && ctx.Err() == nil {
			f.log.Error().Err(err).Str("report", id).Msg("follow a drift report's moves")
		}
	}
}

// ApplyReport applies the moves of report id, each in its own transaction, and returns how
// many changed the graph. One that fails is logged and the others still apply.
func (f *Follower) ApplyReport(ctx context.Context, id string) (int, error) {
	moves, err := f.store.MovedOf(ctx, id)
	if err != nil {
		return 0, err
	}
	applied := 0
	var errs []error
	for _, mv := range moves {
		ok, err := f.Apply(ctx, id, mv)
		if err != nil {
			errs = append(errs, fmt.Errorf("move %s: %w", mv.Slug, err))
			continue
		}
		if ok {
			applied++
		}
	}
	return applied, errors.Join(errs...)
}

// Outcome of one move, for the log.
const (
	skipNoTarget = "its node is not in the graph"
	skipStale    = "the graph no longer has it on the report's from"
)

// Apply moves one guest as the report reportID says, in one transaction; false when nothing
// changed (already there, not from where the report saw it, or its node not in the graph).
func (f *Follower) Apply(ctx context.Context, reportID string, mv placementstore.Move) (bool, error) {
	if mv.To == "" || mv.Slug == "" || mv.From == "" || mv.To == mv.From {
		return false, nil
	}
	o := f.opts.Graph.Ontology()
	m := graph.Meta{Actor: Actor, Role: "scheduler", CorrelationID: reportID}
	moved := false
	skipped := ""
	err := f.store.InTx(ctx, func(st *placementstore.Store, tx storage.DB) error {
		moved, skipped = false, ""
		if err := st.LockMoves(ctx); err != nil {
			return err
		}
		guest, err := st.Guest(ctx, mv.Slug)
		if err != nil {
			return err
		}
		to, err := st.Host(ctx, mv.To)
		if err != nil || !o.IsA(to.Type, hostType) {
			skipped = skipNoTarget
			return nil
		}
		from, err := st.Host(ctx, mv.From)
		if err != nil {
			return err
		}
		edges, err := st.HostsEdges(ctx, guest.ID)
		if err != nil {
			return err
		}
		// Where the graph has the guest now, read as drift reads it: the host attribute
		// first, else the newest hosts edge.
		current := ""
		if guest.HostAttr != "" {
			if current, err = st.ResolveHost(ctx, guest.HostAttr, o.Descendants(hostType)); err != nil {
				return err
			}
		}
		if current == "" && len(edges) > 0 {
			current = edges[len(edges)-1].Source
		}
		if current != mv.From {
			skipped = skipStale
			return nil
		}
		// Every row the move writes is locked before its first event, in id order.
		if err := st.LockEntities(ctx, guest.ID, from.ID, to.ID); err != nil {
			return err
		}
		for _, e := range edges {
			if e.Source == to.Slug {
				continue
			}
			if _, err := f.opts.Graph.EndRelationshipTx(ctx, tx, m, e.ID); err != nil {
				return fmt.Errorf("end %s -hosts-> %s: %w", e.Source, guest.Slug, err)
			}
		}
		if _, _, err := f.opts.Graph.CreateRelationshipTx(ctx, tx, m, "hosts", to.Slug, guest.Slug, nil); err != nil {
			return fmt.Errorf("open %s -hosts-> %s: %w", to.Slug, guest.Slug, err)
		}
		if guest.HostAttr != "" {
			// Keep the attribute's form: a slug stays a slug, a name a name.
			next := to.Name
			if guest.HostAttr == from.Slug {
				next = to.Slug
			}
			if _, err := f.opts.Graph.UpdateAttributesTx(ctx, tx, m, guest.Slug, map[string]any{"host": next}, nil); err != nil {
				return fmt.Errorf("host attribute of %s: %w", guest.Slug, err)
			}
		}
		if err := st.WriteAudit(ctx, audit.Row{Actor: Actor, Action: "guest.move", CorrelationID: reportID, EntityID: guest.ID,
			Before: map[string]any{"host": from.Slug}, After: map[string]any{"host": to.Slug, "node": mv.Node, "report_id": reportID}}); err != nil {
			return err
		}
		if _, err := st.AppendEvent(ctx, eventbus.Event{Type: EventMoved, EntityID: guest.ID, CorrelationID: reportID, Actor: Actor},
			map[string]any{"slug": guest.Slug, "from": from.Slug, "to": to.Slug, "node": mv.Node, "report_id": reportID}); err != nil {
			return err
		}
		moved = true
		return nil
	})
	if err != nil {
		return false, err
	}
	if moved {
		f.log.Info().Str("guest", mv.Slug).Str("from", mv.From).Str("to", mv.To).Msg("guest moved in the graph")
	} else if skipped != "" {
		f.log.Debug().Str("guest", mv.Slug).Str("to", mv.To).Str("why", skipped).Msg("move not applied")
	}
	return moved, nil
}
