// Package tools is the agent's one tool registry (docs/behaviours.md A9): every tool Nomos's
// loop can call and every tool served at /mcp is defined here once, with its name, a
// description whose first words say what it does, a JSON schema derived from its argument
// type, MCP annotations and a handler. Call applies, for both surfaces alike, the argument
// validation, the caller's role, the session (taken from the session, never from the
// arguments), the workflow gates (plan-first, retry cap; gates.go) and the record of the call
// (one tool_calls row, agent_activity with the entity it concerned).
//
// The gates here are the agent's own workflow rules; the api's execution gate is still the
// one that decides what runs (docs/architecture.md "One gated execution path").
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/agent/internal/apiclient"
	"github.com/oikos-hq/oikos/agent/internal/secrets"
	"github.com/oikos-hq/oikos/agent/internal/storage"
	"github.com/oikos-hq/oikos/agent/internal/tasks"
	"github.com/oikos-hq/oikos/agent/internal/webfetch"
	"github.com/oikos-hq/oikos/shared/metrics"
)

// MaxArgumentBytes bounds one call's arguments.
const MaxArgumentBytes = 64 << 10

// Roles of the api's tokens.
const (
	RoleOperator = "operator"
	RoleAgent    = "agent"
	RoleReadonly = "readonly"
)

// Caller is who calls a tool and in which session. The loop and the MCP server fill it from
// the session and the token; no field comes from the model's arguments.
type Caller struct {
	Session string // the Oikos session (an MCP session is one)
	Turn    string // the chat turn ("" over MCP: see gates.go)
	Token   string // the caller's bearer token; every api call carries it
	Actor   string // the token's name
	Role    string // operator, agent or readonly
	Source  string // chat or mcp
	// CallID, when set, is the id the call is recorded under (the loop announces it in its
	// tool_use event before the call); else a new one.
	CallID string
	// Message is the assistant message that made the call (0 over MCP), so a later turn
	// replays exactly one entry per call.
	Message int64
}

// Hints are the MCP tool annotations.
type Hints struct {
	ReadOnly    bool
	Destructive bool
	Idempotent  bool
	OpenWorld   bool
}

// Result is what a tool answers. Data is marshalled as JSON for the model unless Text is set.
type Result struct {
	Data    any
	Text    string
	Render  string // the dashboard's renderer for this result (entity, entity_list, execution, ...)
	IsError bool
	// Entity is the entity the call concerned, when the handler knows it better than the
	// arguments (the execution's target, the task's entity).
	Entity string
}

// Errorf is an error result.
func Errorf(format string, a ...any) Result {
	return Result{Text: "error: " + fmt.Sprintf(format, a...), IsError: true, Render: "error"}
}

// Tool is one registered tool.
type Tool struct {
	Name        string
	Description string
	Schema      json.RawMessage
	Hints       Hints
	Render      string
	// entityArg names the argument that names the entity the call concerns (activity rows).
	entityArg string
	// gate is the tool's workflow gate kind (gates.go).
	gate     gateKind
	resolved *jsonschema.Resolved
	handle   func(ctx context.Context, c *Call) Result
}

// Mutates reports whether the tool may change anything (a readonly token cannot call it).
func (t *Tool) Mutates() bool { return !t.Hints.ReadOnly }

// Call is one invocation as a handler sees it.
type Call struct {
	Caller
	ID      string
	Tool    *Tool
	Args    json.RawMessage
	Session storage.Session
	deps    *Deps
	reg     *Registry

	mu       sync.Mutex
	resolved map[string]string // secrets this call resolved (secretref.go), redacted from its result
}

