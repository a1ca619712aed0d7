package loop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// modelCall is one tool call the model asked for, rebuilt from the stream's deltas.
type modelCall struct {
	Name      string
	Arguments string
}

// answer is one model answer.
type answer struct {
	Content string
	Calls   []modelCall
	Finish  string
	Refusal string
}

func (a answer) empty() bool {
	return strings.TrimSpace(a.Content) == "" && len(a.Calls) == 0
}

// ask streams one model answer, sending its text as delta events. An empty or refused answer,
// or a failed request, is retried after each Backoff wait; the last failure is returned with
// its finish reason. Text already streamed is not streamed twice: a retry happens only when
// nothing was shown.
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
		if shown {
			break
		}
		if err != nil && ctx.Err() != nil {
			return a, err
		}
	}
	if lastErr != nil {
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

// stream runs one streamed completion. shown says whether any text reached the sink.
func (l *Loop) stream(ctx context.Context, msgs []openai.ChatCompletionMessage, defs []openai.Tool, withTools bool, sink Sink) (answer, bool, error) {
	req := openai.ChatCompletionRequest{Model: l.cfg.Model, Messages: msgs, Stream: true}
	if withTools {
		req.Tools = defs
	}
	st, err := l.model.CreateChatCompletionStream(ctx, req)
	if err != nil {
		return answer{}, false, err
	}
	defer st.Close()
	var a answer
	var text strings.Builder
	type partial struct {
		name strings.Builder
		args strings.Builder
	}
	calls := map[int]*partial{}
	shown := false
	for {
		chunk, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			a.Content = text.String()
			return a, shown, err
		}
		for _, ch := range chunk.Choices {
			d := ch.Delta
			if d.Content != "" {
				text.WriteString(d.Content)
				sink(Event{"delta", map[string]any{"text": d.Content}})
				shown = true
			}
			if d.Refusal != "" {
				a.Refusal += d.Refusal
			}
			for _, tc := range d.ToolCalls {
				idx := 0
				if tc.Index != nil {
					idx = *tc.Index
				}
				p := calls[idx]
				if p == nil {
					p = &partial{}
					calls[idx] = p
				}
				p.name.WriteString(tc.Function.Name)
				p.args.WriteString(tc.Function.Arguments)
			}
			if ch.FinishReason != "" {
				a.Finish = string(ch.FinishReason)
			}
		}
	}
	a.Content = text.String()
	idx := make([]int, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		name := strings.TrimSpace(calls[i].name.String())
		if name == "" {
			continue
		}
		args := calls[i].args.String()
		if strings.TrimSpace(args) == "" {
			args = "{}"
		}
		a.Calls = append(a.Calls, modelCall{Name: name, Arguments: args})
	}
	if a.Finish == "" {
		a.Finish = "stop"
	}
	return a, shown, nil
}
