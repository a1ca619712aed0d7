package sessionsapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/oikos-hq/oikos/agent/internal/storage"
)

// ProblemMediaType is RFC 9457's media type for error bodies.
const ProblemMediaType = "application/problem+json"

// problemBody is an RFC 9457 problem; Field names the query parameter at fault (422).
type problemBody struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Field  string `json:"field,omitempty"`
}

func problem(w http.ResponseWriter, status int, title, detail, field string) {
	b, _ := json.Marshal(problemBody{Type: "about:blank", Title: title, Status: status, Detail: detail, Field: field})
	w.Header().Set("Content-Type", ProblemMediaType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func unauthorized(w http.ResponseWriter, detail string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="oikos-agent"`)
	problem(w, http.StatusUnauthorized, "Unauthorized", detail, "")
}

// fail answers err: a refused parameter 422, a missing session 404, a deletion refused while
// the session waits on an approval 409, anything else 500 (logged; the answer says only to
// look in the log).
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var fe *fieldError
	switch {
	case errors.As(err, &fe):
		problem(w, http.StatusUnprocessableEntity, "Invalid value", fe.Error(), fe.field)
	case errors.Is(err, storage.ErrNotFound):
		problem(w, http.StatusNotFound, "Not Found", "no session "+quote(r.PathValue("id")), "")
	case errors.Is(err, errAwaitsApproval):
		problem(w, http.StatusConflict, "Conflict", errAwaitsApproval.Error(), "")
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
		problem(w, http.StatusServiceUnavailable, "Service Unavailable", "the request was cancelled", "")
	default:
		h.log.Error().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Msg("sessions request failed")
		problem(w, http.StatusInternalServerError, "Internal Server Error", "the agent could not answer; see its log", "")
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
