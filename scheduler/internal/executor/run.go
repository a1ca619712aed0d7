package executor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/remote"
)

// finishAttempts bounds how often a run tries to record its end after an error of the
// statement itself; after that the stuck sweep (of this or another scheduler) closes it.
const finishAttempts = 5

// finishOutage bounds how long a run keeps its end while the database is unreachable (an
// outage, a restart: pg.IsUnavailable), retrying with back-off up to finishBackoff, so the
// execution ends with its real status, exit code and output once Postgres is back instead of
// being closed as interrupted by the stuck sweep. The command is never run again either way.
const (
	finishOutage  = 15 * time.Minute
	finishBackoff = 5 * time.Second
)

// run executes one claimed execution and records its end. It never returns early without
// recording: a run that cannot write its end leaves a row the sweep will close.
func (e *Executor) run(ctx context.Context, j job) {
	log := e.log.With().Str("execution_id", j.ID).Str("target", j.TargetSlug).Str("action", j.Action).Logger()
	// Storage of output and of the end must outlive the command's deadline and a Stop: the
	// partial output of a timed-out or interrupted command is exactly what must be kept.
	store := context.WithoutCancel(ctx)
	// The stored secrets' values are read for each run, so a secret set a moment ago is
	// redacted from the next command's output (issue #31).
	r, err := e.opts.Secrets.Redactor(store)
	if err != nil {
		log.Warn().Err(err).Msg("stored secrets unreadable: output is redacted of the readable ones and the well-known formats only")
	}
	red := newOutRedactor(r)
	s := newSink(store, e.opts.Pool, j.ID, e.opts.FlushEvery, e.opts.FlushBytes, e.opts.MaxOutput, red, log)

	began := time.Now()
	runCtx, cancel := context.WithTimeout(ctx, j.Timeout)
	o := e.perform(runCtx, j, s)
	cancel()
	o.Duration = time.Since(began)

	// A command cut short by the executor stopping is interrupted, whatever error the cut
	// produced; one that finished on its own keeps its status.
	finished := o.Status == StatusCompleted || o.ExitCode != nil
	if ctx.Err() != nil && !finished {
		msg := fmt.Sprintf("the scheduler (%s) stopped while the command was running; output so far is kept and it is not re-run",
			e.opts.SchedulerID)
		if o.Err != "" {
			msg += " (" + o.Err + ")"
		}
		o.Status, o.Err = StatusInterrupted, msg
	}
	e.m.observeRun(j.Action, o.Status, o.Duration)
	s.EndOutput()
	// The error and the result may quote the output: stored, logged and sent in the end
	// event, they are redacted as it is.
	o.Err, _ = r.String(o.Err)
	o.Result = red.result(o.Result)
	if o.Err != "" {
		s.System("%s: %s", o.Status, o.Err)
	}
	tail, truncated := s.Close()

	ended := time.Now()
	for attempt := 0; ; attempt++ {
		err = e.finish(store, j, o, tail, truncated)
		if err == nil || errors.Is(err, errNotOurs) {
			break
		}
		unavailable := pg.IsUnavailable(err)
		if (!unavailable && attempt+1 >= finishAttempts) || (unavailable && time.Since(ended) > finishOutage) {
			break
		}
		log.Error().Err(err).Int("attempt", attempt+1).Bool("database_unreachable", unavailable).Msg("record end of execution; retrying")
		select {
		case <-time.After(min(time.Duration(attempt+1)*time.Second, finishBackoff)):
		case <-ctx.Done():
			// Stopping: one last try, then the sweep closes what could not be recorded.
			err = e.finish(store, j, o, tail, truncated)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if err == nil && e.opts.OnEnd != nil {
		e.opts.OnEnd(Ended{ID: j.ID, TargetSlug: j.TargetSlug, Action: j.Action, Command: j.Command, Status: o.Status})
	}
	ev := log.Info()
	if o.Status != StatusCompleted {
		ev = log.Warn()
	}
	if err != nil {
		ev = log.Error().Err(err)
	}
	ev.Str("status", o.Status).Str("error", o.Err).Dur("duration", o.Duration).Msg("execution ended")
}

// perform resolves the target and runs the action. The returned outcome has Status, and
// ExitCode when the command reported one.
func (e *Executor) perform(ctx context.Context, j job, s *sink) (o outcome) {
	defer func() {
		// A panic in one action must end that execution as failed, not hang it in running.
		if r := recover(); r != nil {
			e.log.Error().Str("execution_id", j.ID).Interface("panic", r).Msg("recovered panic while running execution")
			o = outcome{Status: StatusFailed, Err: fmt.Sprintf("internal error while running: %v", r)}
		}
	}()
	t, _, err := e.opts.Fleet.Resolve(ctx, j.TargetID)
	if err != nil {
		if errors.Is(err, remote.ErrResolution) {
			// S8: a broken configuration, told apart from an outage in the log and the row.
			e.log.Warn().Err(err).Str("execution_id", j.ID).Str("target", j.TargetSlug).
				Msg("target resolution failed (configuration problem, not an outage)")
			return outcome{Status: StatusFailed, Err: "target resolution failed: " + err.Error()}
		}
		e.log.Error().Err(err).Str("execution_id", j.ID).Str("target", j.TargetSlug).Msg("target lookup failed")
		return e.fromError(ctx, j, "target lookup failed: ", err)
	}
	if t.Kind == remote.KindVM {
		// qm waits as long as this execution may run, not the resolver's default.
		vmid, timeout := t.VMID, j.Timeout
		t.Wrap = func(cmd string) (string, error) { return remote.GuestExecCommand(vmid, timeout, cmd) }
	}
	a, ok := actions[j.Action]
	if !ok {
		return outcome{Status: StatusFailed, Err: fmt.Sprintf("unknown action %q (known: %s)", j.Action, strings.Join(actionNames(), ", "))}
	}
	return a(ctx, e, j, t, s)
}

// fromError turns a run error into an outcome: the execution's own deadline (or qm giving up
// at it) is timed_out; anything else — including an inner deadline such as the dial's — is
// failed with the error's own words (unreachable host, changed host key, ...).
func (e *Executor) fromError(ctx context.Context, j job, prefix string, err error) outcome {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, remote.ErrGuestTimeout) {
		return outcome{Status: StatusTimedOut,
			Err: fmt.Sprintf("timed out after %s; output so far is kept (%s%v)", j.Timeout, prefix, err)}
	}
	return outcome{Status: StatusFailed, Err: prefix + err.Error()}
}

// exitOutcome maps a finished command: exit 0 is completed, anything else failed.
func exitOutcome(res remote.Result, result any) outcome {
	code := res.ExitCode
	o := outcome{Status: StatusCompleted, ExitCode: &code, Result: result}
	if code != 0 {
		o.Status = StatusFailed
		o.Err = fmt.Sprintf("command exited with status %d", code)
	}
	return o
}
