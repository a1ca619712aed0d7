package llm

import "net/http"

// ReadError reads a server's refusal the way Stream does, for callers that send requests of
// their own to the same server (agent/internal/llmcheck's non-streamed probe).
func ReadError(status int, header http.Header, body []byte) *APIError {
	return parseAPIError(status, header, body)
}

// SplitReasoning takes <think> blocks out of a whole answer's content, as Stream does from
// a streamed one: the text a person reads, and the reasoning kept apart.
func SplitReasoning(content string) (text, reasoning string) { return stripReasoning(content) }
