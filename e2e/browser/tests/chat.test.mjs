// Chat (D3): a turn streams its answer, shows its tool calls under the turn, and the
// approval card of its `run` flips when the approval is decided from the CLI, live.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, env, signIn, ctl, okApi, until, log, markNoReload, stillSamePage } from './lib.mjs';

let b, ctx, page;
before(async () => {
  b = await launch();
  ctx = await b.context();
  page = await ctx.newPage();
  await signIn(page, env.operator, '/chat');
});
after(async () => b?.close());

test('a chat turn streams, shows its tool calls, and its approval card flips when decided from the CLI', async () => {
  await page.goto('/chat');
  const input = page.getByTestId('chat-input');
  await input.waitFor();
  // Record every length the streaming answer takes, as the DOM changes.
  await page.evaluate(() => {
    window.__lengths = [];
    new MutationObserver(() => {
      const els = document.querySelectorAll('[data-testid=assistant-message]');
      const last = els[els.length - 1];
      if (last) window.__lengths.push((last.textContent ?? '').trim().length);
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  await markNoReload(page);
  await input.fill('restart sonarr for the dashboard');
  await page.getByTestId('chat-send').click();
  await page.getByTestId('turn-running').waitFor({ timeout: 5_000 });
  assert.equal(await page.getByTestId('chat-send').isDisabled(), true, 'send is disabled while the turn streams');

  // The session gets its URL.
  await until('the URL names the session', 10_000, async () => /\/chat\/[^/]+$/.test(new URL(page.url()).pathname));
  const session = decodeURIComponent(new URL(page.url()).pathname.split('/').pop());
  log(`chat session ${session}`);

  // The run queues for approval: its card shows in the turn.
  const card = page.getByTestId('approval-card').first();
  await card.waitFor({ timeout: 20_000 });
  await until('the turn ends', 20_000, async () => (await page.getByTestId('turn-running').count()) === 0);
  const lengths = await page.evaluate(() => window.__lengths);
  const distinct = [...new Set(lengths.filter((n) => n > 0))];
  log(`assistant text lengths seen while streaming: ${distinct.slice(0, 12).join(', ')}${distinct.length > 12 ? ' …' : ''}`);
  assert.ok(distinct.length >= 3, `the answer arrived in pieces (${distinct.length} distinct lengths)`);
  const text = (await page.getByTestId('assistant-message').allTextContents()).join('\n');
  assert.match(text, /waits for your approval/);

  // Tool calls under the turn.
  const calls = await page.getByTestId('tool-call').evaluateAll((els) => els.map((e) => [e.dataset.name, e.dataset.state]));
  log(`tool calls: ${JSON.stringify(calls)}`);
  const names = calls.map((c) => c[0]);
  for (const n of ['set_goal', 'propose_plan', 'run']) assert.ok(names.includes(n), `${n} is shown (${names})`);
  assert.ok(calls.every((c) => ['ok', 'error', 'running'].includes(c[1])), 'each call has a state');
  assert.ok(!calls.some((c) => c[1] === 'running'), 'no call is left running after done');
  await page.getByTestId('plan-panel').waitFor();
  await page.getByTestId('task-status').first().waitFor();

  assert.equal(await card.getAttribute('data-status'), 'pending');
  assert.equal(await card.getAttribute('data-risk'), 'config_mutation');
  const approval = await card.getAttribute('data-approval-id');
  const ap = await okApi('GET', `/api/v1/approvals/${approval}`);
  assert.equal(ap.session_id, session);
  assert.equal(ap.target, 'lxc:sonarr');

  // Decided from the CLI: the card flips, live.
  const t0 = Date.now();
  const r = await ctl('POST', '/cli', { token: 'operator', args: ['approve', approval] });
  assert.equal(r.code, 0, `oikos approve: ${r.stdout} ${r.stderr}`);
  await until('the approval card flips to approved', 5_000, async () => (await card.getAttribute('data-status')) === 'approved', 25);
  log(`card flipped ${Date.now() - t0} ms after the CLI started`);
  assert.ok(await stillSamePage(page), 'no reload');

  // Reloading shows the stored conversation.
  await page.reload();
  await page.getByTestId('assistant-message').first().waitFor();
  const stored = (await page.getByTestId('assistant-message').allTextContents()).join('\n');
  assert.match(stored, /waits for your approval/);
  assert.ok((await page.getByTestId('tool-call').count()) >= 3, 'the tool calls are stored');
  const after = await page.locator(`[data-testid=approval-card][data-approval-id="${approval}"]`).first();
  if (await after.count()) assert.equal(await after.getAttribute('data-status'), 'approved');
});

test('the session list shows the session; delete asks twice', async () => {
  await page.goto('/chat');
  const item = page.getByTestId('session-item').first();
  await item.waitFor();
  const n = await page.getByTestId('session-item').count();
  assert.ok(n >= 1);
  const del = page.getByTestId('delete-session').first();
  if (await del.count()) {
    await del.click();
    // One click only arms it.
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(await page.getByTestId('session-item').count(), n, 'one click deletes nothing');
  }
});

test('an agent that cannot be reached ends the turn with a clear error: no empty bubble, no stuck indicator', async () => {
  await page.goto('/chat');
  const input = page.getByTestId('chat-input');
  await input.waitFor();
  await ctl('POST', '/agent/down');
  try {
    const bubbles = await page.getByTestId('assistant-message').count();
    await input.fill('how is the fleet?');
    await page.getByTestId('chat-send').click();
    const err = page.getByTestId('chat-error').first();
    await err.waitFor({ timeout: 15_000 });
    const text = ((await err.textContent()) ?? '').trim();
    log(`chat error shown: ${JSON.stringify(text)}`);
    assert.match(text, /agent|reach|unavailable|not running/i, `the error says what failed: ${text}`);
    await until('the indicator clears', 5_000, async () => (await page.getByTestId('turn-running').count()) === 0);
    const empty = await page.getByTestId('assistant-message').evaluateAll((els) => els.filter((e) => !(e.textContent ?? '').trim()).length);
    assert.equal(empty, 0, 'no empty assistant bubble');
    assert.ok((await page.getByTestId('assistant-message').count()) <= bubbles + 1, 'no stray bubbles');
    assert.equal(await page.getByTestId('chat-send').isDisabled(), true, 'send waits for new text');
    await input.fill('again');
    assert.equal(await page.getByTestId('chat-send').isDisabled(), false, 'the composer works again');
  } finally {
    await ctl('POST', '/agent/up');
  }
});
