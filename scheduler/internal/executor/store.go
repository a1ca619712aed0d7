package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

// Terminal and intermediate statuses written by the executor (X8).
const (
	StatusRunning     = "running"
	StatusCompleted   = "completed"
	StatusFailed      = "failed"
	StatusTimedOut    = "timed_out"
	StatusInterrupted = "interrupted"
)

// job is a claimed execution.
type job = storage.Execution

// db is the executor's storage.
func (e *Executor) db() *storage.Store { return storage.New(e.opts.Pool) }

// eventPayload is the body of every execution.* event the executor appends.
type eventPayload struct {
	ExecutionID string          `json:"execution_id"`
	Status      string          `json:"status"`
	Target      string          `json:"target"`
	Action      string          `json:"action"`
	RiskClass   string          `json:"risk_class"`
	ExitCode    *int            `json:"exit_code,omitempty"`
	Error       string          `json:"error,omitempty"`
	DurationMS  *int64          `json:"duration_ms,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
	SchedulerID string          `json:"scheduler_id"`
}

// eventType names the event of a status change: execution.started for the claim, else
// execution.<terminal status>.
func eventType(status string) string {
	if status == StatusRunning {
		return "execution.started"
	}
	return "execution." + status
}

func (e *Executor) appendEvent(ctx context.Context, tx *storage.Store, targetID, correlation string, p eventPayload) error {
	p.SchedulerID = e.opts.SchedulerID
	_, err := tx.AppendEvent(ctx, eventbus.Event{
		Type:          eventType(p.Status),
		EntityID:      targetID,
		CorrelationID: correlation,
		Actor:         "scheduler:" + e.opts.SchedulerID,
	}, p)
	return err
}

// correlationOf is the id an execution's events are correlated by: its correlation id, else
// its session id.
func correlationOf(correlation, session string) string {
	if correlation != "" {
		return correlation
	}
	return session
}

// claim takes up to n of the oldest runnable executions: running, started_at now, claimed_by
// us and an execution.started event each, in one transaction (one transaction for a batch
// keeps the outbox's commit lock short when a backlog drains). It returns none when nothing
// is runnable.
func (e *Executor) claim(ctx context.Context, n int) ([]job, error) {
	var jobs []job
	err := e.db().InTx(ctx, func(tx *storage.Store) error {
		jobs = jobs[:0]
		// With leases, only executions whose target goes through a unit this scheduler holds
		// (its host's; net for one with no target); the holder of the rest claims them.
		var owned []string
		if e.opts.Owned != nil {
			owned = e.opts.Owned()
			if len(owned) == 0 {
				return nil
			}
		}
		var err error
		jobs, err = tx.ClaimExecutions(ctx, e.opts.SchedulerID, n, owned)
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		for i := range jobs {
			if jobs[i].Timeout <= 0 {
				jobs[i].Timeout = e.opts.DefaultTimeout
			}
		}
		for _, j := range jobs {
			if err := e.appendEvent(ctx, tx, j.TargetID, correlationOf(j.CorrelationID, j.SessionID), eventPayload{
				ExecutionID: j.ID, Status: StatusRunning, Target: j.TargetSlug, Action: j.Action, RiskClass: j.RiskClass,
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return jobs, nil
}

// outcome is how a run ended.
type outcome struct {
	Status   string
	ExitCode *int
	Result   any
	Err      string
	Duration time.Duration
}

// maxEndBatch caps how many run ends one transaction records.
const maxEndBatch = 64

// end is one run's end waiting to be recorded.
type end struct {
	j         job
	o         outcome
	result    []byte
	output    []byte
	truncated bool
	done      chan error
}

// finish records the end of a run: status, exit code, output tail, result, error,
// finished_at and the terminal event, in one transaction. The update is conditional on the
// row still being ours and running, so a sweep that already gave up on it is not undone.
//
// Ends that arrive while another is being written are grouped into the next transaction
// (group commit): every event append holds the outbox's commit lock, so one lock per batch
// rather than per execution is what lets many short executions finish at once.
func (e *Executor) finish(ctx context.Context, j job, o outcome, output []byte, truncated bool) error {
	en := newEnd(j, o, output, truncated)
	e.endMu.Lock()
	e.ends = append(e.ends, en)
	if e.endLeader {
		e.endMu.Unlock()
		return <-en.done
	}
	e.endLeader = true
	for len(e.ends) > 0 {
		batch := e.ends[:min(len(e.ends), maxEndBatch)]
		e.ends = e.ends[len(batch):]
		e.endMu.Unlock()
		e.recordEnds(ctx, batch)
		e.endMu.Lock()
	}
	e.endLeader = false
	e.endMu.Unlock()
	return <-en.done
}

// newEnd prepares a run's end for the database: the result marshalled (never built by hand)
// and every string made storable.
func newEnd(j job, o outcome, output []byte, truncated bool) *end {
	result, err := json.Marshal(o.Result)
	if err != nil {
		// A result that cannot be marshalled is a bug here, not a reason to lose the run.
		result, _ = json.Marshal(map[string]string{"marshal_error": err.Error()})
	}
	o.Err = pgText(o.Err)
	if output == nil {
		output = []byte{}
	}
	return &end{j: j, o: o, result: pgJSON(result), output: output, truncated: truncated, done: make(chan error, 1)}
}

// recordEnds writes a batch in one transaction, or one by one when the batch fails, so one
// bad row cannot fail the others. Every end gets exactly one answer on its done channel.
func (e *Executor) recordEnds(ctx context.Context, batch []*end) {
	answered := 0
	defer func() {
		if r := recover(); r != nil {
			e.log.Error().Interface("panic", r).Msg("recovered panic while recording execution ends")
			for _, en := range batch[answered:] {
				en.done <- fmt.Errorf("record end of execution %s: internal error: %v", en.j.ID, r)
			}
		}
	}()
	if len(batch) > 1 {
		errs := make([]error, len(batch))
		bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := e.db().InTx(bctx, func(tx *storage.Store) error {
			// The updates go in one pipelined round trip; the events follow, each through
			// the outbox's Append.
			rows := make([]storage.ExecutionEnd, len(batch))
			for i, en := range batch {
				rows[i] = endRow(en)
			}
			n, berrs, err := tx.UpdateExecutionEnds(bctx, rows, e.opts.SchedulerID)
			for i, en := range batch {
				errs[i] = updateEndResult(n[i], berrs[i], en)
			}
			if err != nil {
				return fmt.Errorf("record execution ends: %w", err)
			}
			for i := range batch {
				if errs[i] != nil && !errors.Is(errs[i], errNotOurs) {
					return errs[i]
				}
			}
			for i, en := range batch {
				if errs[i] == nil {
					if err := e.appendEnd(bctx, tx, en); err != nil {
						return err
					}
				}
			}
			return nil
		})
		cancel()
		if err == nil {
			for i, en := range batch {
				en.done <- errs[i]
				answered++
			}
			return
		}
		e.log.Warn().Err(err).Int("batch", len(batch)).Msg("record execution ends as a batch; retrying one by one")
	}
	for _, en := range batch {
		ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := e.db().InTx(ectx, func(tx *storage.Store) error {
			if err := e.updateEnd(ectx, tx, en); err != nil {
				return err
			}
			return e.appendEnd(ectx, tx, en)
		})
		cancel()
		en.done <- err
		answered++
	}
}

// endRow is what en writes to its row.
func endRow(en *end) storage.ExecutionEnd {
	return storage.ExecutionEnd{ID: en.j.ID, Status: en.o.Status, ExitCode: en.o.ExitCode, Output: en.output,
		Truncated: en.truncated, Result: json.RawMessage(en.result), Err: en.o.Err}
}

func updateEndResult(n int64, err error, en *end) error {
	if err != nil {
		return fmt.Errorf("record end of execution %s: %w", en.j.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("record end of execution %s: %w", en.j.ID, errNotOurs)
	}
	return nil
}

func (e *Executor) updateEnd(ctx context.Context, tx *storage.Store, en *end) error {
	n, errs, cerr := tx.UpdateExecutionEnds(ctx, []storage.ExecutionEnd{endRow(en)}, e.opts.SchedulerID)
	err := updateEndResult(n[0], errs[0], en)
	if err == nil && cerr != nil {
		err = fmt.Errorf("record end of execution %s: %w", en.j.ID, cerr)
	}
	return err
}

func (e *Executor) appendEnd(ctx context.Context, tx *storage.Store, en *end) error {
	j, o := en.j, en.o
	ms := o.Duration.Milliseconds()
	return e.appendEvent(ctx, tx, j.TargetID, correlationOf(j.CorrelationID, j.SessionID), eventPayload{
		ExecutionID: j.ID, Status: o.Status, Target: j.TargetSlug, Action: j.Action, RiskClass: j.RiskClass,
		ExitCode: o.ExitCode, Error: o.Err, DurationMS: &ms, Result: en.result,
	})
}

// pgText makes s storable in a text column and a jsonb string: PostgreSQL refuses NUL and
// invalid UTF-8 there, and an error message may quote a command's raw output. Both become
// U+FFFD, so the write that records the end cannot fail on them (the bytes themselves are
// kept, exactly, in execution_logs and executions.output).
func pgText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// pgJSON makes marshalled JSON acceptable to jsonb, which refuses the \u0000 escape.
func pgJSON(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u0000`)) {
		return b
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return b
	}
	out, err := json.Marshal(cleanJSON(v))
	if err != nil {
		return b
	}
	return out
}

