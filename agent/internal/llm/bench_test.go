package llm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/oikos-hq/oikos/shared/sse"
	"github.com/oikos-hq/oikos/testkit/llmsim"
)

// recorded is llmsim's streamed answer to "parallel please" under mode, as bytes.
func recorded(b *testing.B, mode string) []byte {
	b.Helper()
	s, err := llmsim.Parse([]byte(script))
	if err != nil {
		b.Fatal(err)
	}
	base, _ := llmsim.Start(b, s, llmsim.Options{Wire: llmsim.Modes[mode]})
	c := New(Config{BaseURL: base, Model: "m"})
	body, _ := c.body(Request{Messages: user("parallel please"), Tools: allTools})
	resp, err := http.Post(base+"/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkReadToolCallAnswer is what Nomos adds per model answer that asks for tools: the
// SSE stream of an answer with text and two tool calls (in chunks of 3 characters, so about
// 60 events) parsed, filtered and rebuilt, in memory: no network, no server.
func BenchmarkReadToolCallAnswer(b *testing.B) {
	for _, mode := range []string{"openai", "fragment-calls", "ollama", "hermes-text", "think"} {
		b.Run(mode, func(b *testing.B) {
			data := recorded(b, mode)
			offered := map[string]bool{"get_entity": true, "run": true, "get_health_summary": true}
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				rd := sse.NewReader(bytes.NewReader(data), 0)
				r := newReader(true, offered, func(string) {})
				for {
					e, err := rd.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					if stop, err := r.event(e); err != nil {
						b.Fatal(err)
					} else if stop {
						break
					}
				}
				if a := r.finish(); len(a.Calls) != 2 {
					b.Fatalf("%d calls", len(a.Calls))
				}
			}
		})
	}
}

// BenchmarkStreamLoopback is one whole streamed completion with two tool calls against llmsim
// on loopback: request, first byte, stream, answer (llmsim's own work included).
func BenchmarkStreamLoopback(b *testing.B) {
	s, err := llmsim.Parse([]byte(script))
	if err != nil {
		b.Fatal(err)
	}
	base, _ := llmsim.Start(b, s)
	c := New(Config{BaseURL: base, Model: "m"})
	req := Request{Messages: user("parallel please"), Tools: allTools}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		a, err := c.Stream(context.Background(), req, Events{Text: func(string) {}})
		if err != nil || len(a.Calls) != 2 {
			b.Fatalf("%+v %v", a, err)
		}
	}
}
