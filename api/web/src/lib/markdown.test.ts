import { describe, expect, it } from 'vitest';
import { escapeHtml, renderMarkdown, safeHref, sanitizeHtml, snippetHtml } from './markdown';

// KnowledgeDoc's link option: `kind:name` code spans and link targets become dashboard links.
const link = (code: string) => (/^(runbook|doc):[a-z0-9-]+$/.test(code) ? `/knowledge/${code}` : null);

/** dom parses rendered HTML so a test can ask what the browser would hold. */
function dom(html: string): HTMLElement {
  const d = document.createElement('div');
  d.innerHTML = html;
  return d;
}

/**
 * inert asserts the properties every rendering must have, whatever the source: no element
 * outside the renderer's own set, no event handler or unexpected attribute, every href a
 * safe one (as the browser reads it), no image, frame, style or script.
 */
const ALLOWED = new Set(
  'H1 H2 H3 H4 H5 H6 P BR HR BLOCKQUOTE PRE CODE UL OL LI INPUT STRONG EM DEL A DIV TABLE THEAD TBODY TR TH TD'.split(' '),
);
function inert(html: string): HTMLElement {
  const d = dom(html);
  for (const el of d.querySelectorAll('*')) {
    expect(ALLOWED.has(el.tagName), `unexpected <${el.tagName}> in ${html}`).toBe(true);
    for (const a of el.attributes) {
      expect(a.name.startsWith('on'), `event handler ${a.name} in ${html}`).toBe(false);
      expect(['href', 'title', 'rel', 'target', 'start', 'type', 'checked', 'disabled', 'data-lang', 'class', 'style']).toContain(a.name);
    }
    const href = el.getAttribute('href');
    if (href !== null) {
      expect(safeHref(href), `unsafe href ${href}`).not.toBeNull();
      // Resolved as the browser would from a dashboard page: only http(s) can come out.
      expect(new URL(href, 'https://oikos.example/knowledge/doc:x').protocol, `href ${href}`).toMatch(/^https?:$/);
    }
  }
  expect(html).not.toMatch(/<(script|img|iframe|svg|style|object|embed|form|math|link|meta|base)\b/i);
  return d;
}

