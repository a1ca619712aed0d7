import { afterEach, describe, expect, it, vi } from 'vitest';
import { Health, isDatabaseOutage, nextDelay, reasonOf } from './health.svelte';

afterEach(() => vi.useRealTimers());

describe('Health', () => {
  it('backs off from 1 s to 15 s', () => {
    expect(nextDelay(1000)).toBe(2000);
    expect(nextDelay(8000)).toBe(15000);
    expect(nextDelay(15000)).toBe(15000);
  });

  it('says since when the database is unreachable', () => {
    expect(reasonOf({ database: { reachable: false } })).toBe('The database is unreachable');
    expect(reasonOf({ database: { reachable: false, unreachable_since: '2026-01-01T10:00:00Z' } })).toMatch(/unreachable since/);
    expect(reasonOf({ detail: 'x' })).toBe('x');
  });

  it('takes only the database-unavailable problem for an outage', () => {
    expect(isDatabaseOutage({ type: 'urn:oikos:problem:database-unavailable', status: 503 })).toBe(true);
    expect(isDatabaseOutage({ type: 'about:blank', title: 'Agent unavailable', status: 503 })).toBe(false);
    expect(isDatabaseOutage({})).toBe(false);
    expect(isDatabaseOutage(null)).toBe(false);
  });

  it('is degraded from the first 503 until /healthz answers 200, retrying with back-off', async () => {
    vi.useFakeTimers();
    const answers = [503, 503, 200];
    const asked: number[] = [];
    const h = new Health(async () => {
      const st = answers.shift() ?? 200;
      asked.push(Date.now());
      return new Response(JSON.stringify(st === 200 ? { status: 'ok' } : { database: { reachable: false } }), { status: st });
    });
    h.report('database-unavailable');
    h.report('again'); // a second 503 starts no second loop
    expect(h.degraded).toBe(true);
    expect(h.retryIn).toBe(1000);
    await vi.advanceTimersByTimeAsync(1000);
    expect(h.degraded).toBe(true);
    expect(h.reason).toBe('The database is unreachable');
    expect(h.retryIn).toBe(2000);
    await vi.advanceTimersByTimeAsync(2000);
    expect(h.retryIn).toBe(4000);
    await vi.advanceTimersByTimeAsync(4000);
    expect(h.degraded).toBe(false);
    expect(h.recoveries).toBe(1);
    expect(asked.length).toBe(3);
    h.stop();
  });
});
