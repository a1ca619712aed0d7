// Package budget keeps every request Nomos sends the model within the model's context window
// (OIKOS_LLM_CONTEXT_TOKENS, issue #31 item 2): the system prompt, the tool schemas, the
// history and the tool output, counted conservatively, with room left for the answer.
//
// Tokens are counted as UTF-8 bytes / 3, rounded up, plus a few per message for the chat
// template's markers. No tokenizer is bundled: the models homelabs run (Qwen, Llama, Mistral,
// gpt-oss…) each have their own, none is known from the model's name alone, and real
// tokenizers give 3.5–4.5 bytes per token on English and JSON, so bytes / 3 over-counts by a
// margin that also covers the templates' hidden text. A server that still says the prompt
// is too long is handled by Fit's Harder (the loop retries once).
//
// Fit works in steps, each tried only when the request does not fit yet, cheapest loss first:
//
//  1. every tool result longer than the per-result budget is cut, with a handle the model
//     pages with (get_output(id, offset); the full text is the tool_calls row);
//  2. the tool schemas are compacted (parameter descriptions, titles and examples dropped,
//     each tool's description cut to its first sentence);
//  3. the results of earlier turns become one-line stubs (with their handle);
//  4. only the tools the turn needs are offered (the core task tools and get_output, the
//     tools the session used, those the turn's words name, then the staples), as many as fit;
//  5. old turns are summarised: the first user message and the current turn are kept, the
//     turns between become one deterministic summary line;
//  6. the results of earlier iterations of the current turn become stubs;
//  7. the latest results are cut harder, down to a floor.
//
// Whatever still does not fit is an error naming the window and what to set.
package budget

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"unicode"

	openai "github.com/sashabaranov/go-openai"
)

// Defaults.
const (
	DefaultWindow = 8192
	// MinWindow is the smallest window Nomos accepts: its system prompt and core tools alone
	// take about 2k tokens.
	MinWindow = 4096
	// perMessage is what a chat template adds around each message (role markers, separators).
	perMessage = 8
	// perTool is what a template adds around each tool's schema.
	perTool = 8
	// minResult is the floor, in bytes, a result is cut down to in the last step.
	minResult = 384
	// GetOutput is the paging tool's name.
	GetOutput = "get_output"
)

// Count is the conservative token count of s: UTF-8 bytes / 3, rounded up.
func Count(s string) int { return (len(s) + 2) / 3 }

// Config is the window and the room kept for the answer.
type Config struct {
	// Window is the model's context window in tokens (OIKOS_LLM_CONTEXT_TOKENS).
	Window int
	// Answer is the room kept for the answer (OIKOS_LLM_ANSWER_TOKENS); 0: an eighth of the
	// window, at least 512 and at most 4096.
	Answer int
}

// WithDefaults fills the zero fields.
func (c Config) WithDefaults() Config {
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	if c.Answer <= 0 {
		c.Answer = min(max(c.Window/8, 512), 4096)
	}
	return c
}

// Input is the budget of the prompt: the window less the answer's room.
func (c Config) Input() int { return c.Window - c.Answer }

// PerResult is the most one tool result may take in a request, in bytes: a quarter of the
// prompt's budget, at most 16k tokens.
func (c Config) PerResult() int { return min(c.Input()/4, 16<<10) * 3 }

// Page is the size, in bytes, of one get_output page: a page must fit in a result's budget
// with its trailer, so it is never cut again.
func (c Config) Page() int { return c.PerResult() - 256 }

// core are the tools always offered: without them the task workflow (plan-first, the
// task's end) cannot proceed, and get_output is how a cut result is read.
var core = map[string]bool{GetOutput: true, "set_goal": true, "propose_plan": true, "update_plan_step": true,
	"complete_task": true, "ask_operator": true}

// staples come after the tools the turn names, before the others: what most turns need.
var staples = []string{"run", "get_entity", "list_entities", "get_health_summary", "search_knowledge", "get_execution",
	"wait_execution", "inspect_path", "get_event_timeline"}

type tool struct {
	name                string
	full, compact       openai.Tool
	fullTok, compactTok int
	words               map[string]int // word → weight (name words 3, description words 1)
}

// Budgeter fits requests to one configuration and one set of tools. It is safe for
// concurrent use: what changes is its cache of cuts, under a lock.
type Budgeter struct {
	cfg    Config
	tools  []tool
	byName map[string]int
	cuts   cutCache
}

// cutCache keeps the cuts of the results replayed on every request of a session, so a
// request costs the cut of its new results only: cutting a JSON result decodes it.
type cutCache struct {
	mu sync.Mutex
	m  map[cutKey]string
}

type cutKey struct {
	id          string
	size, limit int
}

// maxCuts bounds the cache (at most 512 results of a per-result budget: 2.6 MB at 8k, 25 MB
// at 32k); when full it starts again, and the sessions in flight refill it.
const maxCuts = 512

