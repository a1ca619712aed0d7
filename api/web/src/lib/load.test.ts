import { afterEach, describe, expect, it, vi } from 'vitest';
import { CursorTrail, Load, Polled } from './load.svelte';

describe('Load', () => {
  it('is loading until the first answer, and keeps a failure until the next try', async () => {
    let fail = true;
    const seen: (string | undefined)[] = [];
    const l = new Load(async (cursor?: string) => {
      seen.push(cursor);
      if (fail) throw new Error('api down');
    });
    expect(l.loading).toBe(true);
    expect(l.error).toBe('');
    await l.run();
    expect(l.loading).toBe(false);
    expect(l.error).toBe('api down');
    fail = false;
    const p = l.run('c2');
    expect(l.error).toBe(''); // cleared as the try starts
    await p;
    expect(l.error).toBe('');
    expect(seen).toEqual([undefined, 'c2']);
  });
});

describe('CursorTrail', () => {
  it('goes forward through next cursors and back exactly', () => {
    const reads: (string | undefined)[] = [];
    const t = new CursorTrail((c) => reads.push(c));
    expect(t.page).toBe(1);
    expect(t.paged).toBe(false);
    t.forward(); // no next page: nothing happens
    expect(reads).toEqual([]);

    t.next = 'c2';
    expect(t.paged).toBe(true);
    t.forward();
    t.next = 'c3';
    t.forward();
    t.next = null;
    expect(t.page).toBe(3);
    expect(t.cursor).toBe('c3');
    expect(t.hasPrev).toBe(true);
    t.back();
    expect(t.cursor).toBe('c2');
    t.reload();
    t.back();
    t.back(); // on the first page already
    expect(t.page).toBe(1);
    t.next = 'c2';
    t.forward();
    t.restart();
    expect(t.page).toBe(1);
    expect(reads).toEqual(['c2', 'c3', 'c2', 'c2', undefined, 'c2', undefined]);
  });
});

describe('Polled', () => {
  afterEach(() => {
    vi.useRealTimers();
    vi.unstubAllGlobals();
  });

  it('reads at start and every interval while visible, keeps the value through a failure, and stops', async () => {
    vi.useFakeTimers();
    const doc = { visibilityState: 'visible' };
    vi.stubGlobal('document', doc);
    let n = 0;
    let fail = false;
    const p = new Polled(async () => {
      n++;
      if (fail) throw new Error('api down');
      return n;
    }, 1000);
    expect(p.value).toBeNull();
    const stop = p.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(p.value).toBe(1);
    await vi.advanceTimersByTimeAsync(1000);
    expect(p.value).toBe(2);

    fail = true;
    await vi.advanceTimersByTimeAsync(1000);
    expect(p.value).toBe(2); // what was shown stays
    expect(p.error).toBe('api down');

    fail = false;
    doc.visibilityState = 'hidden';
    await vi.advanceTimersByTimeAsync(3000);
    expect(n).toBe(3); // no read while the page is hidden
    doc.visibilityState = 'visible';
    await vi.advanceTimersByTimeAsync(1000);
    expect(p.value).toBe(4);
    expect(p.error).toBe('');

    stop();
    await vi.advanceTimersByTimeAsync(5000);
    expect(n).toBe(4);
  });
});