// Deps are what handlers use.
type Deps struct {
	API     *apiclient.Client
	Tasks   *tasks.Service
	Pool    *storage.Pool
	Fetch   *webfetch.Fetcher // http_get
	Probe   *webfetch.Fetcher // ping_service (trusted URLs from the graph)
	Secrets secrets.Backend   // nil: not configured
	Log     zerolog.Logger
	// Version is the agent's build, for ping.
	Version string
	// OutputPage is the size of a get_output page in bytes (0: DefaultOutputPage); the loop's
	// context budget sets it so a page fits a result's budget uncut.
	OutputPage int
	// ReadWait is how long run waits for a runnable execution before answering "still
	// running" (default 60 s).
	ReadWait time.Duration
}

// Registry holds the tools.
type Registry struct {
	deps   Deps
	tools  []*Tool
	byName map[string]*Tool
	gates  *gates

	ensured sync.Map // session id -> struct{}: sessions known to exist
	red     redactor // configured secrets' values, for redaction (secretref.go)

	calls *prometheus.HistogramVec
}

// New builds the registry of every tool with deps. reg, when non-nil, receives the
// tool-call duration histogram.
func New(deps Deps, reg prometheus.Registerer) (*Registry, error) {
	if deps.ReadWait <= 0 {
		deps.ReadWait = 60 * time.Second
	}
	r := &Registry{deps: deps, byName: map[string]*Tool{}, gates: newGates()}
	r.calls = metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "oikos_agent_tool_call_duration_seconds",
		Help:    "Duration of agent tool calls, by tool, surface (chat, mcp) and outcome (ok, error, refused).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
	}, []string{"tool", "source", "outcome"}))
	for _, defs := range [][]*Tool{executionTools(), graphTools(), knowledgeTools(), observeTools(), netTools(), taskTools(), secretTools(), outputTools()} {
		for _, t := range defs {
			if _, dup := r.byName[t.Name]; dup {
				return nil, fmt.Errorf("tool %s registered twice", t.Name)
			}
			r.tools = append(r.tools, t)
			r.byName[t.Name] = t
		}
	}
	sort.Slice(r.tools, func(i, j int) bool { return r.tools[i].Name < r.tools[j].Name })
	return r, nil
}

// All lists every tool.
func (r *Registry) All() []*Tool { return r.tools }

// For lists the tools a role may call: a readonly token sees only read tools.
func (r *Registry) For(role string) []*Tool {
	if role == RoleOperator || role == RoleAgent {
		return r.tools
	}
	out := make([]*Tool, 0, len(r.tools))
	for _, t := range r.tools {
		if !t.Mutates() {
			out = append(out, t)
		}
	}
	return out
}

// Lookup returns a tool by name.
func (r *Registry) Lookup(name string) (*Tool, bool) {
	t, ok := r.byName[name]
	return t, ok
}

