package chat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
	"github.com/oikos-hq/oikos/shared/apiclient"

	"go.yaml.in/yaml/v3"

	"github.com/oikos-hq/oikos/testkit/llmsim"
)

// The golden evals (docs/behaviours.md A12): testdata/evals/*.yaml, one conversation each,
// holding its own llmsim script, the operator's turns and structural assertions. The format:
//
//	name: plan-yes-window            # the subtest's name (the file's name without .yaml when unset)
//	description: …                   # what it shows
//	behaviours: [A4, A5, X6]         # the catalogue entries it covers
//	scripted_only: true              # the whole eval needs its script (skipped against a real provider)
//	script: {model: …, rules: […]}   # an llmsim script (testkit/llmsim/doc.go); its first model is the agent's
//	setup:                           # before the first turn
//	  - knowledge: {slug: runbook:x, title: …, body: …, about: lxc:y}   # PUT /api/v1/knowledge with the operator's token
//	  - file: {host: ceres, vmid: 307, path: /srv/x, content: …}       # a file on a simulated guest
//	turns:                           # in order; each is one step
//	  - say: "restart sonarr"        # POST /api/v1/chat with the operator's token, stream read to done
//	    then: continuation           # then wait for the session's loop to resume on its own and finish (A7)
//	    assert: […]                  # checked against this step only (its tool calls, executions, …)
//	  - wait_for: approval           # a pending approval of the session
//	    operator_decides: approve    # approve or deny it, with the operator's token …
//	    via: cli                     # … through bin/oikos (cli) or the api (api, the default)
//	    then: continuation
//	assert: […]                      # checked against the whole session at the end
//
// An assertion is a mapping of one or more checks; `scripted_only: true` on it keeps it out
// of a run against a real provider (it depends on what the script makes the model do), and
// `why` documents it. The checks (on the step for turn assertions, on the session for the
// eval's): tools (a subsequence of the tool calls' names), tools_any, tools_absent,
// tool_count, tool_result {tool, matches, is_error}, proposes_plan, plan_before_run (no run
// that created a non-read-only execution before a successful propose_plan),
// plan_generations, approvals / executions / windows {count, min, max, risk_class and
// command_matches to filter; statuses, risk_classes, authorised_by, via, kinds: every item's
// value is one of}, decisions {count, …} (approvals decided during the step),
// decided_by_operator (every decided approval and every window names the operator, a relayed
// one the agent as relayer), writes_back, no_rerun (no two executions with the same target
// and command), no_changes (no non-read-only execution, approval, window or graph write),
// completions (successful complete_task calls), task {status, outcome, blocker},
// text_matches (the step's streamed text, or the session's last answer), finish_reason,
// error_matches, no_error, events (a subsequence of the step's event names), model_requests
// {count, min, max}, last_request_offers_tools, no_empty_bubble, file_absent, file_present.
//
// Against a real provider (OIKOS_EVAL_LLM_BASE_URL, OIKOS_EVAL_LLM_MODEL and, if it needs one,
// OIKOS_EVAL_LLM_API_KEY) the scripts are not used: each eval's agent talks to that model, the
// scripted_only evals and assertions are skipped, and a wait_for that the model never brings
// about (no approval within two minutes) is logged and skipped with what depends on it.

type evalFile struct {
	Name         string      `yaml:"name"`
	Description  string      `yaml:"description"`
	Behaviours   []string    `yaml:"behaviours"`
	ScriptedOnly bool        `yaml:"scripted_only"`
	Script       yaml.Node   `yaml:"script"`
	Setup        []evalSetup `yaml:"setup"`
	Turns        []evalStep  `yaml:"turns"`
	Assert       []assertion `yaml:"assert"`

	path   string
	script *llmsim.Script
}

type evalSetup struct {
	Knowledge *struct {
		Slug  string `yaml:"slug"`
		Title string `yaml:"title"`
		Body  string `yaml:"body"`
		About string `yaml:"about"`
	} `yaml:"knowledge"`
	File *struct {
		Host    string `yaml:"host"`
		VMID    int    `yaml:"vmid"`
		Path    string `yaml:"path"`
		Content string `yaml:"content"`
	} `yaml:"file"`
}

