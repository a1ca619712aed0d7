package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/oikos-hq/oikos/agent/internal/apiclient"
	"github.com/oikos-hq/oikos/agent/internal/tasks"
	api "github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/shared/safego"
)

// Execution is the part of the api's execution the tools read.
type Execution struct {
	ID              string          `json:"id"`
	Target          string          `json:"target"`
	Action          string          `json:"action"`
	Command         string          `json:"command"`
	RiskClass       string          `json:"risk_class"`
	Reasons         []string        `json:"reasons,omitempty"`
	Status          string          `json:"status"`
	ApprovalID      *string         `json:"approval_id,omitempty"`
	ExitCode        *int            `json:"exit_code,omitempty"`
	Output          string          `json:"output,omitempty"`
	OutputTruncated bool            `json:"output_truncated,omitempty"`
	Result          json.RawMessage `json:"result,omitempty"`
	Error           string          `json:"error,omitempty"`
	AlreadyQueued   bool            `json:"already_queued,omitempty"`
	Message         string          `json:"message,omitempty"`
}

// terminal says whether an execution status is final.
func terminal(status string) bool {
	switch status {
	case "completed", "failed", "timed_out", "interrupted", "denied", "revoked", "cancelled":
		return true
	}
	return false
}

// failed says whether a terminal execution failed (what the retry cap counts).
func (e Execution) failed() bool {
	switch e.Status {
	case "failed", "timed_out", "interrupted":
		return true
	case "completed":
		return e.ExitCode != nil && *e.ExitCode != 0
	}
	return false
}

// maxOutput bounds the output a tool result carries (the model sees the tail, which holds the
// error; the whole output stays in the api).
const maxOutput = 12 << 10

type runIn struct {
	Target         string `json:"target" jsonschema:"entity slug to run on, e.g. lxc:jellyfin or proxmox-host:atlas"`
	Command        string `json:"command" jsonschema:"shell command"`
	Purpose        string `json:"purpose" jsonschema:"why, in a few words (shown to the operator)"`
	DeclaredRisk   string `json:"declared_risk,omitempty" jsonschema:"your risk estimate; the api never classifies below it"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty"`
}

type actionIn struct {
	Action       string         `json:"action" jsonschema:"pct_create, apt_upgrade, restart, systemctl, pct_exec or docker_exec"`
	Target       string         `json:"target" jsonschema:"entity slug"`
	Params       map[string]any `json:"params,omitempty" jsonschema:"the action's parameters"`
	Purpose      string         `json:"purpose"`
	DeclaredRisk string         `json:"declared_risk,omitempty"`
}

type idIn struct {
	ID string `json:"id" jsonschema:"execution id"`
}

type waitIn struct {
	ID             string `json:"id" jsonschema:"execution id"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"how long to wait (default 60, max 600)"`
}

type classifyIn struct {
	Command string `json:"command"`
	Target  string `json:"target,omitempty" jsonschema:"entity slug; the transport can raise the class"`
}

type inspectIn struct {
	Path    string   `json:"path" jsonschema:"absolute path"`
	Targets []string `json:"targets" jsonschema:"entity slugs (1 to 8)"`
}

var riskClasses = []string{"read_only", "reversible_low", "config_mutation", "destructive"}

func executionTools() []*Tool {
	run := def("run", "Run a shell command on a host, LXC or VM through the risk gate. "+
		"Read-only commands run at once and answer with their output; others need a plan (propose_plan) and may queue for the operator's approval.",
		Hints{Destructive: true, OpenWorld: true}, "execution",
		func(s *jsonschema.Schema) {
			enum(s, "declared_risk", riskClasses...)
			bounds(s, "timeout_seconds", 1, 3600)
			maxLen(s, "command", 16<<10)
			maxLen(s, "purpose", 500)
		}, runTool)
	run.gate = gateRun
	action := def("request_execution", "Request a typed action (restart, systemctl, apt_upgrade, pct_create, pct_exec, docker_exec) through the risk gate. "+
		"Needs a plan; may queue for approval.",
		Hints{Destructive: true, OpenWorld: true}, "execution",
		func(s *jsonschema.Schema) {
			enum(s, "action", "pct_create", "apt_upgrade", "restart", "systemctl", "pct_exec", "docker_exec")
			enum(s, "declared_risk", riskClasses...)
		}, actionTool)
	action.gate = gateAction
	return []*Tool{
		run, action,
		def("get_execution", "Get an execution's status, risk class, exit code and output by id.",
			Hints{ReadOnly: true, Idempotent: true}, "execution", nil,
			func(ctx context.Context, c *Call, in idIn) Result {
				e, err := getExecution(ctx, c, in.ID)
				if err != nil {
					return apiError(err)
				}
				return executionResult(e)
			}),
		def("wait_execution", "Wait for a queued or running execution to finish, then return it with its output.",
			Hints{ReadOnly: true, Idempotent: true}, "execution",
			func(s *jsonschema.Schema) { bounds(s, "timeout_seconds", 1, 600) },
			func(ctx context.Context, c *Call, in waitIn) Result {
				d := 60 * time.Second
				if in.TimeoutSeconds > 0 {
					d = time.Duration(in.TimeoutSeconds) * time.Second
				}
				e, err := waitExecution(ctx, c, in.ID, d)
				if err != nil {
					return apiError(err)
				}
				return executionResult(e)
			}),
		def("classify_command", "Classify a command's risk exactly as run would, without running it.",
			Hints{ReadOnly: true, Idempotent: true}, "classification", nil,
			func(ctx context.Context, c *Call, in classifyIn) Result {
				cl, err := classify(ctx, c, in.Target, in.Command, "")
				if err != nil {
					return apiError(err)
				}
				return Result{Data: cl}
			}),
		inspectPathTool(),
	}
}

