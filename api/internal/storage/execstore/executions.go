package execstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/ids"
	"github.com/oikos-hq/oikos/api/internal/storage"
)

// execColumns matches scanExecution; the output column is selected only when asked for.
const execColumns = `x.id::text, x.target_id::text, x.target_slug, x.action, x.command, x.params, x.purpose,
	x.declared_risk, x.risk_class, x.reasons, x.status, x.authorised_by, x.approval_id::text, x.session_id,
	x.correlation_id, x.requested_by, x.dedup_key, x.timeout_seconds, x.exit_code, x.output_truncated, x.result,
	x.error, x.created_at, x.updated_at, x.started_at, x.finished_at`

const (
	qExecution           = `SELECT ` + execColumns + ` FROM executions x WHERE x.id = $1::uuid`
	qExecutionWithOutput = `SELECT ` + execColumns + `, x.output FROM executions x WHERE x.id = $1::uuid`
	qExecutionList       = `SELECT ` + execColumns + ` FROM executions x`
	qExecutionStatus     = `SELECT status FROM executions WHERE id = $1::uuid`
	qLogChunks           = `SELECT seq, stream, at, data FROM execution_logs
		WHERE execution_id = $1::uuid AND seq > $2 ORDER BY seq LIMIT $3`

	qTargetBySlug = `SELECT id::text, slug, type, state, attributes FROM entities WHERE slug = $1`
	qTargetByID   = `SELECT id::text, slug, type, state, attributes FROM entities WHERE id = $1::uuid`
	qGuestHolding = `SELECT slug FROM entities
			WHERE type = ANY($1) AND state <> 'destroyed'
			  AND (attributes->>'vmid' = $2 OR (slug = 'lxc:' || $3))
			ORDER BY slug LIMIT 1`
	qPendingDuplicate       = `SELECT id::text FROM executions WHERE dedup_key = $1 AND status = 'pending_approval'`
	qSessionPendingApproval = `SELECT id::text, execution_id::text FROM approvals
		WHERE session_id = $1 AND status = 'pending' ORDER BY requested_at LIMIT 1`
	qOpenAssentWindow = `SELECT id::text FROM approval_windows
		WHERE kind = 'assent' AND session_id = $1 AND closed_at IS NULL AND expires_at > now()
		ORDER BY expires_at DESC LIMIT 1`
	qOpenDestructiveWindow = `SELECT id::text FROM approval_windows
		WHERE kind = 'destructive' AND session_id = $1 AND target_id = $2 AND closed_at IS NULL AND expires_at > now()
		ORDER BY expires_at DESC LIMIT 1`
	qLockRequest     = `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`
	qInsertExecution = `INSERT INTO executions (id, target_id, target_slug, action, command, params, purpose,
			declared_risk, risk_class, reasons, status, authorised_by, approval_id, session_id, correlation_id,
			requested_by, dedup_key, timeout_seconds)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`
	qInsertApproval = `INSERT INTO approvals (id, execution_id, session_id, target_id, risk_class, status, requested_by)
			VALUES ($1, $2, $3, $4, $5, 'pending', $6)`
	qSessionTask = `SELECT slug FROM entities WHERE type = 'task' AND attributes->>'session_id' = $1
			ORDER BY created_at DESC, id DESC LIMIT 1`
	qUnregisteredPctCreates = `SELECT x.id::text FROM executions x
		WHERE x.action = 'pct_create' AND x.status = 'completed' AND x.finished_at > now() - make_interval(secs => $1)
		  AND NOT EXISTS (SELECT 1 FROM entities e WHERE e.type = 'lxc' AND e.name = x.params->>'hostname')
		ORDER BY x.finished_at`
)

func scanExecution(row pgx.Row, withOutput bool) (Execution, error) {
	var e Execution
	var params, reasons, result []byte
	var output []byte
	dst := []any{&e.ID, &e.TargetID, &e.Target, &e.Action, &e.Command, &params, &e.Purpose,
		&e.DeclaredRisk, &e.RiskClass, &reasons, &e.Status, &e.AuthorisedBy, &e.ApprovalID, &e.SessionID,
		&e.CorrelationID, &e.RequestedBy, &e.dedupKey, &e.TimeoutSeconds, &e.ExitCode, &e.OutputTruncated, &result,
		&e.Error, &e.CreatedAt, &e.UpdatedAt, &e.StartedAt, &e.FinishedAt}
	if withOutput {
		dst = append(dst, &output)
	}
	if err := row.Scan(dst...); err != nil {
		return Execution{}, err
	}
	e.Params = json.RawMessage(params)
	if len(result) > 0 {
		e.Result = json.RawMessage(result)
	}
	if err := json.Unmarshal(reasons, &e.Reasons); err != nil {
		return Execution{}, fmt.Errorf("decode reasons of %s: %w", e.ID, err)
	}
	if e.Reasons == nil {
		e.Reasons = []string{}
	}
	if withOutput {
		e.setOutput(output)
	}
	return e, nil
}

