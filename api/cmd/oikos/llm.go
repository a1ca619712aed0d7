package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"time"

	"github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/shared/llmcheck"
)

const llmUsage = `usage: oikos llm check [--base-url URL] [--model M] [--provider P] [--api-key K] [--context-tokens N] [--timeout D] [--json]

Asks the agent to probe the model server it is configured with (OIKOS_LLM_* in the agent's
environment): models listed, server identity and context window, a plain answer, a streamed
answer, one tool-call round trip, reasoning. The flags check another server or model instead,
for this check only (the agent's own key is never sent to another --base-url). Exit 0 when
Nomos can work with the server, 1 when a probe failed or the api cannot be reached.`

// runLLM is `oikos llm check` (issue #31, "Doctor"): the probes run in the agent, which holds
// the model's configuration and Nomos's wire client (agent/internal/llmcheck); this command
// only asks through the api and prints the report.
func runLLM(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintln(env.Stderr, llmUsage)
		return 2
	}
	fs := flag.NewFlagSet("oikos llm check", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	var body apiclient.LLMCheckRequest
	base := fs.String("base-url", "", "check this OpenAI-compatible base URL instead of the agent's OIKOS_LLM_BASE_URL")
	model := fs.String("model", "", "check this model instead of OIKOS_LLM_MODEL")
	provider := fs.String("provider", "", "the preset to judge it by: ollama, llamacpp, vllm, lmstudio, openai")
	key := fs.String("api-key", "", "the key to send to --base-url")
	ctxTokens := fs.Int("context-tokens", 0, "the window to compare with instead of OIKOS_LLM_CONTEXT_TOKENS")
	timeout := fs.Duration("timeout", 0, "bound of each probe (0: the agent's, 45s; at most 5m)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *ctxTokens < 0 || *timeout < 0 || *timeout > 5*time.Minute {
		fmt.Fprintln(env.Stderr, llmUsage)
		return 2
	}
	body.BaseUrl, body.Model, body.ApiKey = apiclient.Opt(*base), apiclient.Opt(*model), apiclient.Opt(*key)
	if *provider != "" {
		body.Provider = apiclient.Ptr(apiclient.LLMCheckRequestProvider(*provider))
	}
	if *ctxTokens > 0 {
		body.ContextTokens = ctxTokens
	}
	if *timeout > 0 {
		s := float32(timeout.Seconds())
		body.TimeoutS = &s
	}
	// The agent answers once every probe ran: longer than the 30 s other commands wait.
	long := *env
	hc := http.Client{Timeout: 11 * time.Minute}
	if env.HTTP != nil {
		hc = *env.HTTP
		hc.Timeout = 11 * time.Minute
	}
	long.HTTP = &hc
	var raw json.RawMessage
	if err := long.do(func(c *apiclient.Client) (*http.Response, error) { return c.CheckModelServer(ctx, body) }, &raw); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.Status == http.StatusUnprocessableEntity {
			fmt.Fprintf(env.Stderr, "oikos llm check: %v\n", err)
			return 2
		}
		fmt.Fprintf(env.Stderr, "oikos llm check: %v\n", err)
		return 1
	}
	var rep llmcheck.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		fmt.Fprintf(env.Stderr, "oikos llm check: the api's report: %v\n", err)
		return 1
	}
	if *asJSON {
		fmt.Fprintf(env.Stdout, "%s\n", raw)
	} else if err := rep.WriteText(env.Stdout); err != nil {
		return 1
	}
	if !rep.OK {
		return 1
	}
	return 0
}
