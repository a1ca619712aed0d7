// Package app is the api's composition root. In order: configuration, logger, pool, schema
// migration (under goose's advisory lock), ontology and seeds, token bootstrap, the command
// policy, the graph and execution services, the event bus, notifications, the HTTP surface; then it serves
// until the context ends and stops everything in reverse order.
//
// It lives outside internal/ so that the end-to-end tests can run the real api in-process.
package app

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/chat"
	"github.com/oikos-hq/oikos/api/internal/chatapi"
	"github.com/oikos-hq/oikos/api/internal/discover"
	"github.com/oikos-hq/oikos/api/internal/execapi"
	"github.com/oikos-hq/oikos/api/internal/execution"
	"github.com/oikos-hq/oikos/api/internal/execution/decision"
	"github.com/oikos-hq/oikos/api/internal/execution/registrar"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/httpapi"
	"github.com/oikos-hq/oikos/api/internal/metricsapi"
	"github.com/oikos-hq/oikos/api/internal/notify"
	"github.com/oikos-hq/oikos/api/internal/notifyapi"
	"github.com/oikos-hq/oikos/api/internal/notifytarget"
	"github.com/oikos-hq/oikos/api/internal/notifyworker"
	"github.com/oikos-hq/oikos/api/internal/onboard"
	"github.com/oikos-hq/oikos/api/internal/placement"
	"github.com/oikos-hq/oikos/api/internal/ratelimit"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/api/internal/secretsapi"
	"github.com/oikos-hq/oikos/api/internal/secretstore"
	"github.com/oikos-hq/oikos/api/internal/seed"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/websession"
	"github.com/oikos-hq/oikos/api/internal/webui"
	webassets "github.com/oikos-hq/oikos/api/web"
	"github.com/oikos-hq/oikos/shared/daemon"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/policy"
	"github.com/oikos-hq/oikos/shared/safego"
	"github.com/oikos-hq/oikos/shared/secretbox"
	"github.com/oikos-hq/oikos/shared/seedfile"
)

// Run starts the api from the environment and blocks until ctx ends.
func Run(ctx context.Context, log zerolog.Logger) error {
	cfg, err := LoadConfig(os.Getenv)
	if err != nil {
		return err
	}
	srv, err := Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer srv.Stop()
	return srv.Wait()
}

// Server is a running api.
type Server struct {
	addr      net.Addr
	pool      *storage.Pool
	notifier  *eventbus.Notifier
	bus       *eventbus.Bus
	registrar *registrar.Registrar
	placement *placement.Follower
	// notifications delivers notifications from the outbox (nil when OIKOS_NOTIFY_ENABLED is off).
	notifications *notifyworker.Notifier
	chat          *chatapi.API
	http          *httpapi.Server
	cancel        context.CancelFunc
	served        chan error
	// Graph is the mutation service (tests drive it directly).
	Graph *graph.Service
	// Auth is the token store (tests mint tokens with it).
	Auth *auth.Store
}

// Addr is the address the HTTP server listens on.
func (s *Server) Addr() net.Addr { return s.addr }

// Routes lists the HTTP routes the daemon serves, as composed here (for the test that holds
// them to openapi.yaml).
func (s *Server) Routes() []*echo.Route { return s.http.Routes() }

// Wait blocks until the HTTP server stops and returns its error.
func (s *Server) Wait() error { return <-s.served }

// Stop shuts everything down in reverse order of start. Safe to call twice.
func (s *Server) Stop() {
	s.cancel()
	if s.http != nil {
		s.http.Stop()
	}
	if s.chat != nil {
		s.chat.Stop()
	}
	if s.placement != nil {
		s.placement.Stop()
	}
	if s.registrar != nil {
		s.registrar.Stop()
	}
	if s.notifications != nil {
		s.notifications.Stop()
	}
	s.notifier.Stop()
	s.bus.Stop()
	s.pool.Close()
}

