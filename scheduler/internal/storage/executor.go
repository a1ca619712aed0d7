package storage

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
)

// Execution is a claimed execution.
type Execution struct {
	ID            string
	TargetID      string
	TargetSlug    string
	Action        string
	Command       string
	Params        map[string]any
	RiskClass     string
	Timeout       time.Duration // timeout_seconds; zero or less when unset
	SessionID     string
	CorrelationID string
	StartedAt     time.Time
}

const qClaimExecutions = `
UPDATE executions SET status = 'running', started_at = now(), updated_at = now(), claimed_by = $1
WHERE id IN (SELECT id FROM executions WHERE status = 'approved'
               AND ($3::text[] IS NULL OR coalesce(lease_unit(target_id), 'net') = ANY($3::text[]))
             ORDER BY created_at, id FOR UPDATE SKIP LOCKED LIMIT $2)
RETURNING id::text, target_id::text, target_slug, action, command, params, risk_class,
	timeout_seconds, coalesce(session_id, ''), correlation_id, started_at`

// ClaimExecutions takes up to n of the oldest approved executions (only those whose lease
// unit is in owned, when owned is not nil): running, started_at now, claimed_by
// schedulerID.
func (s *Store) ClaimExecutions(ctx context.Context, schedulerID string, n int, owned []string) ([]Execution, error) {
	rows, err := s.db.Query(ctx, qClaimExecutions, schedulerID, n, owned)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Execution, error) {
		var j Execution
		var secs int
		err := r.Scan(&j.ID, &j.TargetID, &j.TargetSlug, &j.Action, &j.Command, &j.Params,
			&j.RiskClass, &secs, &j.SessionID, &j.CorrelationID, &j.StartedAt)
		j.Timeout = time.Duration(secs) * time.Second
		return j, err
	})
}

// ExecutionEnd is what the end of a run writes to its row.
type ExecutionEnd struct {
	ID        string
	Status    string
	ExitCode  *int
	Output    []byte
	Truncated bool
	Result    json.RawMessage
	Err       string
}

const qUpdateExecutionEnd = `
UPDATE executions SET status = $2, exit_code = $3, output = $4, output_truncated = $5, result = $6,
       error = $7, finished_at = clock_timestamp(), updated_at = clock_timestamp()
WHERE id = $1 AND status = 'running' AND claimed_by = $8`

// UpdateExecutionEnds writes the ends in one pipelined round trip, each update conditional
// on the row still being running and claimed by schedulerID. n[i] and errs[i] are end i's
// rows changed and error; err is the batch's own (its Close).
func (s *Store) UpdateExecutionEnds(ctx context.Context, ends []ExecutionEnd, schedulerID string) (n []int64, errs []error, err error) {
	var b pgx.Batch
	for _, en := range ends {
		b.Queue(qUpdateExecutionEnd, en.ID, en.Status, en.ExitCode, en.Output, en.Truncated, en.Result, en.Err, schedulerID)
	}
	br := s.db.SendBatch(ctx, &b)
	n, errs = make([]int64, len(ends)), make([]error, len(ends))
	for i := range ends {
		tag, err := br.Exec()
		n[i], errs[i] = tag.RowsAffected(), err
	}
	return n, errs, br.Close()
}

// The rows the interrupt passes pick (executor.interruptOrphans, interruptDeadHolders,
// SweepStuck); each locks what it returns.
const (
	qPickOrphans = `
SELECT id FROM executions x
WHERE status = 'running'
  AND (claimed_by IS NULL OR claimed_by = $1
       OR (NOT EXISTS (SELECT 1 FROM scheduler_members m WHERE m.id = x.claimed_by AND m.expires_at > now())
           AND NOT EXISTS (SELECT 1 FROM scheduler_leases l WHERE l.holder = x.claimed_by AND l.expires_at > now())))
ORDER BY created_at
FOR UPDATE SKIP LOCKED`

	qPickDeadHolders = `
SELECT id FROM executions x
WHERE status = 'running' AND claimed_by IS NOT NULL AND claimed_by <> $1
  AND NOT EXISTS (SELECT 1 FROM scheduler_members m WHERE m.id = x.claimed_by AND m.expires_at > now())
  AND NOT EXISTS (SELECT 1 FROM scheduler_leases l WHERE l.holder = x.claimed_by AND l.expires_at > now())
ORDER BY created_at
FOR UPDATE SKIP LOCKED`

	qPickStuck = `
SELECT id FROM executions
WHERE status = 'running'
  AND started_at + make_interval(secs => timeout_seconds) + $1::interval < now()
  AND NOT (id = ANY(coalesce($2::uuid[], '{}')))
ORDER BY created_at
FOR UPDATE SKIP LOCKED`
)

