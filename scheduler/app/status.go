package app

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/oikos-hq/oikos/scheduler/internal/checkrun"
	"github.com/oikos-hq/oikos/scheduler/internal/leases"
	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/leasetable"
)

// statusHandler serves GET /status: this scheduler's id and leases, the fleet's members and
// lease table, and the check runner's state.
func statusHandler(pool *storage.Pool, lm *leases.Manager, runner *checkrun.Runner) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		members, table, err := leasetable.Read(req.Context(), pool)
		out := map[string]any{"scheduler": lm.ID(), "leases": lm.Held(), "owned": lm.Owned(), "checks": runner.Status()}
		if err != nil {
			out["fleet_error"] = err.Error()
		} else {
			out["members"], out["lease_table"] = members, table
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		if strings.Contains(req.URL.RawQuery, "pretty") {
			enc.SetIndent("", "  ")
		}
		_ = enc.Encode(out)
	})
}