// Execution reads one execution, with its output when withOutput. An id that is not a uuid,
// or names no execution, is apierr.ErrNotFound.
func (s *Store) Execution(ctx context.Context, id string, withOutput bool) (Execution, error) {
	if !ids.IsUUID(id) {
		return Execution{}, fmt.Errorf("%w: execution %q", apierr.ErrNotFound, id)
	}
	q := qExecution
	if withOutput {
		q = qExecutionWithOutput
	}
	e, err := scanExecution(s.db.QueryRow(ctx, q, id), withOutput)
	if storage.IsNoRows(err) {
		return Execution{}, fmt.Errorf("%w: execution %q", apierr.ErrNotFound, id)
	}
	if err != nil {
		return Execution{}, fmt.Errorf("read execution %s: %w", id, err)
	}
	return e, nil
}

// After is a keyset cursor: the sort key, (time, id), of the last row of the previous page.
type After struct {
	At time.Time
	ID string
}

// ExecutionFilter selects executions. Empty fields do not filter.
type ExecutionFilter struct {
	// Target is an entity slug or id.
	Target        string
	Actions       []string
	Statuses      []string
	CorrelationID string
	SessionID     string
	After         *After
}

// where collects the conditions of a list query and their arguments, numbering the
// placeholders as it goes.
type where struct {
	conds []string
	args  []any
}

func (w *where) add(cond string, v ...any) {
	w.args = append(w.args, v...)
	for i := range v {
		cond = strings.Replace(cond, "$?", fmt.Sprintf("$%d", len(w.args)-len(v)+i+1), 1)
	}
	w.conds = append(w.conds, cond)
}

// sql is base, the conditions, order and a LIMIT of limit rows.
func (w *where) sql(base, order string, limit int) (string, []any) {
	sql := base
	if len(w.conds) > 0 {
		sql += ` WHERE ` + strings.Join(w.conds, ` AND `)
	}
	w.args = append(w.args, limit)
	return sql + fmt.Sprintf(` ORDER BY %s LIMIT $%d`, order, len(w.args)), w.args
}

func executionList(f ExecutionFilter, limit int) (string, []any) {
	var w where
	if f.Target != "" {
		if ids.IsUUID(f.Target) {
			w.add(`x.target_id = $?::uuid`, f.Target)
		} else {
			w.add(`x.target_slug = $?`, f.Target)
		}
	}
	if len(f.Actions) > 0 {
		w.add(`x.action = ANY($?)`, f.Actions)
	}
	if len(f.Statuses) > 0 {
		w.add(`x.status = ANY($?)`, f.Statuses)
	}
	if f.CorrelationID != "" {
		w.add(`x.correlation_id = $?`, f.CorrelationID)
	}
	if f.SessionID != "" {
		w.add(`x.session_id = $?`, f.SessionID)
	}
	if f.After != nil {
		w.add(`(x.created_at, x.id) < ($?, $?::uuid)`, f.After.At, f.After.ID)
	}
	return w.sql(qExecutionList, `x.created_at DESC, x.id DESC`, limit)
}

