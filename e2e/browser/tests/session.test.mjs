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

// While the api's database is away the api answers 503 (problem database-unavailable) and
// /healthz says why; the browser simulates that with routes (stopping the shared stack's
// Postgres is e2e/outage's job). The banner says it is reconnecting, the user stays signed
// in, and the banner goes once /healthz answers 200 again.
test('a database outage shows the reconnecting banner and clears it when healthy', async () => {
  const ctx = await b.context();
  const page = await ctx.newPage();
  await signIn(page, env.operator, '/entities');
  await page.getByTestId('entities-table').waitFor();
  const since = new Date().toISOString();
  const unavailable = (route) =>
    route.fulfill({
      status: 503,
      headers: { 'Content-Type': 'application/problem+json', 'Retry-After': '2' },
      body: JSON.stringify({ type: 'urn:oikos:problem:database-unavailable', title: 'Database unavailable', status: 503,
        detail: 'the database is unreachable; retry shortly', errors: [] }),
    });
  const healthz = (route) =>
    route.fulfill({ status: 503, headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ status: 'database unreachable', database: { reachable: false, unreachable_since: since, last_error: 'connection refused' } }) });
  await page.route('**/api/v1/**', unavailable);
  await page.route('**/healthz', healthz);
  await page.locator('nav a[href="/ops"]').first().click();
  const banner = page.locator('[data-testid=reconnecting][data-reason=database]');
  await banner.waitFor({ timeout: 10_000 });
  await until('the banner names the database', 10_000, async () => /database/i.test(await banner.textContent()));
  assert.equal(await page.getByTestId('signin').count(), 0, 'a 503 must not sign the user out');
  const t0 = Date.now();
  await page.unroute('**/api/v1/**', unavailable);
  await page.unroute('**/healthz', healthz);
  await banner.waitFor({ state: 'detached', timeout: 20_000 });
  log(`reconnecting banner cleared ${Date.now() - t0} ms after the api was healthy again`);
  await ctx.close();
});