// Start brings the api up and returns once it listens.
func Start(parent context.Context, cfg Config, log zerolog.Logger) (_ *Server, err error) {
	ctx, cancel := context.WithCancel(parent)
	defer func() {
		if err != nil {
			cancel()
		}
	}()
	// avail learns from the pool whether the database answers; /healthz reports it and
	// every route answers 503 while it does not (request.ToProblem).
	avail := pg.NewAvailability(log)
	pool, err := pg.ConnectWith(ctx, cfg.DatabaseURL, 40, log, avail)
	if err != nil {
		return nil, err
	}
	fail := func(e error) (*Server, error) {
		pool.Close()
		return nil, e
	}
	applied, err := pg.Migrate(ctx, pool)
	if err != nil {
		return fail(err)
	}
	if len(applied) > 0 {
		log.Info().Ints64("versions", applied).Msg("applied migrations")
	}
	pol, err := policy.Load(cfg.PolicyFile)
	if err != nil {
		return fail(fmt.Errorf("command policy: %w", err))
	}
	o, inv, kn, err := seed.Load(seed.Embedded())
	if err != nil {
		return fail(fmt.Errorf("seeds: %w", err))
	}
	svc, err := graph.New(graph.Options{Pool: pool, Ontology: o, Logger: log})
	if err != nil {
		return fail(err)
	}
	if cfg.SeedOnStart {
		// The ontology and the knowledge base always; a fleet only when asked for: the demo
		// (OIKOS_DEMO) or the operator's own file (OIKOS_INVENTORY).
		var fleet *seedfile.Inventory
		switch {
		case cfg.Demo:
			fleet = inv
		case cfg.InventoryFile != "":
			if fleet, err = seed.LoadInventoryFile(cfg.InventoryFile); err != nil {
				return fail(fmt.Errorf("OIKOS_INVENTORY: %w", err))
			}
		}
		// Ingest logs its own report.
		if _, err := seed.Ingest(ctx, svc, o, fleet, seed.KnowledgeFor(kn, fleet), seed.Options{Logger: log}); err != nil {
			return fail(fmt.Errorf("seed ingest: %w", err))
		}
		if fleet == nil {
			log.Info().Msg("no fleet seeded (OIKOS_DEMO and OIKOS_INVENTORY unset): add machines with `oikos add proxmox-host`")
		}
	} else if _, err := svc.SyncOntology(ctx, o); err != nil {
		return fail(fmt.Errorf("ontology: %w", err))
	}
	store := auth.NewStore(pool)
	for _, t := range []struct {
		env, name, token string
		role             auth.Role
	}{
		{"OIKOS_OPERATOR_TOKEN", auth.BootstrapOperatorName, cfg.OperatorToken, auth.RoleOperator},
		{"OIKOS_AGENT_TOKEN", auth.AgentTokenName, cfg.AgentToken, auth.RoleAgent},
	} {
		if t.token == "" {
			continue
		}
		done, err := store.EnsureToken(ctx, t.name, t.role, t.token)
		if err != nil {
			return fail(fmt.Errorf("%s: %w", t.env, err))
		}
		if done != auth.EnsuredUnchanged {
			log.Info().Str("token", t.name).Str("role", string(t.role)).Str("from", t.env).
				Str("outcome", string(done)).Msg("ensured api token")
		}
	}
	exec, err := execution.New(execution.Options{Pool: pool, Policy: pol, Graph: svc, Logger: log})
	if err != nil {
		return fail(err)
	}
	decisions, err := decision.New(decision.Options{Pool: pool, Logger: log})
	if err != nil {
		return fail(err)
	}
	connCfg, err := pg.ListenConfig(cfg.DatabaseURL, "oikos-api-listener")
	if err != nil {
		return fail(err)
	}
	notifier := eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: connCfg, Logger: log})
	bus := eventbus.NewBus(eventbus.BusOptions{Pool: pool, Notifier: notifier, Logger: log})
	health := daemon.NewHealth()
	health.WatchDatabase(pool, avail)
	health.AddCheck("database", func(ctx context.Context) error { return pool.Ping(ctx) })
	health.AddCheck("listener", func(context.Context) error {
		if !notifier.Connected() {
			return fmt.Errorf("event listener is not connected")
		}
		return nil
	})
	chatAPI, err := chatapi.New(chatapi.Deps{Chat: chat.NewStore(pool), AgentURL: cfg.AgentURL, AgentToken: cfg.AgentToken,
		Logger: log})
	if err != nil {
		return fail(err)
	}
	web, err := webui.New(webassets.Dist())
	if err != nil {
		return fail(err)
	}
	if !web.Built() {
		log.Warn().Msg("the dashboard is not built into this api (api/web/dist is empty); / explains how to build it")
	}
	// The stored secrets' key: without one the api runs and `oikos secret set` says what to
	// set; an unusable one stops the start.
	box, err := secretbox.FromEnv(os.Getenv)
	if err != nil && err != secretbox.ErrNoKey {
		return fail(err)
	}
	secretService := secretstore.New(pool, box)
	notifySecrets := notify.Secrets{Stored: secretService.Resolve}
	notifyService := notify.NewService(notify.ServiceOptions{Pool: pool, Secrets: notifySecrets, KnownType: func(t string) bool {
		_, ok := o.Type(t)
		return ok
	}})
	var notifications *notifyworker.Notifier
	wakeNotifications := func() {}
	if cfg.NotifyEnabled {
		if notifications, err = notifyworker.New(notifyworker.Options{Pool: pool, Bus: bus, Logger: log, PublicURL: cfg.PublicURL, Secrets: notifySecrets,
			IsA: o.IsA, Retry: cfg.NotifyRetry, Backoff: cfg.NotifyBackoff, FailingAfter: cfg.NotifyFailingAfter,
			Sender:  &notifytarget.Transport{Logger: log, Timeout: cfg.NotifyTimeout},
			Metrics: health.Metrics}); err != nil {
			return fail(err)
		}
		wakeNotifications = notifications.Wake
	}
	disc, err := discover.New(discover.Options{Executions: exec, Graph: svc, Bus: bus, Logger: log})
	if err != nil {
		return fail(err)
	}
	onboarding := onboard.New(onboard.Deps{Pool: pool, Graph: svc, Logger: log})
	signInRate := ratelimit.Rate{N: cfg.SignInAttempts, Per: cfg.SignInPeriod}
	if signInRate.N < 1 || signInRate.Per <= 0 {
		signInRate = websession.DefaultSignInRate
	}
	sessions := websession.New(pool, store, cfg.SessionTTL).WithSignInLimit(ratelimit.New(signInRate, 0))
	site := &request.Site{TrustedProxies: cfg.TrustedProxies, PublicOrigin: request.OriginOf(cfg.PublicURL)}
	h := httpapi.New(httpapi.Deps{
		Pool: pool, Graph: svc, Ontology: o, Auth: store, Bus: bus, Logger: log, Health: health,
		Sessions: sessions, Web: web, Discover: disc, Site: site,
		// The feature packages' route tables, mounted with the server's own behind its guard
		// (one token lookup admits a request on every route) and its error handling.
		Routes: slices.Concat(
			execapi.New(execapi.Deps{Service: exec, Decisions: decisions, Notifier: notifier, Logger: log}).Routes(),
			metricsapi.New(metricsapi.Deps{Pool: pool, Logger: log}).Routes(),
			onboarding.Routes(),
			chatAPI.Routes(),
			notifyapi.New(notifyapi.Deps{Service: notifyService, PublicURL: cfg.PublicURL, Logger: log, Woken: wakeNotifications}).Routes(),
			secretsapi.New(secretService).Routes(),
		),
	})
	reg, err := registrar.New(registrar.Options{Bus: bus, Pool: pool, Graph: svc, Logger: log})
	if err != nil {
		return fail(err)
	}
	// The graph follows guests that moved between a cluster's nodes (drift's `moved`).
	follower, err := placement.New(placement.Options{Bus: bus, Pool: pool, Graph: svc, Logger: log})
	if err != nil {
		return fail(err)
	}
	s := &Server{pool: pool, notifier: notifier, bus: bus, registrar: reg, placement: follower, notifications: notifications, chat: chatAPI,
		http: h, cancel: cancel, served: make(chan error, 1), Graph: svc, Auth: store}
	if err := bus.Start(ctx); err != nil {
		return fail(err)
	}
	onboarding.Watch(ctx, bus)
	if err := notifier.Start(ctx); err != nil {
		return fail(err)
	}
	if err := reg.Start(ctx); err != nil {
		return fail(err)
	}
	if err := follower.Start(ctx); err != nil {
		return fail(err)
	}
	if notifications != nil {
		if err := notifications.Start(ctx); err != nil {
			return fail(err)
		}
	}
	listening := make(chan net.Addr, 1)
	safego.Go(log, "api-http", func() {
		s.served <- daemon.Serve(ctx, log, cfg.Addr, h, func(a net.Addr) { listening <- a })
	})
	select {
	case s.addr = <-listening:
	case err := <-s.served:
		s.Stop()
		return nil, err
	case <-time.After(30 * time.Second):
		s.Stop()
		return nil, fmt.Errorf("api did not start listening on %s", cfg.Addr)
	}
	return s, nil
}
