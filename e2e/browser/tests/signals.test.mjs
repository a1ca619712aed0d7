// Signals (D1, D4): a signal raised while the page is open appears without a reload; an
// operator acknowledges, mutes and resolves it from the Signals page and from the entity's
// detail, and each decision is the api's (the signal's status there agrees).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, env, signIn, ctl, okApi, until, markNoReload, stillSamePage } from './lib.mjs';

let b, ctx, page;
before(async () => {
  b = await launch();
  ctx = await b.context();
  page = await ctx.newPage();
  await signIn(page, env.operator, '/signals');
});
after(async () => b?.close());

const apiStatus = async (id) => (await okApi('GET', `/api/v1/signals?status=open,acknowledged,muted,resolved&limit=500`)).items.find((s) => s.id === id)?.status;

test('a raised signal appears live; ack, mute and resolve from the Signals page', async () => {
  await page.goto('/signals');
  await page.getByTestId('filter-status').waitFor();
  await markNoReload(page);
  const { id } = await ctl('POST', '/signals', { entity: 'lxc:redis', kind: 'e2e_dash_probe', severity: 'warning', summary: 'e2e-dash: redis answers slowly' });
  const row = page.locator(`[data-testid=signal-row][data-id="${id}"]`);
  await row.waitFor({ timeout: 5_000 });
  assert.ok(await stillSamePage(page), 'it arrived without a reload');
  assert.equal(await row.getAttribute('data-status'), 'open');
  assert.ok((await row.textContent()).includes('redis answers slowly'), 'the row says what is wrong');

  await row.getByTestId('signal-ack').click();
  await until('the row shows acknowledged', 5_000, async () => (await row.getAttribute('data-status')) === 'acknowledged');
  assert.equal(await apiStatus(id), 'acknowledged');

  await row.getByTestId('signal-mute').click();
  await until('the row shows muted', 5_000, async () => (await row.getAttribute('data-status')) === 'muted');
  assert.equal(await apiStatus(id), 'muted');

  await row.getByTestId('signal-resolve').click();
  await until('the row shows resolved or leaves the open list', 5_000, async () => !(await row.count()) || (await row.getAttribute('data-status')) === 'resolved');
  assert.equal(await apiStatus(id), 'resolved');
});

test("a signal shows on its entity's detail and is resolved from there", async () => {
  const { id } = await ctl('POST', '/signals', { entity: 'lxc:radarr', kind: 'e2e_dash_probe', severity: 'critical', summary: 'e2e-dash: radarr queue stuck' });
  await page.goto('/entities/lxc:radarr');
  const box = page.getByTestId('entity-signals');
  await box.waitFor();
  const row = box.locator(`[data-id="${id}"]`).first();
  await row.waitFor({ timeout: 5_000 });
  await row.getByTestId('signal-resolve').click();
  await until('the signal is resolved', 5_000, async () => (await apiStatus(id)) === 'resolved');
});
