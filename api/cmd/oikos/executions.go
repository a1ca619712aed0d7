package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/shared/sse"
)

// execution is the api's execution, as the generated client reads it.
type execution = apiclient.Execution

// page is the api's list shape.
type page[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

func runExecutions(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(env.Stderr, "usage: oikos executions list [flags] | oikos executions tail ID")
		return 2
	}
	switch args[0] {
	case "list":
		return executionsList(ctx, env, args[1:])
	case "tail":
		return executionsTail(ctx, env, args[1:])
	}
	fmt.Fprintf(env.Stderr, "oikos executions: unknown subcommand %q (want list or tail)\n", args[0])
	return 2
}

func executionsList(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("oikos executions list", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	target := fs.String("target", "", "only executions on this target (slug or id)")
	status := fs.String("status", "", "only these statuses (comma-separated)")
	action := fs.String("action", "", "only these actions (run, pct_create, ...; comma-separated)")
	session := fs.String("session", "", "only executions of this agent session")
	limit := fs.Int("limit", 20, "how many, newest first (1-500)")
	asJSON := fs.Bool("json", false, "print the api's JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *limit < 1 || *limit > 500 {
		fmt.Fprintln(env.Stderr, "usage: oikos executions list [--target T] [--status S] [--action A] [--session S] [--limit 1-500] [--json]")
		return 2
	}
	q := apiclient.ListExecutionsParams{Target: apiclient.Opt(*target), Status: apiclient.Opt(*status), Action: apiclient.Opt(*action),
		SessionId: apiclient.Opt(*session), Limit: limit}
	p, code, done := fetchPage[execution](env, "oikos executions list", func(c *apiclient.Client) (*http.Response, error) {
		return c.ListExecutions(ctx, &q)
	}, *asJSON)
	if done {
		return code
	}
	if len(p.Items) == 0 {
		fmt.Fprintln(env.Stdout, "no executions")
		return 0
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tEXIT\tRISK\tTARGET\tCOMMAND\tCREATED")
	for _, x := range p.Items {
		exit := "-"
		if x.ExitCode != nil {
			exit = strconv.Itoa(*x.ExitCode)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", x.Id, x.Status, exit, x.RiskClass, x.Target,
			shorten(oneLine(x.Command), 60), x.CreatedAt.Local().Format("2006-01-02 15:04:05"))
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	if p.NextCursor != nil {
		fmt.Fprintf(env.Stdout, "(more: raise --limit or filter)\n")
	}
	return 0
}

func executionsTail(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) != 1 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(env.Stderr, "usage: oikos executions tail ID")
		return 2
	}
	return followExecution(ctx, env, args[0])
}

// followExecution streams an execution's output to stdout until it ends, then reports how
// it ended on stderr. The exit code is the command's own when it ran (0 on success), 1 when
// it did not run to an exit code (denied, revoked, timed out, interrupted) or the stream
// failed.
func followExecution(ctx context.Context, env *cliEnv, id string) int {
	end, err := tailLogs(ctx, env, id, env.Stdout, env.Stderr)
	if err != nil {
		fmt.Fprintf(env.Stderr, "oikos: follow execution %s: %v\n", id, err)
		return 1
	}
	msg := fmt.Sprintf("execution %s %s", id, end.Status)
	if end.ExitCode != nil {
		msg += fmt.Sprintf(" (exit %d)", *end.ExitCode)
	}
	if end.Error != "" {
		msg += ": " + end.Error
	}
	fmt.Fprintln(env.Stderr, msg)
	switch {
	case end.ExitCode != nil && (end.Status == "completed" || end.Status == "failed"):
		if *end.ExitCode < 0 || *end.ExitCode > 255 {
			return 1
		}
		return *end.ExitCode
	case end.Status == "completed":
		return 0
	}
	return 1
}

// streamEnd is the stream's last event.
type streamEnd struct {
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code"`
	Error    string `json:"error"`
}

// errStreamClosed: the stream ended without its end event (the api restarted, a proxy cut
// it); the tail reconnects from the last chunk it printed.
var errStreamClosed = errors.New("stream closed before the execution ended")

// tailLogs writes an execution's output bytes as the api streams them — the command's
// stdout to w, its stderr and the executor's [oikos] lines to errw — reconnecting with
// Last-Event-ID when the connection drops, and returns how the execution ended.
func tailLogs(ctx context.Context, env *cliEnv, id string, w, errw io.Writer) (streamEnd, error) {
	last := ""
	delay := 250 * time.Millisecond
	for attempt := 0; ; attempt++ {
		end, err := tailOnce(ctx, env, id, w, errw, &last)
		if err == nil {
			return end, nil
		}
		var ae *apiError
		if errors.As(err, &ae) || ctx.Err() != nil || attempt >= 5 {
			return streamEnd{}, err
		}
		fmt.Fprintf(env.Stderr, "oikos: %v; reconnecting\n", err)
		select {
		case <-ctx.Done():
			return streamEnd{}, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// tailOnce reads one connection of the stream. last is the id of the last chunk written
// (kept across reconnects).
func tailOnce(ctx context.Context, env *cliEnv, id string, w, errw io.Writer, last *string) (streamEnd, error) {
	base := strings.TrimRight(env.Getenv("OIKOS_API_URL"), "/")
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/executions/"+url.PathEscape(id)+"/logs/stream", nil)
	if err != nil {
		return streamEnd{}, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if tok := env.Getenv("OIKOS_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if *last != "" {
		req.Header.Set("Last-Event-ID", *last)
	}
	// The stream lasts as long as the execution: the shared client's request timeout would
	// cut it, so the stream uses the same transport without one.
	client := &http.Client{}
	if env.HTTP != nil {
		client.Transport = env.HTTP.Transport
	}
	resp, err := client.Do(req)
	if err != nil {
		return streamEnd{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		pe := &apiError{Status: resp.StatusCode}
		if json.Unmarshal(raw, pe) != nil || pe.Title == "" {
			pe.Title = http.StatusText(resp.StatusCode)
			pe.Detail = strings.TrimSpace(string(raw))
		}
		return streamEnd{}, pe
	}
	events := sse.NewReader(resp.Body, 8<<20)
	for {
		e, err := events.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return streamEnd{}, err
		}
		switch e.Name {
		case "chunk":
			var c struct {
				Stream string `json:"stream"`
				Data   []byte `json:"data"`
			}
			if err := json.Unmarshal([]byte(e.Data), &c); err != nil {
				return streamEnd{}, fmt.Errorf("malformed chunk: %w", err)
			}
			// Only the command's stdout goes to stdout, so it can be piped as if the
			// command ran here; its stderr and the executor's own lines go to stderr.
			dst := errw
			if c.Stream == "stdout" {
				dst = w
			}
			if _, err := dst.Write(c.Data); err != nil {
				return streamEnd{}, err
			}
			*last = e.ID
		case "end":
			var end streamEnd
			if err := json.Unmarshal([]byte(e.Data), &end); err != nil {
				return streamEnd{}, fmt.Errorf("malformed end event: %w", err)
			}
			return end, nil
		}
	}
	return streamEnd{}, errStreamClosed
}

// oneLine flattens a command for a table cell.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// shorten cuts s to n runes with an ellipsis.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// fetchPage GETs one page of a list endpoint (list, a call of the generated client) for a
// list subcommand named cmd. With asJSON it prints the page as the api sent it; done is then
// true, as it is on an error (printed), and code is the exit status. Otherwise p is the
// decoded page.
func fetchPage[T any](env *cliEnv, cmd string, list func(*apiclient.Client) (*http.Response, error), asJSON bool) (p page[T], code int, done bool) {
	var raw json.RawMessage
	if err := env.do(list, &raw); err != nil {
		fmt.Fprintf(env.Stderr, "%s: %v\n", cmd, err)
		return p, 1, true
	}
	if asJSON {
		fmt.Fprintln(env.Stdout, string(raw))
		return p, 0, true
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		fmt.Fprintf(env.Stderr, "%s: %v\n", cmd, err)
		return p, 1, true
	}
	return p, 0, false
}
