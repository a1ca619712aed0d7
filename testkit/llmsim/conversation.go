package llmsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// chatRequest is the part of an OpenAI chat completion request llmsim reads.
type chatRequest struct {
	Model         string          `json:"model"`
	Messages      []reqMessage    `json:"messages"`
	Tools         json.RawMessage `json:"tools"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type reqMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCalls  []reqToolCall   `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`

	text string // Content as text
}

type reqToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// contentText reads a message's content: a string, null, or an array of parts whose text
// parts are joined by newlines (images and other parts are ignored).
func contentText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("content is neither a string nor an array of parts")
	}
	var texts []string
	for _, p := range parts {
		if p.Type == "text" || p.Type == "input_text" || p.Type == "output_text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// convo is a request as the rules see it.
type convo struct {
	model     string
	msgs      []reqMessage
	lastRole  string
	lastUser  string
	system    string
	turnCalls []string     // tool calls of assistant messages since the latest user message, in order
	trailing  []toolResult // the tool messages that end the conversation
	lastTool  *toolResult  // the latest tool message anywhere
	hasTools  bool
	offered   map[string]bool
}

type toolResult struct {
	name, content string
}

var knownRoles = map[string]string{"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool", "function": "tool"}

// analyse validates the request's messages and derives what the conditions read.
func analyse(req *chatRequest) (*convo, error) {
	if len(req.Messages) == 0 {
		return nil, errors.New("messages: at least one message is required")
	}
	c := &convo{model: req.Model, msgs: req.Messages, offered: map[string]bool{}}
	if t := bytes.TrimSpace(req.Tools); len(t) > 0 && string(t) != "null" {
		var tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(t, &tools); err != nil {
			return nil, errors.New("tools: want an array of tools")
		}
		c.hasTools = len(tools) > 0
		for _, tl := range tools {
			c.offered[tl.Function.Name] = true
		}
	}
	var system []string
	lastUserIdx := -1
	for i := range c.msgs {
		m := &c.msgs[i]
		role, ok := knownRoles[m.Role]
		if !ok {
			return nil, fmt.Errorf("messages[%d].role: %q is not one of system, developer, user, assistant, tool", i, m.Role)
		}
		text, err := contentText(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages[%d].content: %v", i, err)
		}
		m.text = text
		switch role {
		case "system":
			system = append(system, text)
		case "user":
			lastUserIdx = i
		}
	}
	c.system = strings.Join(system, "\n")
	c.lastRole = knownRoles[c.msgs[len(c.msgs)-1].Role]
	if lastUserIdx >= 0 {
		c.lastUser = c.msgs[lastUserIdx].text
	}
	for _, m := range c.msgs[lastUserIdx+1:] {
		if m.Role == "assistant" {
			for _, tc := range m.ToolCalls {
				c.turnCalls = append(c.turnCalls, tc.Function.Name)
			}
		}
	}
	for i := len(c.msgs) - 1; i >= 0 && knownRoles[c.msgs[i].Role] == "tool"; i-- {
		c.trailing = append([]toolResult{c.resultAt(i)}, c.trailing...)
	}
	for i := len(c.msgs) - 1; i >= 0; i-- {
		if knownRoles[c.msgs[i].Role] == "tool" {
			r := c.resultAt(i)
			c.lastTool = &r
			break
		}
	}
	return c, nil
}

// resultAt is the tool message at i with the name of the call it answers: the assistant
// call with its tool_call_id, the latest such call before it; else the message's own name.
func (c *convo) resultAt(i int) toolResult {
	m := c.msgs[i]
	r := toolResult{name: m.Name, content: m.text}
	if m.ToolCallID == "" {
		return r
	}
	for j := i - 1; j >= 0; j-- {
		for _, tc := range c.msgs[j].ToolCalls {
			if tc.ID == m.ToolCallID {
				r.name = tc.Function.Name
				return r
			}
		}
	}
	return r
}

// choose is the first rule serving the model whose conditions hold, else the fallback.
func (s *Script) choose(c *convo) (*rule, *tmplEnv) {
	for _, r := range s.rules {
		if r.scope != nil && !r.scope[c.model] {
			continue
		}
		if env, ok := r.w.match(c); ok {
			return r, env
		}
	}
	for _, r := range s.fallbacks {
		if r.scope == nil || r.scope[c.model] {
			env, _ := r.w.match(c)
			return r, env
		}
	}
	env, _ := when{}.match(c)
	return defaultFallback, env
}

var defaultFallback = &rule{name: "fallback", idName: "fallback", source: "built-in",
	reply: &reply{content: template{parts: []tmplPart{{text: DefaultFallback}}}}}

func (w when) match(c *convo) (*tmplEnv, bool) {
	env := &tmplEnv{lastUser: c.lastUser, model: c.model}
	if w.lastRole != "" && w.lastRole != c.lastRole {
		return nil, false
	}
	if w.hasTools != nil && *w.hasTools != c.hasTools {
		return nil, false
	}
	if w.system != nil && !w.system.MatchString(c.system) {
		return nil, false
	}
	if w.user != nil {
		m := w.user.FindStringSubmatch(c.lastUser)
		if m == nil {
			return nil, false
		}
		env.groups = map[string]string{}
		for i, name := range w.user.SubexpNames() {
			env.groups[strconv.Itoa(i)] = m[i]
			if name != "" {
				env.groups[name] = m[i]
			}
		}
	}
	if w.userNot != nil && w.userNot.MatchString(c.lastUser) {
		return nil, false
	}
	n := len(c.turnCalls)
	if n < w.atLeast || (w.atMost != nil && n > *w.atMost) {
		return nil, false
	}
	if len(w.after) > 0 && !subsequence(w.after, c.turnCalls) {
		return nil, false
	}
	for _, t := range w.notAfter {
		for _, called := range c.turnCalls {
			if t == called {
				return nil, false
			}
		}
	}
	res := c.lastTool
	if w.toolResultOf != "" {
		res = nil
		for i := len(c.trailing) - 1; i >= 0; i-- {
			if c.trailing[i].name == w.toolResultOf {
				res = &c.trailing[i]
				break
			}
		}
		if res == nil {
			return nil, false
		}
	}
	if w.toolResult != nil {
		if res == nil {
			return nil, false
		}
		m := w.toolResult.FindStringSubmatch(res.content)
		if m == nil {
			return nil, false
		}
		// Its named groups are {{match:name}} too (a handle to page a cut result with), so
		// the numbered groups stay user_matches's.
		for i, name := range w.toolResult.SubexpNames() {
			if name != "" {
				if env.groups == nil {
					env.groups = map[string]string{}
				}
				env.groups[name] = m[i]
			}
		}
	}
	if res != nil {
		env.toolResult, env.hasResult = res.content, true
	}
	return env, true
}

// subsequence says whether want appears in have in order, not necessarily adjacent.
func subsequence(want, have []string) bool {
	i := 0
	for _, h := range have {
		if i < len(want) && h == want[i] {
			i++
		}
	}
	return i == len(want)
}

// promptTokens estimates the request's tokens as a quarter of its characters: message texts,
// tool call names and arguments, and the tool definitions.
func promptTokens(req *chatRequest, c *convo) int {
	n := 0
	if c.hasTools {
		n = utf8.RuneCount(bytes.TrimSpace(req.Tools))
	}
	for _, m := range c.msgs {
		n += utf8.RuneCountInString(m.text)
		for _, tc := range m.ToolCalls {
			n += utf8.RuneCountInString(tc.Function.Name) + utf8.RuneCountInString(tc.Function.Arguments)
		}
	}
	return tokens(n)
}

func tokens(chars int) int { return (chars + 3) / 4 }
