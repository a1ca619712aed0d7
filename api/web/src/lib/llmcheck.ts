// The model doctor's report (POST /api/v1/llm/check) as the settings page shows it: the
// findings in the order they ran, a one-line verdict and the settings to change, each once.
import type { Schemas } from './api/client';

export type Report = Schemas['LLMCheckReport'];
export type Finding = Schemas['LLMCheckFinding'];

/** probeLabel names a probe for a person. */
export const probeLabel: Record<Finding['probe'], string> = {
  config: 'Configuration',
  models: 'Models listed',
  server: 'Server',
  context: 'Context window',
  plain: 'Plain answer',
  stream: 'Streamed answer',
  tools: 'Tool-call round trip',
  reasoning: 'Reasoning',
};

/** settings are every finding's settings to change, each once, in the findings' order. */
export function settings(r: Report): string[] {
  const out: string[] = [];
  for (const f of r.findings) for (const s of f.set ?? []) if (!out.includes(s)) out.push(s);
  return out;
}

/** verdict is the report in a sentence. */
export function verdict(r: Report): string {
  const count = (s: Finding['status']) => r.findings.filter((f) => f.status === s).length;
  const fails = count('fail');
  const warns = count('warn');
  if (fails > 0) return `Nomos cannot work with this model server as configured: ${fails} check${fails > 1 ? 's' : ''} failed.`;
  if (warns > 0) return `Nomos can work with this model server; ${warns} warning${warns > 1 ? 's' : ''} to look at.`;
  return 'Nomos can work with this model server.';
}

/** server names the server the report identified, with its version and window. */
export function server(r: Report): string {
  const parts = [r.detected ? `${r.detected}${r.server_version ? ' ' + r.server_version : ''}` : 'not identified'];
  if (r.context_tokens) parts.push(`${r.context_tokens.toLocaleString('en')} token window`);
  return parts.join(' · ');
}