type evalStep struct {
	Say             string      `yaml:"say"`
	WaitFor         string      `yaml:"wait_for"`
	OperatorDecides string      `yaml:"operator_decides"`
	Via             string      `yaml:"via"`
	Then            string      `yaml:"then"`
	Assert          []assertion `yaml:"assert"`
}

type guestPath struct {
	Host string `yaml:"host"`
	VMID int    `yaml:"vmid"`
	Path string `yaml:"path"`
}

type assertion struct {
	ScriptedOnly bool   `yaml:"scripted_only"`
	Why          string `yaml:"why"`

	Tools       []string `yaml:"tools"`
	ToolsAny    []string `yaml:"tools_any"`
	ToolsAbsent []string `yaml:"tools_absent"`
	ToolCount   *int     `yaml:"tool_count"`
	ToolResult  *struct {
		Tool    string `yaml:"tool"`
		Matches string `yaml:"matches"`
		IsError *bool  `yaml:"is_error"`
	} `yaml:"tool_result"`
	ProposesPlan      *bool      `yaml:"proposes_plan"`
	PlanBeforeRun     *bool      `yaml:"plan_before_run"`
	PlanGenerations   *int       `yaml:"plan_generations"`
	Approvals         *countSpec `yaml:"approvals"`
	Executions        *countSpec `yaml:"executions"`
	Windows           *countSpec `yaml:"windows"`
	Decisions         *countSpec `yaml:"decisions"`
	DecidedByOperator *bool      `yaml:"decided_by_operator"`
	WritesBack        *bool      `yaml:"writes_back"`
	NoRerun           *bool      `yaml:"no_rerun"`
	NoChanges         *bool      `yaml:"no_changes"`
	Completions       *int       `yaml:"completions"`
	Task              *struct {
		Status  string `yaml:"status"`
		Outcome string `yaml:"outcome"`
		Blocker string `yaml:"blocker"`
	} `yaml:"task"`
	TextMatches            string     `yaml:"text_matches"`
	FinishReason           string     `yaml:"finish_reason"`
	ErrorMatches           string     `yaml:"error_matches"`
	NoError                *bool      `yaml:"no_error"`
	Events                 []string   `yaml:"events"`
	ModelRequests          *countSpec `yaml:"model_requests"`
	LastRequestOffersTools *bool      `yaml:"last_request_offers_tools"`
	NoEmptyBubble          *bool      `yaml:"no_empty_bubble"`
	FileAbsent             *guestPath `yaml:"file_absent"`
	FilePresent            *guestPath `yaml:"file_present"`
}

type countSpec struct {
	Count *int `yaml:"count"`
	Min   *int `yaml:"min"`
	Max   *int `yaml:"max"`
	// Filters: only the items of this risk class / whose command matches count.
	RiskClass      string `yaml:"risk_class"`
	CommandMatches string `yaml:"command_matches"`
	// Every counted item's value is one of these.
	Statuses     []string `yaml:"statuses"`
	RiskClasses  []string `yaml:"risk_classes"`
	AuthorisedBy []string `yaml:"authorised_by"`
	Via          []string `yaml:"via"`
	Kinds        []string `yaml:"kinds"`
}

// loadEvals reads testdata/evals.
func loadEvals(tb testing.TB) []*evalFile {
	tb.Helper()
	evs, err := readEvals()
	if err != nil {
		tb.Fatal(err)
	}
	return evs
}