func (c *cutCache) cut(id, full string, limit int) string {
	if len(full) <= limit {
		return full
	}
	k := cutKey{id, len(full), limit}
	c.mu.Lock()
	s, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return s
	}
	s = Cut(id, full, limit)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCuts {
		c.m = map[cutKey]string{}
	}
	c.m[k] = s
	c.mu.Unlock()
	return s
}

// New prepares the tools' full and compact forms and their counts once.
func New(cfg Config, defs []openai.Tool) *Budgeter {
	b := &Budgeter{cfg: cfg.WithDefaults(), byName: map[string]int{}}
	for _, d := range defs {
		if d.Function == nil {
			continue
		}
		t := tool{name: d.Function.Name, full: d, compact: compactTool(d), words: map[string]int{}}
		t.fullTok, t.compactTok = toolTokens(t.full), toolTokens(t.compact)
		for _, w := range words(strings.ReplaceAll(t.name, "_", " ")) {
			t.words[w] += 3
		}
		for _, w := range words(d.Function.Description) {
			t.words[w]++
		}
		b.byName[t.name] = len(b.tools)
		b.tools = append(b.tools, t)
	}
	return b
}

// Config is the budgeter's configuration with its defaults.
func (b *Budgeter) Config() Config { return b.cfg }

func toolTokens(t openai.Tool) int {
	raw, _ := json.Marshal(t)
	return Count(string(raw)) + perTool
}

// Harder is what a server's context-exceeded refusal said, for a second, harder fit.
type Harder struct {
	// Window, Prompt are the server's n_ctx and its count of the refused prompt (0 unknown).
	Window, Prompt int
	// Estimate is what Fit counted for the refused request.
	Estimate int
}

// Fitted is a request that fits.
type Fitted struct {
	Messages []openai.ChatCompletionMessage
	Tools    []openai.Tool
	// Tokens is the request's count; Limit the prompt budget it was fitted to.
	Tokens, Limit int
	// Steps names what was done to fit, in order ("" none).
	Steps []string
}

// TooBig is a request that cannot fit however much is compacted.
type TooBig struct {
	Window, Need, Limit int
}

func (e *TooBig) Error() string {
	return fmt.Sprintf("the conversation does not fit the model's context window of %d tokens even compacted (%d tokens needed, %d available after the %d kept for the answer): raise OIKOS_LLM_CONTEXT_TOKENS to the server's window if it is larger (llama-server -c, vLLM --max-model-len, Ollama num_ctx), or start a new session",
		e.Window, e.Need, e.Limit, e.Window-e.Limit)
}

// Limit is the prompt budget of a fit: the configured one, or after a server's refusal the
// server's window less the answer's room, scaled by how much more the server counted than
// Fit did, with a tenth more kept free.
func (b *Budgeter) Limit(h *Harder) int {
	limit := b.cfg.Input()
	if h == nil {
		return limit
	}
	if h.Window > 0 && h.Window < b.cfg.Window {
		// The server's window is smaller than the one configured: keep the answer room it
		// would have had by default (an eighth), not the configured window's.
		answer := min(b.cfg.Answer, Config{Window: h.Window}.WithDefaults().Answer)
		limit = h.Window - answer
	}
	if h.Prompt > 0 && h.Estimate > 0 && h.Prompt > h.Estimate {
		limit = int(int64(limit) * int64(h.Estimate) / int64(h.Prompt))
	}
	if h.Prompt == 0 && h.Window == 0 {
		limit = limit * 3 / 4
	}
	return limit * 9 / 10
}

// Fit returns msgs and the tools to offer (none when withTools is false) within the budget.
// The tool messages of msgs hold the full results (their ToolCallID is the get_output
// handle); msgs itself is not modified. h, when not nil, fits harder after a server refused
// the request as too long.
func (b *Budgeter) Fit(msgs []openai.ChatCompletionMessage, withTools bool, h *Harder) (Fitted, error) {
	f := fitter{b: b, limit: b.Limit(h), perResult: b.cfg.PerResult()}
	if h != nil {
		f.perResult = f.perResult * f.limit / b.cfg.Input()
	}
	f.load(msgs)
	f.full = withTools
	if withTools {
		f.tools = make([]bool, len(b.tools))
		for i := range f.tools {
			f.tools[i] = true
		}
	}
	steps := []struct {
		name string
		do   func() bool
	}{
		{"cut-results", func() bool { return true }},
		{"compact-schemas", func() bool { f.full = false; return withTools }},
		{"stub-old-results", func() bool { return f.stub(0, f.current) }},
		{"tool-subset", func() bool { return withTools && f.subset() }},
		{"summarise-old-turns", f.summarise},
		{"stub-turn-results", func() bool { return f.stub(f.current, f.lastResults()) }},
		{"cut-results-harder", f.cutHarder},
	}
	for _, s := range steps {
		if !s.do() {
			continue
		}
		if s.name != "cut-results" || f.cut {
			f.steps = append(f.steps, s.name)
		}
		if withTools && f.subsetOn {
			f.subset() // a later step freed room: offer more tools
		}
		if n := f.count(); n <= f.limit {
			return f.result(n), nil
		}
	}
	return f.result(f.count()), &TooBig{Window: b.cfg.Window, Need: f.count(), Limit: f.limit}
}

