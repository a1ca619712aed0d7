package llmsim_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oikos-hq/oikos/testkit/llmsim"
)

var nomosTools = tools("set_goal", "propose_plan", "update_plan_step", "complete_task", "get_health_summary",
	"get_entity", "run", "upsert_knowledge", "search_knowledge", "wait_execution")

// fakeAgent plays Nomos's loop against the demo script: it streams an answer, runs the calls
// with canned results, and asks again until an answer has no calls.
type fakeAgent struct {
	t       *testing.T
	c       *openai.Client
	msgs    []openai.ChatCompletionMessage
	results func(name, args string) string
	calls   []string // name(args) of every call, in order
	n       int
}

func (a *fakeAgent) say(text string, notes ...string) string {
	a.t.Helper()
	a.calls = nil
	kept := a.msgs[:0:0]
	for _, m := range a.msgs { // the loop's notes belong to their turn only
		if !(m.Role == "system" && strings.HasPrefix(m.Content, "Oikos: ")) {
			kept = append(kept, m)
		}
	}
	a.msgs = append(kept, user(text))
	for _, n := range notes {
		a.msgs = append(a.msgs, system("Oikos: "+n))
	}
	for i := 0; i < 12; i++ {
		got := answerOf(a.t, a.c, openai.ChatCompletionRequest{Model: "nomos-sim", Messages: a.msgs, Tools: nomosTools,
			StreamOptions: &openai.StreamOptions{IncludeUsage: true}})
		if len(got.calls) == 0 {
			if got.finish != "stop" {
				a.t.Fatalf("final answer finished %q", got.finish)
			}
			if got.content != "" {
				a.msgs = append(a.msgs, openai.ChatCompletionMessage{Role: "assistant", Content: got.content})
			}
			return got.content
		}
		if got.finish != "tool_calls" {
			a.t.Fatalf("calls finished %q", got.finish)
		}
		asst := openai.ChatCompletionMessage{Role: "assistant", Content: got.content}
		var results []openai.ChatCompletionMessage
		for _, c := range got.calls {
			if !json.Valid([]byte(c.args)) {
				a.t.Fatalf("%s arguments are not JSON: %s", c.name, c.args)
			}
			a.n++
			id := fmt.Sprintf("uuid-%d", a.n) // the loop replaces the model's ids with its own
			asst.ToolCalls = append(asst.ToolCalls, openai.ToolCall{ID: id, Type: "function", Function: openai.FunctionCall{Name: c.name, Arguments: c.args}})
			results = append(results, result(id, a.results(c.name, c.args)))
			a.calls = append(a.calls, c.name+c.args)
		}
		a.msgs = append(append(a.msgs, asst), results...)
	}
	a.t.Fatal("the demo does not end its turn")
	return ""
}

func (a *fakeAgent) names() string {
	var out []string
	for _, c := range a.calls {
		out = append(out, c[:strings.IndexByte(c, '{')])
	}
	return strings.Join(out, " ")
}

func demoResults(restart string) func(name, args string) string {
	return func(name, args string) string {
		switch name {
		case "get_health_summary":
			return `{"counts":{"up":11,"degraded":1,"down":1,"unknown":0,"stale":2},"entities":[{"slug":"lxc:jellyfin","health":"down"},{"slug":"vm:nas","health":"degraded"}]}`
		case "run":
			var in struct{ Target, Command string }
			_ = json.Unmarshal([]byte(args), &in)
			switch in.Command {
			case "uptime":
				return `{"id":"e1","target":"` + in.Target + `","command":"uptime","status":"completed","exit_code":0,"output":" 10:02:11 up 3 days,  4:05,  0 users,  load average: 0.10, 0.05, 0.01\n"}`
			case "systemctl restart jellyfin":
				return restart
			}
			return `{"id":"e2","status":"completed","exit_code":0,"output":"active (running)"}`
		case "propose_plan":
			return `{"generation":1,"steps":[],"next":"Plan recorded."}`
		}
		return `{"ok":true}`
	}
}

