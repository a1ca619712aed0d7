package llmsim_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oikos-hq/oikos/testkit/llmsim"
)

const basicScript = `
model: sim
models: [sim-2]
rules:
  - name: long-text
    when: {user_matches: "(?i)tell me"}
    reply:
      content: "The fleet is healthy: twelve guests up, nothing degraded, backups fresh — all good <ok> & done."
  - name: two-calls
    when: {user_matches: "parallel", has_tools: true}
    reply:
      content: "Checking both."
      tool_calls:
        - name: get_entity
          arguments: {ref: "lxc:jellyfin", note: "quote \" and newline\n and <html> & more"}
        - name: run
          arguments:
            target: "lxc:jellyfin"
            command: "systemctl status jellyfin --no-pager"
            purpose: "inspect"
            timeout_seconds: 30
            flags: [true, null, 1.5]
  - name: nothing
    when: {user_matches: "^empty$"}
    reply: {empty: true}
  - name: no
    when: {user_matches: "^refuse$"}
    reply: {refusal: "I can't help with that, {{last_user}}."}
  - name: boom
    when: {user_matches: "^boom$"}
    reply: {error: {status: 500, message: "the simulated provider fell over"}}
  - name: slow-down
    when: {user_matches: "^ratelimit$"}
    reply: {error: {status: 429, message: "slow down", retry_after_s: 7}}
  - name: cut
    when: {user_matches: "^cut$"}
    reply: {content: "half an answ", finish_reason: length}
  - name: raw
    when: {user_matches: "^raw$"}
    reply:
      tool_calls:
        - {name: run, arguments_raw: '{"target": "lxc:{{last_user}}"'}
fallback:
  content: "nothing scripted for: {{last_user}}"
`

func TestStreamedTextComesInSeveralChunks(t *testing.T) {
	t.Parallel()
	c, _ := start(t, basicScript)
	want := "The fleet is healthy: twelve guests up, nothing degraded, backups fresh — all good <ok> & done."
	got, err := streamChat(t, c, openai.ChatCompletionRequest{Model: "sim", Messages: []openai.ChatCompletionMessage{user("Tell me about the fleet")}})
	if err != nil {
		t.Fatal(err)
	}
	if got.content != want || got.finish != "stop" || got.firstRole != "assistant" || len(got.calls) != 0 {
		t.Fatalf("streamed answer: %+v", got)
	}
	if wantChunks := (len([]rune(want)) + 11) / 12; got.contentChunks != wantChunks {
		t.Fatalf("content in %d chunks, want %d of 12 characters", got.contentChunks, wantChunks)
	}
	if len(got.ids) != 1 {
		t.Fatalf("every chunk carries the same completion id: %v", got.ids)
	}
	if got.usage != nil {
		t.Fatal("no usage chunk without stream_options.include_usage")
	}

	// The same through the non-streaming call, on the other model name.
	resp, err := c.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "sim-2", Messages: []openai.ChatCompletionMessage{user("tell me")}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Object != "chat.completion" || len(resp.Choices) != 1 || resp.Choices[0].Message.Content != want ||
		resp.Choices[0].FinishReason != openai.FinishReasonStop || resp.Choices[0].Message.Role != "assistant" || resp.Model != "sim-2" {
		t.Fatalf("completion: %+v", resp)
	}
	if resp.Usage.CompletionTokens != (len([]rune(want))+3)/4 || resp.Usage.PromptTokens != 2 || resp.Usage.TotalTokens != resp.Usage.PromptTokens+resp.Usage.CompletionTokens {
		t.Fatalf("usage: %+v", resp.Usage)
	}
}

func TestChunkSizeOption(t *testing.T) {
	t.Parallel()
	c, _ := start(t, basicScript, llmsim.Options{ChunkSize: 5})
	got, err := streamChat(t, c, openai.ChatCompletionRequest{Model: "sim", Messages: []openai.ChatCompletionMessage{user("unscripted")}})
	if err != nil {
		t.Fatal(err)
	}
	if got.content != "nothing scripted for: unscripted" || got.contentChunks != 7 {
		t.Fatalf("fallback in chunks of 5: %d chunks, %q", got.contentChunks, got.content)
	}
}