func cleanJSON(v any) any {
	switch x := v.(type) {
	case string:
		return pgText(x)
	case []any:
		for i := range x {
			x[i] = cleanJSON(x[i])
		}
	case map[string]any:
		clean := make(map[string]any, len(x))
		for k, val := range x {
			clean[pgText(k)] = cleanJSON(val)
		}
		return clean
	}
	return v
}

// errNotOurs means the execution was no longer running under this scheduler when its end
// was recorded (a sweep or an operator got there first).
var errNotOurs = errors.New("execution is no longer running under this scheduler")

// interruptOrphans marks as interrupted every running execution whose scheduler is gone: with
// one scheduler that is every running row at start; with several, those claimed by us (a
// previous life of this id) or by a scheduler that is no live member (scheduler_members,
// renewed with its leases) and holds no live lease. They are never re-run: their command may have had its effect
// already.
func (e *Executor) interruptOrphans(ctx context.Context) (int, error) {
	return e.interrupt(ctx, func(tx *storage.Store) ([]string, error) { return tx.PickOrphans(ctx, e.opts.SchedulerID) },
		"the scheduler running it (%s) stopped before it finished; found at startup by %s. "+
			"It is not re-run because its command may already have had its effect; output so far is kept")
}

// interruptDeadHolders is interruptOrphans while running alongside other schedulers: the
// running executions of a scheduler whose membership lapsed (killed, or cut off) become
// interrupted within an expiry, found by whichever scheduler sweeps first.
func (e *Executor) interruptDeadHolders(ctx context.Context) (int, error) {
	return e.interrupt(ctx, func(tx *storage.Store) ([]string, error) { return tx.PickDeadHolders(ctx, e.opts.SchedulerID) },
		"the scheduler running it (%s) stopped answering before it finished; found by %s. "+
			"It is not re-run because its command may already have had its effect; output so far is kept")
}