func TestDemoScript(t *testing.T) {
	t.Parallel()
	demo, err := llmsim.Demo()
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := llmsim.Load("scripts/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(onDisk.RuleNames(), ",") != strings.Join(demo.RuleNames(), ",") {
		t.Fatal("the embedded demo is scripts/demo.yaml")
	}
	if raw, _ := os.ReadFile("scripts/demo.yaml"); string(raw) != string(llmsim.DemoYAML()) {
		t.Fatal("DemoYAML is not scripts/demo.yaml")
	}
	base, _ := llmsim.Start(t, demo)
	c := client(base, "k")
	completed := `{"id":"e3","target":"lxc:jellyfin","command":"systemctl restart jellyfin","status":"completed","exit_code":0}`

	a := &fakeAgent{t: t, c: c, msgs: []openai.ChatCompletionMessage{system("You are Nomos.")}, results: demoResults(completed)}
	text := a.say("how is the fleet?")
	if a.names() != "get_health_summary" || a.calls[0] != `get_health_summary{"health":"down,degraded"}` ||
		text != "Fleet health: 11 up, 1 degraded, 1 down, 2 stale, 0 unknown. Worst first: lxc:jellyfin." {
		t.Fatalf("health: %v → %q", a.calls, text)
	}

	text = a.say("what is the uptime of jellyfin?")
	if a.names() != "run" || a.calls[0] != `run{"target":"lxc:jellyfin","command":"uptime","purpose":"read jellyfin's uptime for the operator"}` ||
		!strings.HasPrefix(text, "jellyfin answered `uptime` with:  10:02:11 up 3 days") {
		t.Fatalf("uptime: %v → %q", a.calls, text)
	}

	text = a.say("restart jellyfin")
	if a.names() != "set_goal search_knowledge propose_plan" || !strings.Contains(text, `Answer "yes" to approve the plan.`) ||
		a.calls[2] != `propose_plan{"steps":["Inspect jellyfin's status on lxc:jellyfin (systemctl status jellyfin, read-only)","Restart jellyfin with systemctl restart jellyfin","Write back the outcome with upsert_knowledge"]}` {
		t.Fatalf("restart: %v → %q", a.calls, text)
	}
	afterPlan := append([]openai.ChatCompletionMessage(nil), a.msgs...)

	// The operator approves; the restart runs in the plan's window.
	text = a.say("yes", "the operator approved plan generation 1: its config_mutation steps now run without asking again for a while.")
	want := "update_plan_step run update_plan_step update_plan_step run update_plan_step update_plan_step upsert_knowledge complete_task"
	if a.names() != want || !strings.HasPrefix(text, "Done: jellyfin on lxc:jellyfin was restarted") {
		t.Fatalf("approved: %s → %q", a.names(), text)
	}
	if a.calls[0] != `update_plan_step{"step":1,"status":"running"}` || a.calls[1] != `run{"target":"lxc:jellyfin","command":"systemctl status jellyfin --no-pager","purpose":"inspect jellyfin before restarting it"}` ||
		a.calls[4] != `run{"target":"lxc:jellyfin","command":"systemctl restart jellyfin","purpose":"restart jellyfin, step 2 of the approved plan"}` ||
		!strings.HasPrefix(a.calls[8], `complete_task{"outcome":"success"`) {
		t.Fatalf("approved calls: %v", a.calls)
	}

	// Again from the plan, but the restart queues for approval; it ends later and the loop
	// resumes with the agent's note.
	q := &fakeAgent{t: t, c: c, msgs: afterPlan, n: 100,
		results: demoResults(`{"execution_id":"e9","status":"pending_approval","risk_class":"reversible_low","approval_id":"ap1"}`)}
	text = q.say("go ahead")
	if q.names() != "update_plan_step run update_plan_step update_plan_step run" || !strings.Contains(text, "waits for your approval (risk class reversible_low)") {
		t.Fatalf("queued: %s → %q", q.names(), text)
	}
	text = q.say("approved", "the operator's message approved `systemctl restart jellyfin` on lxc:jellyfin (reversible_low); it runs now and its result comes back to this session.")
	if len(q.calls) != 0 || !strings.Contains(text, "The restart runs now") {
		t.Fatalf("approval relayed: %v → %q", q.calls, text)
	}
	text = q.say("[Oikos] execution e9 on lxc:jellyfin ended: completed (exit code 0). Read it with get_execution and continue the task from where it stood.")
	if q.names() != "update_plan_step update_plan_step upsert_knowledge complete_task" || !strings.HasPrefix(text, "Done:") {
		t.Fatalf("resumed: %s → %q", q.names(), text)
	}

	// Anything else gets the fallback.
	if text = a.say("sing me a song"); len(a.calls) != 0 || !strings.HasPrefix(text, "I have nothing scripted for that.") {
		t.Fatalf("fallback: %v → %q", a.calls, text)
	}
}
