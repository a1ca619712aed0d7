// Package httpapi is the api daemon's HTTP surface: the REST endpoints under /api/v1, the
// SSE event stream, problem JSON errors, bearer-token authentication, and /healthz, /readyz
// and /metrics.
//
// Handlers are thin: mutations of the graph go through api/internal/graph (the one mutation
// path, G5), reads through api/internal/readmodel. Every error becomes an RFC 9457 problem
// in one function (toProblem, over api/internal/request, which the api's other surfaces
// share). Every response carries X-Correlation-ID, which also lands on the audit rows and
// events of the request's mutation. api/openapi.yaml is the contract;
// the tests validate every response they receive against it.
package httpapi

import (
	"fmt"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api"
	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/readmodel"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/api/internal/topology"
	"github.com/oikos-hq/oikos/shared/daemon"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/ontology"
)

// Deps are what the HTTP surface needs; the composition root (api/internal/app) builds them.
type Deps struct {
	Pool  *pgxpool.Pool
	Graph *graph.Service
	// Ontology is used when Graph is nil or has none; normally the graph service's current
	// ontology is read on every request, so a re-seeded ontology takes effect at once.
	Ontology *ontology.Ontology
	Auth     *auth.Store
	// Bus feeds the SSE stream; without it /api/v1/stream answers 503.
	Bus    *eventbus.Bus
	Logger zerolog.Logger
	// Health serves /healthz, /readyz and /metrics; request metrics are recorded in it.
	Health *daemon.Health
	// SSEHeartbeat is the interval of the stream's keep-alive comments (default 15 s).
	SSEHeartbeat time.Duration
	// Mounts add feature packages' routes (executions, metrics) under /api/v1. Each gets the
	// group and the token guard, so every route shares one authentication, one correlation
	// id and one error handler.
	Mounts []func(g *echo.Group, guard func(auth.Permission) echo.MiddlewareFunc)
	// SSEClientBuffer is how many events a stream client may lag behind before it is
	// dropped (default 256); a dropped client reconnects with Last-Event-ID.
	SSEClientBuffer int
}

// Server is the HTTP handler. It is an http.Handler; Stop ends the SSE hub.
type Server struct {
	deps   Deps
	echo   *echo.Echo
	reader *readmodel.Reader
	hub    *hub
	log    zerolog.Logger
	// topo walks blast radii in memory; nil without a pool (then they walk in SQL).
	topo *topology.Index
	// rootIDs remembers slug → id for the blast radius's one-round-trip path.
	rootIDs rootIDCache
}

