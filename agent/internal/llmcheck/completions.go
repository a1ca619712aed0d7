package llmcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oikos-hq/oikos/agent/internal/llm"
	"github.com/oikos-hq/oikos/shared/llmcheck"
)

// plainRetries is how often the plain probe sends its request again after a 429 or 503, as
// Nomos's client would.
const plainRetries = 3

// plain sends one non-streamed completion. Nomos streams, so this is the server's basic
// health: a failure here with a working stream is a warning.
func (c *checker) plain(ctx context.Context) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	body, _ := json.Marshal(openai.ChatCompletionRequest{Model: c.t.Model,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: plainPrompt}}})
	var refusals []string
	for attempt := 0; ; attempt++ {
		status, data, hdr, err := c.send(ctx, http.MethodPost, c.t.BaseURL+"/chat/completions", body)
		if err != nil {
			c.add(llmcheck.ProbePlain, llmcheck.Fail, start, fmt.Sprintf("no answer: %v", err))
			return
		}
		if status/100 != 2 {
			e := llm.ReadError(status, hdr, data)
			if e.Transient() && attempt < plainRetries {
				refusals = append(refusals, fmt.Sprintf("%d %s", status, retryNote(e)))
				if !c.wait(ctx, attempt, e.RetryAfter) {
					c.add(llmcheck.ProbePlain, llmcheck.Fail, start, "no answer within the probe's time after "+strings.Join(refusals, ", "))
					return
				}
				continue
			}
			c.add(llmcheck.ProbePlain, llmcheck.Fail, start, e.Error())
			return
		}
		var r struct {
			Choices []struct {
				Message struct {
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
					Reasoning        string `json:"reasoning"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(data, &r); err != nil || len(r.Choices) == 0 {
			c.add(llmcheck.ProbePlain, llmcheck.Fail, start, "the answer is not a chat completion with a choice")
			return
		}
		m := r.Choices[0].Message
		text, think := llm.SplitReasoning(m.Content)
		c.sawReasoning(m.ReasoningContent != "", "reasoning_content field")
		c.sawReasoning(m.Reasoning != "", "reasoning field")
		c.sawReasoning(think != "", "<think> in the content")
		detail := fmt.Sprintf("answered %q", clip(text))
		if len(refusals) > 0 {
			detail += fmt.Sprintf(" after %d refusal(s) (%s), retried as Nomos retries them", len(refusals), strings.Join(refusals, ", "))
		}
		st := llmcheck.OK
		if strings.TrimSpace(text) == "" {
			st, detail = llmcheck.Warn, "answered nothing but reasoning or whitespace (finish_reason "+r.Choices[0].FinishReason+")"
		}
		c.add(llmcheck.ProbePlain, st, start, detail)
		return
	}
}

func retryNote(e *llm.APIError) string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("Retry-After %s", e.RetryAfter.Round(time.Second))
	}
	return "without Retry-After"
}

// wait is the plain probe's back-off: the server's Retry-After, else RetryBase·2^n.
func (c *checker) wait(ctx context.Context, n int, after time.Duration) bool {
	d := c.o.RetryBase << n
	if after > 0 {
		d = after
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (c *checker) sawReasoning(seen bool, form string) {
	if !seen {
		return
	}
	for _, f := range c.reasoning {
		if f == form {
			return
		}
	}
	c.reasoning = append(c.reasoning, form)
}

// client is Nomos's wire client for the target, its waits bounded by the probe's timeout.
func (c *checker) client(status *[]llm.Status) (*llm.Client, llm.Events) {
	fb := c.t.FirstByte
	if fb <= 0 {
		if p, _ := llm.LookupPreset(c.t.Provider); p.FirstByte > 0 {
			fb = p.FirstByte
		} else {
			fb = llm.DefaultFirstByte
		}
	}
	if fb > c.o.Timeout {
		fb = c.o.Timeout
	}
	cl := llm.New(llm.Config{BaseURL: c.t.BaseURL, APIKey: c.t.APIKey, Model: c.t.Model, Provider: c.t.Provider, HTTP: c.o.HTTP,
		FirstByte: fb, StatusAfter: fb / 2, Retries: plainRetries, RetryBase: c.o.RetryBase, RetryMax: 4 * c.o.RetryBase,
		MaxRetryAfter: c.o.Timeout / 2, Log: c.o.Log})
	return cl, llm.Events{Status: func(s llm.Status) { *status = append(*status, s) }}
}

// stream sends the plain question streamed, as Nomos sends every request.
func (c *checker) stream(ctx context.Context, id Identity) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	var statuses []llm.Status
	cl, ev := c.client(&statuses)
	var first time.Duration
	ev.Text = func(string) {
		if first == 0 {
			first = time.Since(start)
		}
	}
	a, err := cl.Stream(ctx, llm.Request{Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: plainPrompt}}}, ev)
	if err != nil {
		c.add(llmcheck.ProbeStream, llmcheck.Fail, start, "no streamed answer: "+err.Error(), c.errorSettings(err, id)...)
		return
	}
	c.noteAnswer(a)
	var notes []string
	if first > 0 {
		notes = append(notes, fmt.Sprintf("first text after %d ms", first.Milliseconds()))
	}
	if a.Usage == nil {
		notes = append(notes, "no usage in the stream (Nomos counts the prompt itself)")
	} else {
		notes = append(notes, fmt.Sprintf("usage %d+%d tokens", a.Usage.PromptTokens, a.Usage.CompletionTokens))
	}
	if n := retries(statuses); n > 0 {
		notes = append(notes, fmt.Sprintf("refused %d time(s) first (%s), retried with back-off", n, lastRetry(statuses)))
	}
	if strings.TrimSpace(a.Content) == "" {
		c.add(llmcheck.ProbeStream, llmcheck.Fail, start, "the streamed answer has no text; "+strings.Join(notes, "; "))
		return
	}
	c.add(llmcheck.ProbeStream, llmcheck.OK, start, fmt.Sprintf("streamed %q; %s", clip(a.Content), strings.Join(notes, "; ")))
}

func retries(ss []llm.Status) int {
	n := 0
	for _, s := range ss {
		if s.State == "retrying" {
			n++
		}
	}
	return n
}

func lastRetry(ss []llm.Status) string {
	for i := len(ss) - 1; i >= 0; i-- {
		if ss[i].State == "retrying" {
			return strings.TrimSuffix(ss[i].Message, ".")
		}
	}
	return ""
}

// noteAnswer records an answer's reasoning, and whether any reached its text.
func (c *checker) noteAnswer(a llm.Answer) {
	c.sawReasoning(a.Reasoning != "", "streamed apart from the answer")
	if strings.Contains(a.Content, "<think>") || strings.Contains(a.Content, "</think>") {
		c.leaked = true
	}
}

// errorSettings are the settings that answer a streamed probe's failure.
func (c *checker) errorSettings(err error, id Identity) []string {
	if errors.Is(err, llm.ErrFirstByte) || errors.Is(err, context.DeadlineExceeded) {
		return []string{"OIKOS_LLM_FIRST_BYTE_TIMEOUT=<longer than the server takes to load the model, e.g. 10m>"}
	}
	var ae *llm.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return []string{"OIKOS_LLM_MODEL=<a model the server serves>"}
	}
	return nil
}

// tools offers one harmless tool, expects a call of it, sends its result back and expects
// an answer: the round trip every Nomos turn makes.
func (c *checker) tools(ctx context.Context) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	var statuses []llm.Status
	cl, ev := c.client(&statuses)
	msgs := []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: toolPrompt}}
	tools := []openai.Tool{checkTool}
	a, err := cl.Stream(ctx, llm.Request{Messages: msgs, Tools: tools}, ev)
	if err != nil {
		var tr *llm.ToolsRefused
		if errors.As(err, &tr) {
			c.add(llmcheck.ProbeTools, llmcheck.Fail, start, err.Error())
			return
		}
		c.add(llmcheck.ProbeTools, llmcheck.Fail, start, "no answer to a request with tools: "+err.Error(), c.errorSettings(err, Identity{})...)
		return
	}
	c.noteAnswer(a)
	if len(a.Calls) == 0 {
		c.add(llmcheck.ProbeTools, llmcheck.Fail, start, fmt.Sprintf("the model answered without calling the tool (%q): it may not support tool calling, or the server drops the tools", clip(a.Content)),
			"OIKOS_LLM_MODEL=<a model with tool support (Qwen 2.5/3, Llama 3.1+, Mistral Nemo…)>")
		return
	}
	call := a.Calls[0]
	var args struct {
		Word string `json:"word"`
	}
	var notes []string
	st := llmcheck.OK
	if call.Name != toolName {
		c.add(llmcheck.ProbeTools, llmcheck.Fail, start, fmt.Sprintf("the model called %q, a tool it was not offered", call.Name))
		return
	}
	if json.Unmarshal([]byte(call.Arguments), &args) != nil {
		st = llmcheck.Warn
		notes = append(notes, fmt.Sprintf("its arguments are not a JSON object (%s)", clip(call.Arguments)))
	}
	if call.FromText {
		st = llmcheck.Warn
		notes = append(notes, "the call came as text in the content, not as tool_calls: the server has no tool parser for the model; Nomos reads it, but a server-side parser is surer (vLLM --enable-auto-tool-choice --tool-call-parser hermes, llama-server --jinja)")
	}
	if a.Finish != "tool_calls" {
		notes = append(notes, fmt.Sprintf("finish_reason %q with a call (handled)", a.Finish))
	}
	if call.ID == "" {
		notes = append(notes, "no tool call id (Nomos makes its own)")
	} else if !strings.HasPrefix(call.ID, "call_") {
		notes = append(notes, fmt.Sprintf("tool call id of its own form %q (handled)", clip(call.ID)))
	}
	if n := retries(statuses); n > 0 {
		notes = append(notes, fmt.Sprintf("refused %d time(s) first, retried", n))
	}
	id := call.ID
	if id == "" {
		id = "call_oikos_check_1"
	}
	msgs = append(msgs,
		openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, ToolCalls: []openai.ToolCall{{ID: id, Type: openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: call.Name, Arguments: call.Arguments}}}},
		openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: id, Name: call.Name, Content: toolResult})
	statuses = nil
	b, err := cl.Stream(ctx, llm.Request{Messages: msgs, Tools: tools}, ev)
	if err != nil {
		c.add(llmcheck.ProbeTools, llmcheck.Fail, start, fmt.Sprintf("the model called %s, but the request with its result failed: %v", toolName, err))
		return
	}
	c.noteAnswer(b)
	switch {
	case strings.TrimSpace(b.Content) == "" && len(b.Calls) > 0:
		st = llmcheck.Warn
		notes = append(notes, "after the result the model called a tool again instead of answering")
	case strings.TrimSpace(b.Content) == "":
		c.add(llmcheck.ProbeTools, llmcheck.Fail, start, "the model called the tool, but answered nothing once it had the result")
		return
	}
	detail := fmt.Sprintf("round trip: called %s(%s), then answered %q", toolName, clip(call.Arguments), clip(b.Content))
	if len(notes) > 0 {
		detail += "; " + strings.Join(notes, "; ")
	}
	c.add(llmcheck.ProbeTools, st, start, detail)
}

// reasoningFinding reports the reasoning the answers carried.
func (c *checker) reasoningFinding() {
	switch {
	case c.leaked:
		c.add(llmcheck.ProbeReasoning, llmcheck.Fail, time.Time{}, "reasoning reached an answer's text (an unclosed <think> block?)")
	case len(c.reasoning) == 0:
		c.add(llmcheck.ProbeReasoning, llmcheck.OK, time.Time{}, "no reasoning seen (not a reasoning model, or the server drops it)")
	default:
		c.add(llmcheck.ProbeReasoning, llmcheck.OK, time.Time{}, "reasoning seen ("+strings.Join(c.reasoning, ", ")+"); Nomos keeps it out of the answers")
	}
}
