package chat_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// firstTokenScript streams a short answer whose chunks leave llmsim 5 ms apart, so the first
// content chunk is well separated from the role chunk before it.
var firstTokenScript = script("e2e-first-token", `
  - name: answer
    when: {user_matches: "^first token (\\d+)"}
    reply:
      content: "First token {{match:1}}: streamed."
      chunk_size: 16
      chunk_delay_ms: 5`)

// sessionsScript: every turn calls one tool (classify_command, which asks the api) with the
// session's and the turn's tag in its arguments, then answers naming that tag.
var sessionsScript = script("e2e-sessions", `
  - name: answer
    when: {user_matches: &q "^bench (s\\d+-t\\d+):", tool_result_of: classify_command}
    reply:
      content: "{{match:1}} done: echo is {{arg:risk_class|?}}."
  - name: call
    when: {user_matches: *q, turn_calls_at_most: 0}
    reply:
      content: "{{match:1}}: classifying."
      tool_calls:
        - name: classify_command
          arguments: {command: "echo {{match:1}}"}`)

// promptSizeScript answers anything with one word.
var promptSizeScript = script("e2e-prompt-size", `
  - name: any
    when: {}
    reply: {content: "ok"}`)

// BenchmarkFirstTokenToDelta: the time from the model's first content chunk leaving llmsim to
// the client reading the first delta event through the api (go-openai's stream, the loop, the
// agent's event stream, the api's relay). Goal: p99 ≤ 5 ms. One turn per op; for a p99 over
// enough turns run it with -benchtime=300x.
func BenchmarkFirstTokenToDelta(b *testing.B) {
	s := benchLab(b)
	agent, m := s.scripted(b, "first-token")
	var added []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sid := newSession("bench-first-token")
		s.router.assign(sid, agent)
		msg := fmt.Sprintf("first token %d", i)
		tr := s.chat(b, s.operator, sid, msg)
		if tr.Finish != "stop" || tr.FirstDelta.IsZero() {
			b.Fatalf("turn %d: %v %q", i, compact(tr.names()), tr.Errors)
		}
		req := lastRequestFor(m, msg)
		if req == nil || req.FirstContent.IsZero() {
			b.Fatalf("turn %d: llmsim sent no content", i)
		}
		added = append(added, tr.FirstDelta.Sub(req.FirstContent))
	}
	b.StopTimer()
	p50, p99 := percentile(added, 50), percentile(added, 99)
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	b.Logf("first model token → client delta over %d turns: p50 %.2f ms, p99 %.2f ms, max %.2f ms (goal p99 ≤ 5 ms)",
		len(added), ms(p50), ms(p99), ms(slices.Max(added)))
}

// BenchmarkConcurrentSessions: 50 sessions × 10 turns, the sessions at once, the turns of one
// session in order. Each turn asks the model twice (a tool call, then the answer) and calls one
// tool through the api. Reported: the turn as the client saw it minus the model's own time for
// that turn's requests (llmsim alone), p50 and p99; and no session's transcript may hold
// anything of another's.
//
// sessions=1 is the same workload one session at a time: the added latency of a turn with
// nothing else running, against which the 50-session figure shows the queueing.
func BenchmarkConcurrentSessions(b *testing.B) {
	for _, n := range []int{1, 50} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) { benchSessions(b, n, 10) })
	}
}