func TestParallelToolCallsStreamByIndex(t *testing.T) {
	t.Parallel()
	c, _ := start(t, basicScript)
	req := openai.ChatCompletionRequest{Model: "sim", Messages: []openai.ChatCompletionMessage{system("you are Nomos"), user("parallel please")},
		Tools: tools("get_entity", "run"), StreamOptions: &openai.StreamOptions{IncludeUsage: true}}
	got, err := streamChat(t, c, req)
	if err != nil {
		t.Fatal(err)
	}
	if got.content != "Checking both." || got.finish != "tool_calls" || len(got.calls) != 2 {
		t.Fatalf("answer: %+v", got)
	}
	wantArgs := []string{
		`{"ref":"lxc:jellyfin","note":"quote \" and newline\n and <html> & more"}`,
		`{"target":"lxc:jellyfin","command":"systemctl status jellyfin --no-pager","purpose":"inspect","timeout_seconds":30,"flags":[true,null,1.5]}`,
	}
	for i, name := range []string{"get_entity", "run"} {
		cl := got.calls[i]
		if cl.name != name || cl.typ != "function" || cl.id != "call_two-calls_2_"+string(rune('1'+i)) || cl.firstHadArgs {
			t.Fatalf("call %d: %+v", i, cl)
		}
		if cl.args != wantArgs[i] || !json.Valid([]byte(cl.args)) {
			t.Fatalf("call %d arguments:\n got %s\nwant %s", i, cl.args, wantArgs[i])
		}
		if cl.deltas < 3 {
			t.Fatalf("call %d: arguments in %d deltas, want them split", i, cl.deltas)
		}
	}
	if got.usage == nil || got.usageChoices != 0 || got.usage.PromptTokens == 0 || got.usage.TotalTokens != got.usage.PromptTokens+got.usage.CompletionTokens {
		t.Fatalf("usage chunk: %+v (choices %d)", got.usage, got.usageChoices)
	}

	// Without streaming: the same calls in one message.
	req.StreamOptions = nil
	resp, err := c.CreateChatCompletion(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	m := resp.Choices[0].Message
	if resp.Choices[0].FinishReason != openai.FinishReasonToolCalls || m.Content != "Checking both." || len(m.ToolCalls) != 2 ||
		m.ToolCalls[0].Function.Arguments != wantArgs[0] || m.ToolCalls[1].Function.Arguments != wantArgs[1] ||
		m.ToolCalls[1].ID != "call_two-calls_2_2" || m.ToolCalls[1].Type != openai.ToolTypeFunction {
		t.Fatalf("completion: %+v", resp)
	}
}

func TestRawStreamLooksLikeOpenAI(t *testing.T) {
	t.Parallel()
	_, base := start(t, basicScript)
	body := `{"model":"sim","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":[{"type":"text","text":"parallel"}]}],
		"tools":[{"type":"function","function":{"name":"get_entity"}},{"type":"function","function":{"name":"run"}}]}`
	req, _ := http.NewRequest(http.MethodPost, base+"/chat/completions", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() != "" {
			lines = append(lines, sc.Text())
		}
	}
	if lines[len(lines)-1] != "data: [DONE]" {
		t.Fatalf("last line %q", lines[len(lines)-1])
	}
	first := lines[0]
	for _, want := range []string{`"object":"chat.completion.chunk"`, `"delta":{"role":"assistant","content":""}`, `"finish_reason":null`, `"usage":null`} {
		if !strings.Contains(first, want) {
			t.Fatalf("first chunk %s lacks %s", first, want)
		}
	}
	var sawFirstCall, sawFinish bool
	for _, l := range lines {
		if !strings.HasPrefix(l, "data: ") {
			t.Fatalf("not an SSE data line: %q", l)
		}
		if strings.Contains(l, `"tool_calls":[{"index":0,"id":"call_two-calls_1_1","type":"function","function":{"name":"get_entity","arguments":""}}]`) {
			sawFirstCall = true
		}
		if strings.Contains(l, `"delta":{},"logprobs":null,"finish_reason":"tool_calls"`) {
			sawFinish = true
		}
	}
	if !sawFirstCall || !sawFinish {
		t.Fatalf("tool call head %v, finish chunk %v in\n%s", sawFirstCall, sawFinish, strings.Join(lines, "\n"))
	}
	if usage := lines[len(lines)-2]; !strings.Contains(usage, `"choices":[]`) || !strings.Contains(usage, `"usage":{"prompt_tokens":`) {
		t.Fatalf("usage chunk %s", usage)
	}
}

func TestEmptyRefusalLengthAndRaw(t *testing.T) {
	t.Parallel()
	c, _ := start(t, basicScript)
	ask := func(text string) streamed {
		t.Helper()
		got, err := streamChat(t, c, openai.ChatCompletionRequest{Model: "sim", Messages: []openai.ChatCompletionMessage{user(text)}})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := ask("empty"); got.content != "" || len(got.calls) != 0 || got.refusal != "" || got.finish != "stop" || got.firstRole != "assistant" {
		t.Fatalf("empty: %+v", got)
	}
	if got := ask("refuse"); got.refusal != "I can't help with that, refuse." || got.content != "" || got.finish != "content_filter" {
		t.Fatalf("refusal: %+v", got)
	}
	if got := ask("cut"); got.content != "half an answ" || got.finish != "length" {
		t.Fatalf("length: %+v", got)
	}
	if got := ask("raw"); len(got.calls) != 1 || got.calls[0].args != `{"target": "lxc:raw"` || got.finish != "tool_calls" {
		t.Fatalf("raw arguments: %+v", got)
	}

	for text, check := range map[string]func(openai.ChatCompletionMessage, openai.FinishReason) bool{
		"empty": func(m openai.ChatCompletionMessage, f openai.FinishReason) bool {
			return m.Content == "" && len(m.ToolCalls) == 0 && f == openai.FinishReasonStop
		},
		"refuse": func(m openai.ChatCompletionMessage, f openai.FinishReason) bool {
			return m.Refusal == "I can't help with that, refuse." && m.Content == "" && f == openai.FinishReasonContentFilter
		},
	} {
		resp, err := c.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "sim", Messages: []openai.ChatCompletionMessage{user(text)}})
		if err != nil {
			t.Fatal(err)
		}
		if !check(resp.Choices[0].Message, resp.Choices[0].FinishReason) {
			t.Fatalf("%s without streaming: %+v", text, resp.Choices[0])
		}
	}
}

