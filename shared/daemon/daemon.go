// Package daemon is the start-up and shut-down frame every Oikos process shares: a context
// cancelled by SIGINT/SIGTERM, a JSON logger, and the /healthz, /readyz and /metrics server.
// Each daemon's main calls Main with its own run function; the run function wires the
// daemon's parts and returns when the context ends.
package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/logging"
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/safego"
)

// Main runs fn with a context that ends on SIGINT or SIGTERM and returns the exit code: 0
// after a clean stop, 1 when fn failed. A second signal exits at once.
func Main(name string, fn func(ctx context.Context, log zerolog.Logger) error) int {
	log := logging.New(os.Stderr, name, os.Getenv("OIKOS_LOG_LEVEL"))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal now kills the process with the default action
	}()
	err := safego.Call(func() error { return fn(ctx, log) })
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Error().Err(err).Msg("stopped with an error")
		return 1
	}
	log.Info().Msg("stopped")
	return 0
}

// ReadyCheck reports whether one dependency is ready; a non-nil error makes /readyz 503.
type ReadyCheck func(ctx context.Context) error

// Health serves /healthz (the process is alive), /readyz (its dependencies answer) and
// /metrics. Daemons mount their own routes beside it or use it as their whole HTTP server.
type Health struct {
	mu      sync.Mutex
	checks  map[string]ReadyCheck
	Metrics *metrics.Registry
	started time.Time
	// db and avail, when set (WatchDatabase), make /healthz say whether the database answers.
	db    interface{ Ping(context.Context) error }
	avail *pg.Availability
}

// healthzPing bounds the ping /healthz sends: a health probe must answer within its own
// timeout even while the database host drops packets.
const healthzPing = time.Second

// WatchDatabase makes /healthz ping db (bounded by a second) and answer 503 while it does
// not answer, saying since when and with what error (avail's record, which the pool's own
// failures feed too). A daemon that lost its database is alive but cannot do its work;
// compose, make up and operators read the reason there.
func (h *Health) WatchDatabase(db interface{ Ping(context.Context) error }, avail *pg.Availability) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.db, h.avail = db, avail
}

// NewHealth returns a Health with its own metrics registry.
func NewHealth() *Health {
	return &Health{checks: map[string]ReadyCheck{}, Metrics: metrics.NewRegistry(), started: time.Now()}
}

// AddCheck registers a readiness check.
func (h *Health) AddCheck(name string, c ReadyCheck) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checks[name] = c
}

// AddDatabaseChecks registers the two readiness checks of a daemon on the database:
// "database" (db answers a ping) and "listener" (the LISTEN connection of its event
// notifier is up).
func (h *Health) AddDatabaseChecks(db interface{ Ping(context.Context) error }, listener interface{ Connected() bool }) {
	h.AddCheck("database", func(ctx context.Context) error { return db.Ping(ctx) })
	h.AddCheck("listener", func(context.Context) error {
		if !listener.Connected() {
			return fmt.Errorf("event listener is not connected")
		}
		return nil
	})
}

// Ready runs every check with a short timeout and returns the failures by name.
func (h *Health) Ready(ctx context.Context) map[string]string {
	h.mu.Lock()
	names := make([]string, 0, len(h.checks))
	for n := range h.checks {
		names = append(names, n)
	}
	h.mu.Unlock()
	sort.Strings(names)
	failed := map[string]string{}
	for _, n := range names {
		h.mu.Lock()
		c := h.checks[n]
		h.mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if err := c(cctx); err != nil {
			failed[n] = err.Error()
		}
		cancel()
	}
	return failed
}

// HealthzHandler answers 200 while the process runs and, when WatchDatabase was called, its
// database answers; 503 with the database's state (unreachable since, last error) when not.
func (h *Health) HealthzHandler(w http.ResponseWriter, r *http.Request) {
	body := map[string]any{"status": "ok", "uptime_seconds": int(time.Since(h.started).Seconds())}
	h.mu.Lock()
	db, avail := h.db, h.avail
	h.mu.Unlock()
	if avail == nil {
		writeJSON(w, http.StatusOK, body)
		return
	}
	_ = avail.Ping(r.Context(), db, healthzPing)
	st := avail.State()
	body["database"] = st
	if !st.Reachable {
		body["status"] = "database unreachable"
		w.Header().Set("Retry-After", "2")
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// ReadyzHandler answers 200 when every readiness check passes, else 503 naming the failures.
func (h *Health) ReadyzHandler(w http.ResponseWriter, r *http.Request) {
	failed := h.Ready(r.Context())
	if len(failed) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "failed": failed})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready"})
}

// Mux returns a mux serving the three health endpoints.
func (h *Health) Mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", h.HealthzHandler)
	mux.HandleFunc("GET /readyz", h.ReadyzHandler)
	mux.Handle("GET /metrics", h.Metrics.Handler())
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Serve listens on addr and serves handler until ctx ends, then shuts down with a deadline.
// ready, when non-nil, receives the bound address once listening (tests pass ":0").
func Serve(ctx context.Context, log zerolog.Logger, addr string, handler http.Handler, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	log.Info().Str("addr", ln.Addr().String()).Msg("listening")
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	safego.Go(log, "http-server", func() { errc <- srv.Serve(ln) })
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	return nil
}