// SweepStuck marks as interrupted the running executions that no run of this executor owns
// and that have outlived their own timeout by StuckAfter. It returns how many it marked.
func (e *Executor) SweepStuck(ctx context.Context) (n int, err error) {
	defer func() {
		if err == nil {
			e.m.observeSwept(sweptStuck, n)
		}
	}()
	return e.interrupt(ctx, func(tx *storage.Store) ([]string, error) {
		return tx.PickStuck(ctx, e.opts.StuckAfter, e.inflightIDs())
	},
		"running under %s for longer than its timeout plus the stuck grace; swept by %s. "+
			"It is not re-run; output so far is kept")
}

// interrupt marks the rows selected by pick (which must lock them; storage's Pick*) as interrupted, fills
// output with the tail of what was logged, and appends execution.interrupted for each, all in
// one transaction. reason is a format taking the claimant and this scheduler's id.
func (e *Executor) interrupt(ctx context.Context, pick func(tx *storage.Store) ([]string, error), reason string) (int, error) {
	n := 0
	err := e.db().InTx(ctx, func(tx *storage.Store) error {
		ids, err := pick(tx)
		if err != nil {
			return fmt.Errorf("find executions to interrupt: %w", err)
		}
		for _, id := range ids {
			r, err := tx.InterruptExecution(ctx, id, e.opts.MaxOutput)
			if err != nil {
				return fmt.Errorf("interrupt execution %s: %w", id, err)
			}
			targetID, slug, action, risk, session, correlation := r.TargetID, r.Slug, r.Action, r.Risk, r.Session, r.Correlation
			claimedBy, startedAt := r.ClaimedBy, r.StartedAt
			claimant := "an unknown scheduler"
			if claimedBy != nil {
				claimant = *claimedBy
			}
			msg := fmt.Sprintf(reason, claimant, e.opts.SchedulerID)
			if err := tx.SetExecutionError(ctx, id, msg); err != nil {
				return fmt.Errorf("interrupt execution %s: %w", id, err)
			}
			p := eventPayload{ExecutionID: id, Status: StatusInterrupted, Target: slug, Action: action, RiskClass: risk, Error: msg}
			if startedAt != nil {
				ms := time.Since(*startedAt).Milliseconds()
				p.DurationMS = &ms
			}
			if err := e.appendEvent(ctx, tx, targetID, correlationOf(correlation, session), p); err != nil {
				return err
			}
			e.log.Warn().Str("execution_id", id).Str("target", slug).Str("claimed_by", claimant).
				Msg("execution interrupted; not re-run")
			n++
		}
		return nil
	})
	return n, err
}
