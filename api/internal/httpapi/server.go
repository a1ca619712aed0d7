// Package httpapi is the api daemon's HTTP surface: the REST endpoints under /api/v1, the
// SSE event stream, problem JSON errors, bearer-token authentication, and /healthz, /readyz
// and /metrics.
//
// Handlers are thin: mutations of the graph go through api/internal/graph (the one mutation
// path, G5), reads through api/internal/readmodel. Every error becomes an RFC 9457 problem
// in one function (toProblem). Every response carries X-Correlation-ID, which also lands on
// the audit rows and events of the request's mutation. api/openapi.yaml is the contract;
// the tests validate every response they receive against it.
package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
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
	if d.Bus != nil {
		s.hub = newHub(d.Bus, s.log, d.Health)
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.Use(s.correlation, s.observe, s.recoverPanics, s.limitBody)
	e.GET("/healthz", echo.WrapHandler(http.HandlerFunc(d.Health.HealthzHandler)))
	e.GET("/readyz", echo.WrapHandler(http.HandlerFunc(d.Health.ReadyzHandler)))
	e.GET("/metrics", echo.WrapHandler(d.Health.Metrics.Handler()))
	e.GET("/api/v1/openapi.yaml", serveSpec)
	for _, r := range s.routes() {
		e.Add(r.method, "/api/v1"+r.path, r.handler, s.authenticate(r.perm))
	}
	for _, mount := range d.Mounts {
		mount(e.Group("/api/v1"), s.authenticate)
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

// Context keys.
const (
	ctxCorrelation = "oikos.correlation_id"
	ctxPrincipal   = "oikos.principal"
)

// HeaderCorrelationID carries the correlation id in and out.
const HeaderCorrelationID = "X-Correlation-ID"

// correlationRe bounds what a client may send as its correlation id: it lands in logs,
// audit rows and events, so it must be short and plain.
var correlationRe = regexp.MustCompile(`^[A-Za-z0-9._:@/-]{1,128}$`)

// correlation reads X-Correlation-ID or generates one, and returns it on every response.
func (s *Server) correlation(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get(HeaderCorrelationID)
		if !correlationRe.MatchString(id) {
			var err error
			if id, err = graph.NewID(); err != nil {
				return err
			}
		}
		c.Set(ctxCorrelation, id)
		c.Response().Header().Set(HeaderCorrelationID, id)
		return next(c)
	}
}

func correlationID(c echo.Context) string {
	id, _ := c.Get(ctxCorrelation).(string)
	return id
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
					Str("correlation_id", correlationID(c)).Msg("handler panicked")
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

// limitBody refuses bodies over MaxBodyBytes: at once when Content-Length says so, else
// when reading passes the limit (decodeJSON maps that to 413).
func (s *Server) limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.ContentLength > MaxBodyBytes {
			return &http.MaxBytesError{Limit: MaxBodyBytes}
		}
		if req.Body != nil {
			req.Body = http.MaxBytesReader(c.Response(), req.Body, MaxBodyBytes)
		}
		return next(c)
	}
}

// authenticate checks the bearer token and the role's permission for the route.
func (s *Server) authenticate(perm auth.Permission) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if p, ok := c.Get(ctxPrincipal).(auth.Principal); ok {
				// Verified already (a mounted group guarded, then a route guards again); only
				// the permission is left to check, without a second token lookup.
				if !p.Role.Can(perm) {
					return fmt.Errorf("%w: role %s may not %s", auth.ErrForbidden, p.Role, perm)
				}
				return next(c)
			}
			h := c.Request().Header.Get(echo.HeaderAuthorization)
			tok, ok := cutBearer(h)
			if !ok {
				return auth.ErrUnauthenticated
			}
			p, err := s.deps.Auth.Verify(c.Request().Context(), tok)
			if err != nil {
				return err
			}
			if !p.Role.Can(perm) {
				return fmt.Errorf("%w: role %s may not %s", auth.ErrForbidden, p.Role, perm)
			}
			c.Set(ctxPrincipal, p)
			return next(c)
		}
	}
}

func cutBearer(h string) (string, bool) {
	const prefix = "bearer "
	if len(h) <= len(prefix) || !equalFold(h[:len(prefix)], prefix) {
		return "", false
	}
	return h[len(prefix):], true
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func principal(c echo.Context) auth.Principal {
	p, _ := c.Get(ctxPrincipal).(auth.Principal)
	return p
}

// meta builds the graph service's Meta for this request: who, through what, and the
// correlation id, so the audit row and the event name the request.
func meta(c echo.Context) graph.Meta {
	p := principal(c)
	return graph.Meta{
		Actor: p.Name, Role: string(p.Role),
		Method: c.Request().Method, Path: c.Request().URL.Path,
		CorrelationID: correlationID(c),
	}
}

// handleError writes err as problem JSON; it is echo's error handler and is also called by
// observe so the recorded status is the one sent.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	p, unexpected := toProblem(err)
	p.Instance = c.Request().URL.Path
	p.CorrelationID = correlationID(c)
	if unexpected {
		s.log.Error().Err(err).Str("correlation_id", p.CorrelationID).Str("method", c.Request().Method).
			Str("path", c.Request().URL.Path).Msg("request failed")
	}
	if p.Status == http.StatusUnauthorized {
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="oikos"`)
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(p.Status)
		return
	}
	c.Response().Header().Set(echo.HeaderContentType, problemMediaType)
	c.Response().WriteHeader(p.Status)
	_ = jsonEncode(c.Response(), p)
}

// jsonEncode writes v as JSON.
func jsonEncode(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }
