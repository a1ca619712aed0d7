// The overview's first-run guide (issue 16) on a stack whose fleet is empty. The Go test
// TestBrowserFirstRun (e2e/dashboard/firstrun_test.go) starts that stack (no inventory
// seeded) and runs this directory; the seeded suite in tests/ never sees an empty fleet.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, env, signIn, okApi, screenshot, collectErrors, markNoReload, stillSamePage, until, log } from '../tests/lib.mjs';

let b;
before(async () => (b = await launch()));
after(async () => b?.close());

const COMMANDS = [
  'oikos ssh-key',
  'oikos add proxmox-host NAME --address ADDR',
  'oikos drift adopt --all',
  'oikos discover services lxc:NAME',
];

/** realErrors leaves out the console's "Failed to load resource" lines (a panel's own error). */
const realErrors = (errors) => errors.filter((e) => !e.startsWith('console: Failed to load resource'));

test('an empty fleet shows the first-run guide until its first entity exists', async () => {
  // Knowledge is not the fleet: with the knowledge base (and one more runbook) in the graph
  // the fleet is still empty.
  await okApi('PUT', '/api/v1/knowledge/runbook:first-steps', env.operator, { title: 'First steps', body: 'Add a Proxmox host.' });
  const kb = await okApi('GET', '/api/v1/entities?type=knowledge&limit=5');
  log(`knowledge entities: ${kb.items.map((e) => e.slug).join(', ')}`);
  assert.ok(kb.items.length > 0, 'the knowledge base is in the graph');
  const fleet = await okApi('GET', '/api/v1/entities?not_type=knowledge,check&limit=1');
  assert.equal(fleet.items.length, 0, 'the stack starts with an empty fleet');

  // Dark and phone first, for the artifacts (the guide is gone once the fleet has an entity).
  for (const [name, opts] of [
    ['overview-first-run-1280-dark', { colorScheme: 'dark' }],
    ['overview-first-run-390-light', { viewport: { width: 390, height: 844 }, colorScheme: 'light', isMobile: true, hasTouch: true }],
  ]) {
    const ctx = await b.context(opts);
    const page = await ctx.newPage();
    const errors = collectErrors(page);
    await signIn(page, env.operator);
    await page.getByTestId('first-run').waitFor();
    if (name.includes('390')) {
      const wide = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(wide <= 391, `the page is ${wide} px wide on a phone`);
    }
    await screenshot(page, name);
    assert.deepEqual(realErrors(errors), [], name);
    await ctx.close();
  }

  const ctx = await b.context({ viewport: { width: 1280, height: 900 }, colorScheme: 'light' });
  await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: env.base });
  const page = await ctx.newPage();
  const errors = collectErrors(page);
  await signIn(page, env.operator);

  const guide = page.getByTestId('first-run');
  await guide.waitFor();
  assert.equal((await guide.getByRole('heading', { level: 2 }).textContent()).trim(), 'Add your first machine');
  assert.equal(await guide.getByRole('heading', { level: 3 }).count(), COMMANDS.length);
  assert.deepEqual(
    (await guide.getByTestId('first-run-command').allTextContents()).map((t) => t.trim()),
    COMMANDS,
  );
  const text = await guide.textContent();
  for (const s of ['oikos seed --inventory fleet.yaml', 'oikos export', 'make up', 'OIKOS_DEMO=true', '/root/.ssh/authorized_keys']) {
    assert.ok(text.includes(s), `the guide mentions ${s}`);
  }
  // In place of the empty panels: no counts of zero, no empty incident or approval lists.
  for (const id of ['count-up', 'open-incidents', 'pending-approvals', 'running-executions']) {
    assert.equal(await page.getByTestId(id).count(), 0, `${id} is not shown on an empty fleet`);
  }
  await page.waitForTimeout(150);
  log('screenshot', await screenshot(page, 'overview-first-run-1280-light'));

  // Every copy button is named, reached with Tab from the one before, and copies with Enter.
  const buttons = guide.getByTestId('copy-command');
  assert.equal(await buttons.count(), COMMANDS.length);
  for (let i = 0; i < COMMANDS.length; i++) {
    assert.equal(await buttons.nth(i).getAttribute('aria-label'), `Copy command: ${COMMANDS[i]}`);
  }
  await buttons.nth(0).focus();
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement?.getAttribute('aria-label')), `Copy command: ${COMMANDS[1]}`);
  await page.keyboard.press('Enter');
  await until('the button says Copied', 3000, async () => (await buttons.nth(1).textContent()).trim() === 'Copied');
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), COMMANDS[1]);

  // One entity through the api: the guide goes and the counts come, without a reload.
  await markNoReload(page);
  await okApi('POST', '/api/v1/entities', env.operator, {
    type: 'proxmox-host',
    name: 'pve1',
    attributes: { node: 'pve1', lan_ipv4: '192.0.2.10' },
  });
  const t0 = Date.now();
  await guide.waitFor({ state: 'detached', timeout: 10_000 });
  await page.getByTestId('count-up').waitFor();
  await page.getByTestId('open-incidents').waitFor();
  log(`guide gone ${Date.now() - t0} ms after the entity was created`);
  assert.ok(await stillSamePage(page), 'the page was not reloaded');
  assert.deepEqual(realErrors(errors), []);
  await ctx.close();
});
