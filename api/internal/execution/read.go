package execution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/ids"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/policy"
	"github.com/oikos-hq/oikos/shared/policy/assent"
)

// execColumns matches scanExecution; the output column is selected only when asked for.
const execColumns = `x.id::text, x.target_id::text, x.target_slug, x.action, x.command, x.params, x.purpose,
	x.declared_risk, x.risk_class, x.reasons, x.status, x.authorised_by, x.approval_id::text, x.session_id,
	x.correlation_id, x.requested_by, x.dedup_key, x.timeout_seconds, x.exit_code, x.output_truncated, x.result,
	x.error, x.created_at, x.updated_at, x.started_at, x.finished_at`

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

// loadExecution reads one execution with its output; lock takes a row lock (FOR UPDATE).
func loadExecution(ctx context.Context, q pg.Querier, id string, withOutput bool) (Execution, error) {
	if !ids.IsUUID(id) {
		return Execution{}, fmt.Errorf("%w: execution %q", ErrNotFound, id)
	}
	cols := execColumns
	if withOutput {
		cols += `, x.output`
	}
	e, err := scanExecution(q.QueryRow(ctx, `SELECT `+cols+` FROM executions x WHERE x.id = $1::uuid`, id), withOutput)
	if errors.Is(err, pgx.ErrNoRows) {
		return Execution{}, fmt.Errorf("%w: execution %q", ErrNotFound, id)
	}
	if err != nil {
		return Execution{}, fmt.Errorf("read execution %s: %w", id, err)
	}
	return e, nil
}

// Get returns one execution with its output.
func (s *Service) Get(ctx context.Context, id string) (Execution, error) {
	return loadExecution(ctx, s.pool, id, true)
}

// ListFilter selects executions. Empty fields do not filter.
type ListFilter struct {
	// Target is an entity slug or id.
	Target        string
	Actions       []string
	Statuses      []string
	CorrelationID string
	SessionID     string
	// After is the cursor: the sort key of the last item of the previous page.
	After string
	Limit int
}

// Page is one page of a list, newest first. Next is the cursor of the following page, ""
// on the last one.
type Page[T any] struct {
	Items []T
	Next  string
}

// cursorKey is the sort key of a row, (created_at, id), as an opaque string. id breaks
// created_at ties, so the order is total and no row is dropped or repeated at a boundary.
func cursorKey(at time.Time, id string) string {
	return at.UTC().Format(time.RFC3339Nano) + "|" + id
}

func parseCursor(field, s string) (time.Time, string, error) {
	ts, id, ok := strings.Cut(s, "|")
	at, err := time.Parse(time.RFC3339Nano, ts)
	if !ok || err != nil || !ids.IsUUID(id) {
		return time.Time{}, "", apierr.Invalid(field, "malformed cursor; pass next_cursor from the previous page unchanged")
	}
	return at, id, nil
}

func clampLimit(n int) int {
	switch {
	case n <= 0:
		return 50
	case n > 500:
		return 500
	}
	return n
}

