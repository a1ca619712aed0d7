// The fleet pages' filters as pure functions: what the URL's query means for the Entities
// table (which api query it becomes) and for the Signals list (the api's status filter, and
// the severity filter that narrows the page in hand). The pages read router.query through
// these, so a filtered view links and survives a reload.
import type { Schemas } from './api/client';
import { sortSignals } from './fleet';

/** EntityFilters are the Entities page's filters, read from the URL. */
export interface EntityFilters {
  type: string;
  /** state is the lifecycle state (?state=). */
  state: string;
  health: string;
  q: string;
  /**
   * showChecks: the check bookkeeping entities (one per check definition) are hidden unless
   * asked for (?checks=1) or filtered by type: they are how checks are stored, not part of
   * the fleet.
   */
  showChecks: boolean;
}

export const ENTITY_HEALTH_OPTIONS = [
  { value: '', label: 'Any health' },
  { value: 'down,degraded,stale,unknown', label: 'Not up' },
  { value: 'up', label: 'Up' },
  { value: 'degraded', label: 'Degraded' },
  { value: 'down', label: 'Down' },
  { value: 'unknown', label: 'Unknown' },
  { value: 'stale', label: 'Stale' },
];

/** The query that clears every Entities filter (router.setQuery drops empty values). */
export const NO_ENTITY_FILTERS = { type: '', state: '', health: '', q: '' };

export function entityFilters(query: URLSearchParams): EntityFilters {
  const type = query.get('type') ?? '';
  return {
    type,
    state: query.get('state') ?? '',
    health: query.get('health') ?? '',
    q: query.get('q') ?? '',
    showChecks: query.get('checks') === '1' || type !== '',
  };
}

/** entityFiltered says whether any filter narrows the table (the "Clear filters" button). */
export function entityFiltered(f: EntityFilters): boolean {
  return !!(f.type || f.state || f.health || f.q);
}

/** entityListQuery is the GET /api/v1/entities query for the filters and a page. */
export function entityListQuery(f: EntityFilters, limit: number, cursor: string | undefined) {
  return {
    type: f.type || undefined,
    not_type: f.showChecks ? undefined : 'check',
    state: f.state || undefined,
    health: f.health || undefined,
    q: f.q || undefined,
    limit,
    cursor,
  };
}

export interface TypeChoice {
  name: string;
  depth: number;
  abstract: boolean;
}

/** typeTree orders the ontology's types for the type filter: each under its parent, by name. */
export function typeTree(all: Schemas['EntityType'][]): TypeChoice[] {
  const kids = new Map<string, Schemas['EntityType'][]>();
  for (const t of all) kids.set(t.parent, [...(kids.get(t.parent) ?? []), t]);
  const out: TypeChoice[] = [];
  const walk = (parent: string, depth: number) => {
    for (const t of (kids.get(parent) ?? []).sort((a, b) => a.name.localeCompare(b.name))) {
      out.push({ name: t.name, depth, abstract: t.abstract });
      if (t.name !== parent) walk(t.name, depth + 1);
    }
  };
  walk('', 0);
  // Types whose parent is not in the list (should not happen) still appear.
  for (const t of all) if (!out.some((o) => o.name === t.name)) out.push({ name: t.name, depth: 0, abstract: t.abstract });
  return out;
}

/** The Signals page's status choices and the api status filter each stands for. */
export const SIGNAL_STATUSES = [
  { value: '', label: 'Active (open, acknowledged, muted)', api: 'open,acknowledged,muted' },
  { value: 'open', label: 'Open', api: 'open' },
  { value: 'acknowledged', label: 'Acknowledged', api: 'acknowledged' },
  { value: 'muted', label: 'Muted', api: 'muted' },
  { value: 'resolved', label: 'Resolved', api: 'resolved' },
  { value: 'all', label: 'All', api: '' },
];

/** signalStatusQuery is the api's status filter for ?status= ('' for all; unknown: active). */
export function signalStatusQuery(status: string): string {
  return SIGNAL_STATUSES.find((s) => s.value === status)?.api ?? 'open,acknowledged,muted';
}

/** shownSignals narrows the page in hand by severity (not an api filter) and sorts it. */
export function shownSignals(items: Schemas['Signal'][], severity: string): Schemas['Signal'][] {
  return sortSignals(severity ? items.filter((s) => s.severity === severity) : items);
}

/** signalCounts are the header's counts: open signals, and critical ones not resolved. */
export function signalCounts(items: Schemas['Signal'][]): { open: number; critical: number } {
  return {
    open: items.filter((s) => s.status === 'open').length,
    critical: items.filter((s) => s.severity === 'critical' && s.status !== 'resolved').length,
  };
}
