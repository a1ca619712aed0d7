package chat_test

import (
	"fmt"
	"sort"
	"sync"
	"testing"

	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
	"github.com/oikos-hq/oikos/testkit/llmsim"
)

// The package's agents, one per script, are all started with the stack, before any test
// writes a session: an agent that starts follows again the executions every open chat session
// of the database handed off, and resumes the session when one ends (loop.Recover). With one
// agent per deployment that is what a restart needs; with one agent per script on one
// database, an agent started while another agent's session waits on an approval would resume
// that session too. So only TestAgentRestartMidTurn starts an agent later, and it runs before
// the parallel tests.

// scripted is a prestarted agent with its scripted model (model is nil when the evals run
// against a real provider).
type scripted struct {
	agent *agentProc
	model *llm
}

// testScripts are the Go tests' agents (on lab): name → llmsim script.
func testScripts() map[string]string {
	return map[string]string{
		"concurrent":  restartScript,
		"cli":         restartScript,
		"relay":       restartScript,
		"loose-yes":   destructiveScript,
		"injection":   injectionScript,
		"disconnect":  disconnectScript,
		"restart-old": slowScript,
		"prompt-size": promptSizeScript,
		"big-output":  bigOutputScript,
		"ctx-refused": bigOutputScript,
	}
}

// benchScripts are the benchmarks' agents (on benchLab, a stack of their own, so the
// figures are not those of a database with every test's agent listening to it).
func benchScripts() map[string]string {
	return map[string]string{
		"first-token": firstTokenScript,
		"sessions":    sessionsScript,
	}
}

// prestart starts the agents of scripts and, with evals, one per golden eval.
func (s *stack) prestart(t *e2estack.PackageTB, scripts map[string]string, evals bool) error {
	type job struct {
		name   string
		script *llmsim.Script
		o      agentOpts // set for a real provider
	}
	var jobs []job
	for name, src := range scripts {
		sc, err := llmsim.Parse([]byte(src))
		if err != nil {
			return fmt.Errorf("script %s: %w", name, err)
		}
		jobs = append(jobs, job{name: name, script: sc})
	}
	var evs []*evalFile
	if evals {
		var err error
		if evs, err = readEvals(); err != nil {
			return err
		}
	}
	live := evalProvider()
	for _, ev := range evs {
		j := job{name: "eval:" + ev.Name, script: ev.script}
		if live != nil {
			j = job{name: j.name, o: agentOpts{BaseURL: live.baseURL, Model: live.model, APIKey: live.apiKey}}
		}
		jobs = append(jobs, j)
	}
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].name < jobs[j].name })

	s.agents = map[string]*scripted{}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	sem := make(chan struct{}, 6)
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			sc := &scripted{}
			o := j.o
			if j.script != nil {
				m, err := newLLM(j.script)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				sc.model = m
				o = agentOpts{BaseURL: m.baseURL, Model: m.model}
			}
			a, err := s.launchAgent(o)
			mu.Lock()
			defer mu.Unlock()
			if sc.model != nil {
				t.Cleanup(sc.model.close)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("agent %s: %w", j.name, err))
				return
			}
			t.Cleanup(a.stop)
			sc.agent = a
			s.agents[j.name] = sc
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// scripted returns the prestarted agent name and its model, and routes sessions to it.
func (s *stack) scripted(tb testing.TB, name string, sessions ...string) (*agentProc, *llm) {
	tb.Helper()
	sc, ok := s.agents[name]
	if !ok {
		tb.Fatalf("no agent %q was started with the stack (testScripts, testdata/evals)", name)
	}
	for _, id := range sessions {
		s.router.assign(id, sc.agent)
	}
	return sc.agent, sc.model
}
