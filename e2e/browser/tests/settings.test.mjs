// Settings (issue #31, "Doctor"): the operator asks the agent to check its model server and
// sees every probe's finding and the verdict; the api's report is what the page shows. A
// read-only token cannot run the check. (Written with the suite's pattern; not yet run by the
// session that added it.)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, env, signIn, okApi, screenshot } from './lib.mjs';

let b, ctx, page;
before(async () => {
  b = await launch();
  ctx = await b.context();
  page = await ctx.newPage();
  await signIn(page, env.operator, '/settings');
});
after(async () => b?.close());

test('Check model server shows the findings and the verdict', async () => {
  await page.goto('/settings');
  await page.getByTestId('llm-check').click();
  const report = page.getByTestId('llm-report');
  await report.waitFor({ timeout: 60_000 });
  const rows = page.getByTestId('llm-finding');
  assert.ok((await rows.count()) >= 7, 'a row per probe');
  const api = await okApi('POST', '/api/v1/llm/check', env.operator, {});
  assert.equal(await report.getAttribute('data-ok'), String(api.ok), 'the page and the api agree');
  assert.ok((await page.getByTestId('llm-verdict').textContent()).includes('model server'));
  for (const f of api.findings) {
    const row = page.locator(`[data-testid=llm-finding][data-probe="${f.probe}"]`);
    assert.equal(await row.getAttribute('data-status'), f.status, `${f.probe}'s status`);
  }
  await screenshot(page, 'settings-llm-check');
});

test('a read-only token cannot run the check', async () => {
  const ro = await b.context();
  const p = await ro.newPage();
  await signIn(p, env.readonly, '/settings');
  assert.ok(await p.getByTestId('llm-check').isDisabled());
  await ro.close();
});
