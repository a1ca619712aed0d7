package loop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oikos-hq/oikos/agent/internal/llm"
)

// modelCall is one tool call the model asked for.
type modelCall struct {
	Name      string
	Arguments string
	FromText  bool // written as text in the content: the server had no tool parser
}

// answer is one model answer. Its Content is what the operator reads and what is fed back:
// the model's reasoning is never part of it (llm keeps it apart, and it is not stored).
type answer struct {
	Content  string
	Calls    []modelCall
	Finish   string
	Refusal  string
	Attempts int
}

func (a answer) empty() bool {
	return strings.TrimSpace(a.Content) == "" && len(a.Calls) == 0
}

// ask streams one model answer, sending its text as delta events and what it waits on as
// status events. The wire client already retried what a server refused for now (429, 503);
// an empty or refused answer, or another failed request, is retried after each Backoff
// wait. The last failure is returned with its finish reason. Text already streamed is not
// streamed twice: a retry happens only when nothing was shown. Nothing here runs a tool, so
// no retry ever runs one again.
func (l *Loop) ask(ctx context.Context, msgs []openai.ChatCompletionMessage, defs []openai.Tool, withTools bool, sink Sink) (answer, error) {
	var last answer
	var lastErr error
	for attempt := 0; attempt <= len(l.cfg.Backoff); attempt++ {
		if attempt > 0 {
			t := time.NewTimer(l.cfg.Backoff[attempt-1])
			select {
			case <-ctx.Done():
				t.Stop()
				return last, ctx.Err()
			case <-t.C:
			}
		}
		a, shown, err := l.stream(ctx, msgs, defs, withTools, sink)
		last, lastErr = a, err
		if err == nil && !a.empty() && a.Refusal == "" {
			return a, nil
		}
		if shown || final(err) {
			break
		}
		if err != nil && ctx.Err() != nil {
			return a, err
		}
	}
	if lastErr != nil {
		var refused *llm.ToolsRefused
		if errors.As(lastErr, &refused) {
			return last, lastErr
		}
		return last, fmt.Errorf("the model did not answer: %w", lastErr)
	}
	reason := last.Finish
	if reason == "" {
		reason = "unknown"
	}
	if last.Refusal != "" {
		//lint:ignore ST1005 Nomos is a proper noun; the operator reads this sentence
		return last, fmt.Errorf("Nomos's model refused (finish_reason=%s): %s", reason, last.Refusal)
	}
	//lint:ignore ST1005 Nomos is a proper noun; the operator reads this sentence
	return last, fmt.Errorf("Nomos's model returned an empty or unusable response (finish_reason=%s). Retry or rephrase", reason)
}

// final says a failure that asking again will not mend: a refusal of tools, a request the
// server rejects (4xx), a transient refusal the wire client already retried, a server that
// sent nothing within the first-byte timeout.
func final(err error) bool {
	if err == nil {
		return false
	}
	var refused *llm.ToolsRefused
	var ae *llm.APIError
	switch {
	case errors.As(err, &refused), errors.Is(err, llm.ErrFirstByte):
		return true
	case errors.As(err, &ae):
		return ae.Transient() || ae.Status/100 == 4
	}
	return false
}

// stream runs one streamed completion. shown says whether any text reached the sink.
func (l *Loop) stream(ctx context.Context, msgs []openai.ChatCompletionMessage, defs []openai.Tool, withTools bool, sink Sink) (answer, bool, error) {
	req := llm.Request{Messages: msgs}
	if withTools {
		req.Tools = defs
		// The budget may offer a subset: a call written as text to another registered tool
		// is a call all the same, as a structured one would be.
		req.Callable = l.callable
	}
	shown := false
	ev := llm.Events{
		Text: func(s string) {
			sink(Event{"delta", map[string]any{"text": s}})
			shown = true
		},
		Status: func(s llm.Status) {
			data := map[string]any{"state": s.State, "message": s.Message}
			if s.State == "retrying" {
				data["attempt"], data["retry_in_ms"] = s.Attempt, s.RetryIn.Milliseconds()
			}
			sink(Event{"status", data})
		},
	}
	got, err := l.model.Stream(ctx, req, ev)
	a := answer{Content: got.Content, Finish: got.Finish, Refusal: got.Refusal, Attempts: got.Attempts}
	for _, c := range got.Calls {
		a.Calls = append(a.Calls, modelCall{Name: c.Name, Arguments: c.Arguments, FromText: c.FromText})
	}
	if len(a.Calls) > 0 && a.Finish != "tool_calls" {
		// Calls are calls whatever the server said (Ollama, LM Studio and gpt-4o may finish
		// them with stop; a server without a tool parser always does): the stored message
		// says what Nomos did with it.
		l.log.Debug().Str("server_finish", a.Finish).Int("calls", len(a.Calls)).Msg("tool calls under another finish reason")
		a.Finish = "tool_calls"
	}
	if got.Reasoning != "" {
		// Kept apart from the answer and not stored: the session model has no place for it,
		// and feeding it back would spend the context window on it (docs/llm-providers.md).
		l.log.Debug().Int("bytes", len(got.Reasoning)).Msg("model reasoning left out of the answer")
	}
	return a, shown, err
}
