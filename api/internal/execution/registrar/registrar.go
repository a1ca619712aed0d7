// Package registrar is the api's worker that keeps the graph in step with executions after
// the fact (docs/behaviours.md G12): it follows the execution.* events, moves each execution's
// entity through its lifecycle, and registers the container a completed pct_create made. The
// scheduler never writes the graph; this is the api's half of that contract. It reads
// executions through api/internal/storage/execstore and writes the graph through the graph
// service, outside any request.
package registrar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/execution"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/execstore"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/safego"
)

// Graph is what the Registrar needs from the graph service (its own transactions:
// the Registrar works after the fact, outside any request). *graph.Service implements it.
type Graph interface {
	GetEntity(ctx context.Context, ref string) (graph.Entity, error)
	CreateEntity(ctx context.Context, m graph.Meta, in graph.CreateEntityInput) (graph.Entity, *graph.Replay, error)
	CreateRelationship(ctx context.Context, m graph.Meta, typ, source, target string, attrs map[string]any) (graph.Relationship, bool, error)
	SetState(ctx context.Context, m graph.Meta, ref, state string, expectedVersion *int64) (graph.Entity, error)
	UpdateAttributes(ctx context.Context, m graph.Meta, ref string, attrs map[string]any, expectedVersion *int64) (graph.Entity, error)
}

// Options configure a Registrar.
type Options struct {
	Bus   *eventbus.Bus
	Pool  *storage.Pool
	Graph Graph
	// Actor names the Registrar on audit rows (default "oikos-api").
	Actor  string
	Logger zerolog.Logger
	// CatchUp is how far back Start looks for completed pct_create executions whose
	// container is not registered yet (default 7 days): events delivered while the api was
	// down are not lost.
	CatchUp time.Duration
}

// Registrar keeps the graph in step with what happened to executions: it moves every
// execution entity through its lifecycle (runnable, denied, running, succeeded, ...) with its
// exit code, and after a pct_create completes it registers the new lxc and the hosts edge
// from its Proxmox host. The scheduler never writes the graph; this is the api's half of
// that contract.
type Registrar struct {
	opts  Options
	store *execstore.Store

	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
	// processed counts handled events (tests wait on it).
	mu        sync.Mutex
	processed int64
	cond      *sync.Cond
}

// New builds a Registrar; Start subscribes it to the bus.
func New(opts Options) (*Registrar, error) {
	if opts.Bus == nil || opts.Pool == nil || opts.Graph == nil {
		return nil, errors.New("execution: the registrar needs a bus, a pool and the graph service")
	}
	if opts.Actor == "" {
		opts.Actor = "oikos-api"
	}
	if opts.CatchUp <= 0 {
		opts.CatchUp = 7 * 24 * time.Hour
	}
	r := &Registrar{opts: opts, store: execstore.New(opts.Pool)}
	r.cond = sync.NewCond(&r.mu)
	return r, nil
}

// Start subscribes to execution events, catches up on completed pct_create executions, and
// handles events until Stop.
func (r *Registrar) Start(ctx context.Context) error {
	sub := r.opts.Bus.Subscribe(256, "execution.")
	ctx, r.cancel = context.WithCancel(ctx)
	r.done = make(chan struct{})
	safego.Go(r.opts.Logger, "execution-registrar", func() {
		defer close(r.done)
		defer sub.Close()
		r.catchUp(ctx)
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-sub.C:
				r.handle(ctx, ev)
				r.mu.Lock()
				r.processed++
				r.cond.Broadcast()
				r.mu.Unlock()
			}
		}
	})
	return nil
}

// Stop ends the Registrar. Safe to call twice.
func (r *Registrar) Stop() {
	r.stopOnce.Do(func() {
		if r.cancel != nil {
			r.cancel()
			<-r.done
		}
	})
}

// Processed returns how many events the Registrar has handled.
func (r *Registrar) Processed() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.processed
}

func (r *Registrar) meta(correlation string) graph.Meta {
	return graph.Meta{Actor: r.opts.Actor, Role: execution.RoleOperator, CorrelationID: correlation}
}

// handle processes one event; failures are logged, never fatal: a missed registration is
// caught up at the next start.
func (r *Registrar) handle(ctx context.Context, ev eventbus.Event) {
	defer safego.Recover(r.opts.Logger, "execution-registrar event")
	var p struct {
		ExecutionID string `json:"execution_id"`
		Status      string `json:"status"`
		Action      string `json:"action"`
		ExitCode    *int   `json:"exit_code"`
	}
	if err := json.Unmarshal(ev.Payload, &p); err != nil || p.ExecutionID == "" {
		return
	}
	status := strings.TrimPrefix(ev.Type, "execution.")
	if status == "started" {
		status = execution.StatusRunning
	}
	switch status {
	case execution.StatusApproved, execution.StatusDenied, execution.StatusRevoked, execution.StatusCancelled,
		execution.StatusRunning, execution.StatusCompleted, execution.StatusFailed, execution.StatusTimedOut, execution.StatusInterrupted:
	default:
		// requested and queued: the entity was created in that state.
		return
	}
	log := r.opts.Logger.With().Str("execution", p.ExecutionID).Str("event", ev.Type).Logger()
	if err := r.mirror(ctx, ev.CorrelationID, p.ExecutionID, status, p.ExitCode); err != nil && ctx.Err() == nil {
		log.Warn().Err(err).Msg("execution entity not moved")
	}
	if status == execution.StatusCompleted && p.Action == execution.ActionPctCreate {
		if err := r.register(ctx, p.ExecutionID); err != nil && ctx.Err() == nil {
			log.Error().Err(err).Msg("created container not registered in the graph; it is retried at the next start")
		}
	}
}

