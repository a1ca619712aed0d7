// Package httpapi is the api daemon's HTTP surface: the REST endpoints under /api/v1, the
// SSE event stream, problem JSON errors, bearer-token authentication, and /healthz, /readyz
// and /metrics.
//
// Handlers are thin: mutations of the graph go through api/internal/graph (the one mutation
// path, G5), reads through api/internal/storage/readmodel; no handler holds SQL. Every route, the
// feature packages' (Deps.Routes) included, is a request.Route mounted by request.Mount, so
// all share one guard and one error handling, and every error becomes an RFC 9457 problem in
// one function (request.ToProblem). Every response carries X-Correlation-ID, which also lands
// on the audit rows and events of the request's mutation. api/openapi.yaml is the contract;
// the tests validate every response they receive against it.
package httpapi

import (
	"fmt"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api"
	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/discover"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/readmodel"
	"github.com/oikos-hq/oikos/api/internal/topology"
	"github.com/oikos-hq/oikos/api/internal/websession"
	"github.com/oikos-hq/oikos/api/internal/webui"
	"github.com/oikos-hq/oikos/shared/daemon"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/signals"
)

// Deps are what the HTTP surface needs; the composition root (api/internal/app) builds them.
type Deps struct {
	Pool  *storage.Pool
	Graph *graph.Service
	// Ontology is used when Graph is nil or has none; normally the graph service's current
	// ontology is read on every request, so a re-seeded ontology takes effect at once.
	Ontology *ontology.Ontology
	Auth     *auth.Store
	// Sessions are the dashboard's sign-in sessions; with them the api admits the session
	// cookie beside bearer tokens and serves /api/v1/session.
	Sessions *websession.Store
	// Web serves the dashboard at / (and every path not the api's); nil serves none.
	Web *webui.Handler
	// Bus feeds the SSE stream; without it /api/v1/stream answers 503.
	Bus    *eventbus.Bus
	Logger zerolog.Logger
	// Health serves /healthz, /readyz and /metrics; request metrics are recorded in it.
	Health *daemon.Health
	// SSEHeartbeat is the interval of the stream's keep-alive comments (default 15 s).
	SSEHeartbeat time.Duration
	// Routes are the feature packages' routes (executions, metrics), mounted under /api/v1
	// exactly as the server's own: one authentication, one correlation id, one error handling.
	Routes []request.Route
	// SSEClientBuffer is how many events a stream client may lag behind before it is
	// dropped (default 256); a dropped client reconnects with Last-Event-ID.
	SSEClientBuffer int
	// Discover proposes and accepts a machine's services (discover.go); without it those
	// routes answer 503.
	Discover *discover.Service
	// Site is how browsers reach the api: the reverse proxies it believes and its public
	// origin (request.Site). Nil: reached directly, no forwarded header believed but
	// X-Forwarded-Proto.
	Site *request.Site
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
	// Echo's error handler, also called by the metrics middleware so it records the status sent.
	e.HTTPErrorHandler = request.ErrorHandler(s.log)
	if d.Site == nil {
		d.Site = &request.Site{}
	}
	e.Use(d.Site.Middleware, securityHeaders, request.Correlation, d.Health.Metrics.EchoMiddleware(), s.recoverPanics, request.LimitBody)
	e.GET("/healthz", echo.WrapHandler(http.HandlerFunc(d.Health.HealthzHandler)))
	e.GET("/readyz", echo.WrapHandler(http.HandlerFunc(d.Health.ReadyzHandler)))
	e.GET("/metrics", echo.WrapHandler(d.Health.Metrics.Handler()))
	e.GET("/api/v1/openapi.yaml", serveSpec)
	// Every route behind one guard over the token store (and the session cookie), so a
	// request is verified once.
	routes := append(s.routes(), d.Routes...)
	var v request.Verifier = d.Auth
	if d.Sessions != nil {
		v = websession.Verifier{Tokens: d.Auth, Sessions: d.Sessions}
		routes = append(routes, d.Sessions.Routes()...)
	}
	request.Mount(e.Group("/api/v1"), v, s.log, routes...)
	if d.Web != nil {
		d.Web.Register(e)
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

// routes is the server's route table (the feature packages' are in Deps.Routes).
func (s *Server) routes() []request.Route {
	r, w := auth.PermRead, auth.PermWrite
	return []request.Route{
		request.GET("/whoami", r, s.whoami),
		request.GET("/checks", r, s.listChecks),
		request.GET("/entities", r, s.listEntities),
		request.POST("/entities", w, s.createEntity),
		request.GET("/entities/:ref", r, s.getEntity),
		request.PATCH("/entities/:ref", w, s.patchEntity),
		request.POST("/entities/:ref/state", w, s.setState),
		request.GET("/entities/:ref/relations", r, s.listRelations),
		request.GET("/entities/:ref/blast-radius", r, s.blastRadius),
		request.GET("/entities/:ref/events", r, s.entityEvents),
		request.GET("/entities/:ref/knowledge", r, s.entityKnowledge),
		request.POST("/entities/:ref/discover/services", w, s.discoverServices),
		request.POST("/entities/:ref/services", w, s.acceptServices),
		request.POST("/relationships", w, s.createRelationship),
		request.POST("/relationships/:id/end", w, s.endRelationship),
		request.GET("/graph", r, s.graphView),
		request.GET("/events", r, s.listEvents),
		request.GET("/audit", r, s.listAudit),
		request.GET("/audit/graph", r, s.graphAudit),
		request.GET("/ontology/types", r, s.ontologyTypes),
		request.GET("/ontology/relationship-types", r, s.ontologyRelationshipTypes),
		request.GET("/knowledge", r, s.listKnowledge),
		request.GET("/knowledge/search", r, s.searchKnowledge),
		request.GET("/knowledge/:slug", r, s.getKnowledge),
		request.PUT("/knowledge/:slug", w, s.upsertKnowledge),
		request.GET("/health/summary", r, s.healthSummary),
		request.GET("/signals", r, s.listSignals),
		request.GET("/incidents", r, s.listIncidents),
		request.GET("/schedulers", r, s.listSchedulers),
		request.GET("/incidents/:id", r, s.getIncident),
		request.POST("/signals/:id/ack", w, s.decideSignal(signals.DecisionAck)),
		request.POST("/signals/:id/mute", w, s.decideSignal(signals.DecisionMute)),
		request.POST("/signals/:id/resolve", w, s.decideSignal(signals.DecisionResolve)),
		request.GET("/stream", r, s.stream),
		request.GET("/export", r, s.exportFleet),
	}
}

func serveSpec(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/yaml", api.OpenAPI)
}

// securityHeaders go on every answer: no MIME sniffing (a JSON body or a knowledge
// document never becomes script or HTML by guessing), no framing, no Referer beyond the api's
// own origin, and a policy under which an answer opened directly in a tab runs nothing. The
// dashboard's pages (webui) replace the policy with the app's own.
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		return next(c)
	}
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