func runTool(ctx context.Context, c *Call, in runIn) Result {
	body := map[string]any{"target": in.Target, "command": in.Command, "purpose": in.Purpose, "session_id": c.Session.ID}
	if in.DeclaredRisk != "" {
		body["declared_risk"] = in.DeclaredRisk
	}
	if in.TimeoutSeconds > 0 {
		body["timeout_seconds"] = in.TimeoutSeconds
	}
	return requestAndFollow(ctx, c, c.api().RequestExecutionWithBody, body, in.Target)
}

func actionTool(ctx context.Context, c *Call, in actionIn) Result {
	body := map[string]any{"action": in.Action, "target": in.Target, "purpose": in.Purpose, "session_id": c.Session.ID}
	if in.Params != nil {
		body["params"] = in.Params
	}
	if in.DeclaredRisk != "" {
		body["declared_risk"] = in.DeclaredRisk
	}
	return requestAndFollow(ctx, c, c.api().RequestActionWithBody, body, in.Target)
}

// requestFn is POST /executions or POST /executions/actions of the generated client.
type requestFn func(ctx context.Context, contentType string, body io.Reader, reqEditors ...api.RequestEditorFn) (*http.Response, error)

// requestAndFollow asks the api for an execution and follows it: a runnable one is waited for
// (up to ReadWait) and answered with its output; one that waits for an approval marks the
// task awaiting_input and tells the model to stop and wait.
func requestAndFollow(ctx context.Context, c *Call, request requestFn, body map[string]any, target string) Result {
	e, err := apiclient.Decode[Execution](request(ctx, api.ContentJSON, api.JSONBody(body), c.as()...))
	if err != nil {
		return apiError(err)
	}
	if e.Status == "pending_approval" {
		approval := ""
		if e.ApprovalID != nil {
			approval = *e.ApprovalID
		}
		if err := c.deps.Tasks.AwaitApproval(ctx, tasks.Who{Session: c.Session.ID, Actor: c.Actor, Source: c.Source}, approval); err != nil {
			c.deps.Log.Warn().Err(err).Str("session", c.Session.ID).Msg("mark task awaiting approval")
		}
		return Result{Render: "approval", Entity: target, Data: map[string]any{
			"execution_id": e.ID, "status": e.Status, "risk_class": e.RiskClass, "reasons": e.Reasons, "approval_id": approval,
			"target": e.Target, "command": e.Command,
			"already_queued": e.AlreadyQueued,
			"next": "Queued for the operator's approval. Stop here and tell the operator what you want to run and why; " +
				"do not retry it or queue another change. Follow it with wait_execution or get_execution.",
		}}
	}
	if !terminal(e.Status) {
		var err error
		e, err = waitExecution(ctx, c, e.ID, c.deps.ReadWait)
		if err != nil {
			return apiError(err)
		}
	}
	res := executionResult(e)
	res.Entity = target
	return res
}

// executionResult is an execution as a tool answers it: a failed one is an error result.
func executionResult(e Execution) Result {
	if len(e.Output) > maxOutput {
		e.Output = "…" + e.Output[len(e.Output)-maxOutput:]
		e.OutputTruncated = true
	}
	res := Result{Data: e, Render: "execution", Entity: e.Target}
	if !terminal(e.Status) && e.Status != "pending_approval" {
		res.Data = struct {
			Execution
			Next string `json:"next"`
		}{e, "Still " + e.Status + ". Follow it with wait_execution; do not run it again."}
	}
	res.IsError = terminal(e.Status) && e.failed()
	return res
}

func getExecution(ctx context.Context, c *Call, id string) (Execution, error) {
	if strings.TrimSpace(id) == "" {
		return Execution{}, errors.New("id is empty")
	}
	return apiclient.Decode[Execution](c.deps.API.API().GetExecution(ctx, id, c.as()...))
}

