// Markdown for knowledge bodies and the model's chat text: marked (GitHub-flavoured markdown)
// renders it, DOMPurify sanitizes what marked wrote. Safety comes in two layers, so a
// document (written by the agent, or pasted from anywhere) can never inject a tag, an
// attribute or a script:
//
//  1. The renderer never passes raw HTML through: an HTML block or tag in the source is
//     shown as the literal text it is, code is escaped, and links keep http, https and
//     relative targets only (anything else, javascript: and data: included, renders as its
//     text). Images are never loaded (a URL written by the model must not make the browser
//     fetch it): an image renders as a link to it, or as its alt text.
//  2. DOMPurify then keeps only the tags and attributes this renderer writes, and checks
//     every href again as the browser will read it (entities decoded).
//
// External (http/https) links open in a new tab with rel="noopener noreferrer"; relative
// links (the dashboard's own pages) open in place.
import { Marked, type RendererObject, type Tokens } from 'marked';
import DOMPurify from 'dompurify';

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

const external = (href: string) => /^https?:/i.test(href.trim());
const anchor = (href: string, inner: string, title?: string | null) =>
  `<a href="${escapeHtml(href)}"${title ? ` title="${escapeHtml(title)}"` : ''}${external(href) ? ' rel="noopener noreferrer" target="_blank"' : ''}>${inner}</a>`;

// The options of the render under way. marked runs synchronously, so one module-level
// parser serves every call and reads these while it renders.
let current: MarkdownOptions = {};

const renderer: RendererObject<string, string> = {
  heading({ tokens, depth }) {
    const n = Math.min(6, depth + (current.headingShift ?? 0));
    return `<h${n}>${this.parser.parseInline(tokens)}</h${n}>\n`;
  },
  code({ text, lang, escaped }) {
    const l = /^[\w+-]+/.exec(lang ?? '')?.[0];
    const body = escaped ? text : escapeHtml(text.replace(/\n$/, ''));
    return `<pre${l ? ` data-lang="${l}"` : ''}><code>${body}</code></pre>\n`;
  },
  // Raw HTML is never markup: it reads as the text it is.
  html({ text, block }: Tokens.HTML | Tokens.Tag) {
    return block ? `<p>${escapeHtml(text.trim())}</p>\n` : escapeHtml(text);
  },
  codespan({ text }) {
    // marked hands the code span's text as written (it escapes it only when it renders).
    const href = current.link?.(text) ?? null;
    const tag = `<code>${escapeHtml(text)}</code>`;
    return href ? anchor(href, tag) : tag;
  },
  link({ href, title, tokens }) {
    const inner = this.parser.parseInline(tokens);
    const to = safeHref(href) ?? current.link?.(href) ?? null;
    return to ? anchor(to, inner, title) : inner;
  },
  image({ href, title, text }) {
    const to = safeHref(href);
    const alt = escapeHtml(text || href);
    return to ? anchor(to, alt, title) : alt;
  },
  table(t: Tokens.Table) {
    const cell = (c: Tokens.TableCell) => {
      const tag = c.header ? 'th' : 'td';
      return `<${tag}${c.align ? ` style="text-align:${c.align}"` : ''}>${this.parser.parseInline(c.tokens)}</${tag}>`;
    };
    const thead = `<thead><tr>${t.header.map(cell).join('')}</tr></thead>`;
    const tbody = t.rows.map((r) => `<tr>${r.map(cell).join('')}</tr>`).join('');
    return `<div class="md-table"><table>${thead}<tbody>${tbody}</tbody></table></div>\n`;
  },
};

const md = new Marked({ gfm: true, breaks: false, async: false, renderer });

// What the renderer writes, and nothing else.
const TAGS = [
  'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'p', 'br', 'hr', 'blockquote', 'pre', 'code', 'ul', 'ol', 'li',
  'input', 'strong', 'em', 'del', 'a', 'div', 'table', 'thead', 'tbody', 'tr', 'th', 'td',
];
const ATTRS = ['href', 'title', 'rel', 'target', 'start', 'type', 'checked', 'disabled', 'data-lang', 'class', 'style'];

const purify = DOMPurify(window);
purify.addHook('uponSanitizeAttribute', (node, data) => {
  const tag = node.nodeName.toLowerCase();
  const v = data.attrValue;
  const keep =
    data.attrName === 'style'
      ? (tag === 'th' || tag === 'td') && /^text-align:(left|center|right)$/.test(v)
      : data.attrName === 'class'
        ? tag === 'div' && v === 'md-table'
        : data.attrName === 'data-lang'
          ? tag === 'pre' && /^[\w+-]+$/.test(v)
          : data.attrName === 'start'
            ? tag === 'ol' && /^\d{1,9}$/.test(v)
            : ['type', 'checked', 'disabled'].includes(data.attrName)
              ? tag === 'input'
              : ['href', 'title', 'rel', 'target'].includes(data.attrName)
                ? tag === 'a'
                : true;
  if (!keep) data.keepAttr = false;
});
purify.addHook('afterSanitizeAttributes', (node) => {
  const el = node as Element;
  if (el.nodeName === 'A') {
    // The href as the browser reads it (entities decoded) must still be a safe one.
    const href = el.getAttribute('href');
    if (href !== null && safeHref(href) === null) el.removeAttribute('href');
    const h = el.getAttribute('href');
    if (h !== null && external(h)) {
      el.setAttribute('rel', 'noopener noreferrer');
      el.setAttribute('target', '_blank');
    } else {
      el.removeAttribute('rel');
      el.removeAttribute('target');
    }
  }
  // Only the task-list checkbox, and it cannot be ticked.
  if (el.nodeName === 'INPUT') {
    if (el.getAttribute('type') !== 'checkbox') el.remove();
    else el.setAttribute('disabled', '');
  }
});

/** sanitizeHtml keeps only the markup renderMarkdown writes (see the file comment). */
export function sanitizeHtml(html: string): string {
  return purify.sanitize(html, {
    ALLOWED_TAGS: TAGS,
    ALLOWED_ATTR: ATTRS,
    ALLOW_DATA_ATTR: false,
    ALLOW_ARIA_ATTR: false,
    ALLOW_UNKNOWN_PROTOCOLS: false,
    RETURN_TRUSTED_TYPE: false,
  });
}

/** renderMarkdown turns markdown into safe HTML (see the file comment for what it keeps). */
export function renderMarkdown(src: string, opt: MarkdownOptions = {}): string {
  current = opt;
  try {
    return sanitizeHtml(md.parse(src.replace(/\r\n?/g, '\n')) as string);
  } finally {
    current = {};
  }
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
  // pairing up with a marker, so only space-free runs become <mark>. Escaping already makes
  // everything else text; the sanitizer, keeping <mark> alone, is the second layer every
  // {@html} of the app goes through.
  const marked = escapeHtml(plain).replace(/\*\*([^*\s]+?)\*\*/g, '<mark>$1</mark>').replace(/\*\*/g, '');
  return purify.sanitize(marked, { ALLOWED_TAGS: ['mark'], ALLOWED_ATTR: [], RETURN_TRUSTED_TYPE: false });
}
