package execution

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/ids"
	"github.com/oikos-hq/oikos/api/internal/storage/execstore"
)

// Get returns one execution with its output.
func (s *Service) Get(ctx context.Context, id string) (Execution, error) {
	return s.store.Execution(ctx, id, true)
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

// parseCursor reads a cursor; "" is none (the first page).
func parseCursor(field, s string) (*execstore.After, error) {
	if s == "" {
		return nil, nil
	}
	ts, id, ok := strings.Cut(s, "|")
	at, err := time.Parse(time.RFC3339Nano, ts)
	if !ok || err != nil || !ids.IsUUID(id) {
		return nil, apierr.Invalid(field, "malformed cursor; pass next_cursor from the previous page unchanged")
	}
	return &execstore.After{At: at, ID: id}, nil
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

// page cuts one row past limit off items and makes the cursor of the next page from the last
// item kept.
func page[T any](items []T, limit int, key func(T) string) Page[T] {
	out := Page[T]{Items: items}
	if len(items) > limit {
		out.Items = items[:limit]
		out.Next = key(out.Items[limit-1])
	}
	return out
}

// List returns executions matching f, newest first, without their output.
func (s *Service) List(ctx context.Context, f ListFilter) (Page[Execution], error) {
	for _, st := range f.Statuses {
		if !validStatus(st) {
			return Page[Execution]{}, apierr.Invalid("status", "%q is not one of %s", st, strings.Join(Statuses(), ", "))
		}
	}
	after, err := parseCursor("cursor", f.After)
	if err != nil {
		return Page[Execution]{}, err
	}
	limit := clampLimit(f.Limit)
	items, err := s.store.Executions(ctx, execstore.ExecutionFilter{Target: f.Target, Actions: f.Actions, Statuses: f.Statuses,
		CorrelationID: f.CorrelationID, SessionID: f.SessionID, After: after}, limit+1)
	if err != nil {
		return Page[Execution]{}, err
	}
	return page(items, limit, func(e Execution) string { return cursorKey(e.CreatedAt, e.ID) }), nil
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
	var err error
	if out.Status, err = s.store.ExecutionStatus(ctx, id); err != nil {
		return Logs{}, err
	}
	chunks, err := s.store.LogChunks(ctx, id, after, limit+1)
	if err != nil {
		return Logs{}, err
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

// GetApproval returns one approval with what it gates.
func (s *Service) GetApproval(ctx context.Context, id string) (Approval, error) {
	return s.store.Approval(ctx, id)
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
	for _, st := range f.Statuses {
		switch st {
		case ApprovalPending, ApprovalApproved, ApprovalDenied, ApprovalRevoked, ApprovalExpired:
		default:
			return Page[Approval]{}, apierr.Invalid("status", "%q is not one of pending, approved, denied, revoked, expired", st)
		}
	}
	after, err := parseCursor("cursor", f.After)
	if err != nil {
		return Page[Approval]{}, err
	}
	limit := clampLimit(f.Limit)
	items, err := s.store.Approvals(ctx, execstore.ApprovalFilter{Statuses: f.Statuses, SessionID: f.SessionID, After: after}, limit+1)
	if err != nil {
		return Page[Approval]{}, err
	}
	return page(items, limit, func(a Approval) string { return cursorKey(a.RequestedAt, a.ID) }), nil
}