describe('renderMarkdown: what the app relies on', () => {
  it('renders headings, shifted by headingShift and capped at h6', () => {
    expect(renderMarkdown('# Title')).toBe('<h1>Title</h1>\n');
    expect(renderMarkdown('# Title', { headingShift: 1 })).toBe('<h2>Title</h2>\n');
    expect(renderMarkdown('###### Deep', { headingShift: 1 })).toBe('<h6>Deep</h6>\n');
    expect(renderMarkdown('## Closed ##')).toBe('<h2>Closed</h2>\n');
  });

  it('starts a knowledge body with a heading KnowledgeDoc can drop when it repeats the title', () => {
    const html = renderMarkdown('# Disk full\n\nClear the cache.', { headingShift: 1 });
    expect(html).toMatch(/^<h2>([^<]*)<\/h2>\n?/);
    expect(html.replace(/^<h2>([^<]*)<\/h2>\n?/, '')).toBe('<p>Clear the cache.</p>\n');
  });

  it('renders paragraphs, emphasis, strike and hard breaks', () => {
    expect(renderMarkdown('Some *em*, _em_, **bold**, __bold__ and ~~gone~~.')).toBe(
      '<p>Some <em>em</em>, <em>em</em>, <strong>bold</strong>, <strong>bold</strong> and <del>gone</del>.</p>\n',
    );
    expect(renderMarkdown('one  \ntwo\nthree')).toBe('<p>one<br>two\nthree</p>\n');
    expect(renderMarkdown('first\n\nsecond')).toBe('<p>first</p>\n<p>second</p>\n');
  });

  it('renders nested and ordered lists, with the start number', () => {
    const d = inert(renderMarkdown('- a\n- b\n  - c\n\n3. x\n4. y'));
    expect(d.querySelectorAll('ul > li').length).toBe(3);
    expect(d.querySelector('ul > li > ul > li')?.textContent).toBe('c');
    expect(d.querySelector('ol')?.getAttribute('start')).toBe('3');
    expect([...d.querySelectorAll('ol > li')].map((l) => l.textContent)).toEqual(['x', 'y']);
  });

  it('renders task lists as disabled checkboxes', () => {
    const d = inert(renderMarkdown('- [ ] todo\n- [x] done'));
    const boxes = [...d.querySelectorAll('input')];
    expect(boxes.map((b) => [b.type, b.disabled, b.checked])).toEqual([
      ['checkbox', true, false],
      ['checkbox', true, true],
    ]);
  });

  it('renders fenced code with its language, escaped and unformatted', () => {
    expect(renderMarkdown('```go\nfmt.Println("<b>**x**</b>")\n```')).toBe(
      '<pre data-lang="go"><code>fmt.Println("&lt;b&gt;**x**&lt;/b&gt;")</code></pre>\n',
    );
    expect(renderMarkdown('~~~\nplain\n~~~')).toBe('<pre><code>plain</code></pre>\n');
    expect(renderMarkdown('    indented <x>\n    two')).toBe('<pre><code>indented &lt;x&gt;\ntwo</code></pre>\n');
  });

  it('renders code spans, escaped, and links them when the link option names them', () => {
    expect(renderMarkdown('run `a <b> & c`')).toBe('<p>run <code>a &lt;b&gt; &amp; c</code></p>\n');
    expect(renderMarkdown('see `runbook:disk-full` or `ls -l`', { link })).toBe(
      '<p>see <a href="/knowledge/runbook:disk-full"><code>runbook:disk-full</code></a> or <code>ls -l</code></p>\n',
    );
  });

  it('renders blockquotes and rules', () => {
    expect(renderMarkdown('> quoted\n> more\n\n---')).toBe('<blockquote>\n<p>quoted\nmore</p>\n</blockquote>\n<hr>\n');
  });

  it('renders pipe tables in a scrolling wrapper, with alignment', () => {
    const html = renderMarkdown('| name | size |\n|:----:|-----:|\n| a \\| b | `1` |\n| c |');
    expect(html).toBe(
      '<div class="md-table"><table><thead><tr><th style="text-align:center">name</th><th style="text-align:right">size</th></tr></thead>' +
        '<tbody><tr><td style="text-align:center">a | b</td><td style="text-align:right"><code>1</code></td></tr>' +
        '<tr><td style="text-align:center">c</td><td style="text-align:right"></td></tr></tbody></table></div>\n',
    );
  });

  it('opens external links in a new tab, safely, and relative ones in place', () => {
    expect(renderMarkdown('[docs](https://example.com/a?b=1&c=2)')).toBe(
      '<p><a href="https://example.com/a?b=1&amp;c=2" rel="noopener noreferrer" target="_blank">docs</a></p>\n',
    );
    expect(renderMarkdown('[there](/entities/lxc:jellyfin) [up](../x) [frag](#top)')).toBe(
      '<p><a href="/entities/lxc:jellyfin">there</a> <a href="../x">up</a> <a href="#top">frag</a></p>\n',
    );
    expect(renderMarkdown('[**bold** link](http://example.com)')).toBe(
      '<p><a href="http://example.com" rel="noopener noreferrer" target="_blank"><strong>bold</strong> link</a></p>\n',
    );
  });

  it('links bare URLs, without the sentence punctuation after them', () => {
    expect(renderMarkdown('See https://example.com/x.')).toBe(
      '<p>See <a href="https://example.com/x" rel="noopener noreferrer" target="_blank">https://example.com/x</a>.</p>\n',
    );
  });

  it('resolves knowledge link targets through the link option, and drops the ones it does not know', () => {
    expect(renderMarkdown('[the runbook](runbook:disk-full)', { link })).toBe('<p><a href="/knowledge/runbook:disk-full">the runbook</a></p>\n');
    expect(renderMarkdown('[x](ftp://host/file)', { link })).toBe('<p>x</p>\n');
    expect(renderMarkdown('mail ops@example.com')).toBe('<p>mail ops@example.com</p>\n');
  });

  it('never loads an image: a safe one becomes a link, another its alt text', () => {
    expect(renderMarkdown('![chart](https://example.com/c.png)')).toBe(
      '<p><a href="https://example.com/c.png" rel="noopener noreferrer" target="_blank">chart</a></p>\n',
    );
    expect(renderMarkdown('![pixel](data:image/png;base64,iVBORw0KGgo=)')).toBe('<p>pixel</p>\n');
  });

  it('shows raw HTML as the text it is', () => {
    expect(renderMarkdown('a <b>bold</b> claim')).toBe('<p>a &lt;b&gt;bold&lt;/b&gt; claim</p>\n');
    expect(renderMarkdown('<div>\nblock\n</div>')).toBe('<p>&lt;div&gt;\nblock\n&lt;/div&gt;</p>\n');
    expect(dom(renderMarkdown('<b>x</b>')).textContent?.trim()).toBe('<b>x</b>');
  });

  it('treats CRLF like LF', () => {
    expect(renderMarkdown('# T\r\n\r\nbody\r\n')).toBe('<h1>T</h1>\n<p>body</p>\n');
  });
});

