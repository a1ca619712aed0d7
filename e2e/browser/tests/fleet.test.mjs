// Fleet (D1): the overview's counts are the api's; a labsim fault on a Proxmox host shows
// its guests unknown within one check interval, live, without a reload; entity detail
// draws a chart from real metric samples; the entities table's filters live in the URL.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, env, signIn, ctl, okApi, until, markNoReload, stillSamePage, log } from './lib.mjs';

let b, ctx, page;
before(async () => {
  b = await launch();
  ctx = await b.context();
  page = await ctx.newPage();
  await signIn(page, env.operator);
});
after(async () => {
  await ctl('DELETE', '/faults').catch(() => undefined);
  await b?.close();
});

const states = ['up', 'degraded', 'down', 'unknown', 'stale'];

async function uiCounts() {
  const out = {};
  // In the api's order: the five health states, then maintenance (counted apart).
  for (const h of [...states, 'maintenance']) out[h] = Number((await page.getByTestId(`count-${h}`).textContent()).trim());
  return out;
}

test("the overview's counts equal GET /api/v1/health/summary", async () => {
  await page.goto('/');
  await page.getByTestId('count-up').waitFor();
  // Checks keep running, so the two are compared until they agree at one moment (the page
  // follows health events; a mismatch that persists fails).
  let api, ui;
  await until('overview counts equal the api summary', 15_000, async () => {
    api = (await okApi('GET', '/api/v1/health/summary')).counts;
    ui = await uiCounts();
    const again = (await okApi('GET', '/api/v1/health/summary')).counts;
    return JSON.stringify(api) === JSON.stringify(again) && JSON.stringify(api) === JSON.stringify(ui);
  }, 250);
  log('overview counts', JSON.stringify(ui));
  assert.ok(states.reduce((n, h) => n + ui[h], 0) > 0, 'the seeded fleet is counted');
  await page.getByTestId('wrong-now').or(page.getByTestId('empty')).first().waitFor();
  await page.getByTestId('pending-approvals').waitFor();
  await page.getByTestId('running-executions').waitFor();
  await page.getByTestId('agent-activity').waitFor();
});

test("a Proxmox host going down shows its guests unknown within one check interval, without a reload", async () => {
  // The guests of ceres that are observed now (not unknown already, not in maintenance).
  const list = await okApi('GET', '/api/v1/entities?type=guest&attr.host=ceres&limit=200');
  const items = list.items ?? list;
  let guests = items.filter((g) => g.state !== 'maintenance').map((g) => g.slug);
  assert.ok(guests.length >= 3, `ceres has guests: ${guests}`);
  await page.goto('/entities?type=guest');
  await page.getByTestId('entities-table').waitFor();
  const badge = (slug) => page.locator(`[data-testid=entity-row][data-slug="${slug}"] [data-health]`).first();
  await until('the guests of ceres have their first results', 30_000, async () => {
    for (const g of guests) if (!(await badge(g).count())) return false;
    const hs = await Promise.all(guests.map((g) => badge(g).getAttribute('data-health')));
    return hs.some((h) => h === 'up' || h === 'degraded');
  });
  const before = Object.fromEntries(await Promise.all(guests.map(async (g) => [g, await badge(g).getAttribute('data-health')])));
  guests = guests.filter((g) => before[g] !== 'unknown');
  log('ceres guests before the fault', JSON.stringify(before));
  await markNoReload(page);

  const t0 = Date.now();
  await ctl('PUT', '/faults/hosts/ceres', { down: true });
  const within = env.interval + 3_000; // one interval, plus the result writer's 1 s flush and delivery
  await until(`every observed guest of ceres shows unknown (${guests.join(', ')})`, within + 5_000, async () => {
    const hs = await Promise.all(guests.map((g) => badge(g).getAttribute('data-health')));
    return hs.every((h) => h === 'unknown');
  }, 50);
  const took = Date.now() - t0;
  log(`guests of ceres unknown ${took} ms after the fault (interval ${env.interval} ms)`);
  assert.ok(took <= within, `within one check interval (+ flush): ${took} ms > ${within} ms`);
  assert.ok(await stillSamePage(page), 'no reload');
  // The reason names the host.
  const summary = await okApi('GET', '/api/v1/health/summary');
  const one = summary.entities.find((e) => e.slug === guests[0]);
  assert.ok(one, `${guests[0]} is in what is wrong`);
  log(`reason of ${guests[0]}: ${one.reason}`);

  // The overview lists them under what is wrong now, with their reasons.
  await page.goto('/');
  await page.locator(`[data-testid=wrong-item][data-slug="${guests[0]}"]`).waitFor();

  await ctl('DELETE', '/faults');
  await until('the guests of ceres are observed again', env.interval * 3, async () => {
    const s = await okApi('GET', '/api/v1/health/summary');
    return !s.entities.some((e) => guests.includes(e.slug) && e.health === 'unknown');
  }, 250);
});

