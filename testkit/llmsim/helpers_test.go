package llmsim_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oikos-hq/oikos/testkit/llmsim"
)

func mustParse(t *testing.T, yaml string) *llmsim.Script {
	t.Helper()
	s, err := llmsim.Parse([]byte(yaml))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return s
}

func client(baseURL, key string) *openai.Client {
	cfg := openai.DefaultConfig(key)
	cfg.BaseURL = baseURL
	return openai.NewClientWithConfig(cfg)
}

// start serves yaml and returns a client for it.
func start(t *testing.T, yaml string, opts ...llmsim.Options) (*openai.Client, string) {
	t.Helper()
	base, _ := llmsim.Start(t, mustParse(t, yaml), opts...)
	key := "test-key"
	if len(opts) > 0 && opts[0].APIKey != "" {
		key = opts[0].APIKey
	}
	return client(base, key), base
}

// streamed is a streamed answer put back together the way the agent's loop does it, with
// what the chunks looked like.
type streamed struct {
	content, refusal string
	finish           string
	calls            []streamedCall
	chunks           int // chunk objects received
	contentChunks    int
	firstRole        string
	usage            *openai.Usage
	usageChoices     int // choices in the usage chunk
	ids              map[string]bool
}

type streamedCall struct {
	id, typ, name, args string
	deltas              int // deltas after the first (arguments pieces)
	firstHadArgs        bool
}

func streamChat(t *testing.T, c *openai.Client, req openai.ChatCompletionRequest) (streamed, error) {
	t.Helper()
	st, err := c.CreateChatCompletionStream(context.Background(), req)
	if err != nil {
		return streamed{}, err
	}
	defer st.Close()
	var out streamed
	out.ids = map[string]bool{}
	byIndex := map[int]*streamedCall{}
	maxIndex := -1
	for {
		ch, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, err
		}
		out.chunks++
		out.ids[ch.ID] = true
		if ch.Usage != nil {
			out.usage = ch.Usage
			out.usageChoices = len(ch.Choices)
		}
		for _, choice := range ch.Choices {
			d := choice.Delta
			if out.chunks == 1 {
				out.firstRole = d.Role
			}
			if d.Content != "" {
				out.content += d.Content
				out.contentChunks++
			}
			out.refusal += d.Refusal
			for _, tc := range d.ToolCalls {
				if tc.Index == nil {
					t.Fatalf("a tool call delta without index: %+v", tc)
				}
				p := byIndex[*tc.Index]
				if p == nil {
					p = &streamedCall{id: tc.ID, typ: string(tc.Type), name: tc.Function.Name, firstHadArgs: tc.Function.Arguments != ""}
					byIndex[*tc.Index] = p
					if *tc.Index > maxIndex {
						maxIndex = *tc.Index
					}
				} else {
					if tc.ID != "" || tc.Function.Name != "" {
						t.Fatalf("id or name repeated after the first delta of call %d: %+v", *tc.Index, tc)
					}
					p.deltas++
				}
				p.args += tc.Function.Arguments
			}
			if choice.FinishReason != "" {
				out.finish = string(choice.FinishReason)
			}
		}
	}
	for i := 0; i <= maxIndex; i++ {
		p := byIndex[i]
		if p == nil {
			t.Fatalf("tool call indexes are not 0..%d: %d missing", maxIndex, i)
		}
		out.calls = append(out.calls, *p)
	}
	return out, nil
}

func user(text string) openai.ChatCompletionMessage {
	return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: text}
}

func system(text string) openai.ChatCompletionMessage {
	return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem, Content: text}
}

// call is an assistant message with tool calls given as id, name, arguments triples.
func call(content string, triples ...string) openai.ChatCompletionMessage {
	m := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: content}
	for i := 0; i+2 < len(triples); i += 3 {
		m.ToolCalls = append(m.ToolCalls, openai.ToolCall{ID: triples[i], Type: openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: triples[i+1], Arguments: triples[i+2]}})
	}
	return m
}

func result(id, content string) openai.ChatCompletionMessage {
	return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: id, Content: content}
}

func tools(names ...string) []openai.Tool {
	var out []openai.Tool
	for _, n := range names {
		out = append(out, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: n, Description: n, Parameters: []byte(`{"type":"object"}`)}})
	}
	return out
}

// post sends body to path and answers the status and the body.
func post(t *testing.T, url, key, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := io.Copy(&b, resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b.Bytes()
}

func apiError(t *testing.T, err error) *openai.APIError {
	t.Helper()
	var e *openai.APIError
	if !errors.As(err, &e) {
		t.Fatalf("want an *openai.APIError, got %T %v", err, err)
	}
	return e
}
