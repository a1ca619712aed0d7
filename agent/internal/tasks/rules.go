package tasks

import (
	"regexp"
	"strings"

	"github.com/oikos-hq/oikos/agent/internal/storage"
)

// A plan's first step gathers what is known before anything changes; its last step writes
// what was learned back into the graph and the knowledge base, so the next task starts from
// it (docs/behaviours.md A3). Both are recognised by their leading verbs and key phrases,
// deterministically: a model that skips either gets told which and how to fix it.
var (
	researchStep = regexp.MustCompile(`(?i)^\W*(research|investigate|inspect|check|read|gather|look|review|examine|query|search|find|diagnose|verify|survey|audit|list|discover|explore|assess|analy[sz]e|collect|identify|confirm|determine|study|map|trace|pre-?plan|understand)\b`)
	writeBack    = regexp.MustCompile(`(?i)\b(write[- ]?back|write (it |this |that |the \w+ |findings |results )?(back|down|up)|record|document|upsert_knowledge|update_entity_attributes|create_relationship|knowledge|runbook|update the (graph|entity|inventory|notes?)|note (the|what|findings)|save (the )?(findings|what)|log (the )?(findings|outcome))\b`)
)

// checkPlan validates a proposal and returns its steps trimmed.
func checkPlan(steps []string) ([]string, error) {
	if len(steps) < 2 {
		return nil, invalid("a plan needs at least two steps: first research (read-only), last write back what was learned (upsert_knowledge, update_entity_attributes)")
	}
	if len(steps) > MaxSteps {
		return nil, invalid("the plan has %d steps; keep it to %d or fewer", len(steps), MaxSteps)
	}
	out := make([]string, len(steps))
	for i, s := range steps {
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, invalid("step %d is empty", i+1)
		}
		if len(s) > MaxStepLen {
			return nil, invalid("step %d is %d bytes; keep each step under %d", i+1, len(s), MaxStepLen)
		}
		out[i] = s
	}
	if !researchStep.MatchString(out[0]) {
		return nil, invalid("the first step must be research, read-only, starting with a verb such as Inspect, Check or Investigate (got %q)", out[0])
	}
	if !writeBack.MatchString(out[len(out)-1]) {
		return nil, invalid("the last step must write back what was learned, e.g. \"Write back: record the findings with upsert_knowledge and update_entity_attributes\" (got %q)", out[len(out)-1])
	}
	return out, nil
}

// Blocker phrases, checked in this order against the completion summary and the last
// assistant text; the first that matches names the blocker.
var blockerRules = []struct {
	blocker string
	re      *regexp.Regexp
}{
	{BlockerApprovalTimeout, regexp.MustCompile(`(?i)approv\w*\W+(\w+\W+){0,6}?(time[sd]?[- ]?out|timed out|expired|no (response|answer|decision)|never came|still pending|not (yet )?(approved|decided))|(waiting|waited) (on|for) (an? |the )?(operator('s)? )?approval`)},
	{BlockerUserAbandoned, regexp.MustCompile(`(?i)\b(abandon\w*|operator (stopped|cancel+ed|declined|asked (me )?to stop)|user (stopped|cancel+ed|left)|cancel+ed by|no longer needed|stopped by the operator|denied by the operator|operator denied)\b`)},
	{BlockerClassifierOverreach, regexp.MustCompile(`(?i)\b(classifi\w+|risk class|misclassif\w*|gate (refused|escalated|blocked)|refused by the gate|escalated to (destructive|config_mutation)|over-?reach)\b`)},
	{BlockerModelRefusal, regexp.MustCompile(`(?i)\b(i (can(no|')t|won't|will not|am unable to|must decline to) (help|do|assist|comply)|i refuse|against (my|the) (policy|guidelines)|not able to assist)\b`)},
	{BlockerToolError, regexp.MustCompile(`(?i)\b(error|failed|failure|exit (code|status) [1-9]|timed out|timeout|unreachable|permission denied|not found|refused)\b`)},
}

// DeriveBlocker names why a task did not succeed, from the completion summary, the last
// assistant text and the session's tool calls; "" when nothing says.
func DeriveBlocker(summary, lastAssistant string, calls []storage.ToolCall) string {
	text := summary + "\n" + lastAssistant
	for _, r := range blockerRules {
		if r.re.MatchString(text) {
			return r.blocker
		}
	}
	for i := len(calls) - 1; i >= 0 && i >= len(calls)-3; i-- {
		if calls[i].IsError {
			return BlockerToolError
		}
	}
	return ""
}
