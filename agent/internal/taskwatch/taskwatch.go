// Package taskwatch keeps the agent's task statuses in step with the api: an approval
// decision (event approval.decided) moves a task that waited on it back to executing, and a
// periodic pass abandons idle tasks — never one that waits on an approval — and reconciles
// waiting tasks with the api's pending approvals, so a decision made while the agent was down
// is not missed.
package taskwatch

import (
	"context"
	"encoding/json"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/agent/internal/apiclient"
	"github.com/oikos-hq/oikos/agent/internal/tasks"
	api "github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/startstop"
)

// Options configure a Watcher.
type Options struct {
	Tasks *tasks.Service
	Bus   *eventbus.Bus // nil: no event subscription (tests drive Decided themselves)
	API   *apiclient.Client
	// Token is the agent's own api token (OIKOS_AGENT_TOKEN), used to read pending approvals
	// and to move swept tasks' graph entities; without it, only the agent's own record of a
	// waiting task protects it from the sweep.
	Token     string
	IdleAfter time.Duration
	Every     time.Duration // default IdleAfter/10, between 10 s and 5 min
	Logger    zerolog.Logger
}

// Watcher runs the subscription and the periodic pass.
type Watcher struct {
	opts Options
	sub  *eventbus.Subscription
	life startstop.Lifecycle
}

// New builds a watcher; with a Bus, it subscribes now (before the bus starts).
func New(opts Options) *Watcher {
	if opts.Every <= 0 {
		opts.Every = min(max(opts.IdleAfter/10, 10*time.Second), 5*time.Minute)
	}
	w := &Watcher{opts: opts}
	if opts.Bus != nil {
		w.sub = opts.Bus.Subscribe(256, "approval.decided")
	}
	return w
}

// Start runs the watcher until Stop or ctx ends.
func (w *Watcher) Start(ctx context.Context) error {
	if err := w.life.Start(ctx, w.opts.Logger, "taskwatch-pass", w.passes); err != nil {
		return err
	}
	if w.sub != nil {
		w.life.Go("taskwatch-decisions", w.decisions)
	}
	return nil
}

// Stop ends the watcher and waits for it.
func (w *Watcher) Stop() {
	if w.sub != nil {
		w.sub.Close()
	}
	w.life.Stop()
}

func (w *Watcher) decisions(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.sub.C:
			if !ok {
				return
			}
			w.decided(ctx, e)
		}
	}
}

func (w *Watcher) decided(ctx context.Context, e eventbus.Event) {
	if e.CorrelationID == "" {
		return
	}
	var p struct {
		Decision  string `json:"decision"`
		DecidedBy string `json:"decided_by"`
	}
	_ = json.Unmarshal(e.Payload, &p)
	if err := w.opts.Tasks.Decided(ctx, e.CorrelationID, p.DecidedBy, p.Decision); err != nil {
		w.opts.Logger.Error().Err(err).Str("session", e.CorrelationID).Msg("task after approval decision")
	}
}

func (w *Watcher) passes(ctx context.Context) {
	t := time.NewTicker(w.opts.Every)
	defer t.Stop()
	for {
		w.Pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Pass reconciles waiting tasks with the api and sweeps idle ones, once.
func (w *Watcher) Pass(ctx context.Context) {
	if w.opts.Token != "" {
		waiting, err := w.opts.Tasks.AwaitingApproval(ctx)
		if err != nil {
			w.opts.Logger.Error().Err(err).Msg("tasks awaiting approval")
		}
		for _, s := range waiting {
			pending, err := w.pending(ctx, s.ID)
			if err != nil {
				w.opts.Logger.Warn().Err(err).Str("session", s.ID).Msg("pending approvals")
				continue
			}
			if !pending {
				if err := w.opts.Tasks.Decided(ctx, s.ID, "agent-reconcile", "decided"); err != nil {
					w.opts.Logger.Error().Err(err).Str("session", s.ID).Msg("reconcile waiting task")
				}
			}
		}
	}
	var pending tasks.PendingApproval
	if w.opts.Token != "" {
		pending = w.pending
	}
	closed, err := w.opts.Tasks.SweepIdle(ctx, time.Now().Add(-w.opts.IdleAfter), pending)
	if err != nil {
		w.opts.Logger.Error().Err(err).Msg("idle sweep")
	}
	for _, id := range closed {
		w.opts.Logger.Info().Str("session", id).Msg("idle task abandoned")
		if w.opts.Token == "" {
			continue
		}
		if s, err := w.opts.Tasks.Session(ctx, id); err == nil && s.Task != "" {
			if _, err := apiclient.Raw(w.opts.API.API().SetEntityState(ctx, s.Task, nil, api.SetState{State: "abandoned"},
				apiclient.As(w.opts.Token, id)...)); err != nil {
				w.opts.Logger.Warn().Err(err).Str("task", s.Task).Msg("abandoned task entity")
			}
		}
	}
}

// pending asks the api whether it holds a pending approval for session.
func (w *Watcher) pending(ctx context.Context, session string) (bool, error) {
	list, err := apiclient.Decode[struct {
		Items []json.RawMessage `json:"items"`
	}](w.opts.API.API().ListApprovals(ctx, &api.ListApprovalsParams{SessionId: &session, Status: api.Ptr("pending"), Limit: api.Ptr(1)},
		apiclient.As(w.opts.Token, session)...))
	return len(list.Items) > 0, err
}
