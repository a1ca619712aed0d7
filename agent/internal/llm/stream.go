package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/oikos-hq/oikos/shared/sse"
)

// chunk is one streamed event: a chat.completion.chunk, or a whole chat.completion from a
// server that ignored "stream", or an error a server sends inside the stream.
type chunk struct {
	Choices []struct {
		Delta        *message `json:"delta"`
		Message      *message `json:"message"`
		FinishReason *string  `json:"finish_reason"`
	} `json:"choices"`
	Usage *Usage          `json:"usage"`
	Error json.RawMessage `json:"error"`
}

type message struct {
	Content          *string         `json:"content"`
	Refusal          *string         `json:"refusal"`
	ReasoningContent *string         `json:"reasoning_content"`
	Reasoning        json.RawMessage `json:"reasoning"`
	ToolCalls        []struct {
		Index    *int    `json:"index"`
		ID       *string `json:"id"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// partial is a tool call being rebuilt.
type partial struct {
	id   string
	name strings.Builder
	args strings.Builder
}

// complete says the call has a name and arguments that are a whole JSON value, so a delta
// that names a tool again starts another call.
func (p *partial) complete() bool {
	return p.name.Len() > 0 && p.args.Len() > 0 && json.Valid([]byte(p.args.String()))
}

// reader accumulates one answer from its events.
type reader struct {
	text         textFilter
	offered      map[string]bool
	reasoning    strings.Builder
	refusal      strings.Builder
	calls        []*partial
	byIndex      map[int]*partial
	finishReason string
	usage        *Usage
}

func newReader(tools bool, offered map[string]bool, emit func(string)) *reader {
	return &reader{text: textFilter{tools: tools, emit: emit}, offered: offered, byIndex: map[int]*partial{}}
}

// event reads one event; stop says the stream is over ([DONE]).
func (r *reader) event(e sse.Event) (bool, error) {
	data := strings.TrimSpace(e.Data)
	if data == "" {
		return false, nil
	}
	if data == "[DONE]" {
		return true, nil
	}
	var c chunk
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		return false, fmt.Errorf("the model server sent an event that is not JSON: %.120s", data)
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		// An error inside the stream (llama-server, vLLM): not retried, as part of the
		// answer may already be shown.
		ae := parseAPIError(0, nil, []byte(data))
		return false, errors.New("the model server failed mid-answer: " + ae.Message)
	}
	if c.Usage != nil && c.Usage.TotalTokens+c.Usage.PromptTokens > 0 {
		r.usage = c.Usage
	}
	for _, ch := range c.Choices {
		m := ch.Delta
		if m == nil {
			m = ch.Message
		}
		if m != nil {
			r.message(m)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			r.finishReason = *ch.FinishReason
		}
	}
	return false, nil
}

func (r *reader) message(m *message) {
	if m.ReasoningContent != nil {
		r.reasoning.WriteString(*m.ReasoningContent)
	}
	if len(m.Reasoning) > 0 {
		var s string
		if json.Unmarshal(m.Reasoning, &s) == nil { // OpenRouter also sends an object: not text
			r.reasoning.WriteString(s)
		}
	}
	if m.Refusal != nil {
		r.refusal.WriteString(*m.Refusal)
	}
	if m.Content != nil && *m.Content != "" {
		r.text.write(*m.Content)
	}
	for _, tc := range m.ToolCalls {
		id := ""
		if tc.ID != nil {
			id = *tc.ID
		}
		args := argsText(tc.Function.Arguments)
		p := r.target(tc.Index, id, tc.Function.Name)
		if p.id == "" {
			p.id = id
		}
		p.name.WriteString(tc.Function.Name)
		p.args.WriteString(args)
	}
}

// target is the call a tool call delta continues, or a new one. A delta continues the call
// of its index, unless that call is already whole and the delta names a tool or carries
// another id (Ollama sends every call whole at index 0); a delta without an index continues
// the latest call unless it starts one the same way.
func (r *reader) target(index *int, id, name string) *partial {
	var p *partial
	if index != nil {
		p = r.byIndex[*index]
	} else if len(r.calls) > 0 {
		p = r.calls[len(r.calls)-1]
	}
	if p != nil && ((id != "" && p.id != "" && id != p.id) || (name != "" && p.complete())) {
		p = nil
	}
	if p == nil {
		p = &partial{}
		r.calls = append(r.calls, p)
		if index != nil {
			r.byIndex[*index] = p
		}
	}
	return p
}

// argsText is a delta's arguments as text: a string as servers should send them, or an
// object as some send whole calls.
func argsText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// answer is what was read so far (for an answer cut short).
func (r *reader) answer() Answer {
	return Answer{Content: r.text.visible.String(), Reasoning: r.reasoning.String() + r.text.reasoning.String(), Refusal: r.refusal.String(), Finish: r.finishReason, Usage: r.usage}
}

// finish completes the answer: held text flushed, calls gathered (streamed ones first, else
// those written as text), reasoning kept apart.
func (r *reader) finish() Answer {
	f := &r.text
	f.end()
	var calls []Call
	for i, p := range r.calls {
		name := strings.TrimSpace(p.name.String())
		if name == "" {
			continue
		}
		args := p.args.String()
		if strings.TrimSpace(args) == "" {
			args = "{}"
		}
		id := p.id
		if id == "" {
			id = fmt.Sprintf("call_%d", i+1)
		}
		calls = append(calls, Call{ID: id, Name: name, Arguments: args})
	}
	// Calls written as text count only when the server sent none of its own, only from this
	// answer's content, and only when every block is a call of an offered tool; anything else
	// is shown as the model wrote it.
	var text []Call
	ok := len(calls) == 0
	for _, b := range f.blocks {
		cs := parseTextCalls(b, r.offered)
		if cs == nil {
			ok = false
		}
		text = append(text, cs...)
	}
	if f.held != "" {
		cs := parseTextCalls(f.held, r.offered)
		if cs == nil || len(f.blocks) > 0 {
			ok = false
		}
		text = append(text, cs...)
	}
	if ok && len(text) > 0 {
		for i := range text {
			text[i].ID = fmt.Sprintf("call_text_%d", i+1)
		}
		calls = text
	} else {
		for _, b := range f.blocks {
			f.show(callOpen + b + callClose)
		}
		f.show(f.held)
	}
	a := r.answer()
	a.Calls = calls
	var lone string
	a.Content, lone = stripReasoning(a.Content)
	a.Reasoning += lone
	if a.Finish == "" {
		a.Finish = "stop"
	}
	return a
}
