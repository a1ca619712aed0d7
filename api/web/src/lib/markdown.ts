// A small markdown renderer for knowledge bodies. Safety comes first: every piece of source
// text is HTML-escaped before any markup is added, and only markup this file writes reaches
// the page, so a document (written by the agent, or pasted from anywhere) can never inject
// a tag, an attribute or a script. Links keep http, https and relative targets only.
//
// Supported: ATX headings, paragraphs, nested - * + and 1. lists, fenced and indented code,
// blockquotes, rules, pipe tables, `code`, **bold**, *italic*, ~~strike~~, [links](href) and
// bare http(s) URLs. Anything else renders as the literal text it is.

export interface MarkdownOptions {
  /** link returns an href for a code span that names something (`runbook:x`), or null. */
  link?: (code: string) => string | null;
  /** headingShift moves headings down (1: `#` becomes h2, since the page owns the h1). */
  headingShift?: number;
}

const ESC: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** escapeHtml makes text safe inside an element or a quoted attribute. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ESC[c]);
}

function unescapeHtml(s: string): string {
  return s.replace(/&(amp|lt|gt|quot|#39);/g, (_, e: string) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'" })[e] ?? '');
}

/** safeHref returns the href if it is http(s), a relative path or a fragment; else null. */
export function safeHref(raw: string): string | null {
  const href = raw.trim();
  // Strip control characters and spaces first: browsers ignore them in a scheme, so
  // "java\tscript:" would otherwise slip past the check.
  const probe = href.replace(/[\u0000-\u0020]/g, '');
  if (/^https?:\/\//i.test(probe)) return href;
  if (/^(\/(?!\/)|\.{1,2}\/|#|\?)/.test(probe)) return href;
  // A plain relative name ("other-page") has no scheme: no colon before any / ? #.
  if (/^[^:/?#]+([/?#].*)?$/.test(probe)) return href;
  return null;
}

// Inline rendering works on escaped text. Code spans are cut out first (nothing inside
// them is formatted), as are links, and put back at the end via private-use placeholders.
function inline(escaped: string, opt: MarkdownOptions): string {
  const held: string[] = [];
  const hold = (html: string) => `\uE000${held.push(html) - 1}\uE001`;

  let s = escaped.replace(/(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g, (_, _t: string, code: string) => {
    const c = code.trim() === '' ? code : code.replace(/^ (.*) $/, '$1');
    const href = opt.link?.(unescapeHtml(c)) ?? null;
    const tag = `<code>${c}</code>`;
    return hold(href ? `<a href="${escapeHtml(href)}">${tag}</a>` : tag);
  });

  s = s.replace(/\[([^\]\n]+)\]\(([^()\s]+)(?:\s+&quot;[^&]*&quot;)?\)/g, (all, text: string, url: string) => {
    const href = safeHref(unescapeHtml(url)) ?? opt.link?.(unescapeHtml(url)) ?? null;
    if (!href) return text;
    const ext = /^https?:/i.test(href) ? ' rel="noopener noreferrer" target="_blank"' : '';
    return hold(`<a href="${escapeHtml(href)}"${ext}>${emphasis(text)}</a>`);
  });

  s = s.replace(/(^|[\s(])(https?:\/\/[^\s<]+[^\s<.,;:!?)'&])/g, (_, pre: string, url: string) => {
    return pre + hold(`<a href="${url}" rel="noopener noreferrer" target="_blank">${url}</a>`);
  });

  s = emphasis(s);
  // Placeholders may nest (a link around a code span), so restore until none are left.
  for (let i = 0; i < 3 && s.includes('\uE000'); i++) s = s.replace(/\uE000(\d+)\uE001/g, (_, n: string) => held[Number(n)]);
  return s;
}

function emphasis(s: string): string {
  return s
    .replace(/\*\*(?=\S)([\s\S]*?\S)\*\*/g, '<strong>$1</strong>')
    .replace(/(^|[^\w])__(?=\S)([\s\S]*?\S)__(?!\w)/g, '$1<strong>$2</strong>')
    .replace(/~~(?=\S)([\s\S]*?\S)~~/g, '<del>$1</del>')
    .replace(/(^|[^*\w])\*(?=[^\s*])([^*\n]*?[^\s*])\*(?![*\w])/g, '$1<em>$2</em>')
    .replace(/(^|[^\w])_(?=[^\s_])([^_\n]*?[^\s_])_(?!\w)/g, '$1<em>$2</em>');
}

const reFence = /^ {0,3}(`{3,}|~{3,})\s*([\w+-]*)/;
const reHeading = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const reRule = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const reItem = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const reQuote = /^ {0,3}&gt;\s?(.*)$/;
const reTableSep = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

function indentOf(line: string): number {
  return (/^\s*/.exec(line)?.[0] ?? '').replace(/\t/g, '    ').length;
}

function cells(row: string): string[] {
  let r = row.trim();
  if (r.startsWith('|')) r = r.slice(1);
  if (r.endsWith('|') && !r.endsWith('\\|')) r = r.slice(0, -1);
  return r.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, '|'));
}

function blocks(lines: string[], opt: MarkdownOptions): string {
  const out: string[] = [];
  let i = 0;
  const shift = opt.headingShift ?? 0;
  const startsBlock = (l: string) =>
    reFence.test(l) || reHeading.test(l) || reRule.test(l) || reQuote.test(l) || /^\s*([-*+]|\d{1,9}[.)])\s+\S/.test(l);

  while (i < lines.length) {
    const line = lines[i];
    if (line.trim() === '') {
      i++;
      continue;
    }

    const fence = reFence.exec(line);
    if (fence) {
      const close = fence[1];
      const body: string[] = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(close)) body.push(lines[i++]);
      i++; // the closing fence (or the end of the document)
      const lang = fence[2] ? ` data-lang="${fence[2]}"` : '';
      out.push(`<pre${lang}><code>${body.join('\n')}</code></pre>`);
      continue;
    }

    if (/^( {4}|\t)/.test(line)) {
      const body: string[] = [];
      while (i < lines.length && (/^( {4}|\t)/.test(lines[i]) || lines[i].trim() === '')) body.push(lines[i++].replace(/^( {4}|\t)/, ''));
      while (body.length && body[body.length - 1].trim() === '') body.pop();
      out.push(`<pre><code>${body.join('\n')}</code></pre>`);
      continue;
    }

    const h = reHeading.exec(line);
    if (h) {
      const n = Math.min(6, h[1].length + shift);
      out.push(`<h${n}>${inline(h[2], opt)}</h${n}>`);
      i++;
      continue;
    }

    if (reRule.test(line)) {
      out.push('<hr>');
      i++;
      continue;
    }

    if (reQuote.test(line)) {
      const body: string[] = [];
      while (i < lines.length && lines[i].trim() !== '') {
        const q = reQuote.exec(lines[i]);
        body.push(q ? q[1] : lines[i]);
        i++;
      }
      out.push(`<blockquote>${blocks(body, opt)}</blockquote>`);
      continue;
    }

    if (reItem.test(line)) {
      const start = i;
      const base = indentOf(line);
      const ordered = /\d/.test(reItem.exec(line)![2]);
      // An item of the other kind at the list's own indentation starts a new list.
      const sibling = (l: string) => {
        const m = reItem.exec(l);
        return !!m && indentOf(l) >= base && (indentOf(l) > base + 1 || /\d/.test(m[2]) === ordered);
      };
      i++;
      // A list runs while lines are items, indented continuations, or blank lines that
      // the list goes on after.
      while (i < lines.length) {
        const l = lines[i];
        if (l.trim() === '') {
          const next = lines[i + 1];
          if (next !== undefined && next.trim() !== '' && ((indentOf(next) > base && !reItem.test(next)) || sibling(next))) {
            i++;
            continue;
          }
          break;
        }
        if (reItem.test(l)) {
          if (!sibling(l)) break;
          i++;
          continue;
        }
        if (indentOf(l) > base || !startsBlock(l)) {
          i++;
          continue;
        }
        break;
      }
      out.push(list(lines.slice(start, i), opt));
      continue;
    }

    if (line.includes('|') && i + 1 < lines.length && reTableSep.test(lines[i + 1]) && lines[i + 1].includes('-')) {
      const head = cells(line);
      const align = cells(lines[i + 1]).map((c) => (c.startsWith(':') && c.endsWith(':') ? 'center' : c.endsWith(':') ? 'right' : ''));
      i += 2;
      const rows: string[][] = [];
      while (i < lines.length && lines[i].trim() !== '' && lines[i].includes('|')) rows.push(cells(lines[i++]));
      const td = (tag: string, c: string, k: number) => `<${tag}${align[k] ? ` style="text-align:${align[k]}"` : ''}>${inline(c, opt)}</${tag}>`;
      const thead = `<thead><tr>${head.map((c, k) => td('th', c, k)).join('')}</tr></thead>`;
      const tbody = rows.map((r) => `<tr>${head.map((_, k) => td('td', r[k] ?? '', k)).join('')}</tr>`).join('');
      out.push(`<div class="md-table"><table>${thead}<tbody>${tbody}</tbody></table></div>`);
      continue;
    }

    const para: string[] = [];
    while (i < lines.length && lines[i].trim() !== '' && (para.length === 0 || !startsBlock(lines[i]))) {
      // A table starting right under a paragraph line ends the paragraph.
      if (para.length && lines[i].includes('|') && i + 1 < lines.length && reTableSep.test(lines[i + 1])) break;
      para.push(lines[i++].trim());
    }
    out.push(`<p>${inline(para.join('\n'), opt).replace(/ {2,}\n|\\\n/g, '<br>')}</p>`);
  }
  return out.join('\n');
}

// list renders one list block: items at its first line's indentation, each item's further
// lines (continuations and nested lists) rendered as blocks of their own.
function list(lines: string[], opt: MarkdownOptions): string {
  const first = reItem.exec(lines[0])!;
  const base = indentOf(lines[0]);
  const ordered = /\d/.test(first[2]);
  const items: string[][] = [];
  let loose = false;
  for (const l of lines) {
    const m = reItem.exec(l);
    if (m && indentOf(l) <= base + 1) items.push([m[3]]);
    else {
      if (l.trim() === '') loose = true;
      items[items.length - 1].push(l.trim() === '' ? '' : l.replace(new RegExp(`^\\s{0,${base + 4}}`), ''));
    }
  }
  const start = ordered && Number.parseInt(first[2], 10) !== 1 ? ` start="${Number.parseInt(first[2], 10)}"` : '';
  const tag = ordered ? 'ol' : 'ul';
  const lis = items.map((it) => {
    // The item's own text runs until its first nested block; nested lines keep their
    // indentation relative to the item so deeper lists nest again.
    const rest = it.slice(1);
    const nestAt = rest.findIndex((l) => reItem.test(l) || reFence.test(l) || l === '');
    const text = [it[0], ...(nestAt === -1 ? rest : rest.slice(0, nestAt))].map((l) => l.trim()).join('\n');
    const tail = nestAt === -1 ? [] : rest.slice(nestAt);
    let task = '';
    let body = text;
    const t = /^\[([ xX])\]\s+(.*)$/s.exec(text);
    if (t) {
      task = `<input type="checkbox" disabled${t[1] === ' ' ? '' : ' checked'}> `;
      body = t[2];
    }
    const html = loose && tail.length ? `<p>${inline(body, opt)}</p>` : inline(body, opt);
    return `<li>${task}${html}${tail.length ? blocks(tail, opt) : ''}</li>`;
  });
  return `<${tag}${start}>${lis.join('')}</${tag}>`;
}

/** renderMarkdown turns markdown into safe HTML (see the file comment for what it keeps). */
export function renderMarkdown(src: string, opt: MarkdownOptions = {}): string {
  const lines = escapeHtml(src.replace(/\r\n?/g, '\n')).split('\n');
  return blocks(lines, opt);
}

/**
 * snippetHtml renders a search snippet: the api wraps each match in **…**; everything is
 * escaped and only those markers become <mark>. Markdown noise (backticks, heading marks,
 * table pipes) is dropped so the fragment reads as prose.
 */
export function snippetHtml(snippet: string): string {
  const plain = snippet
    .replace(/`/g, '')
    .replace(/(^|\n)\s*#{1,6}\s+/g, '$1')
    .replace(/:?-{3,}:?/g, ' ')
    .replace(/\s*\|\s*/g, ' · ')
    .replace(/\s+/g, ' ')
    .replace(/(\s*·)+\s*/g, ' · ')
    .replace(/^ · | · $/g, '')
    .trim();
  // The api marks single words; a marked run with spaces is the body's own **bold**
  // pairing up with a marker, so only space-free runs become <mark>.
  return escapeHtml(plain).replace(/\*\*([^*\s]+?)\*\*/g, '<mark>$1</mark>').replace(/\*\*/g, '');
}
