package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	execsvc "github.com/oikos-hq/oikos/api/internal/execution"

	"github.com/oikos-hq/oikos/shared/apiclient"
)

// approval is an approval as the api answers it (the api's own type: one shape).
type approval = execsvc.Approval

// decisionResult is the answer to a decision.
type decisionResult struct {
	Approval  approval  `json:"approval"`
	Execution execution `json:"execution"`
	Window    *struct {
		Kind      string    `json:"kind"`
		Target    string    `json:"target"`
		ExpiresAt time.Time `json:"expires_at"`
	} `json:"window"`
}

func runApprovals(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 || args[0] != "list" {
		fmt.Fprintln(env.Stderr, "usage: oikos approvals list [--status pending|approved|denied|revoked|all] [--session S] [--json]")
		return 2
	}
	fs := flag.NewFlagSet("oikos approvals list", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	status := fs.String("status", "pending", "pending, approved, denied, revoked, expired (comma-separated) or all")
	session := fs.String("session", "", "only approvals of this agent session")
	limit := fs.Int("limit", 50, "how many, newest first (1-500)")
	asJSON := fs.Bool("json", false, "print the api's JSON")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *limit < 1 || *limit > 500 {
		fmt.Fprintln(env.Stderr, "usage: oikos approvals list [--status S] [--session S] [--limit 1-500] [--json]")
		return 2
	}
	q := apiclient.ListApprovalsParams{SessionId: apiclient.Opt(*session), Limit: limit}
	if *status != "all" {
		q.Status = apiclient.Opt(*status)
	}
	p, code, done := fetchPage[approval](env, "oikos approvals list", func(c *apiclient.Client) (*http.Response, error) {
		return c.ListApprovals(ctx, &q)
	}, *asJSON)
	if done {
		return code
	}
	if len(p.Items) == 0 {
		fmt.Fprintf(env.Stdout, "no %s approvals\n", strings.ReplaceAll(*status, ",", " or "))
		return 0
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tRISK\tTARGET\tCOMMAND\tREQUESTED BY\tAGE")
	for _, a := range p.Items {
		cmd := oneLine(a.Command)
		if a.RiskClass != "destructive" {
			// A destructive command is shown whole: the operator must see what they approve.
			cmd = shorten(cmd, 60)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Status, a.RiskClass, a.Target, cmd, a.RequestedBy,
			time.Since(a.RequestedAt).Round(time.Second))
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	return 0
}

func runApprove(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("oikos approve", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	confirm := fs.String("confirm", "", "for a destructive execution: its target's slug, typed out (else asked on stdin)")
	reason := fs.String("reason", "", "why (kept on the approval)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(env.Stderr, "usage: oikos approve [--confirm TARGET] [--reason R] APPROVAL_ID")
		return 2
	}
	id := fs.Arg(0)
	var a approval
	if err := env.do(func(c *apiclient.Client) (*http.Response, error) { return c.GetApproval(ctx, id) }, &a); err != nil {
		fmt.Fprintf(env.Stderr, "oikos approve: %v\n", err)
		return 1
	}
	via := "api"
	if a.RiskClass == "destructive" {
		// A destructive step needs a typed confirmation: the operator types the target it
		// destroys things on, after seeing the whole command.
		fmt.Fprintf(env.Stderr, "DESTRUCTIVE on %s:\n  %s\npurpose: %s\n", a.Target, a.Command, a.Purpose)
		typed := *confirm
		if typed == "" {
			fmt.Fprintf(env.Stderr, "type %s to approve: ", a.Target)
			line, err := bufio.NewReader(env.Stdin).ReadString('\n')
			if err != nil && line == "" {
				fmt.Fprintln(env.Stderr, "\noikos approve: no confirmation typed; nothing approved")
				return 1
			}
			typed = strings.TrimSpace(line)
		}
		if typed != a.Target {
			fmt.Fprintf(env.Stderr, "oikos approve: confirmation %q is not %s; nothing approved\n", typed, a.Target)
			return 1
		}
		via = "typed_confirmation"
	}
	return decide(ctx, env, "approve", id, via, *reason)
}

func runDeny(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("oikos deny", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	reason := fs.String("reason", "", "why (kept on the approval)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(env.Stderr, "usage: oikos deny [--reason R] APPROVAL_ID")
		return 2
	}
	return decide(ctx, env, "deny", fs.Arg(0), "api", *reason)
}

func decide(ctx context.Context, env *cliEnv, decision, id, via, reason string) int {
	body := apiclient.DecisionRequest{Decision: apiclient.DecisionRequestDecision(decision), Via: apiclient.DecisionRequestVia(via),
		Reason: apiclient.Opt(reason)}
	var res decisionResult
	if err := env.do(func(c *apiclient.Client) (*http.Response, error) { return c.DecideApproval(ctx, id, body) }, &res); err != nil {
		fmt.Fprintf(env.Stderr, "oikos %s: %v\n", decision, err)
		return 1
	}
	fmt.Fprintf(env.Stdout, "approval %s %s (%s); execution %s is %s\n", res.Approval.ID, res.Approval.Status,
		res.Approval.RiskClass, res.Execution.Id, res.Execution.Status)
	if res.Window != nil {
		scope := "this session"
		if res.Window.Target != "" {
			scope = res.Window.Target + " in this session"
		}
		fmt.Fprintf(env.Stdout, "%s window open for %s until %s\n", res.Window.Kind, scope, res.Window.ExpiresAt.Local().Format("15:04:05"))
	}
	if res.Execution.Status == "approved" {
		fmt.Fprintf(env.Stdout, "follow it with: oikos executions tail %s\n", res.Execution.Id)
	}
	return 0
}
