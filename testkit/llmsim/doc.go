// Package llmsim is a scripted stand-in for an OpenAI-compatible model provider, so that
// Nomos's loop (go-openai's CreateChatCompletionStream and CreateChatCompletion) can be tested,
// demoed and evaluated without one. It answers from YAML scripts, streams the way the OpenAI
// API does, and is deterministic and stateless: an answer depends only on the request (its
// model, messages and tools), never on earlier requests or the clock, so the same request
// always gets the same bytes.
//
// # Script format
//
//	model: nomos-sim             # or models: [a, b]; GET /v1/models lists them, any other model is a 404
//	chunk_size: 12               # optional: characters (runes) per streamed chunk, default 12
//	rules:                       # tried in order; the first whose conditions all hold answers
//	  - name: health-question    # optional (rule1, rule2 …); in logs and tool call ids
//	    when:                    # every condition given must hold; an empty when always holds
//	      last_role: user                      # role of the last message: user, tool, assistant, system
//	                                           #   (developer counts as system, function as tool)
//	      user_matches: "(?i)health|how is"    # RE2 regex on the latest user message's text; its groups
//	                                           #   are {{match:1}}, {{match:name}} in the reply
//	      user_not_matches: "regex"            # the latest user message does not match
//	      tool_result_of: get_health_summary   # the tool messages that end the conversation include a
//	                                           #   result of this tool (tool_call_id → the assistant's call)
//	      tool_result_matches: "regex"         # regex on that result; without tool_result_of, on the
//	                                           #   latest tool message of the conversation; its named
//	                                           #   groups are {{match:name}} in the reply
//	      after_tools: [set_goal]              # tools called since the latest user message, in this order
//	                                           #   (a subsequence: other calls may come between)
//	      not_after_tools: [propose_plan]      # none of these called since the latest user message
//	      turn_calls_at_least: 1               # tool calls since the latest user message: at least …
//	      turn_calls_at_most: 0                # … and at most (0: the turn has not called a tool yet)
//	      system_matches: "regex"              # regex on the system messages, joined by newlines
//	      has_tools: true                      # whether the request offered tools
//	    reply:
//	      content: "text"                      # streamed in chunks; takes templates (below)
//	      tool_calls:                          # after the content; one index each, several = parallel
//	        - name: get_health_summary
//	          arguments: {health: "down,degraded"}  # a YAML mapping, sent as JSON in the script's key
//	                                                #   order; string values take templates
//	        - name: run
//	          arguments_raw: '{"target": '     # or the arguments text verbatim (broken JSON on purpose)
//	      finish_reason: stop                  # stop, tool_calls, length or content_filter; default
//	                                           #   tool_calls with tool calls, content_filter with a
//	                                           #   refusal, else stop
//	      empty: true                          # answer nothing: no content, no tool calls (finish stop)
//	      refusal: "I can't help with that"    # delta.refusal / message.refusal, finish content_filter
//	      error: {status: 500, message: "…"}   # an HTTP error with an OpenAI error body; also type, code
//	                                           #   (defaults by status) and retry_after_s (Retry-After)
//	      delay_ms: 0                          # wait before answering
//	      chunk_delay_ms: 0                    # wait between streamed chunks
//	      chunk_size: 0                        # overrides the script's and Options.ChunkSize
//	fallback:                    # a reply (same fields) when no rule matches
//	  content: "I have nothing scripted for that."
//
// Unknown keys, bad regexes, unknown template names and contradictory replies (a refusal with
// content, an error with anything else) are load errors.
//
// Templates, in content, refusal, error messages, arguments_raw and the string values of
// arguments: {{last_user}} is the latest user message; {{last_tool_result}} the tool result
// the rule looked at (the tool_result_of one, else the latest tool message); {{arg:a.b.0.c}}
// a value in that result read as JSON (object keys by name, array elements by index; strings
// as they are, anything else as JSON), {{arg:path|default}} with a default when it is
// missing; {{match:1}} or {{match:name}} a group of user_matches (with |default too);
// {{model}} the request's model. A placeholder that has no value expands to "".
//
// Several scripts can be loaded together (Load with several paths, or a directory's *.yaml
// and *.yml in name order): their rules are tried in load order, a file's rules and fallback
// serve only that file's models (every model when the file declares none), and the first
// fallback serving the request's model answers what no rule does. Rule names are unique
// across the set.
//
// # Answers
//
// POST /v1/chat/completions reads model, messages (system, developer, user, assistant with
// tool_calls, tool with tool_call_id; string or text-part content), tools, stream and
// stream_options.include_usage. Without stream it answers one chat.completion object;
// with it, server-sent events: "data: {chat.completion.chunk}" lines and then
// "data: [DONE]". The first chunk carries delta.role "assistant"; the content (or refusal)
// follows in chunks of chunk_size characters; each tool call follows by its index, its first
// delta carrying id, type "function" and function.name, its arguments split over the next
// deltas; then a chunk with finish_reason; with include_usage, every chunk has "usage": null
// and a last chunk without choices carries the usage. Tokens are estimated as characters / 4
// (prompt: message texts, tool call names and arguments, tool definitions).
//
// Tool call ids are call_<rule>_<number of request messages>_<n>: deterministic, unique
// within an answer and, as a conversation only grows, within a conversation. Completion ids
// hash the request's model and messages. "created" is Options.Created (0 by default).
//
// GET /v1/models lists the script's models, GET /v1/models/{id} answers one, GET /healthz
// answers {"status":"ok"}. The routes answer without the /v1 prefix too. With
// Options.APIKey set, /v1 requests need "Authorization: Bearer <key>" (else 401,
// code invalid_api_key); an unknown model is a 404 (code model_not_found); errors have
// OpenAI's shape, {"error": {"message", "type", "param", "code"}}.
//
// # Use
//
// In a test: script, _ := llmsim.Parse(yaml); baseURL, _ := llmsim.Start(t, script), then
// point go-openai at it (cfg := openai.DefaultConfig("any"); cfg.BaseURL = baseURL). The
// command testkit/cmd/llmsim serves scripts over HTTP; Demo is the embedded demo script
// (scripts/demo.yaml).
package llmsim
