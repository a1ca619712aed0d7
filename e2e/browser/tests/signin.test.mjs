// Sign-in (D6): a bad token is refused with a clear message and nothing is stored; a good
// one is exchanged for an HttpOnly, SameSite=Strict session cookie (the page never keeps
// the token); sign-out revokes it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, env, signIn, screenshot, api, until } from './lib.mjs';

let b;
before(async () => (b = await launch()));
after(async () => b?.close());

async function stored(page) {
  return page.evaluate(() => JSON.stringify({ local: { ...localStorage }, session: { ...sessionStorage } }));
}

test('a bad token shows a clear message and stores nothing', async () => {
  const ctx = await b.context();
  const page = await ctx.newPage();
  await page.goto('/');
  await page.getByTestId('signin').waitFor();
  await screenshot(page, 'signin-1280-light');
  await page.locator('#token').fill('oik_this-is-not-a-token-at-all-0123456789abcdef');
  await page.getByTestId('signin').locator('button[type=submit]').click();
  const err = page.getByTestId('signin-error');
  await err.waitFor();
  const text = (await err.textContent()).trim();
  assert.match(text, /not valid|unknown|revoked|invalid/i, `the message says what is wrong: ${text}`);
  await screenshot(page, 'signin-bad-token-1280-light');
  assert.equal((await ctx.cookies()).length, 0, 'no cookie was set');
  const s = await stored(page);
  assert.ok(!s.includes('oik_'), `nothing token-like in web storage: ${s}`);
  assert.equal(await page.getByTestId('who').count(), 0, 'still signed out');
  await ctx.close();
});

test('an empty token is refused before any request', async () => {
  const ctx = await b.context();
  const page = await ctx.newPage();
  await page.goto('/');
  let posted = false;
  page.on('request', (r) => {
    if (r.url().endsWith('/api/v1/session') && r.method() === 'POST') posted = true;
  });
  await page.getByTestId('signin').locator('button[type=submit]').click();
  await page.getByTestId('signin-error').waitFor();
  assert.equal(posted, false);
  await ctx.close();
});

test('an operator token signs in with an HttpOnly SameSite=Strict cookie; sign-out revokes it', async () => {
  const ctx = await b.context();
  const page = await ctx.newPage();
  await signIn(page, env.operator);
  assert.match(await page.getByTestId('who').textContent(), /operator/);
  const cookies = await ctx.cookies();
  const c = cookies.find((x) => x.name === 'oikos_session');
  assert.ok(c, `the session cookie is set: ${JSON.stringify(cookies.map((x) => x.name))}`);
  assert.equal(c.httpOnly, true, 'HttpOnly');
  assert.equal(c.sameSite, 'Strict', 'SameSite=Strict');
  assert.equal(c.path, '/');
  assert.equal(c.secure, false, 'not Secure over plain http on loopback');
  assert.equal(await page.evaluate(() => document.cookie.includes('oikos_session')), false, 'script cannot read it');
  const s = await stored(page);
  assert.ok(!s.includes(env.operator), 'the token is not kept in web storage');
  // The event stream runs on the cookie alone.
  await page.waitForSelector('[data-testid=stream-status][data-status=live]');

  // A reload keeps the session (the cookie), without asking for the token again.
  await page.reload();
  await page.getByTestId('who').waitFor();

  await page.getByTestId('signout').click();
  await page.getByTestId('signin').waitFor();
  // The cookie is dead on the server even if a copy was kept.
  const r = await fetch(env.base + '/api/v1/session', { headers: { Cookie: `oikos_session=${c.value}` } });
  assert.equal(r.status, 401, 'the signed-out cookie no longer authenticates');
  await ctx.close();
});

test('a cookie-authenticated mutation from another origin is refused', async () => {
  const ctx = await b.context();
  const page = await ctx.newPage();
  await signIn(page, env.operator);
  const c = (await ctx.cookies()).find((x) => x.name === 'oikos_session');
  const r = await fetch(env.base + '/api/v1/session', {
    method: 'DELETE',
    headers: { Cookie: `oikos_session=${c.value}`, Origin: 'http://evil.example' },
  });
  assert.equal(r.status, 403, 'Origin is checked on cookie-authenticated mutations');
  const still = await api('GET', '/api/v1/session', env.operator);
  assert.equal(still.status, 200);
  await ctx.close();
});

test('the dashboard works from the keyboard: sign in, reach the navigation, follow a link', async () => {
  const ctx = await b.context();
  const page = await ctx.newPage();
  await page.goto('/');
  await page.getByTestId('signin').waitFor();
  // The one field has the cursor: paste and Enter are all a sign-in takes.
  await until('the token field has focus', 2_000, async () => page.evaluate(() => document.activeElement?.id === 'token'));
  await page.keyboard.type(env.operator);
  await page.keyboard.press('Enter');
  await page.getByTestId('who').waitFor();
  // Tab walks the navigation in order; each stop shows a focus ring.
  const stops = [];
  for (let i = 0; i < 8; i++) {
    await page.keyboard.press('Tab');
    stops.push(
      await page.evaluate(() => {
        const a = document.activeElement;
        return { tag: a?.tagName ?? '', text: (a?.textContent ?? '').trim(), outline: a ? getComputedStyle(a).outlineStyle : '' };
      }),
    );
  }
  const names = stops.map((s) => s.text);
  for (const want of ['Overview', 'Entities', 'Operations', 'Chat', 'Knowledge', 'Signals', 'Graph']) {
    assert.ok(names.includes(want), `Tab reaches ${want}: ${names.join(' | ')}`);
  }
  assert.ok(stops.every((s) => s.outline !== 'none'), `every stop shows a focus ring: ${JSON.stringify(stops)}`);
  // Enter on the focused link navigates in the app.
  await page.keyboard.press('Shift+Tab');
  const focused = await page.evaluate(() => document.activeElement?.textContent?.trim());
  await page.keyboard.press('Enter');
  await until(`Enter on ${focused} navigates`, 5_000, async () => new URL(page.url()).pathname !== '/');
  await ctx.close();
});
