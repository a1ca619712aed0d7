package loop

import (
	"context"
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oikos-hq/oikos/agent/internal/apiclient"
	"github.com/oikos-hq/oikos/agent/internal/storage"
	"github.com/oikos-hq/oikos/agent/internal/tools"
)

// context builds the model's messages: the persona with a live fleet snapshot and the task's
// state, then the session's history with every earlier tool call and its whole result
// replayed once (the budget cuts what does not fit: fit.go), then the notes of this turn (assent the operator's message proved).
func (l *Loop) context(ctx context.Context, session string, notes []string) ([]openai.ChatCompletionMessage, error) {
	var sys strings.Builder
	sys.WriteString(l.soul)
	sys.WriteString("\n\n## Now\n\n")
	if snap := l.snapshot(ctx, session); snap != "" {
		fmt.Fprintf(&sys, "Fleet health (compact): %s\n", snap)
	}
	if s, err := l.tasks.Session(ctx, session); err == nil {
		if s.Goal != "" {
			fmt.Fprintf(&sys, "Current task: %q (status %s", s.Goal, s.Status)
			if s.PlanGeneration > 0 {
				fmt.Fprintf(&sys, ", plan generation %d", s.PlanGeneration)
			}
			sys.WriteString(").\n")
		}
		if s.PlanGeneration > 0 {
			if steps, err := storage.Steps(ctx, l.pool, session, s.PlanGeneration); err == nil {
				for _, st := range steps {
					fmt.Fprintf(&sys, "  step %d [%s] %s\n", st.Index+1, st.Status, st.Text)
				}
			}
		}
	}
	msgs := []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleSystem, Content: sys.String()}}
	hist, err := storage.History(ctx, l.pool, session, historyLimit)
	if err != nil {
		return nil, err
	}
	for _, m := range hist {
		switch m.Role {
		case "user":
			msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: m.Content})
		case "note":
			msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: "[Oikos] " + m.Content})
		case "assistant":
			if m.Status == storage.MessageStreaming {
				continue // this turn's own open message
			}
			content := m.Content
			if m.Status == storage.MessageInterrupted {
				// Also for an answer cut before any of it was stored: the model learns its turn
				// did not finish rather than seeing the question unanswered.
				content = strings.TrimLeft(content+"\n[this answer was cut short by a restart; its tool calls may not have finished — check before repeating them]", "\n")
			}
			if len(m.Calls) == 0 {
				if strings.TrimSpace(content) != "" {
					msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: content})
				}
				continue
			}
			a := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: content}
			for _, c := range m.Calls {
				args := string(c.Arguments)
				if args == "" {
					args = "{}"
				}
				a.ToolCalls = append(a.ToolCalls, openai.ToolCall{ID: c.ID, Type: openai.ToolTypeFunction,
					Function: openai.FunctionCall{Name: c.Name, Arguments: args}})
			}
			msgs = append(msgs, a)
			for _, c := range m.Calls {
				result := c.Result
				if result == "" {
					result = "[no result recorded: the call did not finish]"
				}
				msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: c.ID, Content: result})
			}
		}
	}
	for _, n := range notes {
		msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem, Content: "Oikos: " + n})
	}
	return msgs, nil
}

// snapshot is the compact fleet health for the system prompt ("" when the api cannot say).
func (l *Loop) snapshot(ctx context.Context, session string) string {
	h, err := apiclient.Decode[tools.HealthSummary](l.api.API().HealthSummary(ctx, nil, apiclient.As(l.cfg.AgentToken, session)...))
	if err != nil {
		l.log.Warn().Err(err).Msg("fleet snapshot for the system prompt")
		return ""
	}
	s := string(tools.Snapshot(h))
	if len(s) > snapshotBudget {
		s = s[:snapshotBudget]
	}
	return s
}
