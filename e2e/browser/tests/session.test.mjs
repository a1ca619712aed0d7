// Sessions and the connection: an expired cookie sends the user to the sign-in with a
// message; an api restart shows the reconnecting banner and recovers without a reload, and
// events after the restart still arrive.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, env, signIn, ctl, okApi, until, log, markNoReload, stillSamePage, screenshot } from './lib.mjs';

let b;
before(async () => (b = await launch()));
after(async () => b?.close());

test('an expired cookie sends the user to the sign-in with a message', { skip: !env.expiring }, async () => {
  const ctx = await b.context();
  const page = await ctx.newPage();
  await signIn(page, env.expiring, '/entities');
  await page.getByTestId('entities-table').waitFor();
  const r = await ctl('POST', '/sessions/expire', { name: env.expiringName });
  assert.ok(r.sessions >= 1, 'the session was expired in the database');
  // The next call answers 401: the page falls back to the sign-in, saying why.
  await page.locator('nav a[href="/ops"]').first().click();
  await page.getByTestId('signin').waitFor({ timeout: 10_000 });
  const notice = (await page.getByTestId('notice').textContent()).trim();
  log(`notice after expiry: ${notice}`);
  assert.match(notice, /session|expired|sign in/i);
  await screenshot(page, 'signin-expired-1280-light');
  await ctx.close();
});

test('a reload with an expired cookie shows the sign-in with a message', { skip: !env.expiring }, async () => {
  const ctx = await b.context();
  const page = await ctx.newPage();
  await signIn(page, env.expiring);
  await ctl('POST', '/sessions/expire', { name: env.expiringName });
  await page.reload();
  await page.getByTestId('signin').waitFor({ timeout: 10_000 });
  const notice = page.getByTestId('notice');
  await notice.waitFor({ timeout: 3_000 });
  log(`notice on reload after expiry: ${(await notice.textContent()).trim()}`);
  assert.match(await notice.textContent(), /expired|session/i);
  await ctx.close();
});

test('an api restart shows the reconnecting banner and recovers without a reload', async () => {
  const ctx = await b.context();
  const page = await ctx.newPage();
  await signIn(page, env.operator, '/entities?q=jellyseerr');
  const row = page.locator('[data-testid=entity-row][data-slug="lxc:jellyseerr"] [data-health]').first();
  await row.waitFor();
  await page.waitForSelector('[data-testid=stream-status][data-status=live]');
  await markNoReload(page);
  const was = await row.getAttribute('data-health');

  const t0 = Date.now();
  const restart = ctl('POST', '/api/restart', { down_ms: 3000 });
  await page.getByTestId('reconnecting').waitFor({ timeout: 10_000 });
  log(`reconnecting banner after ${Date.now() - t0} ms`);
  await screenshot(page, 'reconnecting-1280-light');
  const r = await restart;
  log(`api down ${r.down_ms} ms, back after ${r.restart_ms} ms`);
  await page.waitForSelector('[data-testid=stream-status][data-status=live]', { timeout: 30_000 });
  await until('the banner goes', 5_000, async () => (await page.getByTestId('reconnecting').count()) === 0);
  log(`live again ${Date.now() - t0} ms after the restart began`);
  assert.ok(await stillSamePage(page), 'recovered without a reload');

  // Events after the restart arrive on the resumed stream.
  const to = was === 'degraded' ? 'down' : 'degraded';
  await ctl('POST', '/health-events', { rate: 20, seconds: 0.05, slugs: ['lxc:jellyseerr'], to });
  await until(`the row shows ${to} from an event after the restart`, 10_000, async () => (await row.getAttribute('data-health')) === to, 50);
  await ctl('POST', '/health-events', { rate: 20, seconds: 0.05, slugs: ['lxc:jellyseerr'], to: was || 'up' });
  // And the session survived the restart.
  assert.equal((await okApi('GET', '/api/v1/health/summary')).counts !== undefined, true);
  await page.goto('/ops');
  await page.getByTestId('who').waitFor();
  assert.equal(await page.getByTestId('signin').count(), 0);
  await ctx.close();
});
