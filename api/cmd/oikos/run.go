package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os/user"
	"strings"

	"github.com/oikos-hq/oikos/shared/apiclient"
)

// runRun asks the api to run a command on a target, through the same gate the agent uses:
// nothing here decides whether it may run. A command that runs at once is followed to its
// end (its output on stdout, the exit code as ours); a queued one is reported with the
// approval to decide.
func runRun(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("oikos run", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	purpose := fs.String("purpose", "", "why it runs, shown on the approval (default: who ran it from the CLI)")
	declared := fs.String("declared", "", "your own risk class; it can only raise the gate's")
	session := fs.String("session", "", "session id (approval windows are per session)")
	timeout := fs.Int("timeout", 0, "seconds before the scheduler stops it (default 600)")
	noWait := fs.Bool("no-wait", false, "print the execution and return without following its output")
	usage := func() int {
		fmt.Fprintln(env.Stderr, "usage: oikos run [--purpose P] [--declared CLASS] [--session S] [--timeout SECS] [--no-wait] TARGET -- COMMAND…")
		return 2
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rest := fs.Args()
	if len(rest) < 3 || rest[1] != "--" {
		return usage()
	}
	target, command := rest[0], strings.Join(rest[2:], " ")
	if strings.TrimSpace(command) == "" {
		return usage()
	}
	if *timeout < 0 {
		return usage()
	}
	if *purpose == "" {
		who := "an operator"
		if u, err := user.Current(); err == nil && u.Username != "" {
			who = u.Username
		}
		*purpose = "run from the oikos CLI by " + who
	}
	body := apiclient.RunRequest{Target: target, Command: command, Purpose: *purpose,
		DeclaredRisk: apiclient.Opt(apiclient.RiskClass(*declared)), SessionId: apiclient.Opt(*session)}
	if *timeout > 0 {
		body.TimeoutSeconds = timeout
	}
	var x execution
	if err := env.do(func(c *apiclient.Client) (*http.Response, error) { return c.RequestExecution(ctx, body) }, &x); err != nil {
		fmt.Fprintf(env.Stderr, "oikos run: %v\n", err)
		return 1
	}
	switch {
	case x.AlreadyQueued != nil && *x.AlreadyQueued:
		fmt.Fprintf(env.Stdout, "%s\n", deref(x.Message))
		return 0
	case x.Status == "pending_approval":
		fmt.Fprintf(env.Stdout, "execution %s is %s and waits for approval %s\n", x.Id, x.RiskClass, deref(x.ApprovalId))
		fmt.Fprintf(env.Stdout, "decide it with: oikos approve %s   (or: oikos deny %s)\n", deref(x.ApprovalId), deref(x.ApprovalId))
		return 0
	}
	fmt.Fprintf(env.Stderr, "execution %s: %s, %s\n", x.Id, x.RiskClass, deref(x.Message))
	if *noWait {
		fmt.Fprintln(env.Stdout, x.Id)
		return 0
	}
	return followExecution(ctx, env, x.Id.String())
}

// deref is *p, or T's zero value for nil (an optional field the api left out).
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
