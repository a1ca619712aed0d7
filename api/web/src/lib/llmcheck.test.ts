import { describe, expect, it } from 'vitest';
import { server, settings, verdict, type Report } from './llmcheck';

const report = (findings: Report['findings'], extra: Partial<Report> = {}): Report => ({
  base_url: 'http://127.0.0.1:11434/v1',
  model: 'qwen2.5',
  ok: !findings.some((f) => f.status === 'fail'),
  findings,
  ...extra,
});

describe('llm check report', () => {
  it('lists each setting once, in order', () => {
    const r = report([
      { probe: 'server', status: 'warn', detail: 'wrong preset', set: ['OIKOS_LLM_PROVIDER=ollama'], ms: 1 },
      { probe: 'context', status: 'warn', detail: 'smaller', set: ['OIKOS_LLM_CONTEXT_TOKENS=4096', 'OIKOS_LLM_PROVIDER=ollama'], ms: 1 },
    ]);
    expect(settings(r)).toEqual(['OIKOS_LLM_PROVIDER=ollama', 'OIKOS_LLM_CONTEXT_TOKENS=4096']);
  });
  it('says whether Nomos can work with the server', () => {
    expect(verdict(report([{ probe: 'models', status: 'ok', detail: '', ms: 1 }]))).toBe('Nomos can work with this model server.');
    expect(verdict(report([{ probe: 'context', status: 'warn', detail: '', ms: 1 }]))).toContain('1 warning to look at');
    expect(
      verdict(
        report([
          { probe: 'tools', status: 'fail', detail: '', ms: 1 },
          { probe: 'stream', status: 'fail', detail: '', ms: 1 },
        ]),
      ),
    ).toContain('2 checks failed');
  });
  it('names the server and its window', () => {
    expect(server(report([], { detected: 'ollama', server_version: '0.12.6', context_tokens: 8192 }))).toBe('ollama 0.12.6 · 8,192 token window');
    expect(server(report([]))).toBe('not identified');
  });
});