// mirror moves the execution's entity to the state of a status the scheduler wrote.
func (r *Registrar) mirror(ctx context.Context, correlation, id, status string, exitCode *int) error {
	slug := execution.EntitySlug(id)
	ent, err := r.opts.Graph.GetEntity(ctx, slug)
	if err != nil {
		return err
	}
	m := r.meta(correlation)
	want := execution.ExecutionState(status)
	if ent.State != want {
		if _, err := r.opts.Graph.SetState(ctx, m, slug, want, nil); err != nil {
			return err
		}
	}
	if exitCode != nil {
		if cur, ok := ent.Attributes["exit_code"].(float64); !ok || int(cur) != *exitCode {
			if _, err := r.opts.Graph.UpdateAttributes(ctx, m, slug, map[string]any{"exit_code": *exitCode}, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// catchUp registers the containers of completed pct_create executions that are not in the
// graph yet.
func (r *Registrar) catchUp(ctx context.Context) {
	ids, err := r.store.UnregisteredPctCreates(ctx, r.opts.CatchUp)
	if err != nil {
		if ctx.Err() == nil {
			r.opts.Logger.Warn().Err(err).Msg("registrar catch-up: list completed pct_create executions")
		}
		return
	}
	for _, id := range ids {
		if err := r.register(ctx, id); err != nil && ctx.Err() == nil {
			r.opts.Logger.Error().Err(err).Str("execution", id).Msg("registrar catch-up: container not registered")
		}
	}
}

// register creates the lxc a completed pct_create made, and the hosts edge from its Proxmox
// host. It is idempotent: an existing lxc of that name is kept, and the edge is created only
// when missing.
func (r *Registrar) register(ctx context.Context, id string) error {
	e, err := r.store.Execution(ctx, id, false)
	if err != nil {
		return err
	}
	if e.Action != execution.ActionPctCreate || e.Status != execution.StatusCompleted {
		return nil
	}
	var params, result map[string]any
	if err := json.Unmarshal(e.Params, &params); err != nil {
		return fmt.Errorf("decode params of %s: %w", id, err)
	}
	if len(e.Result) > 0 {
		if err := json.Unmarshal(e.Result, &result); err != nil {
			return fmt.Errorf("decode result of %s: %w", id, err)
		}
	}
	pick := func(key string) any {
		if v, ok := result[key]; ok && v != nil && v != "" {
			return v
		}
		return params[key]
	}
	hostname, _ := pick("hostname").(string)
	if hostname == "" {
		return fmt.Errorf("pct_create %s has no hostname", id)
	}
	host, err := r.opts.Graph.GetEntity(ctx, e.TargetID)
	if err != nil {
		return fmt.Errorf("proxmox host of %s: %w", id, err)
	}
	corr := ""
	if e.SessionID != nil {
		corr = *e.SessionID
	}
	m := r.meta(corr)
	slug := "lxc:" + hostname
	lxc, err := r.opts.Graph.GetEntity(ctx, slug)
	if errors.Is(err, graph.ErrNotFound) {
		attrs := map[string]any{
			"vmid":     pick("vmid"),
			"host":     host.Name,
			"hostname": hostname,
		}
		if v, ok := params["cores"]; ok {
			attrs["cores"] = v
		}
		if v, ok := params["memory"]; ok {
			attrs["memory_mb"] = v
		}
		if v, ok := params["storage"]; ok {
			attrs["storage"] = v
		}
		if v, ok := params["privileged"].(bool); ok {
			attrs["unprivileged"] = !v
		}
		if v, ok := params["nesting"].(bool); ok {
			attrs["nesting"] = v
		}
		if t, ok := pick("template").(string); ok && t != "" {
			attrs["template"] = t
			for _, os := range []string{"debian", "ubuntu", "alpine", "fedora", "rockylinux", "archlinux"} {
				if strings.HasPrefix(t, os) {
					attrs["ostype"] = os
				}
			}
		}
		if ip, ok := pick("ip").(string); ok && ip != "" {
			attrs["ip"] = ip
		}
		attrs["created_by_execution"] = id
		lxc, _, err = r.opts.Graph.CreateEntity(ctx, m, graph.CreateEntityInput{Type: "lxc", Name: hostname, Attributes: attrs})
		if errors.Is(err, graph.ErrDuplicate) {
			lxc, err = r.opts.Graph.GetEntity(ctx, slug)
		}
	}
	if err != nil {
		return fmt.Errorf("register %s: %w", slug, err)
	}
	if _, _, err := r.opts.Graph.CreateRelationship(ctx, m, "hosts", host.ID, lxc.ID, nil); err != nil {
		return fmt.Errorf("hosts edge %s -> %s: %w", host.Slug, slug, err)
	}
	return nil
}

// WaitProcessed blocks until the Registrar has handled at least n events or ctx ends (tests
// use it instead of sleeping).
func (r *Registrar) WaitProcessed(ctx context.Context, n int64) error {
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		r.cond.Broadcast()
		r.mu.Unlock()
	})
	defer stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.processed < n {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.cond.Wait()
	}
	return nil
}
