package loop

import (
	"context"
	"errors"
	"fmt"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oikos-hq/oikos/agent/internal/budget"
	"github.com/oikos-hq/oikos/agent/internal/llm"
)

// askFitted fits msgs to the context window (agent/internal/budget) and asks the model. A
// server that refuses the request as longer than its window (llama-server's
// exceed_context_size_error, vLLM's and OpenAI's messages) is asked once more with the
// request fitted harder to the figures it gave; *harder keeps them for the turn's later
// requests. A second refusal ends the turn with what to set.
func (l *Loop) askFitted(ctx context.Context, session string, msgs []openai.ChatCompletionMessage, withTools bool, harder **budget.Harder, sink Sink) (answer, error) {
	var refused *llm.ContextExceeded
	var last budget.Fitted
	for attempt := 0; ; attempt++ {
		fit, err := l.budget.Fit(msgs, withTools, *harder)
		if err != nil {
			if refused != nil {
				// The server's window is too small for even the compacted request.
				return answer{}, contextError(l.budget.Config(), refused, last)
			}
			return answer{}, err
		}
		last = fit
		l.log.Debug().Str("session", session).Int("tokens", fit.Tokens).Int("limit", fit.Limit).Int("messages", len(fit.Messages)).
			Int("tools", len(fit.Tools)).Strs("steps", fit.Steps).Msg("request fitted to the context window")
		ans, err := l.ask(ctx, fit.Messages, fit.Tools, withTools, sink)
		ce, exceeded := llm.AsContextExceeded(err)
		if !exceeded {
			return ans, err
		}
		cfg := l.budget.Config()
		if attempt > 0 {
			return ans, contextError(cfg, ce, fit)
		}
		l.log.Warn().Str("session", session).Int("server_window", ce.Window).Int("server_prompt", ce.Prompt).Int("estimate", fit.Tokens).
			Int("window", cfg.Window).Msg("the model server refused the request as too long: compacting harder and retrying once")
		sink(Event{"status", map[string]any{"state": "compacting",
			"message": "The model server says the request is longer than its context window; Nomos compacts the conversation and asks again."}})
		refused = ce
		*harder = &budget.Harder{Window: ce.Window, Prompt: ce.Prompt, Estimate: fit.Tokens}
	}
}

// contextError is the turn's end after a second context-exceeded refusal: the window the
// server has, the one configured, and what to set.
func contextError(cfg budget.Config, ce *llm.ContextExceeded, fit budget.Fitted) error {
	server := "the server did not say its window"
	if ce.Window > 0 {
		server = fmt.Sprintf("the server's window is %d tokens", ce.Window)
	}
	if ce.Prompt > 0 {
		server += fmt.Sprintf(" and it counted %d tokens in a prompt Nomos estimated at %d", ce.Prompt, fit.Tokens)
	}
	fix := "raise the server's context size (llama-server -c/--ctx-size, vLLM --max-model-len, Ollama num_ctx or OLLAMA_CONTEXT_LENGTH)"
	if ce.Window > 0 && ce.Window < budget.MinWindow {
		fix = fmt.Sprintf("the server's window is too small for Nomos, whose system prompt and core tools take about 2k tokens: %s to at least %d, and set OIKOS_LLM_CONTEXT_TOKENS to it", fix, budget.MinWindow)
	} else if ce.Window > 0 && ce.Window < cfg.Window {
		fix = fmt.Sprintf("set OIKOS_LLM_CONTEXT_TOKENS=%d (the server's window), or %s", ce.Window, fix)
	} else {
		fix = "lower OIKOS_LLM_CONTEXT_TOKENS or raise OIKOS_LLM_ANSWER_TOKENS, or " + fix
	}
	return errors.New("the model server refused the request as longer than its context window, also after compacting it (" +
		server + "; OIKOS_LLM_CONTEXT_TOKENS is " + fmt.Sprint(cfg.Window) + "): " + fix + ". Server: " + ce.Err.Message)
}