func (s *Store) pickIDs(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// PickOrphans locks the running executions whose scheduler is gone: unclaimed, claimed by
// schedulerID (a previous life of this id), or by a scheduler that is no live member and
// holds no live lease.
func (s *Store) PickOrphans(ctx context.Context, schedulerID string) ([]string, error) {
	return s.pickIDs(ctx, qPickOrphans, schedulerID)
}

// PickDeadHolders locks the running executions of another scheduler whose membership and
// leases lapsed.
func (s *Store) PickDeadHolders(ctx context.Context, schedulerID string) ([]string, error) {
	return s.pickIDs(ctx, qPickDeadHolders, schedulerID)
}

// PickStuck locks the running executions not in inflight that outlived their own timeout by
// stuckAfter.
func (s *Store) PickStuck(ctx context.Context, stuckAfter time.Duration, inflight []string) ([]string, error) {
	return s.pickIDs(ctx, qPickStuck, stuckAfter, inflight)
}

// Interrupted is what InterruptExecution returns of the row.
type Interrupted struct {
	TargetID, Slug, Action, Risk, Session, Correlation string
	ClaimedBy                                          *string
	StartedAt                                          *time.Time
}

const qInterruptExecution = `
WITH logged AS (
    SELECT string_agg(data, ''::bytea ORDER BY seq) AS b FROM execution_logs
    WHERE execution_id = $1 AND stream <> 'system'
)
UPDATE executions x SET status = 'interrupted', finished_at = now(), updated_at = now(),
       output = CASE WHEN length(l.b) > $2 THEN substring(l.b FROM length(l.b) - $2 + 1) ELSE coalesce(l.b, x.output) END,
       output_truncated = coalesce(length(l.b) > $2, x.output_truncated)
FROM logged l
WHERE x.id = $1
RETURNING x.target_id::text, x.target_slug, x.action, x.risk_class, coalesce(x.session_id, ''), x.correlation_id,
          x.claimed_by, x.started_at`

// InterruptExecution marks execution id interrupted and fills its output with the last
// maxOutput bytes of what was logged.
func (s *Store) InterruptExecution(ctx context.Context, id string, maxOutput int) (Interrupted, error) {
	var r Interrupted
	err := s.db.QueryRow(ctx, qInterruptExecution, id, maxOutput).Scan(&r.TargetID, &r.Slug, &r.Action, &r.Risk, &r.Session,
		&r.Correlation, &r.ClaimedBy, &r.StartedAt)
	return r, err
}

const qSetExecutionError = `UPDATE executions SET error = $2 WHERE id = $1`

// SetExecutionError sets execution id's error.
func (s *Store) SetExecutionError(ctx context.Context, id, msg string) error {
	_, err := s.db.Exec(ctx, qSetExecutionError, id, msg)
	return err
}

// LogChunk is one execution_logs row.
type LogChunk struct {
	Seq    int
	Stream string
	Data   []byte
}

const (
	qInsertExecutionLog = `INSERT INTO execution_logs (execution_id, seq, stream, data) VALUES ($1, $2, $3, $4)`
	qNotify             = `SELECT pg_notify($1, $2)`
)

// WriteExecutionLogs stores the chunks of execution id and NOTIFYs channel with note, in one
// batch (one implicit transaction).
func (s *Store) WriteExecutionLogs(ctx context.Context, id string, chunks []LogChunk, channel, note string) error {
	var b pgx.Batch
	for _, c := range chunks {
		b.Queue(qInsertExecutionLog, id, c.Seq, c.Stream, c.Data)
	}
	b.Queue(qNotify, channel, note)
	return s.db.SendBatch(ctx, &b).Close()
}
