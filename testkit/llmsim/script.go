package llmsim

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

//go:embed scripts/demo.yaml
var demoYAML []byte

// Demo is the embedded demo script (scripts/demo.yaml): Nomos answering a fleet health
// question, an uptime question and a planned restart of jellyfin.
func Demo() (*Script, error) { return parseSource(demoYAML, "scripts/demo.yaml", "") }

// DemoYAML is the text of the embedded demo script.
func DemoYAML() []byte { return bytes.Clone(demoYAML) }

// DefaultChunkSize is how many characters (runes) a streamed content or arguments chunk
// carries when neither the reply, its script nor Options set it.
const DefaultChunkSize = 12

// DefaultFallback answers a request no rule matches when no script has a fallback.
const DefaultFallback = "I have nothing scripted for that."

// Script is a parsed, validated set of rules, ready to serve. It is immutable and safe for
// concurrent use.
type Script struct {
	models    []string
	modelSet  map[string]bool
	rules     []*rule
	fallbacks []*rule // one per file with a fallback, in load order; when is empty
}

// Models are the model names the script answers, in declaration order.
func (s *Script) Models() []string { return append([]string(nil), s.models...) }

// RuleNames are the rules' names in matching order (unnamed rules are named rule1, rule2 …,
// prefixed with their file's base name when loaded from a file).
func (s *Script) RuleNames() []string {
	out := make([]string, len(s.rules))
	for i, r := range s.rules {
		out[i] = r.name
	}
	return out
}

type rule struct {
	name   string
	idName string          // name as it appears in tool call ids
	source string          // file the rule comes from, for errors and logs
	scope  map[string]bool // the file's models; nil: any model
	w      when
	reply  *reply
}

type when struct {
	lastRole      string
	user, userNot *regexp.Regexp
	toolResult    *regexp.Regexp
	system        *regexp.Regexp
	toolResultOf  string
	after         []string
	notAfter      []string
	atLeast       int
	atMost        *int
	hasTools      *bool
}

type reply struct {
	content    template
	refusal    template
	hasRefusal bool
	calls      []callSpec
	finish     string // "" = tool_calls when calls are present, content_filter for a refusal, else stop
	empty      bool
	err        *errSpec
	delay      time.Duration
	chunkDelay time.Duration
	chunkSize  int // 0 = Options.ChunkSize or DefaultChunkSize
}

type callSpec struct {
	name string
	args *argNode  // nil: {} unless raw is set
	raw  *template // arguments_raw: sent verbatim
}

type errSpec struct {
	status      int
	message     template
	typ, code   string
	retryAfterS int
}

// ---- YAML shapes ----

type fileYAML struct {
	Model     string     `yaml:"model"`
	Models    []string   `yaml:"models"`
	ChunkSize int        `yaml:"chunk_size"`
	Rules     []ruleYAML `yaml:"rules"`
	Fallback  *replyYAML `yaml:"fallback"`
}

type ruleYAML struct {
	Name  string    `yaml:"name"`
	When  whenYAML  `yaml:"when"`
	Reply replyYAML `yaml:"reply"`
}

type whenYAML struct {
	LastRole          string   `yaml:"last_role"`
	UserMatches       string   `yaml:"user_matches"`
	UserNotMatches    string   `yaml:"user_not_matches"`
	ToolResultOf      string   `yaml:"tool_result_of"`
	ToolResultMatches string   `yaml:"tool_result_matches"`
	AfterTools        []string `yaml:"after_tools"`
	NotAfterTools     []string `yaml:"not_after_tools"`
	TurnCallsAtLeast  int      `yaml:"turn_calls_at_least"`
	TurnCallsAtMost   *int     `yaml:"turn_calls_at_most"`
	SystemMatches     string   `yaml:"system_matches"`
	HasTools          *bool    `yaml:"has_tools"`
}

type replyYAML struct {
	Content      string         `yaml:"content"`
	ToolCalls    []toolCallYAML `yaml:"tool_calls"`
	FinishReason string         `yaml:"finish_reason"`
	Empty        bool           `yaml:"empty"`
	Refusal      *string        `yaml:"refusal"`
	Error        *errorYAML     `yaml:"error"`
	DelayMS      int            `yaml:"delay_ms"`
	ChunkDelayMS int            `yaml:"chunk_delay_ms"`
	ChunkSize    int            `yaml:"chunk_size"`
}

type toolCallYAML struct {
	Name         string    `yaml:"name"`
	Arguments    yaml.Node `yaml:"arguments"`
	ArgumentsRaw *string   `yaml:"arguments_raw"`
}