func TestScriptedErrors(t *testing.T) {
	t.Parallel()
	c, base := start(t, basicScript)
	msgs := []openai.ChatCompletionMessage{user("boom")}
	_, err := streamChat(t, c, openai.ChatCompletionRequest{Model: "sim", Messages: msgs})
	if e := apiError(t, err); e.HTTPStatusCode != 500 || e.Message != "the simulated provider fell over" || e.Type != "server_error" {
		t.Fatalf("streamed error: %+v", e)
	}
	_, err = c.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "sim", Messages: msgs})
	if e := apiError(t, err); e.HTTPStatusCode != 500 {
		t.Fatalf("error: %+v", e)
	}
	_, err = c.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "sim", Messages: []openai.ChatCompletionMessage{user("ratelimit")}})
	if e := apiError(t, err); e.HTTPStatusCode != 429 || e.Code != "rate_limit_exceeded" {
		t.Fatalf("429: %+v", e)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/chat/completions", strings.NewReader(`{"model":"sim","messages":[{"role":"user","content":"ratelimit"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Retry-After") != "7" {
		t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
}

func TestUnknownModelAndBadRequests(t *testing.T) {
	t.Parallel()
	c, base := start(t, basicScript)
	msgs := []openai.ChatCompletionMessage{user("tell me")}
	_, err := c.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "gpt-4o", Messages: msgs})
	if e := apiError(t, err); e.HTTPStatusCode != 404 || e.Code != "model_not_found" || !strings.Contains(e.Message, "gpt-4o") {
		t.Fatalf("unknown model: %+v", e)
	}
	_, err = streamChat(t, c, openai.ChatCompletionRequest{Model: "gpt-4o", Messages: msgs})
	if e := apiError(t, err); e.HTTPStatusCode != 404 {
		t.Fatalf("unknown model, streamed: %+v", e)
	}
	for body, status := range map[string]int{
		`{"model":"sim","messages":[]}`:                                  400,
		`{"model":"sim","messages":[{"role":"wizard","content":"x"}]}`:   400,
		`{"model":"sim","messages":[{"role":"user","content":{"a":1}}]}`: 400,
		`{"messages":[{"role":"user","content":"x"}]}`:                   400,
		`{"model":`: 400,
	} {
		got, out := post(t, base+"/chat/completions", "", body)
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		if got != status || json.Unmarshal(out, &e) != nil || e.Error.Message == "" || e.Error.Type != "invalid_request_error" {
			t.Fatalf("%s: %d %s", body, got, out)
		}
	}
	if got, out := post(t, base+"/nowhere", "", `{}`); got != 404 || !bytes.Contains(out, []byte(`"Invalid URL (POST /v1/nowhere)"`)) {
		t.Fatalf("unknown route: %d %s", got, out)
	}
	resp, err := http.Get(base + "/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Fatalf("GET chat completions: %d", resp.StatusCode)
	}
}

func TestModelsAndHealthz(t *testing.T) {
	t.Parallel()
	c, base := start(t, basicScript)
	list, err := c.ListModels(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Models) != 2 || list.Models[0].ID != "sim" || list.Models[1].ID != "sim-2" || list.Models[0].Object != "model" {
		t.Fatalf("models: %+v", list)
	}
	m, err := c.GetModel(context.Background(), "sim-2")
	if err != nil || m.ID != "sim-2" {
		t.Fatalf("model: %+v %v", m, err)
	}
	if _, err := c.GetModel(context.Background(), "nope"); apiError(t, err).HTTPStatusCode != 404 {
		t.Fatal("an unknown model is a 404")
	}
	resp, err := http.Get(strings.TrimSuffix(base, "/v1") + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz: %d", resp.StatusCode)
	}
	// Without the /v1 prefix too.
	root := client(strings.TrimSuffix(base, "/v1"), "k")
	if list, err := root.ListModels(context.Background()); err != nil || len(list.Models) != 2 {
		t.Fatalf("models without /v1: %+v %v", list, err)
	}
}