// item is one message as the fitter holds it.
type item struct {
	msg     openai.ChatCompletionMessage
	full    string // a tool message's whole result
	name    string // the tool a result answers
	limit   int    // bytes of the result shown (0: a stub)
	dropped bool
	tok     int    // the message's count as it stands, -1 stale
	shown   string // its text as it stands (valid when tok >= 0)
}

type fitter struct {
	b                *Budgeter
	limit, perResult int
	items            []item
	current          int // index of the current turn's user message (len when none)
	first            int // index of the first user message (-1 none)
	full             bool
	tools            []bool // offered (nil: no tools)
	subsetOn         bool
	cut              bool
	summary          *item
	steps            []string
}

func (f *fitter) load(msgs []openai.ChatCompletionMessage) {
	names := map[string]string{}
	f.first, f.current = -1, len(msgs)
	for i, m := range msgs {
		it := item{msg: m, tok: -1}
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Function.Name
		}
		if m.Role == openai.ChatMessageRoleTool {
			it.full, it.name, it.limit = m.Content, names[m.ToolCallID], f.perResult
			if len(it.full) > it.limit {
				f.cut = true
			}
		}
		if m.Role == openai.ChatMessageRoleUser {
			if f.first < 0 {
				f.first = i
			}
			f.current = i
		}
		f.items = append(f.items, it)
	}
}

func (f *fitter) text(it *item) string {
	if it.msg.Role != openai.ChatMessageRoleTool {
		return it.msg.Content
	}
	if it.limit == 0 {
		return Stub(it.msg.ToolCallID, it.name, len(it.full))
	}
	return f.b.cuts.cut(it.msg.ToolCallID, it.full, it.limit)
}

func (f *fitter) msgTokens(it *item) int {
	if it.tok >= 0 {
		return it.tok
	}
	it.shown = f.text(it)
	n := perMessage + Count(it.shown)
	for _, c := range it.msg.ToolCalls {
		n += Count(c.ID) + Count(c.Function.Name) + Count(c.Function.Arguments) + perMessage
	}
	it.tok = n
	return n
}

func (f *fitter) toolTokens() int {
	n := 0
	for i, on := range f.tools {
		if on {
			n += f.b.toolTok(i, f.full)
		}
	}
	return n
}

func (b *Budgeter) toolTok(i int, full bool) int {
	if full {
		return b.tools[i].fullTok
	}
	return b.tools[i].compactTok
}

func (f *fitter) count() int {
	n := f.toolTokens()
	for i := range f.items {
		if !f.items[i].dropped {
			n += f.msgTokens(&f.items[i])
		}
	}
	if f.summary != nil {
		n += f.msgTokens(f.summary)
	}
	return n
}

// stub turns the results of items [from, to) into stubs; it says whether any changed.
func (f *fitter) stub(from, to int) bool {
	changed := false
	for i := from; i < to && i < len(f.items); i++ {
		it := &f.items[i]
		if it.msg.Role == openai.ChatMessageRoleTool && !it.dropped && it.limit > 0 && len(it.full) > 160 {
			it.limit, it.tok, changed = 0, -1, true
		}
	}
	return changed
}

// lastResults is the index of the current turn's last run of tool messages (the results of
// its latest iteration); the results before it are the earlier iterations'.
func (f *fitter) lastResults() int {
	i := len(f.items)
	for i > 0 && f.items[i-1].msg.Role != openai.ChatMessageRoleTool {
		i--
	}
	for i > 0 && f.items[i-1].msg.Role == openai.ChatMessageRoleTool {
		i--
	}
	return max(i, f.current)
}

