// Shared helpers of the dashboard's browser tests. The Go test e2e/dashboard (TestBrowser)
// starts the stack and runs these files with node:test, one file at a time; it passes:
//
//   DASH_BASE_URL        the api serving the dashboard (http://127.0.0.1:port)
//   DASH_CONTROL_URL     the control server (e2e/dashboard/control_test.go)
//   DASH_OPERATOR_TOKEN, DASH_READONLY_TOKEN, DASH_EXPIRING_TOKEN (+ DASH_EXPIRING_NAME)
//   DASH_CHECK_INTERVAL  every check's interval in the stack, in ms
//   DASH_ARTIFACTS       where screenshots go
//   DASH_CHROMIUM        the browser (/usr/bin/chromium)
//
// Only loopback addresses are dialled: the base URL and the control server.
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

export const env = {
  base: need('DASH_BASE_URL'),
  control: need('DASH_CONTROL_URL'),
  operator: need('DASH_OPERATOR_TOKEN'),
  readonly: need('DASH_READONLY_TOKEN'),
  expiring: process.env.DASH_EXPIRING_TOKEN ?? '',
  expiringName: process.env.DASH_EXPIRING_NAME ?? '',
  interval: Number(process.env.DASH_CHECK_INTERVAL ?? 5000),
  artifacts: process.env.DASH_ARTIFACTS ?? join(tmpdir(), 'oikos-screenshots'),
  chromium: process.env.DASH_CHROMIUM ?? '/usr/bin/chromium',
};

function need(k) {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set: run these tests through the Go test e2e/dashboard (TestBrowser)`);
  return v;
}

// The only flags the browser is launched with (no network beyond loopback, no sync, no
// component updates).
export const chromiumArgs = [
  '--headless=new',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * launch starts Chromium (playwright-core gives every launch a fresh user-data directory of
 * its own and removes it at close). Each context it makes is a separate cookie jar (a
 * separate signed-in user).
 */
export async function launch() {
  const browser = await chromium.launch({ executablePath: env.chromium, args: chromiumArgs, timeout: 60_000 });
  return {
    browser,
    async context(opts = {}) {
      const ctx = await browser.newContext({ baseURL: env.base, viewport: { width: 1280, height: 900 }, ...opts });
      ctx.setDefaultTimeout(15_000);
      return ctx;
    },
    async close() {
      await browser.close().catch(() => undefined);
    },
  };
}

/** signIn opens the dashboard in page and signs in with token; it waits for the shell. */
export async function signIn(page, token, path = '/') {
  await page.goto(path);
  await page.getByTestId('signin').waitFor();
  await page.locator('#token').fill(token);
  await page.getByTestId('signin').locator('button[type=submit]').click();
  await page.getByTestId('who').waitFor();
}

/** ctl calls the control server; it returns the decoded JSON answer (or null for a 204). */
export async function ctl(method, path, body) {
  const r = await fetch(env.control + path, {
    method,
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (!r.ok) throw new Error(`control ${method} ${path}: ${r.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/** api calls the api with a bearer token (what the browser's page shows is compared to it). */
export async function api(method, path, token = env.operator, body) {
  const r = await fetch(env.base + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = text;
  }
  return { status: r.status, data };
}

/** okApi is api that throws unless the answer is 2xx. */
export async function okApi(method, path, token, body) {
  const r = await api(method, path, token, body);
  if (r.status < 200 || r.status > 299) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.data)}`);
  return r.data;
}

/** until re-checks cond (async, returning truthy when done) every step ms until within ms pass. */
export async function until(what, within, cond, step = 100) {
  const end = Date.now() + within;
  let last;
  for (;;) {
    try {
      last = await cond();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`${what}: not within ${within} ms (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, step));
  }
}

/**
 * markNoReload tags the page's window; stillSamePage says whether the tag survived, i.e. the
 * page was never reloaded (what "without a reload" means in the tests).
 */
export async function markNoReload(page) {
  await page.evaluate(() => {
    window.__oikosNoReload = 'kept';
  });
}
export async function stillSamePage(page) {
  return (await page.evaluate(() => window.__oikosNoReload)) === 'kept';
}

/** screenshot writes a full-page PNG named name into the artifacts directory. */
export async function screenshot(page, name) {
  mkdirSync(env.artifacts, { recursive: true });
  const path = join(env.artifacts, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/** collectErrors records the page's uncaught errors and console errors, for assertions. */
export function collectErrors(page) {
  const errors = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`console: ${m.text()}`);
  });
  return errors;
}

/** log prints a line into the Go test's log (node:test's spec reporter shows stdout). */
export function log(...a) {
  console.log('   ', ...a);
}
