// Drives the agent's /mcp endpoint with the official TypeScript MCP SDK, as an external agent
// (Claude Code, Codex, a script) would, and prints what it saw as one JSON document on stdout.
// The Go test e2e/agent (TestTypeScriptClient) runs it with `node` and checks that document.
//
// Environment:
//   OIKOS_MCP_URL    the endpoint, e.g. http://127.0.0.1:8092/mcp (required)
//   OIKOS_MCP_TOKEN  the bearer token (an Oikos api token); unset or empty: no Authorization header
//   OIKOS_MCP_CALLS  a JSON array of {"name": ..., "arguments": {...}} called in order after
//                    tools/list (default: none)
//
// Output: {"ok": true, "session_id", "protocol_version", "server", "tools": [...],
// "calls": [{"name", "is_error", "text"} or {"name", "protocol_error": {"code", "message"}}]}
// or, when the connection itself fails, {"ok": false, "connect_error": {"code", "message"}}.
// The exit status is 0 either way; only a crash of the script itself is non-zero.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = process.env.OIKOS_MCP_URL;
if (!url) {
  console.error("OIKOS_MCP_URL is not set");
  process.exit(2);
}
const token = process.env.OIKOS_MCP_TOKEN ?? "";
const calls = JSON.parse(process.env.OIKOS_MCP_CALLS || "[]");

const headers = {};
if (token !== "") {
  headers.Authorization = `Bearer ${token}`;
}
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "oikos-e2e-ts", version: "0.0.0" });

function errorOf(e) {
  return { code: e?.code ?? null, message: String(e?.message ?? e) };
}

function textOf(result) {
  return (result.content ?? [])
    .filter((c) => c.type === "text")
    .map((c) => c.text)
    .join("\n");
}

const out = { ok: true };
try {
  await client.connect(transport);
} catch (e) {
  process.stdout.write(JSON.stringify({ ok: false, connect_error: errorOf(e) }) + "\n");
  process.exit(0);
}
out.session_id = transport.sessionId ?? "";
out.protocol_version = transport.protocolVersion ?? "";
out.server = client.getServerVersion() ?? null;

const tools = [];
let cursor;
do {
  const page = await client.listTools(cursor ? { cursor } : {});
  tools.push(...page.tools);
  cursor = page.nextCursor;
} while (cursor);
out.tools = tools.map((t) => ({
  name: t.name,
  description: t.description ?? "",
  input_schema_type: t.inputSchema?.type ?? "",
  annotations: t.annotations ?? null,
}));

out.calls = [];
for (const c of calls) {
  try {
    const result = await client.callTool({ name: c.name, arguments: c.arguments ?? {} });
    out.calls.push({ name: c.name, is_error: result.isError === true, text: textOf(result) });
  } catch (e) {
    out.calls.push({ name: c.name, protocol_error: errorOf(e) });
  }
}

await transport.terminateSession().catch(() => {});
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
