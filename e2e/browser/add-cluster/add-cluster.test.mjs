// The entities page's add form (issue 30): a Proxmox host added from the dashboard, its host
// key shown for the operator to compare before anything is trusted, then the cluster it is a
// member of, with each node's key pinned on its word, and one adopt for everything. The Go
// test TestBrowserAddCluster (e2e/dashboard/addcluster_test.go) starts the stack (no fleet in
// the graph, the lab serving the demo's cluster) and runs this directory.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, env, signIn, okApi, api, screenshot, collectErrors, log } from '../tests/lib.mjs';

const fp = { atlas: process.env.DASH_FP_ATLAS, boreas: process.env.DASH_FP_BOREAS, ceres: process.env.DASH_FP_CERES };

let b;
before(async () => (b = await launch()));
after(async () => b?.close());

test('add a cluster through one node: compare the key, confirm, see the nodes, adopt everything', async () => {
  const ctx = await b.context({ viewport: { width: 1280, height: 1000 }, colorScheme: 'light' });
  const page = await ctx.newPage();
  const errors = collectErrors(page);
  await signIn(page, env.operator, '/entities');
  await page.getByTestId('fleet-add-open').click();
  const form = page.getByTestId('fleet-add-form');
  await form.waitFor();
  await page.getByTestId('add-type').selectOption('proxmox-host');
  await page.getByTestId('add-name').fill('atlas');
  await page.getByTestId('add-address').fill('127.0.10.1');
  await page.getByTestId('add-user').fill('root');
  await page.getByTestId('add-port').fill('2222');
  await screenshot(page, 'fleet-add-form');
  await page.getByTestId('add-connect').click();

  // The key the machine offered, for the operator to compare; nothing is pinned yet.
  const shown = page.getByTestId('add-fingerprint');
  await shown.waitFor({ timeout: 60_000 });
  const text = (await shown.textContent()).trim();
  log('offered:', text);
  assert.equal(text, `ssh-ed25519 ${fp.atlas}`);
  const before = await okApi('GET', '/api/v1/hosts/proxmox-host:atlas');
  assert.equal(before.connect.status, 'awaiting_confirmation');
  await screenshot(page, 'fleet-add-fingerprint');

  await page.getByTestId('add-confirm').click();
  await page.getByTestId('add-connected').or(page.getByTestId('add-failed')).or(page.getByTestId('add-error')).first()
    .waitFor({ timeout: 60_000 });
  log('answer:', (await page.getByTestId('fleet-add').textContent()).replace(/\s+/g, ' ').trim());
  const cluster = page.getByTestId('add-cluster');
  await cluster.waitFor({ timeout: 5_000 });
  assert.equal(await cluster.getAttribute('data-cluster'), 'olympus');
  const rows = page.getByTestId('cluster-node');
  assert.equal(await rows.count(), 3);
  for (const [node, status] of [['atlas', 'connected'], ['boreas', 'vouched'], ['ceres', 'vouched']]) {
    const row = page.locator(`[data-testid=cluster-node][data-node=${node}]`);
    assert.equal(await row.getAttribute('data-key-status'), status, node);
    assert.equal((await row.getByTestId('node-fingerprint').textContent()).trim(), `ssh-ed25519 ${fp[node]}`, node);
  }
  await screenshot(page, 'fleet-add-cluster');

  await page.getByTestId('add-adopt').click();
  const done = page.getByTestId('add-adopted');
  await done.waitFor({ timeout: 90_000 });
  log('adopted:', (await done.textContent()).replace(/\s+/g, ' ').trim());
  assert.match(await done.textContent(), /cluster:olympus/);
  for (const slug of ['cluster:olympus', 'proxmox-host:boreas', 'proxmox-host:ceres']) {
    const r = await api('GET', `/api/v1/entities/${slug}`);
    assert.equal(r.status, 200, `${slug} is in the graph`);
  }
  await screenshot(page, 'fleet-add-adopted');
  // The sign-in page's session probe answers 401 before the token is given: not an error here.
  assert.deepEqual(errors.filter((e) => !e.startsWith('console: Failed to load resource')), []);
  await ctx.close();
});

test('a bad address is refused, naming the field, and nothing is added', async () => {
  const ctx = await b.context({ viewport: { width: 1280, height: 900 } });
  const page = await ctx.newPage();
  await signIn(page, env.operator, '/entities');
  await page.getByTestId('fleet-add-open').click();
  await page.getByTestId('add-name').fill('nowhere');
  await page.getByTestId('add-address').fill('pve.lab.example');
  await page.getByTestId('add-connect').click();
  const err = page.getByTestId('add-error');
  await err.waitFor();
  assert.match(await err.textContent(), /not an IP address/);
  const r = await api('GET', '/api/v1/entities/proxmox-host:nowhere');
  assert.equal(r.status, 404);
  await ctx.close();
});