// List returns executions matching f, newest first, without their output.
func (s *Service) List(ctx context.Context, f ListFilter) (Page[Execution], error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "$?", fmt.Sprintf("$%d", len(args))))
	}
	if f.Target != "" {
		if ids.IsUUID(f.Target) {
			add(`x.target_id = $?::uuid`, f.Target)
		} else {
			add(`x.target_slug = $?`, f.Target)
		}
	}
	if len(f.Actions) > 0 {
		add(`x.action = ANY($?)`, f.Actions)
	}
	if len(f.Statuses) > 0 {
		for _, st := range f.Statuses {
			if !validStatus(st) {
				return Page[Execution]{}, apierr.Invalid("status", "%q is not one of %s", st, strings.Join(Statuses(), ", "))
			}
		}
		add(`x.status = ANY($?)`, f.Statuses)
	}
	if f.CorrelationID != "" {
		add(`x.correlation_id = $?`, f.CorrelationID)
	}
	if f.SessionID != "" {
		add(`x.session_id = $?`, f.SessionID)
	}
	if f.After != "" {
		at, id, err := parseCursor("cursor", f.After)
		if err != nil {
			return Page[Execution]{}, err
		}
		args = append(args, at, id)
		where = append(where, fmt.Sprintf(`(x.created_at, x.id) < ($%d, $%d::uuid)`, len(args)-1, len(args)))
	}
	limit := clampLimit(f.Limit)
	sql := `SELECT ` + execColumns + ` FROM executions x`
	if len(where) > 0 {
		sql += ` WHERE ` + strings.Join(where, ` AND `)
	}
	args = append(args, limit+1)
	sql += fmt.Sprintf(` ORDER BY x.created_at DESC, x.id DESC LIMIT $%d`, len(args))
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return Page[Execution]{}, fmt.Errorf("list executions: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Execution, error) { return scanExecution(r, false) })
	if err != nil {
		return Page[Execution]{}, fmt.Errorf("list executions: %w", err)
	}
	out := Page[Execution]{Items: items}
	if len(items) > limit {
		out.Items = items[:limit]
		last := out.Items[limit-1]
		out.Next = cursorKey(last.CreatedAt, last.ID)
	}
	return out, nil
}

func validStatus(s string) bool {
	for _, st := range Statuses() {
		if st == s {
			return true
		}
	}
	return false
}

// maxLogChunks bounds one page of logs.
const maxLogChunks = 1000