describe('renderMarkdown: hostile input is inert', () => {
  const hostile: [string, string][] = [
    ['script tag', '<script>alert(1)</script>'],
    ['script inline', 'hello <script>alert(document.cookie)</script> world'],
    ['img onerror', '<img src=x onerror=alert(1)>'],
    ['img onerror inline', 'a <img src="x" onerror="alert(1)"> b'],
    ['javascript link', '[click](javascript:alert(1))'],
    ['javascript link, mixed case', '[click](JaVaScRiPt:alert(1))'],
    ['javascript link, entity colon', '[click](javascript&#58;alert(1))'],
    ['javascript link, hex entity', '[click](&#x6A;avascript:alert(1))'],
    ['javascript link, tab', '[click](java\tscript:alert(1))'],
    ['javascript link, encoded newline', '[click](java%0ascript:alert(1))'],
    ['javascript autolink', '<javascript:alert(1)>'],
    ['javascript reference link', '[click][x]\n\n[x]: javascript:alert(1)'],
    ['vbscript link', '[click](vbscript:msgbox(1))'],
    ['data link', '[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)'],
    ['data image', '![x](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)'],
    ['javascript image', '![x](javascript:alert(1))'],
    ['svg with script', '<svg><script>alert(1)</script></svg>'],
    ['svg onload', '<svg onload=alert(1)>'],
    ['svg animate', '<svg><a><animate attributeName=href values=javascript:alert(1) /><text x=20 y=20>x</text></a></svg>'],
    ['math', '<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>'],
    ['iframe', '<iframe src="https://evil.example"></iframe>'],
    ['iframe srcdoc', '<iframe srcdoc="<script>alert(1)</script>"></iframe>'],
    ['style', '<style>body{background:url(javascript:alert(1))}</style>'],
    ['style attribute', '<p style="background:url(javascript:alert(1))">x</p>'],
    ['object/embed', '<object data="x.swf"></object><embed src="x.swf">'],
    ['form', '<form action="https://evil.example"><input name=token></form>'],
    ['meta refresh', '<meta http-equiv="refresh" content="0;url=javascript:alert(1)">'],
    ['base', '<base href="https://evil.example/">'],
    ['nested script', '<scr<script>ipt>alert(1)</scr</script>ipt>'],
    ['broken tag', '<img src=x\nonerror=alert(1)//'],
    ['comment break-out', '<!--><img src=x onerror=alert(1)>-->'],
    ['cdata', '<![CDATA[<img src=x onerror=alert(1)>]]>'],
    ['noscript mxss', '<noscript><p title="</noscript><img src=x onerror=alert(1)>">'],
    ['link title injection', '[t](https://example.com "x\\" onmouseover=\\"alert(1)")'],
    ['link title with tag', "[t](https://example.com 'a\"><img src=x onerror=alert(1)>')"],
    ['link text with html', '[<img src=x onerror=alert(1)>](https://example.com)'],
    ['link href with quote', '[t](https://example.com/"onmouseover="alert(1))'],
    ['link href with angle', '[t](<https://example.com/"><script>alert(1)</script>>)'],
    ['code span link option', '`runbook:x" onclick="alert(1)`'],
    ['fence language injection', '```go" onclick="alert(1)\ncode\n```'],
    ['table cell html', '| a |\n|---|\n| <img src=x onerror=alert(1)> |'],
    ['heading html', '# <script>alert(1)</script>'],
    ['list html', '- <a href="javascript:alert(1)">x</a>'],
    ['blockquote html', '> <iframe src=javascript:alert(1)>'],
    ['html entity payload', '&lt;script&gt;alert(1)&lt;/script&gt;'],
    ['bare data URL', 'data:text/html,<script>alert(1)</script>'],
    ['protocol-relative link', '[x](//evil.example/path)'],
  ];

  it.each(hostile)('%s', (_name, src) => {
    const html = renderMarkdown(src, { link });
    const d = inert(html);
    // Whatever the payload, a link's text and every attribute value are inert text: nothing
    // the payload wrote became an element of its own.
    expect(d.querySelectorAll('a').length).toBeLessThanOrEqual(1);
  });

  it('drops the dangerous link targets and keeps their text', () => {
    expect(renderMarkdown('[click](javascript:alert(1))')).toBe('<p>click</p>\n');
    expect(renderMarkdown('[click](data:text/html,x)')).toBe('<p>click</p>\n');
    expect(renderMarkdown('[x](//evil.example/path)')).toBe('<p>x</p>\n');
    expect(renderMarkdown('<javascript:alert(1)>')).toBe('<p>javascript:alert(1)</p>\n');
    // An entity in a target stays literal text: the browser never reads it as a colon.
    const a = dom(renderMarkdown('[click](javascript&#58;alert(1))')).querySelector('a');
    expect(a?.getAttribute('href')).toBe('javascript&#58;alert(1)');
    expect(a?.protocol).not.toBe('javascript:');
  });

  it('keeps a hostile link title as one attribute value', () => {
    const a = dom(renderMarkdown('[t](https://example.com "x\\" onmouseover=\\"alert(1)")')).querySelector('a')!;
    expect(a.getAttribute('title')).toBe('x" onmouseover="alert(1)');
    expect(a.getAttributeNames().sort()).toEqual(['href', 'rel', 'target', 'title']);
  });

  it('shows a script as text and never as an element', () => {
    const d = dom(renderMarkdown('<script>alert(1)</script>'));
    expect(d.querySelector('script')).toBeNull();
    expect(d.textContent?.trim()).toBe('<script>alert(1)</script>');
  });
});