type errorYAML struct {
	Status      int    `yaml:"status"`
	Message     string `yaml:"message"`
	Type        string `yaml:"type"`
	Code        string `yaml:"code"`
	RetryAfterS int    `yaml:"retry_after_s"`
}

// Parse parses one script document.
func Parse(data []byte) (*Script, error) { return parseSource(data, "script", "") }

// Load reads script files and merges them in order. A path may be a directory: its *.yaml
// and *.yml files are read in name order. Rules keep their order (the first file's rules are
// tried first) and apply only to their own file's models (all models when the file declares
// none); the fallback is the first one, in load order, whose file serves the request's model.
func Load(paths ...string) (*Script, error) {
	if len(paths) == 0 {
		return nil, errors.New("llmsim: no script given")
	}
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("llmsim: %w", err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("llmsim: %w", err)
		}
		var found []string
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml") {
				found = append(found, filepath.Join(p, e.Name()))
			}
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("llmsim: %s holds no *.yaml or *.yml script", p)
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	parts := make([]*Script, 0, len(files))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("llmsim: %w", err)
		}
		base := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
		s, err := parseFile(data, f, base+"-")
		if err != nil {
			return nil, err
		}
		parts = append(parts, s)
	}
	return combine(parts)
}

func parseSource(data []byte, source, autoPrefix string) (*Script, error) {
	s, err := parseFile(data, source, autoPrefix)
	if err != nil {
		return nil, err
	}
	return combine([]*Script{s})
}

// combine merges parsed files and checks what only the whole set can show.
func combine(parts []*Script) (*Script, error) {
	out := &Script{modelSet: map[string]bool{}}
	names := map[string]string{}
	for _, p := range parts {
		for _, m := range p.models {
			if !out.modelSet[m] {
				out.modelSet[m] = true
				out.models = append(out.models, m)
			}
		}
		for _, r := range p.rules {
			if prev, dup := names[r.name]; dup {
				return nil, fmt.Errorf("llmsim: %s: rule %q is already defined in %s", r.source, r.name, prev)
			}
			names[r.name] = r.source
			out.rules = append(out.rules, r)
		}
		out.fallbacks = append(out.fallbacks, p.fallbacks...)
	}
	if len(out.models) == 0 {
		return nil, errors.New("llmsim: no model: set model or models in a script")
	}
	return out, nil
}

var (
	modelName = regexp.MustCompile(`^[^\s/]+(/[^\s/]+)*$`)
	toolName  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	notIDChar = regexp.MustCompile(`[^A-Za-z0-9_-]+`)
	roles     = map[string]bool{"user": true, "tool": true, "assistant": true, "system": true}
	finishes  = map[string]bool{"stop": true, "tool_calls": true, "length": true, "content_filter": true}
)

// parseFile parses one document; the set's checks are combine's.
func parseFile(data []byte, source, autoPrefix string) (*Script, error) {
	var f fileYAML
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("llmsim: %s: %w", source, err)
	}
	fail := func(format string, a ...any) error {
		return fmt.Errorf("llmsim: %s: "+format, append([]any{source}, a...)...)
	}
	s := &Script{}
	models := f.Models
	if f.Model != "" {
		models = append([]string{f.Model}, models...)
	}
	var scope map[string]bool
	for _, m := range models {
		if !modelName.MatchString(m) {
			return nil, fail("model %q: a model name has no spaces", m)
		}
		if scope == nil {
			scope = map[string]bool{}
		}
		if !scope[m] {
			scope[m] = true
			s.models = append(s.models, m)
		}
	}
	if f.ChunkSize < 0 {
		return nil, fail("chunk_size is negative")
	}
	seen := map[string]bool{}
	for i, ry := range f.Rules {
		name := ry.Name
		if name == "" {
			name = fmt.Sprintf("%srule%d", autoPrefix, i+1)
		}
		if seen[name] {
			return nil, fail("rule %q is defined twice", name)
		}
		seen[name] = true
		r := &rule{name: name, idName: idName(name), source: source, scope: scope}
		var err error
		if r.w, err = compileWhen(ry.When); err != nil {
			return nil, fail("rule %q: when: %v", name, err)
		}
		if r.reply, err = compileReply(ry.Reply, f.ChunkSize, ry.When.UserMatches != "" || ry.When.ToolResultMatches != ""); err != nil {
			return nil, fail("rule %q: reply: %v", name, err)
		}
		s.rules = append(s.rules, r)
	}
	if f.Fallback != nil {
		rep, err := compileReply(*f.Fallback, f.ChunkSize, false)
		if err != nil {
			return nil, fail("fallback: %v", err)
		}
		s.fallbacks = append(s.fallbacks, &rule{name: "fallback", idName: "fallback", source: source, scope: scope, reply: rep})
	}
	return s, nil
}

