package labsim

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
)

// controlHandler serves the loopback control API used by tests and `make up`:
//
//	PUT    /faults/hosts/{host}          body: Fault JSON   → 204
//	PUT    /faults/guests/{host}/{vmid}  body: Fault JSON   → 204
//	DELETE /faults                                          → 204
//	GET    /state                                           → State JSON
//	POST   /guests/{host}/{vmid}/start | /stop              → 204
//	POST   /guests/{host}/{vmid}/migrate body: {"target": "NODE"}
//	                                     → 200 Placement JSON; 400 problem JSON naming the
//	                                       field (host, vmid, target); 409 target down
//	POST   /ha/recover/{host}            → 200 [Placement] (recover a down node's HA guests now)
func (s *Sim) controlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /faults/hosts/{host}", func(w http.ResponseWriter, r *http.Request) {
		var f Fault
		if !decodeFault(w, r, &f) {
			return
		}
		s.answer(w, s.SetHostFault(r.PathValue("host"), f))
	})
	mux.HandleFunc("PUT /faults/guests/{host}/{vmid}", func(w http.ResponseWriter, r *http.Request) {
		vmid, err := strconv.Atoi(r.PathValue("vmid"))
		if err != nil {
			writeJSONError(w, http.StatusBadRequest, "vmid must be an integer")
			return
		}
		var f Fault
		if !decodeFault(w, r, &f) {
			return
		}
		s.answer(w, s.SetGuestFault(r.PathValue("host"), vmid, f))
	})
	mux.HandleFunc("DELETE /faults", func(w http.ResponseWriter, r *http.Request) {
		s.answer(w, s.ClearFaults())
	})
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(s.Snapshot()); err != nil {
			s.log.Warn().Err(err).Msg("write state")
		}
	})
	for _, action := range []string{"start", "stop"} {
		running := action == "start"
		mux.HandleFunc("POST /guests/{host}/{vmid}/"+action, func(w http.ResponseWriter, r *http.Request) {
			vmid, err := strconv.Atoi(r.PathValue("vmid"))
			if err != nil {
				writeJSONError(w, http.StatusBadRequest, "vmid must be an integer")
				return
			}
			s.answer(w, s.SetGuestStatus(r.PathValue("host"), vmid, running))
		})
	}
	mux.HandleFunc("POST /guests/{host}/{vmid}/migrate", s.serveMigrate)
	mux.HandleFunc("POST /ha/recover/{host}", func(w http.ResponseWriter, r *http.Request) {
		moved, err := s.RecoverHA(r.PathValue("host"))
		if err != nil {
			writeProblem(w, http.StatusBadRequest, "Unknown host", err.Error(), "host")
			return
		}
		writeJSON(w, http.StatusOK, moved)
	})
	return mux
}

// serveMigrate moves a guest to another node of its cluster (Sim.MigrateGuest).
func (s *Sim) serveMigrate(w http.ResponseWriter, r *http.Request) {
	vmid, err := strconv.Atoi(r.PathValue("vmid"))
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "Invalid vmid", "vmid must be an integer", "vmid")
		return
	}
	var body struct {
		Target string `json:"target"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeProblem(w, http.StatusBadRequest, "Invalid body", "body must be {\"target\": \"NODE\"}: "+err.Error(), "target")
		return
	}
	if body.Target == "" {
		writeProblem(w, http.StatusBadRequest, "Missing target", "target names the node to migrate to", "target")
		return
	}
	p, err := s.MigrateGuest(r.PathValue("host"), vmid, body.Target)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, p)
	case errors.Is(err, ErrUnknownHost):
		writeProblem(w, http.StatusBadRequest, "Unknown host", err.Error(), "host")
	case errors.Is(err, ErrUnknownGuest):
		writeProblem(w, http.StatusBadRequest, "Unknown guest", err.Error(), "vmid")
	case errors.Is(err, ErrBadTarget):
		writeProblem(w, http.StatusBadRequest, "Invalid target", err.Error(), "target")
	case errors.Is(err, ErrTargetDown):
		writeProblem(w, http.StatusConflict, "Target node down", err.Error(), "target")
	default:
		writeProblem(w, http.StatusInternalServerError, "Migration failed", err.Error(), "")
	}
}

// writeProblem answers an RFC 9457 problem (application/problem+json), as the Oikos API does.
func writeProblem(w http.ResponseWriter, status int, title, detail, field string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	p := map[string]any{"type": "about:blank", "title": title, "status": status, "detail": detail}
	if field != "" {
		p["field"] = field
	}
	_ = json.NewEncoder(w).Encode(p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func decodeFault(w http.ResponseWriter, r *http.Request, f *Fault) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
	if err := dec.Decode(f); err != nil {
		writeJSONError(w, http.StatusBadRequest, "invalid fault: "+err.Error())
		return false
	}
	return true
}

func (s *Sim) answer(w http.ResponseWriter, err error) {
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, ErrUnknownHost), errors.Is(err, ErrUnknownGuest):
		writeJSONError(w, http.StatusNotFound, err.Error())
	default:
		writeJSONError(w, http.StatusInternalServerError, err.Error())
	}
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
