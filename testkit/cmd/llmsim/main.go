// Command llmsim serves an OpenAI-compatible chat completions API that answers from YAML
// scripts (package testkit/llmsim), so Nomos can be demoed and tested without a model
// provider:
//
//	llmsim --addr 127.0.0.1:8099 --script testkit/llmsim/scripts/demo.yaml [--api-key K]
//	OIKOS_LLM_BASE_URL=http://127.0.0.1:8099/v1 OIKOS_LLM_MODEL=nomos-sim
//
// Flags (each has an environment twin):
//
//	--addr ADDR          LLMSIM_ADDR        listen address (127.0.0.1:8099)
//	--script PATH        LLMSIM_SCRIPT      a script file or a directory of them; repeat the flag
//	                                        (comma-separated in the variable); default: the
//	                                        embedded demo script
//	--api-key KEY        LLMSIM_API_KEY     bearer key every /v1 request must carry ("" = none)
//	--chunk-size N       LLMSIM_CHUNK_SIZE  characters per streamed chunk where neither the reply
//	                                        nor its script sets chunk_size (default 12)
//	--log-level LEVEL    LLMSIM_LOG_LEVEL   debug, info, warn, error (info)
//	--mode NAME          LLMSIM_MODE        a wire behaviour of a real server (llmsim.Modes:
//	                                        ollama, llamacpp, vllm, lmstudio, hermes-text,
//	                                        think, flaky-429 …; several joined by +); default
//	                                        OpenAI's format
//
// Logs are JSON on stderr, one line per request naming the rule that answered. SIGINT or
// SIGTERM stops it gracefully.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	envconfig "github.com/oikos-hq/oikos/shared/config"
	"github.com/oikos-hq/oikos/shared/logging"
	"github.com/oikos-hq/oikos/testkit/llmsim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stderr, nil)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "llmsim:", err)
		os.Exit(1)
	}
}

// config is the command line after flags and environment.
type config struct {
	addr, apiKey, logLevel string
	mode                   llmsim.Wire
	scripts                []string
	chunkSize              int
}

// stringList is a repeatable flag; the first use replaces the environment's value.
type stringList struct {
	vals []string
	set  bool
}

func (l *stringList) String() string { return strings.Join(l.vals, ",") }

func (l *stringList) Set(v string) error {
	if !l.set {
		l.vals, l.set = nil, true
	}
	l.vals = append(l.vals, v)
	return nil
}

func parseConfig(args []string, getenv func(string) string) (config, error) {
	// A setting's flag defaults to its environment variable (or NAME_FILE, as the daemons
	// read theirs), else to fallback.
	def := envconfig.New(getenv).String
	var c config
	var scripts stringList
	for _, s := range strings.Split(getenv("LLMSIM_SCRIPT"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			scripts.vals = append(scripts.vals, s)
		}
	}
	chunk, err := strconv.Atoi(def("LLMSIM_CHUNK_SIZE", "0"))
	if err != nil {
		return config{}, fmt.Errorf("LLMSIM_CHUNK_SIZE: %w", err)
	}
	fs := flag.NewFlagSet("llmsim", flag.ContinueOnError)
	fs.StringVar(&c.addr, "addr", def("LLMSIM_ADDR", "127.0.0.1:8099"), "listen address")
	fs.Var(&scripts, "script", "script file or directory (repeatable; default: the embedded demo script)")
	fs.StringVar(&c.apiKey, "api-key", def("LLMSIM_API_KEY", ""), "bearer key /v1 requests must carry (empty: none)")
	fs.IntVar(&c.chunkSize, "chunk-size", chunk, "characters per streamed chunk where a script sets none (0: 12)")
	fs.StringVar(&c.logLevel, "log-level", def("LLMSIM_LOG_LEVEL", "info"), "log level")
	mode := fs.String("mode", def("LLMSIM_MODE", ""), "wire behaviour of a real server ("+strings.Join(llmsim.ModeNames(), ", ")+")")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if c.mode, err = llmsim.ParseMode(*mode); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if c.chunkSize < 0 {
		return config{}, fmt.Errorf("--chunk-size %d is negative", c.chunkSize)
	}
	c.scripts = scripts.vals
	return c, nil
}

// run serves until ctx ends (SIGINT or SIGTERM in main); ready, when set, learns the base URL
// once the server listens.
func run(ctx context.Context, args []string, getenv func(string) string, logOut io.Writer, ready func(baseURL string)) error {
	cfg, err := parseConfig(args, getenv)
	if err != nil {
		return err
	}
	log := logging.New(logOut, "llmsim", cfg.logLevel)
	var script *llmsim.Script
	source := "embedded demo"
	if len(cfg.scripts) == 0 {
		script, err = llmsim.Demo()
	} else {
		script, err = llmsim.Load(cfg.scripts...)
		source = strings.Join(cfg.scripts, ",")
	}
	if err != nil {
		return err
	}
	log.Info().Str("script", source).Strs("models", script.Models()).Int("rules", len(script.RuleNames())).Msg("script loaded")
	base, stop, err := llmsim.Listen(ctx, cfg.addr, script, llmsim.Options{APIKey: cfg.apiKey, ChunkSize: cfg.chunkSize, Logger: log, Wire: cfg.mode})
	if err != nil {
		return err
	}
	log.Info().Str("base_url", base).Bool("api_key", cfg.apiKey != "").Msg("listening")
	if ready != nil {
		ready(base)
	}
	<-ctx.Done()
	log.Info().Msg("stopping")
	stop()
	return nil
}