func idName(name string) string {
	n := strings.Trim(notIDChar.ReplaceAllString(name, "_"), "_")
	if len(n) > 40 {
		n = n[:40]
	}
	if n == "" {
		n = "rule"
	}
	return n
}

func compileWhen(y whenYAML) (when, error) {
	w := when{lastRole: y.LastRole, toolResultOf: y.ToolResultOf, after: y.AfterTools, notAfter: y.NotAfterTools,
		atLeast: y.TurnCallsAtLeast, atMost: y.TurnCallsAtMost, hasTools: y.HasTools}
	if w.lastRole != "" && !roles[w.lastRole] {
		return w, fmt.Errorf("last_role %q: want user, tool, assistant or system", w.lastRole)
	}
	for _, re := range []struct {
		key, src string
		dst      **regexp.Regexp
	}{
		{"user_matches", y.UserMatches, &w.user},
		{"user_not_matches", y.UserNotMatches, &w.userNot},
		{"tool_result_matches", y.ToolResultMatches, &w.toolResult},
		{"system_matches", y.SystemMatches, &w.system},
	} {
		if re.src == "" {
			continue
		}
		c, err := regexp.Compile(re.src)
		if err != nil {
			return w, fmt.Errorf("%s: %v", re.key, err)
		}
		*re.dst = c
	}
	for _, n := range append(append([]string{y.ToolResultOf}, y.AfterTools...), y.NotAfterTools...) {
		if n != "" && !toolName.MatchString(n) {
			return w, fmt.Errorf("tool name %q: want letters, digits, _ and -", n)
		}
	}
	for _, n := range y.AfterTools {
		if n == "" {
			return w, errors.New("after_tools holds an empty name")
		}
	}
	if w.atLeast < 0 || (w.atMost != nil && *w.atMost < w.atLeast) {
		return w, errors.New("turn_calls_at_least and turn_calls_at_most make an empty range")
	}
	return w, nil
}

func compileReply(y replyYAML, fileChunk int, hasUserRegex bool) (*reply, error) {
	r := &reply{finish: y.FinishReason, empty: y.Empty, chunkSize: y.ChunkSize}
	if r.chunkSize == 0 {
		r.chunkSize = fileChunk
	}
	if y.DelayMS < 0 || y.ChunkDelayMS < 0 || y.ChunkSize < 0 {
		return nil, errors.New("delay_ms, chunk_delay_ms and chunk_size cannot be negative")
	}
	r.delay = time.Duration(y.DelayMS) * time.Millisecond
	r.chunkDelay = time.Duration(y.ChunkDelayMS) * time.Millisecond
	if r.finish != "" && !finishes[r.finish] {
		return nil, fmt.Errorf("finish_reason %q: want stop, tool_calls, length or content_filter", r.finish)
	}
	var tmpls []template
	var err error
	if r.content, err = parseTemplate(y.Content); err != nil {
		return nil, fmt.Errorf("content: %v", err)
	}
	tmpls = append(tmpls, r.content)
	if y.Refusal != nil {
		r.hasRefusal = true
		if r.refusal, err = parseTemplate(*y.Refusal); err != nil {
			return nil, fmt.Errorf("refusal: %v", err)
		}
		tmpls = append(tmpls, r.refusal)
	}
	switch {
	case r.empty && (y.Content != "" || len(y.ToolCalls) > 0 || y.Refusal != nil):
		return nil, errors.New("empty answers nothing: no content, tool_calls or refusal with it")
	case y.Refusal != nil && (y.Content != "" || len(y.ToolCalls) > 0):
		return nil, errors.New("a refusal has no content or tool_calls")
	case y.Error != nil && (y.Content != "" || len(y.ToolCalls) > 0 || y.Refusal != nil || r.empty):
		return nil, errors.New("an error answers nothing else")
	}
	if e := y.Error; e != nil {
		if e.Status < 400 || e.Status > 599 {
			return nil, fmt.Errorf("error status %d: want 400 to 599", e.Status)
		}
		r.err = &errSpec{status: e.Status, typ: e.Type, code: e.Code, retryAfterS: e.RetryAfterS}
		msg := e.Message
		if msg == "" {
			msg = fmt.Sprintf("simulated error %d", e.Status)
		}
		if r.err.message, err = parseTemplate(msg); err != nil {
			return nil, fmt.Errorf("error message: %v", err)
		}
		tmpls = append(tmpls, r.err.message)
	}
	for i, tc := range y.ToolCalls {
		if !toolName.MatchString(tc.Name) {
			return nil, fmt.Errorf("tool_calls[%d]: name %q: want 1 to 64 letters, digits, _ and -", i, tc.Name)
		}
		c := callSpec{name: tc.Name}
		hasArgs := tc.Arguments.Kind != 0
		switch {
		case hasArgs && tc.ArgumentsRaw != nil:
			return nil, fmt.Errorf("tool_calls[%d]: arguments or arguments_raw, not both", i)
		case tc.ArgumentsRaw != nil:
			t, err := parseTemplate(*tc.ArgumentsRaw)
			if err != nil {
				return nil, fmt.Errorf("tool_calls[%d].arguments_raw: %v", i, err)
			}
			c.raw = &t
			tmpls = append(tmpls, t)
		case hasArgs:
			n := &tc.Arguments
			for n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
				n = n.Content[0]
			}
			if n.Kind == yaml.AliasNode {
				n = n.Alias
			}
			if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
				break
			}
			if n.Kind != yaml.MappingNode {
				return nil, fmt.Errorf("tool_calls[%d].arguments: want a mapping (use arguments_raw for any other text)", i)
			}
			if c.args, err = compileArgs(n, 0); err != nil {
				return nil, fmt.Errorf("tool_calls[%d].arguments: %v", i, err)
			}
			tmpls = append(tmpls, c.args.templates()...)
		}
		r.calls = append(r.calls, c)
	}
	if !hasUserRegex {
		for _, t := range tmpls {
			if t.uses("match") {
				return nil, errors.New("{{match:...}} needs when.user_matches or when.tool_result_matches")
			}
		}
	}
	return r, nil
}

