package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	typed "github.com/oikos-hq/oikos/shared/actions"
	"github.com/oikos-hq/oikos/shared/remote"
)

// action runs one kind of execution on a resolved target (X9). The api has normalised and
// classified the params; the command column is the api's rendering for classification and
// display, and only `run` executes it verbatim — typed actions build their command lines
// from params here, quoting every value.
type action func(ctx context.Context, e *Executor, j job, t remote.Target, s *sink) outcome

var actions = map[string]action{
	"run":         runAction,
	"restart":     restartAction,
	"systemctl":   systemctlAction,
	"apt_upgrade": aptUpgradeAction,
	"pct_exec":    pctExecAction,
	"docker_exec": dockerExecAction,
	"pct_create":  pctCreateAction,
}

func actionNames() []string {
	names := make([]string, 0, len(actions))
	for n := range actions {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// execResult is the result JSON of a command run through the host-hop.
type execResult struct {
	ExitCode        int    `json:"exit_code"`
	DurationMS      int64  `json:"duration_ms"`
	StdoutBytes     int    `json:"stdout_bytes"`
	StderrBytes     int    `json:"stderr_bytes"`
	OutputTruncated bool   `json:"output_truncated"`
	Hop             string `json:"hop"`
	Via             string `json:"via,omitempty"`
	Command         string `json:"command,omitempty"`
}

// execOn runs cmd on t through the host-hop, streaming into s.
func execOn(ctx context.Context, e *Executor, j job, t remote.Target, s *sink, cmd string, showCommand bool) outcome {
	res, err := e.opts.SSH.Exec(ctx, t, cmd, s)
	if err != nil {
		return e.fromError(ctx, j, "", err)
	}
	r := execResult{
		ExitCode: res.ExitCode, DurationMS: res.Duration.Milliseconds(),
		StdoutBytes: len(res.Stdout), StderrBytes: len(res.Stderr),
		OutputTruncated: res.StdoutTruncated || res.StderrTruncated,
		Hop:             t.Kind, Via: t.Host,
	}
	if showCommand {
		r.Command = cmd
	}
	return exitOutcome(res, r)
}

func runAction(ctx context.Context, e *Executor, j job, t remote.Target, s *sink) outcome {
	if strings.TrimSpace(j.Command) == "" {
		return failed("run: the execution has no command")
	}
	return execOn(ctx, e, j, t, s, j.Command, false)
}

// restart: params {unit} (or {service}) → `systemctl restart <unit>` on the target.
func restartAction(ctx context.Context, e *Executor, j job, t remote.Target, s *sink) outcome {
	unit := paramString(j.Params, "unit", "service")
	if unit == "" {
		return failed("restart: params.unit is required (the systemd unit to restart)")
	}
	cmd, err := shellLine("systemctl", "restart", unit)
	if err != nil {
		return failed("restart: " + err.Error())
	}
	return execOn(ctx, e, j, t, s, cmd, true)
}

// systemctl: params {verb, unit} → `systemctl <verb> <unit>` on the target.
func systemctlAction(ctx context.Context, e *Executor, j job, t remote.Target, s *sink) outcome {
	verb, unit := paramString(j.Params, "verb", "action"), paramString(j.Params, "unit", "service")
	if !typed.SystemctlVerb(verb) {
		return failed(fmt.Sprintf("systemctl: params.verb %q is not one of the supported verbs", verb))
	}
	if unit == "" {
		return failed("systemctl: params.unit is required")
	}
	cmd, err := shellLine("systemctl", verb, unit)
	if err != nil {
		return failed("systemctl: " + err.Error())
	}
	return execOn(ctx, e, j, t, s, cmd, true)
}

// aptUpgradeCommand is what apt_upgrade runs on the target.
const aptUpgradeCommand = "apt-get update && apt-get -y upgrade"

func aptUpgradeAction(ctx context.Context, e *Executor, j job, t remote.Target, s *sink) outcome {
	return execOn(ctx, e, j, t, s, aptUpgradeCommand, true)
}

// pct_exec: params {command} on an LXC target (the host-hop is pct exec), or params
// {vmid, command} on its Proxmox host.
func pctExecAction(ctx context.Context, e *Executor, j job, t remote.Target, s *sink) outcome {
	cmd := paramString(j.Params, "command", "cmd")
	if cmd == "" {
		return failed("pct_exec: params.command is required")
	}
	switch t.Kind {
	case remote.KindLXC:
		return execOn(ctx, e, j, t, s, cmd, false)
	case remote.KindMachine:
		vmid, ok, err := paramInt(j.Params, "vmid")
		if err != nil || !ok || vmid <= 0 {
			return failed(fmt.Sprintf("pct_exec on %s: params.vmid must name the container (a positive integer)", t.Slug))
		}
		line, err := remote.PctExecCommand(vmid, cmd)
		if err != nil {
			return failed("pct_exec: " + err.Error())
		}
		// The host runs the pct line itself; no further hop.
		res, err := e.opts.SSH.Run(ctx, t, line, s)
		if err != nil {
			return e.fromError(ctx, j, "", err)
		}
		return exitOutcome(res, execResult{ExitCode: res.ExitCode, DurationMS: res.Duration.Milliseconds(),
			StdoutBytes: len(res.Stdout), StderrBytes: len(res.Stderr), Hop: remote.KindLXC, Via: t.Slug, Command: line})
	default:
		return failed(fmt.Sprintf("pct_exec: target %s is a %s; it needs an LXC, or its Proxmox host with params.vmid", t.Slug, t.Kind))
	}
}

// docker_exec: params {container, command} → `docker exec <container> sh -c <command>`.
func dockerExecAction(ctx context.Context, e *Executor, j job, t remote.Target, s *sink) outcome {
	container, cmd := paramString(j.Params, "container"), paramString(j.Params, "command", "cmd")
	if container == "" || cmd == "" {
		return failed("docker_exec: params.container and params.command are required")
	}
	line, err := shellLine("docker", "exec", container, "sh", "-c", cmd)
	if err != nil {
		return failed("docker_exec: " + err.Error())
	}
	return execOn(ctx, e, j, t, s, line, true)
}

func failed(msg string) outcome { return outcome{Status: StatusFailed, Err: msg} }

// shellLine quotes every word so no value can change the command's meaning.
func shellLine(words ...string) (string, error) {
	q := make([]string, len(words))
	for i, w := range words {
		var err error
		if q[i], err = remote.QuoteArg(w); err != nil {
			return "", err
		}
	}
	return strings.Join(q, " "), nil
}

// paramString returns the first of keys that holds a non-empty string (numbers are
// accepted and printed, since a unit or container name may arrive as one).
func paramString(p map[string]any, keys ...string) string {
	for _, k := range keys {
		switch v := p[k].(type) {
		case string:
			if s := strings.TrimSpace(v); s != "" {
				return s
			}
		case float64:
			return strconv.FormatFloat(v, 'f', -1, 64)
		case json.Number:
			return v.String()
		}
	}
	return ""
}

// paramInt reads an integer param given as a number or a digit string.
func paramInt(p map[string]any, key string) (n int, ok bool, err error) {
	switch v := p[key].(type) {
	case nil:
		return 0, false, nil
	case float64:
		if v != math.Trunc(v) || math.Abs(v) > math.MaxInt32 {
			return 0, true, fmt.Errorf("params.%s: %v is not an integer", key, v)
		}
		return int(v), true, nil
	case int:
		return v, true, nil
	case int64:
		return int(v), true, nil
	case json.Number:
		n, err := strconv.Atoi(v.String())
		if err != nil {
			return 0, true, fmt.Errorf("params.%s: %v is not an integer", key, v)
		}
		return n, true, nil
	case string:
		if strings.TrimSpace(v) == "" {
			return 0, false, nil
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return 0, true, fmt.Errorf("params.%s: %q is not an integer", key, v)
		}
		return n, true, nil
	default:
		return 0, true, fmt.Errorf("params.%s: %v is not an integer", key, v)
	}
}

// paramBool reads a boolean param in any of the shapes agents send (X9): true/false, 0/1,
// "true"/"false"/"1"/"0"/"yes"/"no".
func paramBool(p map[string]any, key string) (b bool, ok bool, err error) {
	switch v := p[key].(type) {
	case nil:
		return false, false, nil
	case bool:
		return v, true, nil
	case int:
		return paramBool(map[string]any{key: float64(v)}, key)
	case int64:
		return paramBool(map[string]any{key: float64(v)}, key)
	case float64:
		switch v {
		case 0:
			return false, true, nil
		case 1:
			return true, true, nil
		}
	case json.Number:
		switch v.String() {
		case "0":
			return false, true, nil
		case "1":
			return true, true, nil
		}
	case string:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "1", "true", "yes", "on":
			return true, true, nil
		case "0", "false", "no", "off":
			return false, true, nil
		}
	}
	return false, true, fmt.Errorf("params.%s: %v is not a boolean (use true/false or 1/0)", key, p[key])
}
