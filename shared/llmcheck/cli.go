package llmcheck

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/oikos-hq/oikos/shared/apiclient"
)

// CLITimeout bounds the CLI's wait for the report: the agent answers once every probe ran
// (the api gives it 10 minutes), far longer than the 30 s other commands wait.
const CLITimeout = 11 * time.Minute

const usage = `usage: oikos llm check [--base-url URL] [--model M] [--provider P] [--api-key K] [--context-tokens N] [--timeout D] [--json]

Asks the agent to probe the model server it is configured with (OIKOS_LLM_* in the agent's
environment): models listed, server identity and context window, a plain answer, a streamed
answer, one tool-call round trip, reasoning. The flags check another server or model instead,
for this check only (the agent's own key is never sent to another --base-url). Exit 0 when
Nomos can work with the server, 1 when a probe failed or the api cannot be reached.`

// CLI is `oikos llm check` (args after "llm"): it reads the flags, asks the api through send
// (POST /api/v1/llm/check) and prints the report. It lives here, not in api/cmd/oikos, to keep
// that package under its size limit; the command there only supplies send. Exit 0 when the
// report passed, 1 when it failed or the api refused, 2 on a usage error or the api's 422.
func CLI(ctx context.Context, args []string, stdout, stderr io.Writer, send func(context.Context, apiclient.LLMCheckRequest) (json.RawMessage, error)) int {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	fs := flag.NewFlagSet("oikos llm check", flag.ContinueOnError)
	fs.SetOutput(stderr)
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
		fmt.Fprintln(stderr, usage)
		return 2
	}
	body := apiclient.LLMCheckRequest{BaseUrl: apiclient.Opt(*base), Model: apiclient.Opt(*model), ApiKey: apiclient.Opt(*key),
		ContextTokens: apiclient.Opt(*ctxTokens)}
	if *provider != "" {
		body.Provider = apiclient.Ptr(apiclient.LLMCheckRequestProvider(*provider))
	}
	if *timeout > 0 {
		body.TimeoutS = apiclient.Ptr(float32(timeout.Seconds()))
	}
	raw, err := send(ctx, body)
	if err != nil {
		fmt.Fprintf(stderr, "oikos llm check: %v\n", err)
		var ae *apiclient.APIError
		if errors.As(err, &ae) && ae.Status == http.StatusUnprocessableEntity {
			return 2
		}
		return 1
	}
	var rep Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		fmt.Fprintf(stderr, "oikos llm check: the api's report: %v\n", err)
		return 1
	}
	if *asJSON {
		fmt.Fprintf(stdout, "%s\n", raw)
	} else if err := rep.WriteText(stdout); err != nil {
		return 1
	}
	if !rep.OK {
		return 1
	}
	return 0
}