// Executions lists at most limit executions matching f, newest first, without their output.
func (s *Store) Executions(ctx context.Context, f ExecutionFilter, limit int) ([]Execution, error) {
	sql, args := executionList(f, limit)
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("list executions: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Execution, error) { return scanExecution(r, false) })
	if err != nil {
		return nil, fmt.Errorf("list executions: %w", err)
	}
	return items, nil
}

// ExecutionStatus is the status of execution id (a uuid); apierr.ErrNotFound when there is none.
func (s *Store) ExecutionStatus(ctx context.Context, id string) (string, error) {
	var status string
	err := s.db.QueryRow(ctx, qExecutionStatus, id).Scan(&status)
	if storage.IsNoRows(err) {
		return "", fmt.Errorf("%w: execution %q", apierr.ErrNotFound, id)
	}
	if err != nil {
		return "", fmt.Errorf("read execution %s: %w", id, err)
	}
	return status, nil
}

// LogChunks returns at most limit output chunks of execution id with seq > after, in order.
func (s *Store) LogChunks(ctx context.Context, id string, after, limit int) ([]LogChunk, error) {
	rows, err := s.db.Query(ctx, qLogChunks, id, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read logs of %s: %w", id, err)
	}
	chunks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (LogChunk, error) {
		var c LogChunk
		err := r.Scan(&c.Seq, &c.Stream, &c.At, &c.Data)
		c.Text = TextOf(c.Data)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("read logs of %s: %w", id, err)
	}
	return chunks, nil
}

// Target reads the entity ref names (a slug or an id) as the gate decides on it; an
// unknown one is apierr.ErrNotFound.
func (s *Store) Target(ctx context.Context, ref string) (Target, error) {
	q := qTargetBySlug
	if ids.IsUUID(ref) {
		q = qTargetByID
	}
	var t Target
	err := s.db.QueryRow(ctx, q, ref).Scan(&t.ID, &t.Slug, &t.Type, &t.State, &t.Attributes)
	if storage.IsNoRows(err) {
		return t, fmt.Errorf("%w: target %q is not in the graph", apierr.ErrNotFound, ref)
	}
	if err != nil {
		return t, fmt.Errorf("read target %q: %w", ref, err)
	}
	return t, nil
}

// optional runs a one-column lookup into dst, leaving it unchanged when no row matches.
func (s *Store) optional(ctx context.Context, what, q string, args []any, dst ...any) error {
	if err := s.db.QueryRow(ctx, q, args...).Scan(dst...); err != nil && !storage.IsNoRows(err) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// GuestHolding is the slug of a live guest (of one of the types guests) that already holds
// vmid or the hostname, "" when none does.
func (s *Store) GuestHolding(ctx context.Context, guests []string, vmid string, hostname any) (string, error) {
	var slug string
	err := s.optional(ctx, "vmid lookup", qGuestHolding, []any{guests, vmid, hostname}, &slug)
	return slug, err
}

// PendingDuplicate is the id of the execution with dedup key key that waits for an
// approval, "" when there is none.
func (s *Store) PendingDuplicate(ctx context.Context, key string) (string, error) {
	var id string
	err := s.optional(ctx, "dedup lookup", qPendingDuplicate, []any{key}, &id)
	return id, err
}

// SessionPendingApproval is the oldest approval of session awaiting a decision and the
// execution it gates ("", "" when there is none).
func (s *Store) SessionPendingApproval(ctx context.Context, session string) (approvalID, executionID string, err error) {
	err = s.optional(ctx, "pending approval lookup", qSessionPendingApproval, []any{session}, &approvalID, &executionID)
	return approvalID, executionID, err
}

// OpenAssentWindow is the id of the session's open assent window, "" when none is open.
func (s *Store) OpenAssentWindow(ctx context.Context, session string) (string, error) {
	var id string
	err := s.optional(ctx, "assent window lookup", qOpenAssentWindow, []any{session}, &id)
	return id, err
}

// OpenDestructiveWindow is the id of the open destructive window of (session, target), ""
// when none is open.
func (s *Store) OpenDestructiveWindow(ctx context.Context, session, targetID string) (string, error) {
	var id string
	err := s.optional(ctx, "destructive window lookup", qOpenDestructiveWindow, []any{session, targetID}, &id)
	return id, err
}

// SessionTask is the slug of the newest task the session drives, "" when there is none.
func (s *Store) SessionTask(ctx context.Context, session string) (string, error) {
	var slug string
	err := s.optional(ctx, "find the session's task", qSessionTask, []any{session}, &slug)
	return slug, err
}

// LockRequest takes the transaction's advisory lock on key: requests that could conflict
// wait for each other until the holder commits.
func (s *Store) LockRequest(ctx context.Context, key string) error {
	if _, err := s.db.Exec(ctx, qLockRequest, key); err != nil {
		return fmt.Errorf("lock request: %w", err)
	}
	return nil
}

// NewExecution is an execution the gate let through or queued, as it is inserted.
type NewExecution struct {
	ID, TargetID, TargetSlug, Action, Command string
	// Params is the canonical params JSON.
	Params                   []byte
	Purpose                  string
	DeclaredRisk             *string
	RiskClass                string
	Reasons                  []string
	Status, AuthorisedBy     string
	ApprovalID, SessionID    *string
	CorrelationID, Requester string
	DedupKey                 string
	TimeoutSeconds           int
}

// InsertExecution inserts e and, when it names one, its pending approval (requested by
// e.Requester).
func (s *Store) InsertExecution(ctx context.Context, e NewExecution) error {
	reasons := e.Reasons
	if reasons == nil {
		reasons = []string{}
	}
	rj, err := json.Marshal(reasons)
	if err != nil {
		return fmt.Errorf("marshal reasons: %w", err)
	}
	_, err = s.db.Exec(ctx, qInsertExecution, e.ID, e.TargetID, e.TargetSlug, e.Action, e.Command, e.Params, e.Purpose,
		e.DeclaredRisk, e.RiskClass, rj, e.Status, e.AuthorisedBy, e.ApprovalID, e.SessionID, e.CorrelationID,
		e.Requester, e.DedupKey, e.TimeoutSeconds)
	if err != nil {
		return fmt.Errorf("insert execution: %w", err)
	}
	if e.ApprovalID != nil {
		_, err = s.db.Exec(ctx, qInsertApproval, *e.ApprovalID, e.ID, e.SessionID, e.TargetID, e.RiskClass, e.Requester)
		if err != nil {
			return fmt.Errorf("insert approval: %w", err)
		}
	}
	return nil
}

// UnregisteredPctCreates lists the completed pct_create executions of the last within whose
// container is not in the graph, oldest first.
func (s *Store) UnregisteredPctCreates(ctx context.Context, within time.Duration) ([]string, error) {
	rows, err := s.db.Query(ctx, qUnregisteredPctCreates, within.Seconds())
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