// New builds the handler and starts the SSE hub (subscribed once to the bus). Call Stop at
// shutdown to end the hub and every open stream.
func New(d Deps) *Server {
	if d.Health == nil {
		d.Health = daemon.NewHealth()
	}
	if d.SSEHeartbeat <= 0 {
		d.SSEHeartbeat = 15 * time.Second
	}
	if d.SSEClientBuffer <= 0 {
		d.SSEClientBuffer = 256
	}
	s := &Server{deps: d, log: d.Logger.With().Str("component", "httpapi").Logger()}
	s.reader = readmodel.New(d.Pool, s.ontology)
	s.topo = newTopology(d, s.log)
	if d.Bus != nil {
		s.hub = newHub(d.Bus, s.log, d.Health)
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	// Echo's error handler, also called by observe so the recorded status is the one sent.
	e.HTTPErrorHandler = request.ErrorHandler(s.log, graphProblem)
	e.Use(request.Correlation, s.observe, s.recoverPanics, request.LimitBody)
	e.GET("/healthz", echo.WrapHandler(http.HandlerFunc(d.Health.HealthzHandler)))
	e.GET("/readyz", echo.WrapHandler(http.HandlerFunc(d.Health.ReadyzHandler)))
	e.GET("/metrics", echo.WrapHandler(d.Health.Metrics.Handler()))
	e.GET("/api/v1/openapi.yaml", serveSpec)
	for _, r := range s.routes() {
		e.Add(r.method, "/api/v1"+r.path, r.handler, s.guard(r.perm))
	}
	for _, mount := range d.Mounts {
		mount(e.Group("/api/v1"), s.guard)
	}
	s.echo = e
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// Stop ends the SSE hub, which closes every open stream. Safe to call twice.
func (s *Server) Stop() {
	if s.hub != nil {
		s.hub.stop()
	}
}

// Routes lists the registered routes as METHOD and echo path (for the spec coverage test).
func (s *Server) Routes() []*echo.Route { return s.echo.Routes() }

func (s *Server) ontology() *ontology.Ontology {
	if s.deps.Graph != nil {
		if o := s.deps.Graph.Ontology(); o != nil {
			return o
		}
	}
	return s.deps.Ontology
}

// route is one endpoint and the permission it requires.
type route struct {
	method, path string
	perm         auth.Permission
	handler      echo.HandlerFunc
}

func (s *Server) routes() []route {
	r, w := auth.PermRead, auth.PermWrite
	return []route{
		{http.MethodGet, "/entities", r, s.listEntities},
		{http.MethodPost, "/entities", w, s.createEntity},
		{http.MethodGet, "/entities/:ref", r, s.getEntity},
		{http.MethodPatch, "/entities/:ref", w, s.patchEntity},
		{http.MethodPost, "/entities/:ref/state", w, s.setState},
		{http.MethodGet, "/entities/:ref/relations", r, s.listRelations},
		{http.MethodGet, "/entities/:ref/blast-radius", r, s.blastRadius},
		{http.MethodGet, "/entities/:ref/events", r, s.entityEvents},
		{http.MethodGet, "/entities/:ref/knowledge", r, s.entityKnowledge},
		{http.MethodPost, "/relationships", w, s.createRelationship},
		{http.MethodPost, "/relationships/:id/end", w, s.endRelationship},
		{http.MethodGet, "/graph", r, s.graphView},
		{http.MethodGet, "/events", r, s.listEvents},
		{http.MethodGet, "/audit", r, s.listAudit},
		{http.MethodGet, "/audit/graph", r, s.graphAudit},
		{http.MethodGet, "/ontology/types", r, s.ontologyTypes},
		{http.MethodGet, "/ontology/relationship-types", r, s.ontologyRelationshipTypes},
		{http.MethodGet, "/knowledge/search", r, s.searchKnowledge},
		{http.MethodGet, "/knowledge/:slug", r, s.getKnowledge},
		{http.MethodPut, "/knowledge/:slug", w, s.upsertKnowledge},
		{http.MethodGet, "/health/summary", r, s.healthSummary},
		{http.MethodGet, "/signals", r, s.listSignals},
		{http.MethodPost, "/signals/:id/ack", w, s.decideSignal(readmodel.DecisionAck)},
		{http.MethodPost, "/signals/:id/mute", w, s.decideSignal(readmodel.DecisionMute)},
		{http.MethodPost, "/signals/:id/resolve", w, s.decideSignal(readmodel.DecisionResolve)},
		{http.MethodGet, "/stream", r, s.stream},
	}
}

func serveSpec(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/yaml", api.OpenAPI)
}

// recoverPanics turns a handler panic into a logged 500 instead of a dropped connection.
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				s.log.Error().Str("panic", fmt.Sprint(r)).Bytes("stack", debug.Stack()).
					Str("correlation_id", request.CorrelationID(c)).Msg("handler panicked")
				err = fmt.Errorf("handler panic: %v", r)
			}
		}()
		return next(c)
	}
}

// observe records request counts and durations per route in the daemon's registry.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err) // write the problem now so the status below is the real one
		}
		path := c.Path()
		if path == "" {
			path = "unmatched"
		}
		status := strconv.Itoa(c.Response().Status)
		m := s.deps.Health.Metrics
		m.Add("oikos_api_http_requests_total", "HTTP requests by route, method and status.", 1,
			"route", path, "method", c.Request().Method, "status", status)
		m.Add("oikos_api_http_request_seconds_total", "Time spent serving HTTP requests, by route.",
			time.Since(start).Seconds(), "route", path)
		return nil
	}
}

// guard checks the bearer token and the role's permission for a route; every route, the
// mounted feature packages' included, is guarded by it, so a principal is verified once per
// request whichever of them asks first.
func (s *Server) guard(perm auth.Permission) echo.MiddlewareFunc {
	return request.Guard(s.deps.Auth, perm)
}