// readEvals reads and checks testdata/evals/*.yaml.
func readEvals() ([]*evalFile, error) {
	paths, err := filepath.Glob(filepath.Join("testdata", "evals", "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []*evalFile
	seen := map[string]string{}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var ev evalFile
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		dec.KnownFields(true)
		if err := dec.Decode(&ev); err != nil {
			return nil, fmt.Errorf("%s: %v", p, err)
		}
		ev.path = p
		if ev.Name == "" {
			ev.Name = strings.TrimSuffix(filepath.Base(p), ".yaml")
		}
		if prev, dup := seen[ev.Name]; dup {
			return nil, fmt.Errorf("%s: eval %q is already defined in %s", p, ev.Name, prev)
		}
		seen[ev.Name] = p
		script, err := yaml.Marshal(&ev.Script)
		if err != nil {
			return nil, fmt.Errorf("%s: script: %v", p, err)
		}
		if ev.script, err = llmsim.Parse(script); err != nil {
			return nil, fmt.Errorf("%s: script: %v", p, err)
		}
		if len(ev.Turns) == 0 {
			return nil, fmt.Errorf("%s: no turns", p)
		}
		for i, st := range ev.Turns {
			if (st.Say == "") == (st.WaitFor == "") {
				return nil, fmt.Errorf("%s: turn %d: give say or wait_for", p, i+1)
			}
			if st.WaitFor != "" && st.WaitFor != "approval" {
				return nil, fmt.Errorf("%s: turn %d: wait_for %q: only approval", p, i+1, st.WaitFor)
			}
			switch st.OperatorDecides {
			case "", "approve", "deny":
			default:
				return nil, fmt.Errorf("%s: turn %d: operator_decides %q: approve or deny", p, i+1, st.OperatorDecides)
			}
			switch st.Via {
			case "", "api", "cli":
			default:
				return nil, fmt.Errorf("%s: turn %d: via %q: api or cli", p, i+1, st.Via)
			}
			if st.Then != "" && st.Then != "continuation" {
				return nil, fmt.Errorf("%s: turn %d: then %q: only continuation", p, i+1, st.Then)
			}
		}
		out = append(out, &ev)
	}
	return out, nil
}

// liveProvider is the real provider the evals run against, when configured.
type liveProvider struct{ baseURL, model, apiKey string }

func evalProvider() *liveProvider {
	p := &liveProvider{os.Getenv("OIKOS_EVAL_LLM_BASE_URL"), os.Getenv("OIKOS_EVAL_LLM_MODEL"), os.Getenv("OIKOS_EVAL_LLM_API_KEY")}
	if p.baseURL == "" || p.model == "" {
		return nil
	}
	return p
}

// TestEvalFiles: there are at least 12 evals, each with a name, a description, the
// behaviours it covers, a script that answers its first turn and at least one assertion.
func TestEvalFiles(t *testing.T) {
	t.Parallel()
	evs := loadEvals(t)
	if len(evs) < 12 {
		t.Errorf("%d golden evals; want at least 12", len(evs))
	}
	for _, ev := range evs {
		if ev.Description == "" || len(ev.Behaviours) == 0 || len(ev.Assert) == 0 {
			t.Errorf("%s: needs description, behaviours and assert", ev.path)
		}
	}
}

// TestGoldenEvals drives every eval through the api and scores it.
func TestGoldenEvals(t *testing.T) {
	t.Parallel()
	s := lab(t)
	live := evalProvider()
	for _, ev := range loadEvals(t) {
		t.Run(ev.Name, func(t *testing.T) {
			t.Parallel()
			if live != nil && ev.ScriptedOnly {
				t.Skipf("%s needs its script; a real provider is configured", ev.Name)
			}
			runEval(t, s, ev, live)
		})
	}
}

// evalRun is one eval in progress.
type evalRun struct {
	t       *testing.T
	s       *stack
	ev      *evalFile
	live    bool
	session string
	model   *llm // nil against a real provider
	scored  int
	skipped int
	turns   []turn // the say steps' streams, in order
}

func runEval(t *testing.T, s *stack, ev *evalFile, live *liveProvider) *evalRun {
	r := &evalRun{t: t, s: s, ev: ev, live: live != nil, session: newSession(ev.Name)}
	_, r.model = s.scripted(t, "eval:"+ev.Name, r.session) // no model of its own against a real provider
	for _, st := range ev.Setup {
		r.setup(st)
	}
	for i, st := range ev.Turns {
		r.step(i+1, st)
		if t.Failed() {
			t.Logf("session %s transcript:\n%s", r.session, r.transcript())
			return r
		}
	}
	all := r.scopeSince(scopeMark{})
	r.score("eval", ev.Assert, all)
	if t.Failed() {
		t.Logf("session %s transcript:\n%s", r.session, r.transcript())
	}
	t.Logf("%s: %d assertions scored, %d skipped (scripted only or not reached)", ev.Name, r.scored, r.skipped)
	return r
}

func (r *evalRun) setup(st evalSetup) {
	t, s := r.t, r.s
	switch {
	case st.Knowledge != nil:
		k := st.Knowledge
		body := apiclient.UpsertKnowledge{Title: k.Title, Body: &k.Body, About: apiclient.Opt(k.About)}
		e2estack.OK(t, nil)(s.client.API(t, s.operator).UpsertKnowledge(t.Context(), k.Slug, body))
	case st.File != nil:
		s.writeGuestFile(t, st.File.Host, st.File.VMID, st.File.Path, st.File.Content)
	default:
		t.Fatalf("%s: an empty setup step", r.ev.path)
	}
}

// scopeMark is where a step starts: how much of the session there was.
type scopeMark struct {
	calls     int
	execs     map[string]bool
	approvals map[string]string // id -> status
	requests  int
	valid     bool
}

func (r *evalRun) mark() scopeMark {
	m := scopeMark{execs: map[string]bool{}, approvals: map[string]string{}, valid: true}
	m.calls = len(r.s.sessionIfAny(r.t, r.session).calls())
	for _, e := range r.s.executions(r.t, r.session) {
		m.execs[e.ID] = true
	}
	for _, a := range r.s.approvals(r.t, r.session) {
		m.approvals[a.ID] = a.Status
	}
	if r.model != nil {
		m.requests = len(r.model.requests())
	}
	return m
}

// scope is what the assertions of a step (or of the whole eval) look at.
type scope struct {
	whole     bool
	view      sessionView
	calls     []call // the scope's
	allCalls  []call
	execs     []execution // created in the scope
	allExecs  []execution
	approvals []approval // created in the scope
	decided   []approval // decided in the scope
	windows   []window
	requests  []*llmRequest
	turn      *turn // the chat turn of a say step
	text      string
}

func (r *evalRun) scopeSince(m scopeMark) *scope {
	sc := &scope{whole: !m.valid}
	sc.view = r.s.session(r.t, r.session)
	sc.allCalls = sc.view.calls()
	if m.calls <= len(sc.allCalls) {
		sc.calls = sc.allCalls[m.calls:]
	}
	sc.allExecs = r.s.executions(r.t, r.session)
	for _, e := range sc.allExecs {
		if !m.execs[e.ID] {
			sc.execs = append(sc.execs, e)
		}
	}
	for _, a := range r.s.approvals(r.t, r.session) {
		prev, known := m.approvals[a.ID]
		if !known {
			sc.approvals = append(sc.approvals, a)
		}
		if a.Status != "pending" && (!known || prev == "pending") {
			sc.decided = append(sc.decided, a)
		}
	}
	sc.windows = r.s.windows(r.t, r.session)
	if r.model != nil {
		reqs := r.model.requests()
		if m.requests <= len(reqs) {
			sc.requests = reqs[m.requests:]
		}
	}
	sc.text = sc.view.lastAssistant()
	return sc
}

func (r *evalRun) step(n int, st evalStep) {
	t, s := r.t, r.s
	m := r.mark()
	notes := s.noteCount(t, r.session)
	var tr *turn
	reached := true
	switch {
	case st.Say != "":
		got := s.chat(t, s.operator, r.session, st.Say)
		tr = &got
		r.turns = append(r.turns, got)
		if got.Status != http.StatusOK {
			t.Fatalf("turn %d %q: %d %s", n, st.Say, got.Status, got.Body)
		}
		if got.SessionID != r.session || got.MessageID == "" {
			t.Errorf("turn %d: the session event names %q / %q; want session %q and the api's message id", n, got.SessionID, got.MessageID, r.session)
		}
		t.Logf("turn %d %q: events %v, finish %s, errors %v", n, st.Say, compact(got.names()), got.Finish, got.Errors)
	case st.WaitFor == "approval":
		a, ok := r.waitApproval(n)
		if !ok {
			reached = false
			break
		}
		if st.OperatorDecides != "" {
			r.operatorDecides(n, a, st.OperatorDecides, st.Via)
		}
	}
	if reached && st.Then == "continuation" {
		within := 60 * time.Second
		if r.live {
			within = 5 * time.Minute
		}
		s.waitContinuation(t, r.session, notes, within)
	}
	if !reached {
		r.skipped += len(st.Assert)
		return
	}
	sc := r.scopeSince(m)
	sc.turn = tr
	if tr != nil {
		sc.text = tr.text()
	} else {
		sc.text = ""
		for _, msg := range sc.view.Messages {
			if msg.Role == "assistant" {
				sc.text = msg.Content // the continuation's last answer
			}
		}
	}
	r.score(fmt.Sprintf("turn %d", n), st.Assert, sc)
}

// waitApproval waits for a pending approval of the session (against a real provider, for up
// to two minutes, and says so when none comes).
func (r *evalRun) waitApproval(n int) (approval, bool) {
	within := 10 * time.Second
	if r.live {
		within = 2 * time.Minute
	}
	deadline := time.Now().Add(within)
	for {
		if p := r.s.pendingApprovals(r.t, r.session); len(p) > 0 {
			return p[len(p)-1], true
		}
		if time.Now().After(deadline) {
			if r.live {
				r.t.Logf("turn %d: the model brought about no approval within %s; the decision and what depends on it are skipped", n, within)
				return approval{}, false
			}
			r.t.Fatalf("turn %d: no pending approval in session %s within %s", n, r.session, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// operatorDecides decides a with the operator's token, through bin/oikos or the api.
func (r *evalRun) operatorDecides(n int, a approval, decision, via string) {
	t, s := r.t, r.s
	if via == "cli" {
		if bin := cliPath(); bin != "" {
			args := []string{decision, a.ID}
			if decision == "approve" && a.RiskClass == "destructive" {
				args = []string{decision, "--confirm", a.Target, a.ID}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Env = append(os.Environ(), "OIKOS_API_URL="+s.apiURL, "OIKOS_TOKEN="+s.operator)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("turn %d: oikos %s: %v\n%s", n, strings.Join(args, " "), err, out)
			}
			t.Logf("turn %d: oikos %s: %s", n, strings.Join(args, " "), strings.TrimSpace(string(out)))
			return
		}
		t.Logf("turn %d: bin/oikos is not built (make build); deciding through the api instead", n)
	}
	s.decide(t, a.ID, decision)
	t.Logf("turn %d: the operator decided %s on approval %s (%s %q on %s) through the api", n, decision, a.ID, a.RiskClass, a.Command, a.Target)
}

// compact shortens runs of one event name (delta ×12).
func compact(names []string) string {
	var b strings.Builder
	for i := 0; i < len(names); {
		j := i
		for j < len(names) && names[j] == names[i] {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(names[i])
		if j-i > 1 {
			fmt.Fprintf(&b, "×%d", j-i)
		}
		i = j
	}
	return b.String()
}

// transcript renders the session for a failure's log.
func (r *evalRun) transcript() string {
	v := r.s.session(r.t, r.session)
	var b strings.Builder
	for _, m := range v.Messages {
		fmt.Fprintf(&b, "  [%d %s] %s\n", m.ID, m.Role, clip(m.Content, 300))
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, "      %s %s → %s\n", c.Name, clip(string(c.Arguments), 200), clip(c.Result, 300))
		}
	}
	for _, e := range r.s.executions(r.t, r.session) {
		fmt.Fprintf(&b, "  execution %s %q on %s: %s %s (%s)\n", e.ID, e.Command, e.Target, e.RiskClass, e.Status, e.AuthorisedBy)
	}
	for _, a := range r.s.approvals(r.t, r.session) {
		fmt.Fprintf(&b, "  approval %s %q: %s %s by %v via %v\n", a.ID, a.Command, a.RiskClass, a.Status, deref(a.DecidedBy), deref(a.Via))
	}
	return b.String()
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", "⏎")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// ---------------------------------------------------------------------------- scoring

func (r *evalRun) score(where string, as []assertion, sc *scope) {
	for i, a := range as {
		label := fmt.Sprintf("%s: assert %d", where, i+1)
		if a.Why != "" {
			label += " (" + a.Why + ")"
		}
		if r.live && a.ScriptedOnly {
			r.skipped++
			continue
		}
		for _, fail := range r.check(a, sc) {
			r.t.Errorf("%s %s: %s", r.ev.Name, label, fail)
		}
		r.scored++
	}
}

// check runs every check an assertion holds and returns the failures.
func (r *evalRun) check(a assertion, sc *scope) []string {
	var fails []string
	failf := func(format string, args ...any) { fails = append(fails, fmt.Sprintf(format, args...)) }
	got := names(sc.calls)
	if len(a.Tools) > 0 && !subsequence(a.Tools, got) {
		failf("tools %v are not a subsequence of the calls %v", a.Tools, got)
	}
	if len(a.ToolsAny) > 0 && !slices.ContainsFunc(got, func(n string) bool { return slices.Contains(a.ToolsAny, n) }) {
		failf("none of %v was called (calls %v)", a.ToolsAny, got)
	}
	for _, n := range a.ToolsAbsent {
		if slices.Contains(got, n) {
			failf("%s was called (calls %v)", n, got)
		}
	}
	if a.ToolCount != nil && len(sc.calls) != *a.ToolCount {
		failf("%d tool calls, want %d (%v)", len(sc.calls), *a.ToolCount, compact(got))
	}
	if tr := a.ToolResult; tr != nil {
		re := regexp.MustCompile(tr.Matches)
		found := false
		for _, c := range sc.calls {
			if c.Name == tr.Tool && re.MatchString(c.Result) && (tr.IsError == nil || *tr.IsError == c.IsError) {
				found = true
			}
		}
		if !found {
			failf("no %s result matches %q (is_error %v)", tr.Tool, tr.Matches, boolOr(tr.IsError))
		}
	}
	if a.ProposesPlan != nil {
		proposed := slices.ContainsFunc(sc.calls, func(c call) bool { return c.Name == "propose_plan" && !c.IsError })
		if proposed != *a.ProposesPlan {
			failf("a plan was proposed: %v, want %v", proposed, *a.ProposesPlan)
		}
	}
	if a.PlanBeforeRun != nil && *a.PlanBeforeRun {
		if msg := planBeforeRun(sc.allCalls); msg != "" {
			failf("%s", msg)
		}
	}
	if a.PlanGenerations != nil && sc.view.Plan.Generation != *a.PlanGenerations {
		failf("plan generation %d, want %d", sc.view.Plan.Generation, *a.PlanGenerations)
	}
	if a.Approvals != nil {
		fails = append(fails, countApprovals("approvals", a.Approvals, sc.approvals)...)
	}
	if a.Decisions != nil {
		fails = append(fails, countApprovals("decisions", a.Decisions, sc.decided)...)
	}
	if a.Executions != nil {
		fails = append(fails, countExecutions(a.Executions, sc.execs)...)
	}
	if a.Windows != nil {
		fails = append(fails, countWindows(a.Windows, sc.windows)...)
	}
	if a.DecidedByOperator != nil && *a.DecidedByOperator {
		for _, ap := range r.s.approvals(r.t, r.session) {
			if ap.Status == "pending" {
				continue
			}
			if deref(ap.DecidedBy) != operatorName {
				failf("approval %s (%s) was decided by %q, not the operator %q", ap.ID, ap.Status, deref(ap.DecidedBy), operatorName)
			}
			// A relayed decision names the agent as relayer and the operator's recorded message
			// it was proved from; a direct one neither.
			if ap.RelayedBy != nil && (*ap.RelayedBy != agentName || deref(ap.MessageID) == "") {
				failf("approval %s was relayed by %q with message %q; want the agent %q and the operator's message", ap.ID, *ap.RelayedBy, deref(ap.MessageID), agentName)
			}
			if ap.RelayedBy == nil && deref(ap.Via) == "chat_assent" {
				failf("approval %s was decided by chat assent without a relay", ap.ID)
			}
		}
		for _, w := range sc.windows {
			if w.OpenedBy != operatorName {
				failf("the %s window %s was opened by %q, not the operator", w.Kind, w.ID, w.OpenedBy)
			}
		}
	}
	if a.WritesBack != nil {
		wrote := slices.ContainsFunc(sc.calls, func(c call) bool {
			return (c.Name == "upsert_knowledge" || c.Name == "update_entity_attributes") && !c.IsError
		})
		if wrote != *a.WritesBack {
			failf("wrote back: %v, want %v", wrote, *a.WritesBack)
		}
	}
	if a.NoRerun != nil && *a.NoRerun {
		seen := map[string]bool{}
		for _, e := range sc.allExecs {
			k := e.Target + "\x00" + strings.Join(strings.Fields(e.Command), " ")
			if seen[k] && (sc.whole || slices.ContainsFunc(sc.execs, func(x execution) bool { return x.ID == e.ID })) {
				failf("`%s` on %s ran twice", e.Command, e.Target)
			}
			seen[k] = true
		}
	}
	if a.NoChanges != nil && *a.NoChanges {
		for _, e := range sc.execs {
			if e.RiskClass != "read_only" {
				failf("a %s execution `%s` was requested", e.RiskClass, e.Command)
			}
		}
		if len(sc.approvals) > 0 {
			failf("%d approvals were asked for", len(sc.approvals))
		}
		if len(sc.windows) > 0 {
			failf("%d approval windows are open", len(sc.windows))
		}
		for _, c := range sc.calls {
			if graphWrites[c.Name] && !c.IsError {
				failf("%s changed the graph", c.Name)
			}
		}
	}
	if a.Completions != nil {
		n := 0
		for _, c := range sc.calls {
			if c.Name == "complete_task" && !c.IsError {
				n++
			}
		}
		if n != *a.Completions {
			failf("complete_task succeeded %d times, want %d", n, *a.Completions)
		}
	}
	if a.Task != nil {
		tk := sc.view.Task
		if a.Task.Status != "" && tk.Status != a.Task.Status {
			failf("task status %q, want %q", tk.Status, a.Task.Status)
		}
		if a.Task.Outcome != "" && tk.Outcome != a.Task.Outcome {
			failf("task outcome %q, want %q", tk.Outcome, a.Task.Outcome)
		}
		if a.Task.Blocker != "" && tk.Blocker != a.Task.Blocker {
			failf("task blocker %q, want %q", tk.Blocker, a.Task.Blocker)
		}
	}
	if a.TextMatches != "" && !regexp.MustCompile(a.TextMatches).MatchString(sc.text) {
		failf("the text %q does not match %q", clip(sc.text, 400), a.TextMatches)
	}
	if a.FinishReason != "" || a.ErrorMatches != "" || a.NoError != nil || len(a.Events) > 0 {
		if sc.turn == nil {
			failf("finish_reason, error_matches, no_error and events need a say step")
		} else {
			tr := sc.turn
			if a.FinishReason != "" && tr.Finish != a.FinishReason {
				failf("finish_reason %q, want %q", tr.Finish, a.FinishReason)
			}
			if a.ErrorMatches != "" && !slices.ContainsFunc(tr.Errors, regexp.MustCompile(a.ErrorMatches).MatchString) {
				failf("no error event matches %q (errors %q)", a.ErrorMatches, tr.Errors)
			}
			if a.NoError != nil && *a.NoError && len(tr.Errors) > 0 {
				failf("error events %q", tr.Errors)
			}
			if len(a.Events) > 0 && !subsequence(a.Events, tr.names()) {
				failf("events %v are not a subsequence of %v", a.Events, compact(tr.names()))
			}
		}
	}
	if a.ModelRequests != nil || a.LastRequestOffersTools != nil {
		if r.model == nil {
			failf("model_requests and last_request_offers_tools need the scripted model (mark them scripted_only)")
		} else {
			if a.ModelRequests != nil {
				fails = append(fails, countCheck("model requests", a.ModelRequests, len(sc.requests))...)
			}
			if a.LastRequestOffersTools != nil {
				if len(sc.requests) == 0 {
					failf("no model request in scope")
				} else if offered := len(sc.requests[len(sc.requests)-1].Tools) > 0; offered != *a.LastRequestOffersTools {
					failf("the last model request offered tools: %v, want %v", offered, *a.LastRequestOffersTools)
				}
			}
		}
	}
	if a.NoEmptyBubble != nil && *a.NoEmptyBubble {
		for _, m := range sc.view.Messages {
			if m.Role == "assistant" && strings.TrimSpace(m.Content) == "" && len(m.ToolCalls) == 0 {
				failf("assistant message %d is an empty bubble", m.ID)
			}
		}
	}
	if p := a.FileAbsent; p != nil {
		if _, err := os.Stat(r.s.guestPath(p.Host, p.VMID, p.Path)); err == nil {
			failf("%s is still on %s/%d", p.Path, p.Host, p.VMID)
		}
	}
	if p := a.FilePresent; p != nil {
		if _, err := os.Stat(r.s.guestPath(p.Host, p.VMID, p.Path)); err != nil {
			failf("%s is not on %s/%d: %v", p.Path, p.Host, p.VMID, err)
		}
	}
	return fails
}

// graphWrites are the tools that change the graph or the knowledge base.
var graphWrites = map[string]bool{"upsert_knowledge": true, "update_entity_attributes": true, "create_entity": true,
	"set_entity_state": true, "create_relationship": true, "end_relationship": true, "request_execution": true}

func boolOr(b *bool) string {
	if b == nil {
		return "any"
	}
	return strconv.FormatBool(*b)
}

// planBeforeRun finds a run (or typed action) that created a non-read-only execution before
// a plan was proposed; "" when there is none.
func planBeforeRun(calls []call) string {
	planned := false
	for _, c := range calls {
		switch c.Name {
		case "propose_plan":
			planned = planned || !c.IsError
		case "run", "request_execution":
			var e struct {
				ID          string `json:"id"`
				ExecutionID string `json:"execution_id"`
				RiskClass   string `json:"risk_class"`
			}
			if json.Unmarshal([]byte(c.Result), &e) != nil || (e.ID == "" && e.ExecutionID == "") {
				continue // refused: no execution
			}
			if e.RiskClass != "read_only" && !planned {
				return fmt.Sprintf("%s %s created a %s execution before any plan was proposed", c.Name, c.Arguments, e.RiskClass)
			}
		}
	}
	return ""
}

func subsequence(want, have []string) bool {
	i := 0
	for _, h := range have {
		if i < len(want) && h == want[i] {
			i++
		}
	}
	return i == len(want)
}

func countCheck(what string, c *countSpec, n int) []string {
	var fails []string
	if c.Count != nil && n != *c.Count {
		fails = append(fails, fmt.Sprintf("%d %s, want %d", n, what, *c.Count))
	}
	if c.Min != nil && n < *c.Min {
		fails = append(fails, fmt.Sprintf("%d %s, want at least %d", n, what, *c.Min))
	}
	if c.Max != nil && n > *c.Max {
		fails = append(fails, fmt.Sprintf("%d %s, want at most %d", n, what, *c.Max))
	}
	return fails
}

func oneOf(what, got string, set []string) string {
	if len(set) == 0 || slices.Contains(set, got) {
		return ""
	}
	return fmt.Sprintf("%s %q is not one of %v", what, got, set)
}

func countExecutions(c *countSpec, all []execution) []string {
	var fails []string
	var re *regexp.Regexp
	if c.CommandMatches != "" {
		re = regexp.MustCompile(c.CommandMatches)
	}
	n := 0
	for _, e := range all {
		if (c.RiskClass != "" && e.RiskClass != c.RiskClass) || (re != nil && !re.MatchString(e.Command)) {
			continue
		}
		n++
		for _, f := range []string{oneOf("status", e.Status, c.Statuses), oneOf("risk class", e.RiskClass, c.RiskClasses),
			oneOf("authorised_by", e.AuthorisedBy, c.AuthorisedBy)} {
			if f != "" {
				fails = append(fails, fmt.Sprintf("execution `%s`: %s", e.Command, f))
			}
		}
	}
	return append(countCheck("executions", c, n), fails...)
}

func countApprovals(what string, c *countSpec, all []approval) []string {
	var fails []string
	var re *regexp.Regexp
	if c.CommandMatches != "" {
		re = regexp.MustCompile(c.CommandMatches)
	}
	n := 0
	for _, a := range all {
		if (c.RiskClass != "" && a.RiskClass != c.RiskClass) || (re != nil && !re.MatchString(a.Command)) {
			continue
		}
		n++
		for _, f := range []string{oneOf("status", a.Status, c.Statuses), oneOf("risk class", a.RiskClass, c.RiskClasses),
			oneOf("via", deref(a.Via), c.Via)} {
			if f != "" {
				fails = append(fails, fmt.Sprintf("approval `%s`: %s", a.Command, f))
			}
		}
	}
	return append(countCheck(what, c, n), fails...)
}

func countWindows(c *countSpec, all []window) []string {
	var fails []string
	for _, w := range all {
		if f := oneOf("kind", w.Kind, c.Kinds); f != "" {
			fails = append(fails, "window: "+f)
		}
		if f := oneOf("via", w.Via, c.Via); f != "" {
			fails = append(fails, "window: "+f)
		}
	}
	return append(countCheck("windows", c, len(all)), fails...)
}
