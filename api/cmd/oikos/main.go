// Command oikos is the operator's command line: it classifies commands, migrates and seeds
// the database, manages tokens, and drives approvals, executions and notification channels
// through the api.
//
// Every subcommand lives in its own file as run<Name>(ctx, env, args) int, so this file only
// dispatches. Commands that change the fleet go through the api's gate, never around it.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

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
		"approve":    {runApprove, "approve a queued execution: oikos approve [--confirm TARGET] APPROVAL_ID"},
		"deny":       {runDeny, "deny a queued execution: oikos deny [--reason R] APPROVAL_ID"},
		"discover":   {runDiscover, "propose service entities from a guest's running units and ports: oikos discover services SLUG [--accept all|NAME,NAME]"},
		"export":     {runExport, "the fleet as an inventory file for oikos seed --inventory: oikos export [--type T]... > fleet.yaml"},
		"executions": {runExecutions, "list executions or follow one's output: oikos executions list | tail ID"},
		"run":        {runRun, "run a command through the api's gate: oikos run TARGET -- COMMAND…"},
		"classify":   {runClassify, "classify a command's risk: oikos classify [--declared CLASS] [--json] -- COMMAND… | --stdin"},
		"drift":      {runDrift, "guests on the Proxmox hosts vs the graph: oikos drift [--refresh] [--json] | oikos drift adopt --all | VMID…"},
		"health":     {runHealth, "exit 0 when URL answers 200 (container health checks): oikos health URL"},
		"incidents":  {runIncidents, "incidents, one per root cause: oikos incidents [--status open|resolved|all] [--entity SLUG]"},
		"lab":        {runLab, "fault the lab simulator of make up: oikos lab fault HOST down|slow|flap | oikos lab clear"},
		"migrate":    {runMigrate, "apply pending database migrations (OIKOS_DATABASE_URL)"},
		"notify":     {runNotify, "notification channels: oikos notify test URL | add NAME --url URL [--on KINDS] | list | deliveries | rm NAME"},
		"schedulers": {runSchedulers, "the schedulers sharing the fleet and the units (hosts, net) each holds"},
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
func (e *cliEnv) db(ctx context.Context) (*pgxpool.Pool, error) {
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

// apiError is a problem JSON answer from the api.
type apiError struct {
	Status int    `json:"status"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
	Field  string `json:"field,omitempty"`
}

func (e *apiError) Error() string {
	msg := fmt.Sprintf("%d %s", e.Status, e.Title)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Field != "" {
		msg += " (field " + e.Field + ")"
	}
	return msg
}

// call sends a JSON request to the api with the operator's token and decodes the answer into
// out (when non-nil). A non-2xx answer comes back as *apiError.
func (e *cliEnv) call(ctx context.Context, method, path string, body, out any) error {
	base := strings.TrimRight(e.Getenv("OIKOS_API_URL"), "/")
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok := e.Getenv("OIKOS_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := e.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		pe := &apiError{Status: resp.StatusCode}
		if json.Unmarshal(raw, pe) != nil || pe.Title == "" {
			pe.Title = http.StatusText(resp.StatusCode)
			pe.Detail = strings.TrimSpace(string(raw))
		}
		return pe
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("decode answer of %s %s: %w", method, path, err)
		}
	}
	return nil
}

// runHealth is the container health check: the runtime image has no curl.
func runHealth(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(env.Stderr, "usage: oikos health URL")
		return 2
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
	if err != nil {
		fmt.Fprintf(env.Stderr, "oikos health: %v\n", err)
		return 2
	}
	resp, err := env.HTTP.Do(req)
	if err != nil {
		fmt.Fprintf(env.Stderr, "oikos health: %v\n", err)
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(env.Stderr, "oikos health: %s answered %d\n", args[0], resp.StatusCode)
		return 1
	}
	return 0
}