// Call runs one tool for caller. It never returns a Go error: whatever goes wrong is a tool
// result with IsError set, so the session survives it.
func (r *Registry) Call(ctx context.Context, caller Caller, name string, args json.RawMessage) (res Result) {
	start := time.Now()
	outcome := "ok"
	defer func() {
		if p := recover(); p != nil {
			r.deps.Log.Error().Str("tool", name).Str("session", caller.Session).Interface("panic", p).Msg("tool panicked")
			res, outcome = Errorf("the tool %s failed unexpectedly; the failure is logged", name), "error"
		}
		r.calls.WithLabelValues(metricName(r, name), caller.Source, outcome).Observe(time.Since(start).Seconds())
	}()
	t, ok := r.byName[name]
	if !ok {
		outcome = "refused"
		return Errorf("unknown tool %q; call tools/list (or see your tool list) for the available tools", name)
	}
	if caller.Session == "" {
		outcome = "refused"
		return Errorf("no session: a tool call belongs to a session")
	}
	if t.Mutates() && caller.Role != RoleOperator && caller.Role != RoleAgent {
		outcome = "refused"
		return Errorf("permission denied: %s may change things and a %s token may only use read tools", name, roleOr(caller.Role))
	}
	clean, err := t.validate(args)
	if err != nil {
		outcome = "refused"
		return Errorf("%s: %v", name, err)
	}
	sess, err := r.ensure(ctx, caller)
	if err != nil {
		outcome = "error"
		return Errorf("session %s: %v", caller.Session, err)
	}
	id := caller.CallID
	if id == "" {
		id = uuid.NewString()
	}
	c := &Call{Caller: caller, ID: id, Tool: t, Args: clean, Session: sess, deps: &r.deps, reg: r}
	if err := storage.StartToolCall(ctx, r.deps.Pool, storage.ToolCall{ID: c.ID, SessionID: caller.Session, Turn: caller.Turn, Name: name,
		Arguments: clean, MessageID: caller.Message}); err != nil {
		outcome = "error"
		return Errorf("record the call: %v", err)
	}
	res = r.run(ctx, c)
	if res.IsError {
		outcome = "error"
	}
	if res.Render == "" {
		res.Render = t.Render
	}
	// Nothing leaves the call unredacted: not the record, not the model's tool message.
	text := r.redact(ctx, c, res.render())
	// The record outlives a cancelled request: the call happened.
	rec, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := storage.FinishToolCall(rec, r.deps.Pool, c.ID, text, res.IsError, res.Render); err != nil {
		r.deps.Log.Error().Err(err).Str("tool", name).Msg("complete tool call row")
	}
	entity := res.Entity
	if entity == "" && t.entityArg != "" {
		entity = argString(clean, t.entityArg)
	}
	if entity != "" || t.Mutates() {
		a := storage.Activity{SessionID: caller.Session, Kind: name, Summary: activitySummary(t, clean, res), Entity: entity}
		if err := storage.InsertActivity(rec, r.deps.Pool, a); err != nil {
			r.deps.Log.Error().Err(err).Str("tool", name).Msg("record activity")
		}
	}
	res.Text = text
	return res
}

// run applies the gates and the handler.
func (r *Registry) run(ctx context.Context, c *Call) Result {
	if refusal, ok := r.gates.before(ctx, c); !ok {
		return refusal
	}
	res := c.Tool.handle(ctx, c)
	r.gates.after(c, res)
	if c.Tool.gate != gateTask && c.Session.Awaiting == "question" {
		// The caller went on after its question: the answer came.
		if err := r.deps.Tasks.Resume(ctx, tasks.Who{Session: c.Session.ID, Actor: c.Actor, Source: c.Source}); err != nil {
			r.deps.Log.Warn().Err(err).Str("session", c.Session.ID).Msg("resume after question")
		}
	}
	return res
}

func (r *Registry) ensure(ctx context.Context, caller Caller) (storage.Session, error) {
	if _, ok := r.ensured.Load(caller.Session); ok {
		s, err := r.deps.Tasks.Session(ctx, caller.Session)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, storage.ErrNotFound) {
			return s, err
		}
	}
	s, err := r.deps.Tasks.Ensure(ctx, tasks.Who{Session: caller.Session, Actor: caller.Actor, Source: caller.Source})
	if err == nil {
		r.ensured.Store(caller.Session, struct{}{})
	}
	return s, err
}

// render is the result's text for the model and the record.
func (res Result) render() string {
	if res.Text != "" {
		return res.Text
	}
	switch d := res.Data.(type) {
	case nil:
		return "ok"
	case json.RawMessage:
		var b bytes.Buffer
		if json.Compact(&b, d) == nil {
			return b.String()
		}
		return string(d)
	case string:
		return d
	}
	b, err := json.Marshal(res.Data)
	if err != nil {
		return "error: encode result: " + err.Error()
	}
	return string(b)
}

