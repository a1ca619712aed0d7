// Command oikos-local runs Oikos on one machine without Docker.
//
//	oikos-local up                 private Postgres, lab simulator, api, scheduler, agent; Ctrl-C stops all
//	oikos-local test -- CMD ARGS   start a private Postgres, run CMD with OIKOS_TEST_DATABASE_URL set, stop it
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/oikos-hq/oikos/deploy/local"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: oikos-local up | oikos-local test -- COMMAND [ARGS]")
		os.Exit(2)
	}
	root, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	switch os.Args[1] {
	case "up":
		os.Exit(up(ctx, root))
	case "test":
		args := os.Args[2:]
		if len(args) > 0 && args[0] == "--" {
			args = args[1:]
		}
		if len(args) == 0 {
			fmt.Fprintln(os.Stderr, "oikos-local test: no command given")
			os.Exit(2)
		}
		os.Exit(test(ctx, args))
	default:
		fmt.Fprintf(os.Stderr, "oikos-local: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

func up(ctx context.Context, root string) int {
	stack, err := local.Up(ctx, local.Options{Root: root, Stdout: os.Stdout})
	if err != nil {
		fmt.Fprintf(os.Stderr, "oikos-local: %v\n", err)
		return 1
	}
	fmt.Print(banner(stack, root))
	werr := stack.Wait(ctx)
	stack.Down()
	if werr != nil {
		fmt.Fprintf(os.Stderr, "oikos-local: %v\n", werr)
		return 1
	}
	return 0
}

// banner is what `make up` prints once everything answers: the addresses, the tokens (the
// operator's in full, as ever; the agent's by where it is kept) and how to point an MCP
// client at the agent.
func banner(stack *local.Stack, root string) string {
	api, sched, agent := stack.Addrs()
	kept := func(file, env string) string {
		if file == "" {
			return "from " + env
		}
		return "kept in " + rel(root, file)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nOikos is up.\n")
	fmt.Fprintf(&b, "  dashboard        http://%s/   (sign in with the operator token below)\n", api)
	fmt.Fprintf(&b, "  api              http://%s\n", api)
	fmt.Fprintf(&b, "  agent            http://%s\n", agent)
	fmt.Fprintf(&b, "  mcp              %s   (Streamable HTTP; Authorization: Bearer <an api token>)\n", stack.MCPURL())
	fmt.Fprintf(&b, "  chat             POST http://%s/api/v1/chat   (Nomos on %s)\n", api, stack.LLM)
	fmt.Fprintf(&b, "  scheduler        http://%s/healthz\n", sched)
	fmt.Fprintf(&b, "  database         %s\n", stack.DBURL)
	fmt.Fprintf(&b, "  operator token   %s   (%s)\n", stack.Token, kept(stack.TokenFile, "OIKOS_OPERATOR_TOKEN"))
	fmt.Fprintf(&b, "  agent token      %s; role agent, name nomos: the agent's own\n", kept(stack.AgentTokenFile, "OIKOS_AGENT_TOKEN"))
	if stack.SecretsKeyFile != "" {
		fmt.Fprintf(&b, "  secrets key      %s; the three daemons' OIKOS_SECRETS_KEY_FILE: `oikos secret set` seals under it\n", kept(stack.SecretsKeyFile, ""))
	}
	fmt.Fprintf(&b, "\nConnect an MCP client with a token of its own (see README, \"Connect an MCP client\"):\n")
	fmt.Fprintf(&b, "  OIKOS_DATABASE_URL='%s' bin/oikos token create --role agent --name claude-code\n", stack.DBURL)
	fmt.Fprintf(&b, "  claude mcp add --transport http oikos %s --header \"Authorization: Bearer oik_...\"\n", stack.MCPURL())
	fmt.Fprintf(&b, "\nA daemon that exits is restarted (with back-off). Ctrl-C stops everything.\n\n")
	return b.String()
}

// rel shows file relative to root when it is under it.
func rel(root, file string) string {
	if r, err := filepath.Rel(root, file); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return file
}

func test(ctx context.Context, args []string) int {
	dir, err := os.MkdirTemp("", "oikos-test-pg-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	url, cluster, err := local.StartPostgres(ctx, func(string) string { return "" }, filepath.Join(dir, "pg"), true, nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "oikos-local test: %v\n", err)
		return 1
	}
	defer cluster.Stop()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "OIKOS_TEST_DATABASE_URL="+url)
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		fmt.Fprintf(os.Stderr, "oikos-local test: %v\n", err)
		return 1
	}
	return 0
}
