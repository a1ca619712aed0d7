// Command oikos is the operator's command line: it classifies commands, migrates and seeds
// the database, manages tokens, and drives approvals, executions and notification channels
// through the api.
//
// Every subcommand lives in its own file as run<Name>(ctx, env, args) int, so this file only
// dispatches. Commands that change the fleet go through the api's gate, never around it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/cmd/oikos/jobs"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/shared/daemon"
	"github.com/oikos-hq/oikos/shared/llmcheck"
	"github.com/oikos-hq/oikos/shared/pg"
)

// cliEnv is what a subcommand may touch: its streams and its environment.
type cliEnv struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	HTTP   *http.Client
}

type command struct {
	run     func(ctx context.Context, env *cliEnv, args []string) int
	summary string
}

func commands() map[string]command {
	return map[string]command{
		"add":        {runAdd, "add a machine and connect to it: oikos add proxmox-host|host|workstation NAME --address IP [--fingerprint SHA256:…]"},
		"hosts":      {runHosts, "a machine being added: oikos hosts show SLUG"},
		"ssh-key":    {runSSHKey, "print the scheduler's public key and the line a machine adds to authorized_keys"},
		"approvals":  {runApprovals, "list approvals: oikos approvals list [--status pending|approved|denied|revoked|all]"},
		"backup":     {runBackup, "the whole database as one pg_dump archive, while the system runs: oikos backup FILE|-"},
		"approve":    {runApprove, "approve a queued execution: oikos approve [--confirm TARGET] APPROVAL_ID"},
		"deny":       {runDeny, "deny a queued execution: oikos deny [--reason R] APPROVAL_ID"},
		"discover":   {runDiscover, "propose service entities from a guest's running units and ports: oikos discover services SLUG [--accept all|NAME,NAME]"},
		"export":     {runExport, "the fleet as an inventory file for oikos seed --inventory: oikos export [--type T]... > fleet.yaml"},
		"executions": {runExecutions, "list executions or follow one's output: oikos executions list | tail ID"},
		"restore":    {runRestore, "load an archive of oikos backup into a new, empty database: oikos restore FILE|-"},
		"run":        {runRun, "run a command through the api's gate: oikos run TARGET -- COMMAND…"},
		"classify":   {runClassify, "classify a command's risk: oikos classify [--declared CLASS] [--json] -- COMMAND… | --stdin"},
		"drift":      {runDrift, "guests on the Proxmox hosts vs the graph: oikos drift [--refresh] [--json] | oikos drift adopt --all | VMID…"},
		"health":     {runHealth, "exit 0 when URL answers 200 (container health checks): oikos health URL"},
		"incidents":  {runIncidents, "incidents, one per root cause: oikos incidents [--status open|resolved|all] [--entity SLUG]"},
		"lab":        {runLab, "fault the lab simulator of make up: oikos lab fault HOST down|slow|flap | oikos lab clear"},
		"llm":        {runLLM, "probe the agent's model server: oikos llm check [--base-url URL] [--model M] [--json]"},
		"migrate":    {runMigrate, "apply pending database migrations (OIKOS_DATABASE_URL)"},
		"notify":     {runNotify, "notification channels: oikos notify test URL | add NAME --url URL [--on KINDS] | list | deliveries | rm NAME"},
		"schedulers": {runSchedulers, "the schedulers sharing the fleet and the units (hosts, net) each holds"},
		"secret":     {runSecret, "secrets by reference (secret:NAME): oikos secret set NAME < file | list | rm NAME"},
		"seed":       {runSeed, "ingest the seeds (ontology, inventory, knowledge); --diff reports drift"},
		"token":      {runToken, "manage api tokens: oikos token create --role operator|agent|readonly --name NAME"},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: oikos <command> [arguments]")
	fmt.Fprintln(w, "\ncommands:")
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nenvironment: OIKOS_API_URL (default http://127.0.0.1:8080), OIKOS_TOKEN, OIKOS_DATABASE_URL")
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	env := &cliEnv{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv,
		HTTP: &http.Client{Timeout: 30 * time.Second}}
	code := dispatch(ctx, env, os.Args[1:])
	stop()
	os.Exit(code)
}

func dispatch(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(env.Stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands()[args[0]]
	if !ok {
		fmt.Fprintf(env.Stderr, "oikos: unknown command %q\n\n", args[0])
		usage(env.Stderr)
		return 2
	}
	return cmd.run(ctx, env, args[1:])
}

// db opens a pool on OIKOS_DATABASE_URL and migrates it, for the commands that work on the
// database directly (migrate, seed, token).
func (e *cliEnv) db(ctx context.Context) (*storage.Pool, error) {
	url := e.Getenv("OIKOS_DATABASE_URL")
	if url == "" {
		return nil, errors.New("OIKOS_DATABASE_URL is not set")
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	pool, err := pg.Connect(cctx, url, 8, zerolog.Nop())
	if err != nil {
		return nil, err
	}
	if _, err := pg.Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

func runMigrate(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) > 0 {
		fmt.Fprintln(env.Stderr, "usage: oikos migrate")
		return 2
	}
	url := env.Getenv("OIKOS_DATABASE_URL")
	if url == "" {
		fmt.Fprintln(env.Stderr, "oikos migrate: OIKOS_DATABASE_URL is not set")
		return 1
	}
	pool, err := pg.Connect(ctx, url, 4, zerolog.Nop())
	if err != nil {
		fmt.Fprintf(env.Stderr, "oikos migrate: %v\n", err)
		return 1
	}
	defer pool.Close()
	applied, err := pg.Migrate(ctx, pool)
	if err != nil {
		fmt.Fprintf(env.Stderr, "oikos migrate: %v\n", err)
		return 1
	}
	if len(applied) == 0 {
		fmt.Fprintln(env.Stdout, "schema is up to date")
		return 0
	}
	fmt.Fprintf(env.Stdout, "applied migrations %v\n", applied)
	return 0
}

// apiError is a problem JSON answer from the api: the shared client's one error type
// ("STATUS Title: detail (field F)").
type apiError = apiclient.APIError

// defaultAPI is the api's address when OIKOS_API_URL is not set.
const defaultAPI = "http://127.0.0.1:8080"

// apiBase is OIKOS_API_URL (or the default) without a trailing slash.
func (e *cliEnv) apiBase() string {
	base := strings.TrimRight(e.Getenv("OIKOS_API_URL"), "/")
	if base == "" {
		base = defaultAPI
	}
	return base
}

// api is the generated client of the api at OIKOS_API_URL, sending OIKOS_TOKEN as the bearer
// token through env.HTTP (and its timeout).
func (e *cliEnv) api() (*apiclient.Client, error) {
	var hc apiclient.HttpRequestDoer = http.DefaultClient
	if e.HTTP != nil {
		hc = e.HTTP
	}
	return apiclient.New(e.apiBase(), apiclient.Options{Token: e.Getenv("OIKOS_TOKEN"), HTTP: hc})
}

// do sends one call of the generated client with the operator's token and decodes the answer
// into out (when non-nil; a *json.RawMessage keeps it as sent). A non-2xx answer comes back
// as *apiError; an api that cannot be reached as "METHOD /path: the transport's error".
func (e *cliEnv) do(call func(*apiclient.Client) (*http.Response, error), out any) error {
	return e.send(call, 32<<20, func(raw []byte) error {
		if out == nil || len(raw) == 0 {
			return nil
		}
		return json.Unmarshal(raw, out)
	})
}

// send sends one call and hands a 2xx answer's body (at most limit bytes) to use; a failure
// of use is a "decode answer of METHOD /path" error.
func (e *cliEnv) send(call func(*apiclient.Client) (*http.Response, error), limit int64, use func([]byte) error) error {
	c, err := e.api()
	if err != nil {
		return err
	}
	resp, err := call(c)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			if u, perr := url.Parse(ue.URL); perr == nil {
				return fmt.Errorf("%s %s: %w", strings.ToUpper(ue.Op), u.RequestURI(), err)
			}
		}
		return err
	}
	raw, err := apiclient.ReadLimit(resp, nil, limit)
	if err != nil {
		return err
	}
	if err := use(raw); err != nil {
		return fmt.Errorf("decode answer of %s %s: %w", resp.Request.Method, resp.Request.URL.RequestURI(), err)
	}
	return nil
}

// runHealth is the container health check: the runtime image has no curl.
func runHealth(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(env.Stderr, "usage: oikos health URL")
		return 2
	}
	if err := daemon.CheckURL(ctx, env.HTTP, args[0]); err != nil {
		fmt.Fprintf(env.Stderr, "oikos health: %v\n", err)
		return 1
	}
	return 0
}

// job is env as the jobs package takes it.
func (e *cliEnv) job() jobs.Env {
	return jobs.Env{Stdin: e.Stdin, Stdout: e.Stdout, Stderr: e.Stderr, Do: e.do, ExitOf: exitOf}
}

func runSecret(ctx context.Context, env *cliEnv, args []string) int {
	return jobs.Secret(ctx, env.job(), args)
}

func runSchedulers(ctx context.Context, env *cliEnv, args []string) int {
	return jobs.Schedulers(ctx, env.job(), args)
}

// runLLM is `oikos llm check` (shared/llmcheck.CLI), with the longer wait the agent's probes need.
func runLLM(ctx context.Context, env *cliEnv, args []string) int {
	return llmcheck.CLI(ctx, args, env.Stdout, env.Stderr, func(ctx context.Context, b apiclient.LLMCheckRequest) (raw json.RawMessage, err error) {
		long := &cliEnv{Stdout: env.Stdout, Stderr: env.Stderr, Getenv: env.Getenv, HTTP: &http.Client{Timeout: llmcheck.CLITimeout}}
		return raw, long.do(func(c *apiclient.Client) (*http.Response, error) { return c.CheckModelServer(ctx, b) }, &raw)
	})
}
