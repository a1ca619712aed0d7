// Screenshots of every page (1280 px light and dark, 390 px phone light and dark) into the
// artifacts directory, and a check that no page throws or logs an error while it renders.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, env, signIn, okApi, screenshot, collectErrors, log } from './lib.mjs';

let b;
before(async () => (b = await launch()));
after(async () => b?.close());

async function pages() {
  const out = [
    ['overview', '/', 'count-up'],
    ['entities', '/entities', 'entities-table'],
    ['entity', '/entities/lxc:jellyfin', 'metrics-chart'],
    ['ops', '/ops', 'history-table'],
    ['chat', '/chat', 'chat-input'],
    ['knowledge', '/knowledge', 'knowledge-search'],
    ['signals', '/signals', null],
    ['graph', '/graph', 'graph-list'],
    ['blast-radius', '/graph?root=proxmox-host:atlas', 'blast-radius-list'],
    ['not-found', '/no-such-page', 'not-found'],
  ];
  const s = await okApi('GET', '/api/v1/sessions?limit=1').catch(() => null);
  if (s?.items?.[0]?.id) out.push(['chat-session', `/chat/${encodeURIComponent(s.items[0].id)}`, 'assistant-message']);
  const k = await okApi('GET', '/api/v1/knowledge/search?q=jellyfin&limit=1').catch(() => null);
  const slug = k?.items?.[0]?.slug ?? k?.results?.[0]?.slug;
  if (slug) out.push(['knowledge-doc', `/knowledge/${encodeURIComponent(slug)}`, 'knowledge-doc']);
  return out;
}

const variants = [
  ['1280-light', { viewport: { width: 1280, height: 900 }, colorScheme: 'light' }],
  ['1280-dark', { viewport: { width: 1280, height: 900 }, colorScheme: 'dark' }],
  ['390-light', { viewport: { width: 390, height: 844 }, colorScheme: 'light', isMobile: true, hasTouch: true }],
];

test('screenshots of every page', async () => {
  const list = await pages();
  const problems = [];
  for (const [vname, opts] of variants) {
    const ctx = await b.context(opts);
    const page = await ctx.newPage();
    await signIn(page, env.operator);
    const errors = collectErrors(page);
    // Failed api calls, by URL (a console line does not say which).
    page.on('response', (r) => {
      const u = new URL(r.url());
      // GET /metrics without a name is the spec's way to list an entity's metric names (a 400
      // that names them); the chart asks it on purpose.
      if (r.status() === 400 && u.pathname.endsWith('/metrics') && !u.searchParams.get('name')) return;
      if (r.status() >= 400 && u.pathname.startsWith('/api/')) errors.push(`${r.status()} ${r.request().method()} ${r.url().replace(env.base, '')} on ${new URL(page.url()).pathname}`);
    });
    for (const [name, path, testid] of list) {
      const t0 = Date.now();
      await page.goto(path);
      if (testid) {
        await page.getByTestId(testid).first().waitFor({ timeout: 15_000 }).catch((e) => problems.push(`${vname} ${path}: ${testid} not shown (${e.message.split('\n')[0]})`));
      }
      await page
        .waitForFunction(() => !document.querySelector('main [data-testid=loading]'), null, { timeout: 5_000 })
        .catch(() => problems.push(`${vname} ${path}: still loading after 5 s`));
      await page.waitForTimeout(150); // charts and the graph lay out
      if (vname.startsWith('390')) {
        // Nothing but a table's own scroller may be wider than the phone.
        const wide = await page.evaluate(() => document.documentElement.scrollWidth);
        if (wide > 390 + 1) problems.push(`${vname} ${path}: the page is ${wide} px wide`);
      }
      await screenshot(page, `${name}-${vname}`);
      if (vname === '1280-light') log(`${path}: ${Date.now() - t0} ms`);
    }
    // "Failed to load resource" console lines are the responses listed above.
    const real = errors.filter((e) => !e.startsWith('console: Failed to load resource'));
    if (real.length) problems.push(...real.map((e) => `${vname}: ${e}`));
    await ctx.close();
  }
  log(`${list.length} pages × ${variants.length} variants written to ${env.artifacts}`);
  for (const p of problems) log('problem:', p);
  assert.deepEqual(problems, []);
});