func TestAPIKey(t *testing.T) {
	t.Parallel()
	good, base := start(t, basicScript, llmsim.Options{APIKey: "sk-sim-secret"})
	msgs := []openai.ChatCompletionMessage{user("tell me")}
	if _, err := good.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "sim", Messages: msgs}); err != nil {
		t.Fatalf("the right key: %v", err)
	}
	bad := client(base, "sk-wrong-key-123")
	_, err := bad.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "sim", Messages: msgs})
	if e := apiError(t, err); e.HTTPStatusCode != 401 || e.Code != "invalid_api_key" || strings.Contains(e.Message, "sk-wrong-key-123") {
		t.Fatalf("wrong key: %+v", e)
	}
	_, err = streamChat(t, bad, openai.ChatCompletionRequest{Model: "sim", Messages: msgs})
	if e := apiError(t, err); e.HTTPStatusCode != 401 {
		t.Fatalf("wrong key, streamed: %+v", e)
	}
	if _, err := bad.ListModels(context.Background()); apiError(t, err).HTTPStatusCode != 401 {
		t.Fatal("models need the key too")
	}
	if got, _ := post(t, base+"/chat/completions", "", `{"model":"sim","messages":[{"role":"user","content":"x"}]}`); got != 401 {
		t.Fatalf("no key: %d", got)
	}
	resp, err := http.Get(strings.TrimSuffix(base, "/v1") + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz needs no key: %d", resp.StatusCode)
	}
}

func TestDeterministic(t *testing.T) {
	t.Parallel()
	_, base1 := start(t, basicScript)
	_, base2 := start(t, basicScript)
	for _, body := range []string{
		`{"model":"sim","messages":[{"role":"user","content":"parallel"}],"tools":[{"type":"function","function":{"name":"run"}}]}`,
		`{"model":"sim","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"parallel"}],"tools":[{"type":"function","function":{"name":"run"}}]}`,
		`{"model":"sim","stream":true,"messages":[{"role":"user","content":"tell me"}]}`,
	} {
		s1, a := post(t, base1+"/chat/completions", "", body)
		s2, b := post(t, base1+"/chat/completions", "", body)
		s3, c := post(t, base2+"/chat/completions", "", body)
		if s1 != 200 || s2 != 200 || s3 != 200 || !bytes.Equal(a, b) || !bytes.Equal(a, c) {
			t.Fatalf("the same request answered differently:\n%s\n%s\n%s", a, b, c)
		}
	}
	// Another conversation gets another completion id.
	_, a := post(t, base1+"/chat/completions", "", `{"model":"sim","messages":[{"role":"user","content":"tell me"}]}`)
	_, b := post(t, base1+"/chat/completions", "", `{"model":"sim","messages":[{"role":"user","content":"tell me more"}]}`)
	var ra, rb struct{ ID string }
	if json.Unmarshal(a, &ra) != nil || json.Unmarshal(b, &rb) != nil || ra.ID == rb.ID || !strings.HasPrefix(ra.ID, "chatcmpl-") {
		t.Fatalf("ids %q %q", ra.ID, rb.ID)
	}
}

func TestDelays(t *testing.T) {
	t.Parallel()
	c, _ := start(t, `
model: sim
rules:
  - when: {user_matches: slow}
    reply: {content: "0123456789abcdefghij", delay_ms: 40, chunk_delay_ms: 10, chunk_size: 10}
  - when: {user_matches: stuck}
    reply: {content: "never seen", delay_ms: 60000}
`)
	began := time.Now()
	got, err := streamChat(t, c, openai.ChatCompletionRequest{Model: "sim", Messages: []openai.ChatCompletionMessage{user("slow")}})
	if err != nil || got.content != "0123456789abcdefghij" || got.contentChunks != 2 {
		t.Fatalf("slow: %+v %v", got, err)
	}
	// 40 ms before the first chunk, 10 ms between each of the 4 chunks (role, 2 content, finish).
	if took := time.Since(began); took < 70*time.Millisecond {
		t.Fatalf("answered in %v, before its delays", took)
	}
	// A client that gives up ends a delayed answer at once.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	began = time.Now()
	_, err = c.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "sim", Messages: []openai.ChatCompletionMessage{user("stuck")}})
	if err == nil || time.Since(began) > 10*time.Second {
		t.Fatalf("a cancelled request: %v after %v", err, time.Since(began))
	}
}