// Logs returns the output chunks of an execution with seq > after, in order, and whether the
// stream is over (the execution is terminal and nothing follows).
func (s *Service) Logs(ctx context.Context, id string, after, limit int) (Logs, error) {
	if limit <= 0 || limit > maxLogChunks {
		limit = maxLogChunks
	}
	if !ids.IsUUID(id) {
		return Logs{}, fmt.Errorf("%w: execution %q", ErrNotFound, id)
	}
	out := Logs{ExecutionID: id, Chunks: []LogChunk{}, NextSeq: after}
	// Status before chunks: the scheduler writes the last chunk before the terminal status,
	// so a terminal status read here means every chunk is visible to the read below, and
	// "done" never drops the tail.
	err := s.pool.QueryRow(ctx, `SELECT status FROM executions WHERE id = $1::uuid`, id).Scan(&out.Status)
	if errors.Is(err, pgx.ErrNoRows) {
		return Logs{}, fmt.Errorf("%w: execution %q", ErrNotFound, id)
	}
	if err != nil {
		return Logs{}, fmt.Errorf("read execution %s: %w", id, err)
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, stream, at, data FROM execution_logs
		WHERE execution_id = $1::uuid AND seq > $2 ORDER BY seq LIMIT $3`, id, after, limit+1)
	if err != nil {
		return Logs{}, fmt.Errorf("read logs of %s: %w", id, err)
	}
	chunks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (LogChunk, error) {
		var c LogChunk
		err := r.Scan(&c.Seq, &c.Stream, &c.At, &c.Data)
		c.Text = TextOf(c.Data)
		return c, err
	})
	if err != nil {
		return Logs{}, fmt.Errorf("read logs of %s: %w", id, err)
	}
	more := len(chunks) > limit
	if more {
		chunks = chunks[:limit]
	}
	out.Chunks = chunks
	if len(chunks) > 0 {
		out.NextSeq = chunks[len(chunks)-1].Seq
	}
	out.Done = Terminal(out.Status) && !more
	return out, nil
}

// approvalColumns matches scanApproval; a is approvals, x the execution it gates.
const approvalColumns = `a.id::text, a.execution_id::text, a.session_id, a.target_id::text, x.target_slug, x.action,
	x.command, x.purpose, a.risk_class, x.reasons, a.status, a.requested_by, a.requested_at, a.decided_by,
	a.relayed_by, a.decided_at, a.via, a.message_id, a.reason, x.status`

const approvalFrom = ` FROM approvals a JOIN executions x ON x.id = a.execution_id `

func scanApproval(row pgx.Row) (Approval, error) {
	var a Approval
	var reasons []byte
	err := row.Scan(&a.ID, &a.ExecutionID, &a.SessionID, &a.TargetID, &a.Target, &a.Action, &a.Command, &a.Purpose,
		&a.RiskClass, &reasons, &a.Status, &a.RequestedBy, &a.RequestedAt, &a.DecidedBy, &a.RelayedBy, &a.DecidedAt, &a.Via,
		&a.MessageID, &a.Reason, &a.ExecutionStatus)
	if err != nil {
		return Approval{}, err
	}
	if err := json.Unmarshal(reasons, &a.Reasons); err != nil {
		return Approval{}, fmt.Errorf("decode reasons of approval %s: %w", a.ID, err)
	}
	if a.Reasons == nil {
		a.Reasons = []string{}
	}
	if a.RiskClass == string(policy.Destructive) {
		a.ConfirmationPhrase = assent.ConfirmationPhrase(assent.PendingApproval{TargetSlug: a.Target, Command: a.Command, Class: policy.Destructive})
	}
	return a, nil
}

func loadApproval(ctx context.Context, q pg.Querier, id string) (Approval, error) {
	if !ids.IsUUID(id) {
		return Approval{}, fmt.Errorf("%w: approval %q", ErrNotFound, id)
	}
	a, err := scanApproval(q.QueryRow(ctx, `SELECT `+approvalColumns+approvalFrom+`WHERE a.id = $1::uuid`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Approval{}, fmt.Errorf("%w: approval %q", ErrNotFound, id)
	}
	if err != nil {
		return Approval{}, fmt.Errorf("read approval %s: %w", id, err)
	}
	return a, nil
}

// GetApproval returns one approval with what it gates.
func (s *Service) GetApproval(ctx context.Context, id string) (Approval, error) {
	return loadApproval(ctx, s.pool, id)
}

// ApprovalFilter selects approvals. Empty fields do not filter.
type ApprovalFilter struct {
	Statuses  []string
	SessionID string
	After     string
	Limit     int
}

// ListApprovals returns approvals matching f, newest request first.
func (s *Service) ListApprovals(ctx context.Context, f ApprovalFilter) (Page[Approval], error) {
	var where []string
	var args []any
	if len(f.Statuses) > 0 {
		for _, st := range f.Statuses {
			switch st {
			case ApprovalPending, ApprovalApproved, ApprovalDenied, ApprovalRevoked, ApprovalExpired:
			default:
				return Page[Approval]{}, apierr.Invalid("status", "%q is not one of pending, approved, denied, revoked, expired", st)
			}
		}
		args = append(args, f.Statuses)
		where = append(where, fmt.Sprintf(`a.status = ANY($%d)`, len(args)))
	}
	if f.SessionID != "" {
		args = append(args, f.SessionID)
		where = append(where, fmt.Sprintf(`a.session_id = $%d`, len(args)))
	}
	if f.After != "" {
		at, id, err := parseCursor("cursor", f.After)
		if err != nil {
			return Page[Approval]{}, err
		}
		args = append(args, at, id)
		where = append(where, fmt.Sprintf(`(a.requested_at, a.id) < ($%d, $%d::uuid)`, len(args)-1, len(args)))
	}
	limit := clampLimit(f.Limit)
	sql := `SELECT ` + approvalColumns + approvalFrom
	if len(where) > 0 {
		sql += ` WHERE ` + strings.Join(where, ` AND `)
	}
	args = append(args, limit+1)
	sql += fmt.Sprintf(` ORDER BY a.requested_at DESC, a.id DESC LIMIT $%d`, len(args))
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return Page[Approval]{}, fmt.Errorf("list approvals: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Approval, error) { return scanApproval(r) })
	if err != nil {
		return Page[Approval]{}, fmt.Errorf("list approvals: %w", err)
	}
	out := Page[Approval]{Items: items}
	if len(items) > limit {
		out.Items = items[:limit]
		last := out.Items[limit-1]
		out.Next = cursorKey(last.RequestedAt, last.ID)
	}
	return out, nil
}
