// Package app is the agent's composition root: it reads the configuration, connects to
// Postgres, refuses a stale schema, wires the task model, the tool registry, the MCP endpoint
// and the task watcher, and serves until the context ends.
package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/agent/internal/apiclient"
	"github.com/oikos-hq/oikos/agent/internal/budget"
	"github.com/oikos-hq/oikos/agent/internal/chatapi"
	"github.com/oikos-hq/oikos/agent/internal/llmcheck"
	"github.com/oikos-hq/oikos/agent/internal/llmcheckapi"
	"github.com/oikos-hq/oikos/agent/internal/loop"
	"github.com/oikos-hq/oikos/agent/internal/mcpserver"
	"github.com/oikos-hq/oikos/agent/internal/secrets"
	"github.com/oikos-hq/oikos/agent/internal/sessionsapi"
	"github.com/oikos-hq/oikos/agent/internal/storage"
	"github.com/oikos-hq/oikos/agent/internal/tasks"
	"github.com/oikos-hq/oikos/agent/internal/taskwatch"
	"github.com/oikos-hq/oikos/agent/internal/tools"
	"github.com/oikos-hq/oikos/agent/internal/webfetch"
	"github.com/oikos-hq/oikos/shared/daemon"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/schema"
	"github.com/oikos-hq/oikos/shared/secretbox"
	"github.com/oikos-hq/oikos/shared/startstop"
)

// Version is the agent's build version (set with -ldflags at release builds).
var Version = "dev"

// Run starts the agent and blocks until ctx ends.
func Run(ctx context.Context, log zerolog.Logger) error {
	cfg, err := LoadConfig(os.Getenv)
	if err != nil {
		return err
	}
	return RunConfig(ctx, cfg, log, nil)
}

// RunConfig is Run with its configuration; ready, when non-nil, receives the address the
// HTTP server listens on (tests listen on port 0 and start the agent in-process).
func RunConfig(ctx context.Context, cfg Config, log zerolog.Logger, ready func(net.Addr)) error {
	// avail learns from the pool whether the database answers, for /healthz.
	avail := pg.NewAvailability(log)
	pool, err := pg.ConnectWith(ctx, cfg.DatabaseURL, 20, log, avail)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := schema.Wait(ctx, pool, cfg.SchemaWait, log); err != nil {
		return err
	}
	api, err := apiclient.New(cfg.APIURL)
	if err != nil {
		return err
	}
	fetch, err := webfetch.New(webfetch.Config{Allow: cfg.HTTPGetAllow, NameMap: cfg.NameMap, RootCAs: cfg.RootCAs})
	if err != nil {
		return fmt.Errorf("http_get: %w", err)
	}
	sec, err := secrets.FromEnv(os.Getenv, os.Environ())
	if err != nil && err != secrets.ErrNotConfigured {
		return fmt.Errorf("secrets: %w", err)
	}
	// The secrets `oikos secret set` stores open with OIKOS_SECRETS_KEY, asked after the
	// agent's own backend; without the key they are not used, an unusable key stops the start.
	if box, err := secretbox.FromEnv(cfg.Getenv); err == nil {
		sec = secrets.Chain(sec, secrets.NewStored(storage.SecretReader{DB: pool}, box))
	} else if err != secretbox.ErrNoKey {
		return fmt.Errorf("secrets: %w", err)
	}
	health := daemon.NewHealth()
	taskSvc := tasks.New(pool)
	window := budget.Config{Window: cfg.LLMContextTokens, Answer: cfg.LLMAnswerTokens}.WithDefaults()
	reg, err := tools.New(tools.Deps{API: api, Tasks: taskSvc, Pool: pool, Fetch: fetch, Probe: fetch, Secrets: sec, Log: log,
		Version: Version, OutputPage: window.Page()}, health.Metrics)
	if err != nil {
		return err
	}
	if cfg.AgentToken == "" {
		log.Warn().Msg("OIKOS_AGENT_TOKEN is not set: chat is refused and the task sweep cannot read pending approvals")
	}
	DetectProvider(ctx, &cfg, nil, log)
	nomos, err := loop.New(loop.Config{BaseURL: cfg.LLMBaseURL, Model: cfg.LLMModel, APIKey: cfg.LLMAPIKey, SoulFile: cfg.SoulFile,
		Provider: cfg.LLMProvider, FirstByte: cfg.LLMFirstByte, StatusAfter: cfg.LLMStatusAfter,
		AgentToken: cfg.AgentToken, Context: window}, reg, taskSvc, pool, api, log)
	if err != nil {
		return err
	}
	if !nomos.Configured() {
		log.Warn().Msg("no language model configured (OIKOS_LLM_BASE_URL, OIKOS_LLM_MODEL): chat answers an error; the tools and /mcp work")
	}
	// The loop's turns (the operator's, and those a finished execution resumes) run on its
	// lifecycle: stopped after the HTTP server and the event consumers (deferred first, so
	// run last but before the pool closes), it cancels the turns still running and waits for
	// them; a panic in one was recovered and is logged again here as the loop's error.
	if err := nomos.Start(ctx); err != nil {
		return err
	}
	defer func() {
		nomos.Stop()
		if err := nomos.Err(); err != nil {
			log.Error().Err(err).Msg("the chat loop recovered from panics")
		}
	}()
	if err := nomos.Recover(ctx); err != nil {
		return err
	}

	connCfg, err := pg.ListenConfig(cfg.DatabaseURL, "oikos-agent-listener")
	if err != nil {
		return err
	}
	notifier := eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: connCfg, Logger: log})
	bus := eventbus.NewBus(eventbus.BusOptions{Pool: pool, Notifier: notifier, Logger: log})
	continuer := loop.NewContinuer(nomos, bus, log)
	watch := taskwatch.New(taskwatch.Options{Tasks: taskSvc, Bus: bus, API: api, Token: cfg.AgentToken, IdleAfter: cfg.IdleAfter, Logger: log})

	health.AddDatabaseChecks(pool, notifier)
	health.WatchDatabase(pool, avail)
	stop, err := startstop.StartAll(ctx, notifier, bus, watch, continuer)
	if err != nil {
		return err
	}
	defer stop()

	mux := health.Mux()
	mux.Handle("/mcp", mcpserver.New(reg, api, mcpserver.Options{Version: Version, Log: log}))
	mux.Handle("POST /internal/chat", chatapi.New(nomos, cfg.AgentToken, log))
	sessions := sessionsapi.New(pool, cfg.AgentToken, log)
	mux.Handle("/internal/sessions", sessions)
	mux.Handle("/internal/sessions/", sessions)
	mux.Handle("/internal/llm/check", &llmcheckapi.Handler{Token: cfg.AgentToken, Log: log, Target: llmcheck.Target{
		BaseURL: cfg.LLMBaseURL, Model: cfg.LLMModel, APIKey: cfg.LLMAPIKey, Provider: cfg.LLMProvider, FirstByte: cfg.LLMFirstByte,
		ContextTokens: cfg.LLMContextTokens}})
	var h http.Handler = health.Metrics.InstrumentHandler(mux)
	return daemon.Serve(ctx, log, cfg.Addr, h, ready)
}
