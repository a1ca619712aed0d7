// Every place the app turns a string into markup goes through lib/markdown's sanitizer
// (renderMarkdown or snippetHtml, both DOMPurify's output): knowledge bodies, search
// snippets and the model's chat text are written by whoever wrote the document or by the
// model, never trusted. This test reads the sources, so a new {@html} or innerHTML that skips
// the sanitizer fails here before any browser sees it.
/// <reference types="vite/client" />
import { describe, expect, it } from 'vitest';

// Every source of the app but tests and the generated api types, as text (Vite reads them).
const all = import.meta.glob<string>(['../**/*.svelte', '../**/*.ts', '!../**/*.test.ts', '!../lib/api/**'], {
  query: '?raw',
  import: 'default',
  eager: true,
});
const sourceFiles = Object.entries(all).map(([p, text]) => ({ rel: p.replace(/^\.\.\//, ''), text }));

// {@html …} expressions allowed: a call of the sanitizing renderers, or (KnowledgeDoc) a
// value derived from renderMarkdown's output in the same file, named here with that proof.
const sanitized = /^(renderMarkdown|snippetHtml)\(/;
const derived: Record<string, { name: string; from: RegExp }> = {
  'pages/KnowledgeDoc.svelte': { name: 'shown', from: /const html = \$derived\(doc \? renderMarkdown\(/ },
};

describe('HTML sinks', () => {
  it('finds the app sources', () => {
    expect(sourceFiles.length).toBeGreaterThan(20);
    expect(sourceFiles.map((f) => f.rel)).toContain('pages/KnowledgeDoc.svelte');
  });

  it('every {@html} renders sanitizer output', () => {
    const seen: string[] = [];
    for (const { rel, text } of sourceFiles) {
      for (const m of text.matchAll(/\{@html\s+([^}]*)\}/g)) {
        const expr = m[1].trim();
        seen.push(`${rel}: ${expr}`);
        const d = derived[rel];
        const ok = sanitized.test(expr) || (d !== undefined && expr === d.name && d.from.test(text));
        expect(ok, `${rel}: {@html ${expr}} does not go through renderMarkdown or snippetHtml`).toBe(true);
      }
    }
    // The four known sinks: chat turns, chat messages, the knowledge reader, search snippets.
    expect(seen.length, seen.join('\n')).toBeGreaterThanOrEqual(4);
  });

  it('no script writes markup past the sanitizer', () => {
    for (const { rel, text } of sourceFiles) {
      if (rel === 'lib/markdown.ts') continue; // the sanitizer itself
      for (const sink of ['innerHTML', 'outerHTML', 'insertAdjacentHTML', 'document.write', 'srcdoc', 'new Function', 'eval(']) {
        expect(text.includes(sink), `${rel} uses ${sink}`).toBe(false);
      }
    }
  });
});