func benchSessions(b *testing.B, sessions, turns int) {
	s := benchLab(b)
	agent, m := s.scripted(b, "sessions")
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		run := newSession("run") // makes this run's messages unique: the model's requests are told apart by them
		ids := make([]string, sessions)
		for i := range ids {
			ids[i] = newSession(fmt.Sprintf("bench-%d-s%d", sessions, i))
			s.router.assign(ids[i], agent)
		}
		type sample struct{ turn, model time.Duration }
		var mu sync.Mutex
		var samples []sample
		var wg sync.WaitGroup
		start := time.Now()
		for i, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < turns; j++ {
					tag := fmt.Sprintf("s%d-t%d", i, j)
					msg := "bench " + tag + ": classify an echo (" + run + ")"
					tr := s.chat(b, s.operator, id, msg)
					if tr.Finish != "stop" || !strings.Contains(tr.text(), tag+" done") {
						b.Errorf("%s: %v %q %q", tag, compact(tr.names()), tr.Errors, tr.text())
						return
					}
					var model time.Duration
					for _, r := range requestsFor(m, msg) {
						model += r.Done.Sub(r.At)
					}
					mu.Lock()
					samples = append(samples, sample{tr.End.Sub(tr.Start), model})
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		wall := time.Since(start)
		if b.Failed() {
			return
		}
		var added, alone, whole []time.Duration
		for _, x := range samples {
			added = append(added, x.turn-x.model)
			alone = append(alone, x.model)
			whole = append(whole, x.turn)
		}
		b.ReportMetric(ms(percentile(added, 50)), "added-p50-ms")
		b.ReportMetric(ms(percentile(added, 99)), "added-p99-ms")
		b.ReportMetric(ms(percentile(alone, 99)), "llmsim-p99-ms")
		b.ReportMetric(float64(len(samples))/wall.Seconds(), "turns/s")
		b.Logf("%d sessions × %d turns in %s (%.0f turns/s): turn p50 %.1f ms p99 %.1f ms; llmsim alone p50 %.2f ms p99 %.2f ms; added p50 %.1f ms p99 %.1f ms",
			sessions, turns, wall.Round(time.Millisecond), float64(len(samples))/wall.Seconds(), ms(percentile(whole, 50)), ms(percentile(whole, 99)),
			ms(percentile(alone, 50)), ms(percentile(alone, 99)), ms(percentile(added, 50)), ms(percentile(added, 99)))
		checkNoLeaks(b, s, ids, turns)
	}
}

// checkNoLeaks: each session's transcript holds its own turns only: its user messages, its
// answers and its tool calls all carry its own tag and no other session's.
func checkNoLeaks(b *testing.B, s *stack, ids []string, turns int) {
	tagRe := regexp.MustCompile(`s(\d+)-t(\d+)`)
	for i, id := range ids {
		v := s.session(b, id)
		own := fmt.Sprintf("s%d", i)
		users, calls := 0, 0
		check := func(where, text string) {
			for _, mm := range tagRe.FindAllStringSubmatch(text, -1) {
				if "s"+mm[1] != own {
					b.Errorf("session %s (%s): %s holds %s", id, own, where, mm[0])
				}
			}
		}
		for _, msg := range v.Messages {
			if msg.Role == "user" {
				users++
			}
			check("message "+msg.Role, msg.Content)
			for _, c := range msg.ToolCalls {
				calls++
				check("tool call "+c.Name, string(c.Arguments))
			}
		}
		if users != turns || calls != turns {
			b.Errorf("session %s: %d user messages and %d tool calls, want %d of each", id, users, calls, turns)
		}
	}
}

// TestPromptSize: the system prompt and the tool schemas Nomos sends the model fit in 8k
// tokens (characters / 4, as llmsim counts them), measured on the request llmsim receives.
func TestPromptSize(t *testing.T) {
	t.Parallel()
	s := lab(t)
	sid := newSession("prompt-size")
	_, m := s.scripted(t, "prompt-size", sid)
	const msg = "how big is your prompt?"
	if tr := s.chat(t, s.operator, sid, msg); tr.Finish != "stop" {
		t.Fatalf("%v %q", compact(tr.names()), tr.Errors)
	}
	req := lastRequestFor(m, msg)
	if req == nil {
		t.Fatal("llmsim received no request")
	}
	system := len(req.system())
	tools, err := json.Marshal(req.Tools)
	if err != nil {
		t.Fatal(err)
	}
	total := (system + len(tools) + 3) / 4
	t.Logf("system prompt %d chars (%d tokens), %d tool schemas %d chars (%d tokens): %d tokens in all (budget 8000)",
		system, (system+3)/4, len(req.Tools), len(tools), (len(tools)+3)/4, total)
	if total > 8000 {
		t.Errorf("the system prompt and tool schemas are %d tokens; the budget is 8000", total)
	}
	if len(req.Tools) == 0 || system == 0 {
		t.Errorf("the request has %d tools and a %d-character system prompt", len(req.Tools), system)
	}
}

// requestsFor are the model requests whose latest user message is msg.
func requestsFor(m *llm, msg string) []*llmRequest {
	var out []*llmRequest
	for _, r := range m.requests() {
		if r.lastUser() == msg {
			out = append(out, r)
		}
	}
	return out
}

func lastRequestFor(m *llm, msg string) *llmRequest {
	rs := requestsFor(m, msg)
	if len(rs) == 0 {
		return nil
	}
	return rs[len(rs)-1]
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	if i < 1 {
		i = 1
	}
	return s[i-1]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
