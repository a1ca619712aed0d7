import { describe, expect, it, vi } from 'vitest';
import type { Schemas } from './api/client';
import { applyExecution, attrText, debounce, entityHref, executionChange, healthChange, healthRank, isHealth, signalChange } from './fleet';
import type { StreamEvent } from './stream.svelte';

const ev = (type: string, payload: unknown, extra: Partial<StreamEvent> = {}) => ({ type, payload, at: '2026-03-01T12:00:00Z', ...extra }) as StreamEvent;

describe('fleet event readers', () => {
  it('reads a health change, and refuses one without an entity or a state', () => {
    expect(healthChange(ev('health.changed', { entity_id: 'e1', slug: 'lxc:a', from: 'up', to: 'down', reason: 'ping' }))).toEqual({
      entityId: 'e1',
      slug: 'lxc:a',
      from: 'up',
      to: 'down',
      reason: 'ping',
      at: '2026-03-01T12:00:00Z',
    });
    expect(healthChange(ev('health.stale', { to: 'stale' }, { entity_id: 'e2' }))?.entityId).toBe('e2');
    expect(healthChange(ev('health.changed', { entity_id: 'e1' }))).toBeNull();
    expect(healthChange(ev('signal.raised', { entity_id: 'e1', to: 'down' }))).toBeNull();
    expect(healthChange(ev('health.changed', 'not an object'))).toBeNull();
  });

  it('reads an execution change with a known status only', () => {
    expect(executionChange(ev('execution.finished', { execution_id: 'x1', status: 'failed', exit_code: 2, error: 'boom' }))).toMatchObject({
      executionId: 'x1',
      status: 'failed',
      exitCode: 2,
      error: 'boom',
    });
    expect(executionChange(ev('execution.finished', { execution_id: 'x1', status: 'exploded' }))).toBeNull();
    expect(executionChange(ev('execution.started', { execution_id: 'x1', status: 'running', exit_code: '0' }))?.exitCode).toBeUndefined();
  });

  it('applies an execution change in place', () => {
    const list = [{ id: 'x1', status: 'running', started_at: '2026-03-01T11:00:00Z', finished_at: null }] as unknown as Schemas['Execution'][];
    const c = executionChange(ev('execution.finished', { execution_id: 'x1', status: 'completed', exit_code: 0 }))!;
    expect(applyExecution(list, c)).toBe(true);
    expect(list[0]).toMatchObject({ status: 'completed', finished_at: '2026-03-01T12:00:00Z', exit_code: 0 });
    expect(applyExecution(list, { ...c, executionId: 'other' })).toBe(false);
  });

  it('reads a signal change, its status implied by raised and resolved', () => {
    expect(signalChange(ev('signal.raised', { signal_id: 's1', occurrences: 3 }))).toMatchObject({ signalId: 's1', status: 'open', occurrences: 3 });
    expect(signalChange(ev('signal.resolved', { signal_id: 's1', status: 'open' }))?.status).toBe('resolved');
    expect(signalChange(ev('signal.raised', {}))).toBeNull();
  });
});

describe('fleet helpers', () => {
  it('ranks health worst first', () => {
    expect(['up', 'stale', 'down', 'unknown', 'degraded'].sort((a, b) => healthRank(a) - healthRank(b))).toEqual(['down', 'degraded', 'stale', 'unknown', 'up']);
    expect(isHealth('down')).toBe(true);
    expect(isHealth('sideways')).toBe(false);
  });

  it('links an entity slug with a / in its name kept encoded', () => {
    expect(entityHref('lxc:jellyfin')).toBe('/entities/lxc%3Ajellyfin');
    expect(entityHref('share:tank/media')).toBe('/entities/share%3Atank%2Fmedia');
  });

  it('shows attribute values as text', () => {
    expect([attrText(null), attrText(undefined), attrText('x'), attrText(3), attrText({ a: [1] })]).toEqual(['', '', 'x', '3', '{"a":[1]}']);
  });

  it('debounces to one call after the last', () => {
    vi.useFakeTimers();
    try {
      const fn = vi.fn();
      const d = debounce(fn, 100);
      d();
      vi.advanceTimersByTime(60);
      d();
      vi.advanceTimersByTime(60);
      expect(fn).not.toHaveBeenCalled();
      vi.advanceTimersByTime(40);
      expect(fn).toHaveBeenCalledTimes(1);
      d();
      d.cancel();
      vi.advanceTimersByTime(200);
      expect(fn).toHaveBeenCalledTimes(1);
    } finally {
      vi.useRealTimers();
    }
  });
});
