// Operations (D2): approving a config_mutation from Ops runs it and its output streams into
// the live output; a destructive approval stays refused until its typed phrase is typed
// exactly (the button is disabled and nothing runs).
// The schedulers panel lists each scheduler and its units, and the units a killed one left.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, env, signIn, ctl, okApi, until, log, markNoReload, stillSamePage, screenshot } from './lib.mjs';

let b, ctx, page;
before(async () => {
  b = await launch();
  ctx = await b.context();
  page = await ctx.newPage();
  await signIn(page, env.operator, '/ops');
});
after(async () => b?.close());

/** request asks for an execution with the agent's token (as Nomos would) and checks it queued. */
async function request(body) {
  const e = await ctl('POST', '/executions', body);
  assert.equal(e.status, 'pending_approval', `queued for approval: ${JSON.stringify(e)}`);
  assert.ok(e.approval_id);
  return e;
}

test('approving a config_mutation from Ops streams its output into the live output', async () => {
  await page.goto('/ops');
  await markNoReload(page);
  const command = 'echo restarting redis; sleep 2; echo waiting for redis; sleep 2; systemctl restart redis-server; echo redis restarted';
  const e = await request({ target: 'lxc:redis', command, purpose: 'e2e-dash: restart redis from the Ops page' });
  assert.equal(e.risk_class, 'config_mutation');

  // The new approval appears live (approval.requested), with the whole command.
  const card = page.locator(`[data-testid=approval-card][data-approval-id="${e.approval_id}"]`);
  await card.waitFor({ timeout: 5_000 });
  assert.equal(await card.getAttribute('data-risk'), 'config_mutation');
  assert.equal(await card.getAttribute('data-status'), 'pending');
  assert.ok((await card.textContent()).includes(command), 'the whole command is shown');
  assert.ok(await stillSamePage(page), 'it arrived without a reload');

  await card.getByTestId('approve-button').click();
  const exec = page.locator(`[data-testid=execution-card][data-execution-id="${e.id}"]`);
  const out = exec.getByTestId('live-output');
  // Streaming: the first line shows while the command still runs, before the last exists.
  let seen = 'no execution card';
  const partial = await until('the first output line while it runs', 15_000, async () => {
    if (!(await exec.count())) {
      const cards = await page.getByTestId('execution-card').evaluateAll((els) => els.map((e) => `${e.dataset.executionId}:${e.dataset.status}`));
      seen = `no card for ${e.id}; cards: ${cards.join(' ')}; api: ${(await okApi('GET', `/api/v1/executions/${e.id}`)).status}`;
      return false;
    }
    const st = await exec.getAttribute('data-status');
    const text = (await out.textContent()) ?? '';
    seen = `card ${st}, output state ${await out.getAttribute('data-state')}, text ${JSON.stringify(text.slice(0, 200))}`;
    return st === 'running' && text.includes('restarting redis') && !text.includes('redis restarted') ? text : false;
  }, 50).catch((err) => {
    throw new Error(`${err.message}; last seen: ${seen}`);
  });
  log('partial output while running:', JSON.stringify(partial.trim().slice(0, 120)));
  await exec.getByTestId('elapsed').first().waitFor();
  await until('the execution completes with all its output', 30_000, async () => {
    const st = await exec.getAttribute('data-status');
    return st === 'completed' && ((await out.textContent()) ?? '').includes('redis restarted');
  }, 100);
  const after = await okApi('GET', `/api/v1/executions/${e.id}`);
  assert.equal(after.status, 'completed');
  assert.equal(after.authorised_by, 'approval');
  const ap = await okApi('GET', `/api/v1/approvals/${e.approval_id}`);
  assert.equal(ap.status, 'approved');
  log(`approved via ${ap.via} by ${ap.decided_by}`);
  await page.getByTestId('history-table').waitFor();
  assert.ok(await stillSamePage(page));
});