// argNode is a tool call's arguments as written in YAML, string values as templates; it
// renders as JSON with the keys in the script's order.
type argNode struct {
	kind byte // 'o' object, 'a' array, 's' string, 'l' literal JSON
	keys []string
	vals []*argNode
	str  template
	lit  []byte
}

func compileArgs(n *yaml.Node, depth int) (*argNode, error) {
	if depth > 64 {
		return nil, errors.New("nested too deeply")
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return nil, errors.New("empty document")
		}
		return compileArgs(n.Content[0], depth+1)
	case yaml.AliasNode:
		return compileArgs(n.Alias, depth+1)
	case yaml.MappingNode:
		a := &argNode{kind: 'o'}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.Value == "<<" {
				return nil, fmt.Errorf("line %d: keys are plain scalars (no merge keys)", k.Line)
			}
			if seen[k.Value] {
				return nil, fmt.Errorf("line %d: key %q twice", k.Line, k.Value)
			}
			seen[k.Value] = true
			v, err := compileArgs(n.Content[i+1], depth+1)
			if err != nil {
				return nil, err
			}
			a.keys = append(a.keys, k.Value)
			a.vals = append(a.vals, v)
		}
		return a, nil
	case yaml.SequenceNode:
		a := &argNode{kind: 'a'}
		for _, c := range n.Content {
			v, err := compileArgs(c, depth+1)
			if err != nil {
				return nil, err
			}
			a.vals = append(a.vals, v)
		}
		return a, nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return &argNode{kind: 'l', lit: []byte("null")}, nil
		case "!!bool", "!!int", "!!float":
			var v any
			if err := n.Decode(&v); err != nil {
				return nil, fmt.Errorf("line %d: %v", n.Line, err)
			}
			b, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("line %d: %q is no JSON value", n.Line, n.Value)
			}
			return &argNode{kind: 'l', lit: b}, nil
		default: // !!str, !!timestamp, !!binary …: the text as written
			t, err := parseTemplate(n.Value)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", n.Line, err)
			}
			return &argNode{kind: 's', str: t}, nil
		}
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}

func (a *argNode) templates() []template {
	switch a.kind {
	case 's':
		return []template{a.str}
	case 'o', 'a':
		var out []template
		for _, v := range a.vals {
			out = append(out, v.templates()...)
		}
		return out
	}
	return nil
}

func (a *argNode) render(b *bytes.Buffer, env *tmplEnv) {
	switch a.kind {
	case 'l':
		b.Write(a.lit)
	case 's':
		writeJSONString(b, a.str.expand(env))
	case 'a':
		b.WriteByte('[')
		for i, v := range a.vals {
			if i > 0 {
				b.WriteByte(',')
			}
			v.render(b, env)
		}
		b.WriteByte(']')
	case 'o':
		b.WriteByte('{')
		for i, k := range a.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, k)
			b.WriteByte(':')
			a.vals[i].render(b, env)
		}
		b.WriteByte('}')
	}
}

// writeJSONString writes s as a JSON string without HTML escaping, as the providers do.
func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a string always encodes
	b.Truncate(b.Len() - 1) // Encode's newline
}
