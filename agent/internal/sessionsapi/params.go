package sessionsapi

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/agent/internal/storage"
	"github.com/oikos-hq/oikos/agent/internal/tasks"
	"github.com/oikos-hq/oikos/shared/duration"
	"github.com/oikos-hq/oikos/shared/ids"
)

// The values the list's filters accept.
var (
	outcomes = []string{tasks.OutcomeSuccess, tasks.OutcomePartial, tasks.OutcomeFailed}
	statuses = []string{storage.StatusExecuting, storage.StatusAwaitingInput, storage.StatusCompleted, storage.StatusFailed, storage.StatusAbandoned}
	blockers = []string{tasks.BlockerApprovalTimeout, tasks.BlockerUserAbandoned, tasks.BlockerClassifierOverreach,
		tasks.BlockerModelRefusal, tasks.BlockerToolError}
)

// maxRefLen bounds an entity slug in a filter.
const maxRefLen = 512

// fieldError is a query parameter the list refuses (422, naming it).
type fieldError struct {
	field, detail string
}

func (e *fieldError) Error() string { return e.field + ": " + e.detail }

func invalid(field, format string, a ...any) error {
	return &fieldError{field: field, detail: fmt.Sprintf(format, a...)}
}

// parseFilter reads the list's query: outcome, status, blocker (each comma-separated and/or
// repeated), entity_id (a uuid or a slug), since (RFC 3339, or a duration back from now such
// as 7d, 12h or 90m), limit (1..200, default 50) and cursor (next_cursor of the page before).
func parseFilter(q url.Values, now time.Time) (storage.SessionFilter, error) {
	f := storage.SessionFilter{Limit: storage.DefaultSessionLimit}
	var err error
	if f.Outcomes, err = oneOf(q, "outcome", outcomes); err != nil {
		return f, err
	}
	if f.Statuses, err = oneOf(q, "status", statuses); err != nil {
		return f, err
	}
	if f.Blockers, err = oneOf(q, "blocker", blockers); err != nil {
		return f, err
	}
	if v := strings.TrimSpace(q.Get("entity_id")); v != "" {
		if !ids.IsUUID(v) && !isSlug(v) {
			return f, invalid("entity_id", "%q is neither an entity id (uuid) nor an entity slug (type:name)", v)
		}
		f.Entity = v
	}
	if v := strings.TrimSpace(q.Get("since")); v != "" {
		if f.Since, err = since(v, now); err != nil {
			return f, err
		}
	}
	if v := strings.TrimSpace(q.Get("limit")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > storage.MaxSessionLimit {
			return f, invalid("limit", "%q: want a whole number from 1 to %d", v, storage.MaxSessionLimit)
		}
		f.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		c, err := storage.ParseSessionCursor(v)
		if err != nil {
			return f, invalid("cursor", "%v", err)
		}
		f.After = &c
	}
	return f, nil
}

// oneOf reads a filter of known values, comma-separated and/or repeated; empty items are
// ignored, so an empty parameter does not filter.
func oneOf(q url.Values, name string, allowed []string) ([]string, error) {
	var out []string
	for _, raw := range q[name] {
		for v := range strings.SplitSeq(raw, ",") {
			v = strings.TrimSpace(v)
			if v == "" {
				continue
			}
			if !slices.Contains(allowed, v) {
				return nil, invalid(name, "%q: want one or more of %s, comma-separated", v, strings.Join(allowed, ", "))
			}
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out, nil
}

// since parses a point in time: an RFC 3339 time, or a duration back from now.
func since(v string, now time.Time) (time.Time, error) {
	// A '+' of an offset that was not escaped in the query string arrives as a space.
	for _, s := range []string{v, strings.ReplaceAll(v, " ", "+")} {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			return t, nil
		}
	}
	d, err := duration.Parse(v)
	if err != nil {
		return time.Time{}, invalid("since", "%v, nor an RFC 3339 time", err)
	}
	return now.Add(-d), nil
}

// isSlug reports whether v has an entity slug's shape, "<type>:<name>" with neither empty,
// without whitespace or control characters.
func isSlug(v string) bool {
	typ, name, ok := strings.Cut(v, ":")
	if !ok || typ == "" || name == "" || len(v) > maxRefLen {
		return false
	}
	for _, r := range v {
		if r <= ' ' || r == 0x7f {
			return false
		}
	}
	return true
}