// validate checks args against the tool's schema and returns them compacted.
func (t *Tool) validate(args json.RawMessage) (json.RawMessage, error) {
	if len(args) > MaxArgumentBytes {
		return nil, fmt.Errorf("arguments are %d bytes; the limit is %d", len(args), MaxArgumentBytes)
	}
	if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
		args = json.RawMessage(`{}`)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("arguments are not JSON: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, errors.New("arguments must be a JSON object")
	}
	var plain any
	if err := json.Unmarshal(args, &plain); err != nil {
		return nil, err
	}
	if err := t.resolved.Validate(plain); err != nil {
		return nil, fmt.Errorf("invalid arguments: %s", cleanSchemaError(err))
	}
	var b bytes.Buffer
	if err := json.Compact(&b, args); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// cleanSchemaError shortens the validator's message to what a model can act on.
func cleanSchemaError(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "validating root: ")
	s = strings.ReplaceAll(s, "validating /properties/", "")
	return s
}

// def builds a tool whose arguments decode into In. The schema is derived from In's json and
// jsonschema tags (every field without omitempty is required, unknown fields are refused);
// tweak, when non-nil, adjusts it (enums, bounds).
func def[In any](name, desc string, hints Hints, render string, tweak func(*jsonschema.Schema), h func(ctx context.Context, c *Call, in In) Result) *Tool {
	s, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: schema: %v", name, err))
	}
	if s.Properties == nil {
		s.Properties = map[string]*jsonschema.Schema{}
	}
	// Slices and maps are nullable in Go; an argument is not: ["null", "array"] becomes
	// "array", so a missing list is refused instead of accepted as null.
	for _, p := range s.Properties {
		if len(p.Types) == 2 && p.Types[0] == "null" {
			p.Type, p.Types = p.Types[1], nil
		}
	}
	if tweak != nil {
		tweak(s)
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: resolve schema: %v", name, err))
	}
	raw, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("tool %s: encode schema: %v", name, err))
	}
	t := &Tool{Name: name, Description: desc, Schema: raw, Hints: hints, Render: render, resolved: resolved}
	t.handle = func(ctx context.Context, c *Call) Result {
		var in In
		if err := json.Unmarshal(c.Args, &in); err != nil {
			return Errorf("%s: invalid arguments: %v", name, err)
		}
		return h(ctx, c, in)
	}
	// The first string field named like an entity reference is the activity's entity.
	rt := reflect.TypeFor[In]()
	for _, f := range []string{"target", "ref", "entity", "about", "source"} {
		for i := 0; i < rt.NumField(); i++ {
			tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			if tag == f && rt.Field(i).Type.Kind() == reflect.String {
				t.entityArg = f
				break
			}
		}
		if t.entityArg != "" {
			break
		}
	}
	return t
}

// enum restricts a property to values.
func enum(s *jsonschema.Schema, prop string, values ...string) {
	p := s.Properties[prop]
	if p == nil {
		return
	}
	if p.Items != nil {
		p = p.Items
	}
	for _, v := range values {
		p.Enum = append(p.Enum, v)
	}
}

// bounds sets an integer property's range.
func bounds(s *jsonschema.Schema, prop string, lo, hi float64) {
	if p := s.Properties[prop]; p != nil {
		p.Minimum, p.Maximum = &lo, &hi
	}
}

// maxLen bounds a string property (or an array's items and count).
func maxLen(s *jsonschema.Schema, prop string, n int) {
	p := s.Properties[prop]
	if p == nil {
		return
	}
	if p.Items != nil {
		p.MaxItems = &n
		return
	}
	p.MaxLength = &n
}

func argString(args json.RawMessage, key string) string {
	var m map[string]any
	if json.Unmarshal(args, &m) != nil {
		return ""
	}
	s, _ := m[key].(string)
	return s
}

func activitySummary(t *Tool, args json.RawMessage, res Result) string {
	s := t.Name + " " + string(args)
	if res.IsError {
		s += " → error"
	}
	return s
}

func roleOr(r string) string {
	if r == "" {
		return "unknown-role"
	}
	return r
}

// metricName keeps unknown tool names out of the metric's labels.
func metricName(r *Registry, name string) string {
	if _, ok := r.byName[name]; ok {
		return name
	}
	return "unknown"
}