test('entity detail draws a metrics chart from real samples', async () => {
  const slug = 'lxc:jellyfin';
  await until('lxc:jellyfin has cpu samples', 30_000, async () => {
    const m = await okApi('GET', `/api/v1/entities/${encodeURIComponent(slug)}/metrics?name=cpu_pct&since=1h`);
    return m.points.length > 0;
  }, 500);
  await page.goto(`/entities/${slug}`);
  await page.getByTestId('entity-title').waitFor();
  const chart = page.getByTestId('metrics-chart');
  await chart.waitFor();
  const points = await until('the chart has points', 15_000, async () => Number(await chart.getAttribute('data-points')) || 0);
  log(`metrics chart of ${slug}: ${points} points`);
  assert.ok(points > 0);
  assert.ok(await chart.locator('canvas').count(), 'uPlot drew a canvas');
  for (const id of ['entity-health', 'range-picker', 'checks', 'relations', 'blast-radius', 'audit', 'entity-executions', 'entity-signals']) {
    await page.getByTestId(id).first().waitFor({ timeout: 10_000 });
  }
  // Another range reloads the chart from the metrics endpoint.
  const rp = page.getByTestId('range-picker');
  const six = rp.getByRole('button', { name: /6\s*h/i }).or(rp.getByRole('radio', { name: /6\s*h/i }));
  if (await six.count()) {
    await six.first().click();
    await until('the 6h chart has points', 10_000, async () => Number(await chart.getAttribute('data-points')) > 0);
  } else if (await rp.locator('select').count()) {
    await rp.locator('select').selectOption({ label: '6h' }).catch(() => rp.locator('select').selectOption('6h'));
  }
});

test('the entities table filters through the URL and pages with the cursor', async () => {
  await page.goto('/entities');
  await page.getByTestId('entities-table').waitFor();
  const q = page.getByTestId('filter-q');
  const t0 = Date.now();
  await q.fill('jelly');
  await until('the table shows the filtered rows', 5_000, async () => {
    const slugs = await page.getByTestId('entity-row').evaluateAll((rs) => rs.map((r) => r.dataset.slug));
    return slugs.length > 0 && slugs.every((s) => s.includes('jelly'));
  }, 20);
  log(`filter change to rows: ${Date.now() - t0} ms`);
  assert.match(page.url(), /q=jelly/);
  // The filter survives a reload (it lives in the URL).
  await page.reload();
  await page.getByTestId('entities-table').waitFor();
  assert.equal(await page.getByTestId('filter-q').inputValue(), 'jelly');
  await q.fill('');
  // Paging: the seeded fleet has more than one page of 50.
  await page.goto('/entities');
  await page.getByTestId('entity-row').first().waitFor();
  const first = await page.getByTestId('entity-row').first().getAttribute('data-slug');
  const next = page.getByTestId('next-page');
  if (await next.isEnabled()) {
    await next.click();
    await until('page 2', 5_000, async () => (await page.getByTestId('entity-row').first().getAttribute('data-slug')) !== first);
    await page.getByTestId('prev-page').click();
    await until('back on page 1', 5_000, async () => (await page.getByTestId('entity-row').first().getAttribute('data-slug')) === first);
  }
});

test("a health event updates a row of the entities table in place", async () => {
  const was = (await okApi('GET', '/api/v1/entities/lxc:jellyseerr')).health ?? 'up';
  await page.goto('/entities?q=jellyseerr');
  const row = page.locator('[data-testid=entity-row][data-slug="lxc:jellyseerr"] [data-health]').first();
  await row.waitFor();
  await markNoReload(page);
  let fetched = 0;
  const onReq = (r) => {
    if (r.url().includes('/api/v1/entities?')) fetched++;
  };
  page.on('request', onReq);
  await ctl('POST', '/health-events', { rate: 20, seconds: 0.05, slugs: ['lxc:jellyseerr'], to: 'degraded' });
  await until('the row shows degraded', 5_000, async () => (await row.getAttribute('data-health')) === 'degraded', 20);
  page.off('request', onReq);
  assert.equal(fetched, 0, 'the page was not refetched');
  assert.ok(await stillSamePage(page));
  await ctl('POST', '/health-events', { rate: 20, seconds: 0.05, slugs: ['lxc:jellyseerr'], to: was === 'degraded' ? 'up' : was });
});
