package tools

import (
	"context"
	"errors"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/oikos-hq/oikos/agent/internal/budget"
	"github.com/oikos-hq/oikos/agent/internal/storage"
)

type outputIn struct {
	ID     string `json:"id" jsonschema:"the tool call id the cut result names"`
	Offset int    `json:"offset,omitempty" jsonschema:"byte offset to read from (the cut result names the next one)"`
}

// DefaultOutputPage is a get_output page when Deps.OutputPage is unset: what fits a result's
// budget in an 8k window (budget.Config.Page).
const DefaultOutputPage = 5120

// outputTools is get_output: the model reads, page by page, a tool result the context budget
// cut (agent/internal/budget). The full text is the call's tool_calls row, read within the
// caller's session only: another session's call is "no such call".
func outputTools() []*Tool {
	return []*Tool{
		def(budget.GetOutput, "Read more of a tool result that was cut to fit the context window: the text from offset, one page.",
			Hints{ReadOnly: true, Idempotent: true}, "text",
			func(s *jsonschema.Schema) { bounds(s, "offset", 0, 1<<40); maxLen(s, "id", 100) },
			func(ctx context.Context, c *Call, in outputIn) Result {
				_, text, err := storage.ToolResult(ctx, c.deps.Pool, c.Session.ID, in.ID)
				if errors.Is(err, storage.ErrNotFound) {
					return Errorf("get_output: this session has no tool call %q; use the id a cut result names", in.ID)
				}
				if err != nil {
					return Errorf("get_output: %v", err)
				}
				page := c.deps.OutputPage
				if page <= 0 {
					page = DefaultOutputPage
				}
				return Result{Text: budget.Page(in.ID, text, in.Offset, page)}
			}),
	}
}