// summarise drops the turns between the first user message's turn and the current turn,
// and puts one summary line in their place.
func (f *fitter) summarise() bool {
	start := f.first + 1
	// The first turn's own answer goes too: its question is what matters.
	var users []string
	calls := map[string]int{}
	dropped := 0
	for i := start; i < f.current; i++ {
		it := &f.items[i]
		if it.dropped || it.msg.Role == openai.ChatMessageRoleSystem && i == 0 {
			continue
		}
		if it.msg.Role == openai.ChatMessageRoleUser {
			users = append(users, oneLine(it.msg.Content, 120))
		}
		for _, c := range it.msg.ToolCalls {
			calls[c.Function.Name]++
		}
		it.dropped = true
		dropped++
	}
	if dropped == 0 || f.first < 0 {
		return false
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[Oikos: %d earlier messages of this session are left out to fit the model's context window.", dropped)
	if len(users) > 0 {
		b.WriteString(" The operator also asked: ")
		for i, u := range users {
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%q", u)
		}
		b.WriteString(".")
	}
	if len(calls) > 0 {
		names := make([]string, 0, len(calls))
		for n := range calls {
			names = append(names, n)
		}
		sort.Strings(names)
		b.WriteString(" Tools called then:")
		for _, n := range names {
			fmt.Fprintf(&b, " %s×%d", n, calls[n])
		}
		b.WriteString(". Their results are left out: call the tools again for current values.]")
	} else {
		b.WriteString("]")
	}
	f.summary = &item{msg: openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem, Content: b.String()}, tok: -1}
	return true
}

// cutHarder halves the limit of the results still shown until they fit or reach the floor.
func (f *fitter) cutHarder() bool {
	changed := false
	for f.count() > f.limit {
		any := false
		for i := range f.items {
			it := &f.items[i]
			if it.msg.Role == openai.ChatMessageRoleTool && !it.dropped && it.limit > minResult && len(it.full) > minResult {
				it.limit = max(min(it.limit, len(it.full))/2, minResult)
				it.tok, any = -1, true
			}
		}
		if !any {
			break
		}
		changed = true
	}
	return changed
}

// subset offers the tools the turn needs, by priority, as many as the room left allows.
func (f *fitter) subset() bool {
	f.subsetOn = true
	for i := range f.tools {
		f.tools[i] = false
	}
	room := f.limit - f.count()
	used := map[string]bool{}
	var turnText strings.Builder
	for i := range f.items {
		it := &f.items[i]
		if it.dropped {
			continue
		}
		for _, c := range it.msg.ToolCalls {
			used[c.Function.Name] = true
		}
		if i >= f.current && it.msg.Role == openai.ChatMessageRoleUser {
			turnText.WriteString(it.msg.Content)
			turnText.WriteString(" ")
		}
	}
	score := make([]int, len(f.b.tools))
	for _, w := range words(turnText.String()) {
		for i, t := range f.b.tools {
			score[i] += t.words[w]
		}
	}
	staple := map[string]int{}
	for i, n := range staples {
		staple[n] = len(staples) - i
	}
	order := make([]int, len(f.b.tools))
	rank := func(i int) (int, int) {
		t := f.b.tools[i]
		switch {
		case core[t.name]:
			return 4, 0
		case used[t.name]:
			return 3, 0
		case score[i] > 0:
			return 2, score[i]
		case staple[t.name] > 0:
			return 1, staple[t.name]
		}
		return 0, 0
	}
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ra, sa := rank(order[a])
		rb, sb := rank(order[b])
		if ra != rb {
			return ra > rb
		}
		return sa > sb
	})
	for _, i := range order {
		r, _ := rank(i)
		need := f.b.toolTok(i, f.full)
		if r == 4 || need <= room {
			f.tools[i] = true
			room -= need
		}
	}
	return true
}

func (f *fitter) result(n int) Fitted {
	out := Fitted{Tokens: n, Limit: f.limit, Steps: f.steps}
	for i := range f.items {
		it := &f.items[i]
		if it.dropped {
			if f.summary != nil && i == f.current-1 {
				out.Messages = append(out.Messages, f.summary.msg)
			}
			continue
		}
		m := it.msg
		f.msgTokens(it)
		m.Content = it.shown
		out.Messages = append(out.Messages, m)
	}
	offered := 0
	for i, on := range f.tools {
		if !on {
			continue
		}
		offered++
		if f.full {
			out.Tools = append(out.Tools, f.b.tools[i].full)
		} else {
			out.Tools = append(out.Tools, f.b.tools[i].compact)
		}
	}
	if f.subsetOn {
		steps := out.Steps[:0:0]
		for _, s := range out.Steps {
			if s == "tool-subset" {
				if offered == len(f.b.tools) {
					continue // a later step made room for every tool
				}
				s = fmt.Sprintf("tool-subset %d/%d", offered, len(f.b.tools))
			}
			steps = append(steps, s)
		}
		out.Steps = steps
	}
	return out
}

// words are the lower-case words of s of at least three letters, a trailing s dropped.
func words(s string) []string {
	f := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	out := f[:0]
	for _, w := range f {
		if len(w) < 3 || stop[w] {
			continue
		}
		out = append(out, strings.TrimSuffix(w, "s"))
	}
	return out
}

var stop = map[string]bool{"the": true, "and": true, "for": true, "with": true, "what": true, "how": true, "you": true,
	"can": true, "get": true, "its": true, "this": true, "that": true, "from": true, "are": true, "all": true, "one": true,
	"set": true, "list": true, "please": true}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
