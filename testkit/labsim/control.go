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
	return mux
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