// waitExecution waits up to d for an execution to end (following the api's log stream) and
// answers it as it then stands: terminal, or still queued or running when d passed.
func waitExecution(ctx context.Context, c *Call, id string, d time.Duration) (Execution, error) {
	e, err := getExecution(ctx, c, id)
	if err != nil || terminal(e.Status) {
		return e, err
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	err = c.deps.API.WaitEnd(wctx, c.Token, c.Session.ID, id)
	cancel()
	if err != nil && ctx.Err() != nil {
		return e, ctx.Err()
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return e, err
	}
	return getExecution(ctx, c, id)
}

// Classification is the api's verdict on a command (POST /api/v1/classify).
type Classification struct {
	RiskClass string `json:"risk_class"`
	// Explanation names the principle or rule that raised the class.
	Explanation      string          `json:"explanation,omitempty"`
	Reasons          []string        `json:"reasons"`
	ReadOnly         bool            `json:"read_only"`
	Target           string          `json:"target"`
	ApprovalRequired bool            `json:"approval_required"`
	Refusal          json.RawMessage `json:"refusal,omitempty"`
}

func classify(ctx context.Context, c *Call, target, command, declared string) (Classification, error) {
	body := api.ClassifyRequest{Command: command, Target: api.Opt(target), DeclaredRisk: api.Opt(api.RiskClass(declared))}
	return apiclient.Decode[Classification](c.deps.API.API().ClassifyCommand(ctx, body, c.as()...))
}

// as is the request editors of the call: its caller's token and its session.
func (c *Call) as() []api.RequestEditorFn { return apiclient.As(c.Token, c.Session.ID) }

// apiError is an api failure as a tool result: the api's own words, which name the field.
func apiError(err error) Result {
	var e *apiclient.Error
	if errors.As(err, &e) {
		switch {
		case e.Status == http.StatusForbidden:
			return Errorf("permission denied by the api: %s", e.Detail)
		case e.Status == http.StatusConflict && e.ApprovalID != "":
			return Result{IsError: true, Render: "refusal", Text: fmt.Sprintf("refused by the api: %s (pending approval %s). "+
				"Wait for the operator's decision on it before queueing another change.", e.Detail, e.ApprovalID)}
		}
		return Errorf("%s", e.Error())
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return Errorf("the call was cancelled or timed out: %v", err)
	}
	return Errorf("%v", err)
}

// inspectPathTool runs read-only inspections of one path on up to 8 targets in parallel.
func inspectPathTool() *Tool {
	t := def("inspect_path", "Inspect one path on up to 8 targets in parallel: mount, disk use, listing and stat.",
		Hints{ReadOnly: true, Idempotent: true, OpenWorld: true}, "inspect_path",
		func(s *jsonschema.Schema) {
			maxLen(s, "targets", 8)
			one := 1
			s.Properties["targets"].MinItems = &one
			maxLen(s, "path", 1024)
		},
		func(ctx context.Context, c *Call, in inspectIn) Result {
			if !strings.HasPrefix(in.Path, "/") || strings.ContainsAny(in.Path, "\x00\n") {
				return Errorf("inspect_path: path must be absolute and on one line (got %q)", in.Path)
			}
			q := shellQuote(in.Path)
			cmd := fmt.Sprintf("findmnt -T %s; df -h -- %s; ls -la -- %s; stat -- %s", q, q, q, q)
			type one struct {
				Target   string `json:"target"`
				Status   string `json:"status"`
				ExitCode *int   `json:"exit_code,omitempty"`
				Output   string `json:"output,omitempty"`
				Error    string `json:"error,omitempty"`
			}
			out := make([]one, len(in.Targets))
			var wg sync.WaitGroup
			for i, target := range in.Targets {
				wg.Add(1)
				safego.Go(c.deps.Log, "inspect-path", func() {
					defer wg.Done()
					out[i].Target = target
					body := api.RunRequest{Target: target, Command: cmd, Purpose: "inspect " + in.Path, SessionId: &c.Session.ID}
					e, err := apiclient.Decode[Execution](c.deps.API.API().RequestExecution(ctx, body, c.as()...))
					if err != nil {
						out[i].Status, out[i].Error = "refused", apiError(err).Text
						return
					}
					if !terminal(e.Status) && e.Status != "pending_approval" {
						if e, err = waitExecution(ctx, c, e.ID, c.deps.ReadWait); err != nil {
							out[i].Status, out[i].Error = "error", err.Error()
							return
						}
					}
					if len(e.Output) > maxOutput/len(in.Targets) {
						e.Output = "…" + e.Output[len(e.Output)-maxOutput/len(in.Targets):]
					}
					out[i].Status, out[i].ExitCode, out[i].Output, out[i].Error = e.Status, e.ExitCode, e.Output, e.Error
				})
			}
			wg.Wait()
			return Result{Data: map[string]any{"path": in.Path, "results": out}}
		})
	return t
}

// shellQuote single-quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// query builds url.Values from pairs, skipping empty values.
func query(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Set(kv[i], kv[i+1])
		}
	}
	return v
}
