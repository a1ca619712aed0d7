package llm

import (
	"bytes"
	"encoding/json"
	"strings"
)

// The tags a model writes into its content when the server has no parser for them: reasoning
// (DeepSeek R1, Qwen3, QwQ) and Hermes-style tool calls (Hermes, Qwen2.5, Qwen3).
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
	callOpen   = "<tool_call>"
	callClose  = "</tool_call>"
)

// textFilter splits the content a model streams into what the operator sees, its reasoning
// and the tool calls it wrote as text, as the content arrives: text that may still turn out
// to be a tag is held until it is known, a <think> block goes to the reasoning, a
// <tool_call> block to the calls, and, when tools were offered, an answer that starts like a
// JSON object is held whole until the end, when it is either a call or shown.
type textFilter struct {
	tools bool // tools were offered: text calls count
	emit  func(string)

	buf       strings.Builder // held text
	mode      int
	shown     bool // visible text was emitted (a bare JSON answer must start the answer)
	visible   strings.Builder
	reasoning strings.Builder
	blocks    []string // the bodies of <tool_call> blocks
	held      string   // an answer held whole (modeJSON), once the content is complete
	space     string   // whitespace held until text follows it
	scanned   int      // how much of a held block was searched for its closing tag
}

const (
	modeText = iota
	modeThink
	modeCall
	modeJSON // the whole answer may be a bare JSON call
)

func (f *textFilter) write(s string) {
	f.buf.WriteString(s)
	f.drain(false)
}

// end flushes what is held once the content is complete.
func (f *textFilter) end() {
	f.drain(true)
	rest := f.buf.String()
	f.buf.Reset()
	switch f.mode {
	case modeThink:
		f.reasoning.WriteString(rest) // an unclosed block is all reasoning
	case modeCall:
		f.blocks = append(f.blocks, rest)
	case modeJSON:
		f.held = rest // the reader shows it unless it is a call
	default:
		f.show(rest)
	}
	f.mode = modeText
}

// show emits visible text. Whitespace at the start of the answer is dropped, and whitespace
// is held until text follows it, so that what a removed block leaves behind (the blank line
// before a <tool_call>, after a </think>) never shows.
func (f *textFilter) show(s string) {
	if !f.shown {
		s = strings.TrimLeft(s, " \t\r\n")
	}
	body := strings.TrimRight(s, " \t\r\n")
	if body == "" {
		if f.shown {
			f.space += s
		}
		return
	}
	out := f.space + body
	f.space = s[len(body):]
	f.shown = true
	f.visible.WriteString(out)
	if f.emit != nil {
		f.emit(out)
	}
}

// drain moves what is known out of the buffer.
func (f *textFilter) drain(final bool) {
	for {
		s := f.buf.String()
		if s == "" {
			return
		}
		switch f.mode {
		case modeJSON:
			return // held to the end
		case modeThink, modeCall:
			closeTag := thinkClose
			if f.mode == modeCall {
				closeTag = callClose
			}
			// Search only what was not searched yet (and a tag's length before it), so a long
			// block streamed token by token stays linear.
			from := max(0, f.scanned-len(closeTag))
			i := strings.Index(s[from:], closeTag)
			if i < 0 {
				f.scanned = len(s)
				return
			}
			i += from
			f.scanned = 0
			if f.mode == modeThink {
				f.reasoning.WriteString(s[:i])
			} else {
				f.blocks = append(f.blocks, s[:i])
			}
			f.reset(s[i+len(closeTag):])
			f.mode = modeText
		default:
			if !f.shown && f.tools {
				t := strings.TrimLeft(s, " \t\r\n")
				if t == "" {
					return
				}
				if strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[{") || strings.HasPrefix(t, "```json") {
					f.mode = modeJSON
					return
				}
				if !final && (isPrefix(t, "```json") || t == "[") {
					return // not known yet
				}
			}
			i := strings.IndexByte(s, '<')
			if i < 0 {
				f.show(s)
				f.buf.Reset()
				return
			}
			f.show(s[:i])
			rest := s[i:]
			switch {
			case strings.HasPrefix(rest, thinkOpen):
				f.reset(rest[len(thinkOpen):])
				f.mode = modeThink
			case strings.HasPrefix(rest, callOpen) && f.tools:
				f.reset(rest[len(callOpen):])
				f.mode = modeCall
			case !final && (isPrefix(rest, thinkOpen) || (f.tools && isPrefix(rest, callOpen))):
				f.reset(rest) // a tag may be starting: wait for more
				return
			default:
				f.show("<")
				f.reset(rest[1:])
			}
		}
	}
}

func (f *textFilter) reset(s string) {
	f.buf.Reset()
	f.buf.WriteString(s)
}

// isPrefix says whether s is a proper beginning of tag.
func isPrefix(s, tag string) bool { return len(s) < len(tag) && strings.HasPrefix(tag, s) }

// textCall is a tool call a model wrote as JSON: {"name", "arguments"} (Hermes, Qwen) or
// {"name", "parameters"} (Llama 3.1's JSON format).
type textCall struct {
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	Parameters json.RawMessage `json:"parameters"`
}

// parseTextCalls reads the calls of one block of text: an object, an array of objects, or
// either in a ```json fence. It answers nothing unless every call names an offered tool and
// its arguments are a JSON object (or a string holding one): prose that merely contains JSON
// stays prose.
func parseTextCalls(text string, offered map[string]bool) []Call {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "```") {
		t = strings.TrimPrefix(strings.TrimPrefix(t, "```json"), "```")
		t = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(t), "```"))
	}
	if t == "" {
		return nil
	}
	var list []textCall
	dec := json.NewDecoder(strings.NewReader(t))
	if t[0] == '[' {
		if dec.Decode(&list) != nil {
			return nil
		}
	} else {
		var one textCall
		if dec.Decode(&one) != nil {
			return nil
		}
		list = []textCall{one}
	}
	if dec.More() {
		return nil // text after the JSON: not a bare call
	}
	var out []Call
	for _, c := range list {
		if !offered[c.Name] {
			return nil
		}
		args := c.Arguments
		if len(args) == 0 {
			args = c.Parameters
		}
		args = bytes.TrimSpace(args)
		if len(args) > 0 && args[0] == '"' {
			var s string
			if json.Unmarshal(args, &s) != nil {
				return nil
			}
			args = json.RawMessage(s)
		}
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage("{}")
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(args, &obj) != nil {
			return nil
		}
		out = append(out, Call{Name: c.Name, Arguments: string(args), FromText: true})
	}
	return out
}

// stripReasoning removes the reasoning from a complete answer's text: a <think> block, or
// everything before a lone </think> (DeepSeek R1's template opens the block in the prompt, so
// the answer carries only its end).
func stripReasoning(s string) (text, reasoning string) {
	if i := strings.Index(s, thinkClose); i >= 0 {
		before := s[:i]
		if j := strings.Index(before, thinkOpen); j >= 0 {
			return strings.TrimSpace(before[:j] + s[i+len(thinkClose):]), before[j+len(thinkOpen):]
		}
		return strings.TrimSpace(s[i+len(thinkClose):]), before
	}
	return s, ""
}