describe('sanitizeHtml: the second layer on its own', () => {
  it('strips scripts, handlers, frames and styles from HTML it is given', () => {
    expect(sanitizeHtml('<p onclick="alert(1)">hi<script>alert(1)</script></p>')).toBe('<p>hi</p>');
    expect(sanitizeHtml('<img src=x onerror=alert(1)>')).toBe('');
    expect(sanitizeHtml('<iframe src="https://evil.example"></iframe><style>*{}</style>ok')).toBe('ok');
    expect(sanitizeHtml('<svg><script>alert(1)</script></svg>')).toBe('');
    expect(sanitizeHtml('<p style="color:red">x</p><div class="evil">y</div>')).toBe('<p>x</p><div>y</div>');
    expect(sanitizeHtml('<td style="text-align:center">c</td>')).toBe('c');
    expect(sanitizeHtml('<table><tbody><tr><td style="text-align:center;background:url(x)">c</td></tr></tbody></table>')).toBe(
      '<table><tbody><tr><td>c</td></tr></tbody></table>',
    );
  });

  it('checks hrefs as the browser reads them and re-applies the link policy', () => {
    expect(sanitizeHtml('<a href="javascript:alert(1)">x</a>')).toBe('<a>x</a>');
    expect(sanitizeHtml('<a href="jav&#x09;ascript:alert(1)">x</a>')).toBe('<a>x</a>');
    expect(sanitizeHtml('<a href="java&#58;script&#58;alert(1)">x</a>')).toBe('<a>x</a>');
    expect(sanitizeHtml('<a href="data:text/html,x">x</a>')).toBe('<a>x</a>');
    expect(sanitizeHtml('<a href="mailto:a@b.c">x</a>')).toBe('<a>x</a>');
    expect(sanitizeHtml('<a href="https://e.com" target="_self">x</a>')).toBe('<a href="https://e.com" target="_blank" rel="noopener noreferrer">x</a>');
    expect(sanitizeHtml('<a href="/ops" target="_blank" rel="opener">x</a>')).toBe('<a href="/ops">x</a>');
  });

  it('keeps only a disabled checkbox input', () => {
    expect(sanitizeHtml('<input type="text" value="x">')).toBe('');
    expect(sanitizeHtml('<input type="checkbox" checked>')).toBe('<input type="checkbox" checked="" disabled="">');
  });
});

describe('safeHref', () => {
  it.each([
    ['https://example.com', 'https://example.com'],
    ['HTTP://EXAMPLE.COM', 'HTTP://EXAMPLE.COM'],
    ['  /knowledge/runbook:x ', '/knowledge/runbook:x'],
    ['./a', './a'],
    ['../a', '../a'],
    ['#top', '#top'],
    ['?q=1', '?q=1'],
    ['other-page', 'other-page'],
    ['other-page#x:y', 'other-page#x:y'],
  ])('keeps %j', (raw, want) => expect(safeHref(raw)).toBe(want));

  it.each(['javascript:alert(1)', ' JavaScript:alert(1)', 'java\tscript:alert(1)', 'java\nscript:x', '\u0001javascript:x', 'data:text/html,x', 'vbscript:x', 'mailto:a@b.c', '//evil.example', 'runbook:x', 'ftp://x'])(
    'refuses %j',
    (raw) => expect(safeHref(raw)).toBeNull(),
  );
});

describe('escapeHtml and snippetHtml', () => {
  it('escapes the five characters', () => {
    expect(escapeHtml(`<a href="x" title='y'>&</a>`)).toBe('&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;');
  });

  it('marks the matched words and nothing else', () => {
    expect(snippetHtml('the **disk** is **full**')).toBe('the <mark>disk</mark> is <mark>full</mark>');
    expect(snippetHtml('a **bold run** of **x**')).toBe('a bold run of <mark>x</mark>');
    expect(snippetHtml('<script>alert(1)</script> **hit**')).toBe('&lt;script&gt;alert(1)&lt;/script&gt; <mark>hit</mark>');
    expect(snippetHtml('**<img src=x onerror=alert(1)>**')).toBe('&lt;img src=x onerror=alert(1)&gt;');
  });

  it('drops markdown noise so the fragment reads as prose', () => {
    expect(snippetHtml('## Steps\n`df -h` | **disk** | ok\n|---|---|')).toBe('Steps df -h · <mark>disk</mark> · ok');
  });
});
