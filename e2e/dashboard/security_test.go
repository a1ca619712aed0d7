package dashboard_test

import (
	"net/http"
	"testing"
	"time"
)

// TestBrowserSecurity runs e2e/browser/security against the package's stack (issue 32, the
// browser): a hostile page served on another loopback port, with the operator signed in to
// the dashboard in the same browser, tries to change things through the operator's session
// (form posts, fetch with credentials, a beacon, a preflighted DELETE) and changes nothing;
// a knowledge entry full of script and event-handler payloads renders inert on the reader
// and in search results, and the app runs without a single Content-Security-Policy
// violation. The hostile page's server is the node test's own.
func TestBrowserSecurity(t *testing.T) {
	requireBuilt(t)
	w := shared.Get(t)
	defer w.ctl.logTo(t)()
	env := browserEnv(t, w)
	runNode(t, 3*time.Minute, env, "--test", "--test-concurrency=1", "--test-reporter=spec", "security/")
}

// footprint counts what a change made as one actor leaves behind (GET /footprint): every
// mutation of the api writes an audit row and an event naming its actor in its own
// transaction, so equal counts before and after mean the actor changed nothing; entities,
// knowledge entries and the actor's live dashboard sessions are counted beside them.
func (c *control) footprint(w http.ResponseWriter, r *http.Request) {
	actor := r.URL.Query().Get("actor")
	if actor == "" {
		fail(w, http.StatusBadRequest, errMissing("actor"))
		return
	}
	var out struct {
		Audit        int `json:"audit"`
		Events       int `json:"events"`
		Entities     int `json:"entities"`
		Knowledge    int `json:"knowledge"`
		LiveSessions int `json:"live_sessions"`
	}
	err := c.s.db.Pool.QueryRow(r.Context(), `SELECT
		(SELECT count(*) FROM audit_log WHERE actor = $1),
		(SELECT count(*) FROM events WHERE actor = $1),
		(SELECT count(*) FROM entities),
		(SELECT count(*) FROM entities WHERE type IN ('document', 'investigation', 'runbook')),
		(SELECT count(*) FROM web_sessions s JOIN api_tokens t ON t.id = s.token_id
		  WHERE t.name = $1 AND s.revoked_at IS NULL AND s.expires_at > now())`, actor).
		Scan(&out.Audit, &out.Events, &out.Entities, &out.Knowledge, &out.LiveSessions)
	if err != nil {
		fail(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

type errMissing string

func (e errMissing) Error() string { return string(e) + " is required" }
