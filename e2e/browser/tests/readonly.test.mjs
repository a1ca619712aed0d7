// A readonly sign-in (D6) gets a read-only UI: no approve button, and no other mutating
// button (deny, ack, mute, resolve, send, delete), on every page, even with a pending approval
// and an open signal in view.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, env, signIn, ctl, okApi, log } from './lib.mjs';

let b, ctx, page, pending;
before(async () => {
  b = await launch();
  ctx = await b.context();
  page = await ctx.newPage();
  pending = await ctl('POST', '/executions', { target: 'lxc:radarr', command: 'systemctl restart radarr', purpose: 'e2e-dash: pending for the readonly view' });
  await signIn(page, env.readonly);
});
after(async () => {
  if (pending?.approval_id) await okApi('POST', `/api/v1/approvals/${pending.approval_id}/decision`, env.operator, { decision: 'deny', via: 'api' }).catch(() => undefined);
  await b?.close();
});

const mutating = ['approve-button', 'deny-button', 'typed-phrase', 'signal-ack', 'signal-mute', 'signal-resolve', 'chat-input', 'chat-send', 'delete-session'];
const words = /^\s*(approve|deny|ack(nowledge)?|mute|resolve|send|delete|revoke)\b/i;

async function noMutations(where) {
  for (const id of mutating) assert.equal(await page.getByTestId(id).count(), 0, `${where}: no ${id}`);
  const labels = await page.locator('button, [role=button], input[type=submit]').evaluateAll((els) => els.map((e) => (e.textContent || e.value || e.getAttribute('aria-label') || '').trim()));
  const bad = labels.filter((l) => words.test(l));
  assert.deepEqual(bad, [], `${where}: no mutating button`);
}

test('the readonly session is marked read-only', async () => {
  assert.match(await page.getByTestId('who').textContent(), /readonly/);
  await page.getByTestId('readonly').waitFor();
});

test('a readonly sign-in shows no approve button and no other mutating button', async () => {
  const sessions = await okApi('GET', '/api/v1/sessions?limit=1').catch(() => ({ items: [] }));
  const sid = sessions.items?.[0]?.id;
  const pages = ['/', '/entities', '/entities/lxc:jellyfin', '/ops', '/chat', ...(sid ? [`/chat/${sid}`] : []), '/knowledge', '/signals', '/graph', '/graph?root=proxmox-host:atlas'];
  for (const p of pages) {
    await page.goto(p);
    await page.locator('main').waitFor();
    // Let the page load its data (the loading views go).
    await page.waitForFunction(() => !document.querySelector('main [data-testid=loading]'), null, { timeout: 5_000 }).catch(() => undefined);
    if (p === '/ops') {
      const card = page.locator(`[data-testid=approval-card][data-approval-id="${pending.approval_id}"]`);
      await card.waitFor();
      log('readonly sees the pending approval card without buttons');
    }
    await noMutations(p);
  }
});

test('the api refuses a readonly decision anyway', async () => {
  const r = await fetch(`${env.base}/api/v1/approvals/${pending.approval_id}/decision`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${env.readonly}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ decision: 'approve', via: 'button' }),
  });
  assert.equal(r.status, 403);
});
