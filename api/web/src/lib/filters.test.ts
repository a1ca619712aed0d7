import { describe, expect, it } from 'vitest';
import type { Schemas } from './api/client';
import {
  ENTITY_HEALTH_OPTIONS,
  NO_ENTITY_FILTERS,
  entityFiltered,
  entityFilters,
  entityListQuery,
  shownSignals,
  signalCounts,
  signalStatusQuery,
  typeTree,
} from './filters';

const q = (s: string) => new URLSearchParams(s);

describe('entityFilters', () => {
  it('reads no filter from an empty query, checks hidden', () => {
    const f = entityFilters(q(''));
    expect(f).toEqual({ type: '', state: '', health: '', q: '', showChecks: false });
    expect(entityFiltered(f)).toBe(false);
  });

  it('reads every filter from the URL', () => {
    const f = entityFilters(q('type=lxc&state=active&health=down%2Cdegraded&q=jelly+fin'));
    expect(f).toEqual({ type: 'lxc', state: 'active', health: 'down,degraded', q: 'jelly fin', showChecks: true });
    expect(entityFiltered(f)).toBe(true);
  });

  it('shows the check entities when asked for, or when filtering by type', () => {
    expect(entityFilters(q('checks=1')).showChecks).toBe(true);
    expect(entityFilters(q('checks=0')).showChecks).toBe(false);
    expect(entityFilters(q('checks=true')).showChecks).toBe(false);
    expect(entityFilters(q('type=check')).showChecks).toBe(true);
    // Showing checks alone narrows nothing: no "Clear filters".
    expect(entityFiltered(entityFilters(q('checks=1')))).toBe(false);
  });

  it.each(['type=vm', 'state=retired', 'health=up', 'q=x'])('%s is a filter', (s) => {
    expect(entityFiltered(entityFilters(q(s)))).toBe(true);
  });
});

describe('entityListQuery', () => {
  it('asks for the fleet without the check entities by default', () => {
    expect(entityListQuery(entityFilters(q('')), 50, undefined)).toEqual({
      type: undefined,
      not_type: 'check',
      state: undefined,
      health: undefined,
      q: undefined,
      limit: 50,
      cursor: undefined,
    });
  });

  it('passes every filter and the cursor through', () => {
    expect(entityListQuery(entityFilters(q('type=lxc&state=active&health=down,degraded,stale,unknown&q=immich')), 50, 'c2')).toEqual({
      type: 'lxc',
      not_type: undefined,
      state: 'active',
      health: 'down,degraded,stale,unknown',
      q: 'immich',
      limit: 50,
      cursor: 'c2',
    });
    expect(entityListQuery(entityFilters(q('checks=1')), 10, undefined).not_type).toBeUndefined();
  });

  it('offers "Not up" as the api health list of the wrong states', () => {
    expect(ENTITY_HEALTH_OPTIONS.find((o) => o.label === 'Not up')?.value).toBe('down,degraded,stale,unknown');
    expect(ENTITY_HEALTH_OPTIONS[0]).toEqual({ value: '', label: 'Any health' });
    expect(NO_ENTITY_FILTERS).toEqual({ type: '', state: '', health: '', q: '' });
  });
});

describe('typeTree', () => {
  const t = (name: string, parent: string, abstract = false) => ({ name, parent, abstract, states: [] }) as unknown as Schemas['EntityType'];

  it('puts each type under its parent, by name, with its depth', () => {
    const tree = typeTree([t('vm', 'guest'), t('lxc', 'guest'), t('guest', '', true), t('host', ''), t('proxmox-host', 'host')]);
    expect(tree.map((x) => `${'-'.repeat(x.depth)}${x.name}${x.abstract ? '*' : ''}`)).toEqual(['guest*', '-lxc', '-vm', 'host', '-proxmox-host']);
  });

  it('keeps a type whose parent is missing, at the top', () => {
    expect(typeTree([t('orphan', 'nowhere'), t('a', '')]).map((x) => [x.name, x.depth])).toEqual([
      ['a', 0],
      ['orphan', 0],
    ]);
  });
});

describe('signals filters', () => {
  const s = (id: string, status: string, severity: string, last_seen: string) => ({ id, status, severity, last_seen }) as unknown as Schemas['Signal'];
  const items = [
    s('a', 'resolved', 'critical', '2026-03-01T10:00:00Z'),
    s('b', 'open', 'warning', '2026-03-01T09:00:00Z'),
    s('c', 'open', 'critical', '2026-03-01T08:00:00Z'),
    s('d', 'acknowledged', 'critical', '2026-03-01T11:00:00Z'),
    s('e', 'open', 'critical', '2026-03-01T12:00:00Z'),
    s('f', 'muted', 'info', '2026-03-01T07:00:00Z'),
  ];

  it('maps the status choice to the api filter, active by default', () => {
    expect(signalStatusQuery('')).toBe('open,acknowledged,muted');
    expect(signalStatusQuery('open')).toBe('open');
    expect(signalStatusQuery('resolved')).toBe('resolved');
    expect(signalStatusQuery('all')).toBe('');
    expect(signalStatusQuery('bogus')).toBe('open,acknowledged,muted');
  });

  it('sorts open first, then the most severe, then the most recent', () => {
    expect(shownSignals(items, '').map((x) => x.id)).toEqual(['e', 'c', 'b', 'd', 'f', 'a']);
  });

  it('narrows by severity without touching the list it was given', () => {
    expect(shownSignals(items, 'critical').map((x) => x.id)).toEqual(['e', 'c', 'd', 'a']);
    expect(shownSignals(items, 'info').map((x) => x.id)).toEqual(['f']);
    expect(shownSignals(items, 'nonsense')).toEqual([]);
    expect(items.map((x) => x.id)).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
  });

  it('counts open signals and unresolved critical ones', () => {
    expect(signalCounts(items)).toEqual({ open: 3, critical: 3 });
    expect(signalCounts([])).toEqual({ open: 0, critical: 0 });
  });
});