test('a destructive approval is refused without the typed phrase, and nothing runs', async () => {
  await page.goto('/ops');
  const command = 'rm -rf /srv/e2e-dash-scratch';
  const e = await request({ target: 'lxc:homepage', command, purpose: 'e2e-dash: a destructive step' });
  assert.equal(e.risk_class, 'destructive');
  const card = page.locator(`[data-testid=approval-card][data-approval-id="${e.approval_id}"]`);
  await card.waitFor({ timeout: 5_000 });
  assert.equal(await card.getAttribute('data-risk'), 'destructive');
  assert.ok((await card.textContent()).includes(command), 'the whole command is shown');
  assert.ok((await card.textContent()).includes('lxc:homepage'), 'and the target');
  const approve = card.getByTestId('approve-button');
  const phrase = card.getByTestId('typed-phrase');
  await phrase.waitFor();
  assert.equal(await approve.isDisabled(), true, 'Approve is disabled before the phrase is typed');
  // The phrase is the api's typed confirmation, `confirm <verb> <target>`; the card shows it.
  const wanted = 'confirm rm lxc:homepage';
  assert.ok((await card.textContent()).includes(wanted), `the card names the phrase ${wanted}`);
  for (const wrong of ['yes', 'confirm rm', 'confirm rm lxc:homepag', 'CONFIRM RM LXC:HOMEPAGE x']) {
    await phrase.fill(wrong);
    assert.equal(await approve.isDisabled(), true, `still disabled with ${JSON.stringify(wrong)}`);
  }
  // A click on the disabled button does nothing.
  await approve.click({ force: true, timeout: 2_000 }).catch(() => undefined);
  await new Promise((r) => setTimeout(r, 500));
  assert.equal((await okApi('GET', `/api/v1/executions/${e.id}`)).status, 'pending_approval', 'nothing ran');
  assert.equal((await okApi('GET', `/api/v1/approvals/${e.approval_id}`)).status, 'pending', 'nothing was decided');

  // The exact phrase enables it; approving then runs it (harmless in the lab simulator).
  await phrase.fill(wanted);
  assert.equal(await approve.isDisabled(), false, 'enabled by the exact phrase');
  await approve.click();
  await until('the card shows approved', 5_000, async () => (await card.getAttribute('data-status')) === 'approved');
  const ap = await okApi('GET', `/api/v1/approvals/${e.approval_id}`);
  assert.equal(ap.status, 'approved');
  assert.equal(ap.via, 'typed_confirmation', 'recorded as a typed confirmation');
});

test('denying from Ops flips the card and nothing runs', async () => {
  await page.goto('/ops');
  const e = await request({ target: 'lxc:redis', command: 'systemctl restart redis-server', purpose: 'e2e-dash: to be denied' });
  const card = page.locator(`[data-testid=approval-card][data-approval-id="${e.approval_id}"]`);
  await card.waitFor({ timeout: 5_000 });
  await card.getByTestId('deny-button').click();
  await until('the card shows denied', 5_000, async () => (await card.getAttribute('data-status')) === 'denied' || !(await card.count()));
  const x = await okApi('GET', `/api/v1/executions/${e.id}`);
  assert.notEqual(x.status, 'completed');
  assert.equal((await okApi('GET', `/api/v1/approvals/${e.approval_id}`)).status, 'denied');
});

test('the schedulers panel shows each scheduler with its units, and the units a killed one left', async () => {
  await page.goto('/ops');
  await markNoReload(page);
  const id = 'e2e-dash-scheduler';
  const row = page.locator(`[data-testid=scheduler-row][data-scheduler-id="${id}"]`);
  await row.waitFor({ timeout: 10_000 });
  const listed = await okApi('GET', '/api/v1/schedulers');
  const me = listed.schedulers.find((s) => s.id === id);
  assert.ok(me?.live, `the api lists ${id} live: ${JSON.stringify(listed)}`);
  assert.equal(await row.getAttribute('data-live'), 'true');
  assert.equal(Number(await row.getAttribute('data-units')), me.leases.length, 'as many units as the api lists');
  // The only scheduler holds every unit: each SSH host, and net.
  for (const u of ['host:proxmox-host:atlas', 'net']) assert.ok(me.leases.some((l) => l.unit === u), `${id} holds ${u}`);
  const atlas = row.locator('[data-unit="host:proxmox-host:atlas"] a');
  assert.match(decodeURIComponent((await atlas.getAttribute('href')) ?? ''), /\/entities\/proxmox-host:atlas$/, 'a host unit links to its entity');
  assert.equal(await page.getByTestId('orphaned-units').count(), 0, 'nothing orphaned while it runs');

  // Killed as by kill -9: its leases lapse unreleased; the panel (polling) shows it gone and
  // its units without a live holder.
  await ctl('POST', '/scheduler/kill');
  try {
    const orphaned = page.getByTestId('orphaned-units');
    await until('the scheduler gone and its units orphaned', 20_000, async () =>
      (await row.getAttribute('data-live')) === 'false' && (await orphaned.count()) > 0);
    const text = (await orphaned.textContent()) ?? '';
    assert.match(text, new RegExp(`${me.leases.length} units have no live scheduler`));
    assert.ok(text.includes(`Last held by ${id}`), text);
    assert.equal(await orphaned.locator('[data-unit]').count(), me.leases.length, 'every unit it held is listed');
    assert.equal(await orphaned.locator('[data-unit="host:proxmox-host:atlas"]').count(), 1);
    await screenshot(page, 'ops-schedulers-orphaned');
  } finally {
    await ctl('POST', '/scheduler/start');
  }
  // Started again under its id, it takes its units back.
  await until('the scheduler live again with nothing orphaned', 20_000, async () =>
    (await row.getAttribute('data-live')) === 'true' && (await page.getByTestId('orphaned-units').count()) === 0 &&
    Number(await row.getAttribute('data-units')) === me.leases.length);
  assert.ok(await stillSamePage(page), 'kept current without a reload');
});
