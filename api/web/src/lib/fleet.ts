// Shared logic of the fleet pages (overview, entities, entity detail, signals): how event
// payloads read, how health states order, and small pure helpers. Event payloads are typed
// `unknown` by the spec, so each reader here checks the fields it uses instead of trusting
// a cast.
import type { Schemas } from './api/client';
import type { StreamEvent } from './stream.svelte';

export type HealthState = Schemas['HealthState'];
export const HEALTH_STATES: HealthState[] = ['up', 'degraded', 'down', 'unknown', 'stale'];
/** The states that mean something needs a look, worst first (the api's own order). */
export const WRONG_STATES: HealthState[] = ['down', 'degraded', 'stale', 'unknown'];

export function isHealth(s: unknown): s is HealthState {
  return typeof s === 'string' && (HEALTH_STATES as string[]).includes(s);
}

/** rank orders health worst first, as GET /health/summary does. */
export function healthRank(h: string): number {
  const i = (WRONG_STATES as string[]).indexOf(h);
  return i < 0 ? WRONG_STATES.length : i;
}

function obj(p: unknown): Record<string, unknown> {
  return typeof p === 'object' && p !== null ? (p as Record<string, unknown>) : {};
}
function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

/** HealthChange is a health.changed or health.stale event (the scheduler's payload). */
export interface HealthChange {
  entityId: string;
  slug: string;
  from: string;
  to: string;
  reason: string;
  at: string;
}

/** healthChange reads a health.* event; null when it is not one or lacks what we need. */
export function healthChange(e: StreamEvent): HealthChange | null {
  if (e.type !== 'health.changed' && e.type !== 'health.stale') return null;
  const p = obj(e.payload);
  const entityId = str(p.entity_id) || e.entity_id || '';
  const to = str(p.to);
  if (!entityId || !to) return null;
  return { entityId, slug: str(p.slug), from: str(p.from), to, reason: str(p.reason), at: e.at };
}

/** ExecutionChange is an execution.* event (the api's and the executor's payload). */
export interface ExecutionChange {
  executionId: string;
  status: string;
  target: string;
  exitCode: number | null | undefined;
  error: string;
  at: string;
}

const EXEC_STATUSES = new Set<string>([
  'pending_approval',
  'approved',
  'running',
  'completed',
  'failed',
  'timed_out',
  'interrupted',
  'denied',
  'revoked',
  'cancelled',
]);

export function executionChange(e: StreamEvent): ExecutionChange | null {
  if (!e.type.startsWith('execution.')) return null;
  const p = obj(e.payload);
  const executionId = str(p.execution_id);
  const status = str(p.status);
  if (!executionId || !EXEC_STATUSES.has(status)) return null;
  const code = p.exit_code;
  return {
    executionId,
    status,
    target: str(p.target),
    exitCode: typeof code === 'number' ? code : undefined,
    error: str(p.error),
    at: e.at,
  };
}

export const TERMINAL = new Set(['completed', 'failed', 'timed_out', 'interrupted', 'denied', 'revoked', 'cancelled']);

/**
 * applyExecution updates an execution in place from its event; it answers false when the
 * list does not hold it (the caller decides whether to fetch it).
 */
export function applyExecution(list: Schemas['Execution'][], c: ExecutionChange): boolean {
  const x = list.find((r) => r.id === c.executionId);
  if (!x) return false;
  x.status = c.status as Schemas['ExecutionStatus'];
  if (c.status === 'running' && !x.started_at) x.started_at = c.at;
  if (TERMINAL.has(c.status)) {
    x.finished_at = x.finished_at ?? c.at;
    if (c.exitCode !== undefined) x.exit_code = c.exitCode;
    if (c.error) x.error = c.error;
  }
  return true;
}

/** SignalChange is a signal.* event. */
export interface SignalChange {
  signalId: string;
  type: string;
  status: string;
  mutedUntil: string | null;
  occurrences: number | undefined;
  entityId: string;
}

export function signalChange(e: StreamEvent): SignalChange | null {
  if (!e.type.startsWith('signal.')) return null;
  const p = obj(e.payload);
  const signalId = str(p.signal_id);
  if (!signalId) return null;
  let status = str(p.status);
  if (e.type === 'signal.raised') status = 'open';
  if (e.type === 'signal.resolved') status = 'resolved';
  return {
    signalId,
    type: e.type,
    status,
    mutedUntil: typeof p.muted_until === 'string' ? p.muted_until : null,
    occurrences: typeof p.occurrences === 'number' ? p.occurrences : undefined,
    entityId: str(p.entity_id) || e.entity_id || '',
  };
}

/** applySignal updates a signal in place; false when the list does not hold it. */
export function applySignal(list: Schemas['Signal'][], c: SignalChange, at: string, actor: string | undefined): boolean {
  const s = list.find((r) => r.id === c.signalId);
  if (!s) return false;
  if (c.status) s.status = c.status as Schemas['Signal']['status'];
  if (c.occurrences !== undefined) s.occurrences = c.occurrences;
  if (c.type === 'signal.raised') s.last_seen = at;
  if (c.type === 'signal.muted') s.muted_until = c.mutedUntil;
  if (c.type === 'signal.acknowledged') {
    s.acknowledged_at = at;
    s.acknowledged_by = actor ?? s.acknowledged_by;
  }
  if (c.type === 'signal.resolved') {
    s.resolved_at = at;
    s.resolved_by = actor ?? s.resolved_by;
  }
  return true;
}

export const SEVERITY_RANK: Record<string, number> = { critical: 0, warning: 1, info: 2 };
export const SIGNAL_STATUS_RANK: Record<string, number> = { open: 0, acknowledged: 1, muted: 2, resolved: 3 };

/** sortSignals puts open first, then the most severe, then the most recent. */
export function sortSignals(list: Schemas['Signal'][]): Schemas['Signal'][] {
  return [...list].sort(
    (a, b) =>
      (SIGNAL_STATUS_RANK[a.status] ?? 9) - (SIGNAL_STATUS_RANK[b.status] ?? 9) ||
      (SEVERITY_RANK[a.severity] ?? 9) - (SEVERITY_RANK[b.severity] ?? 9) ||
      b.last_seen.localeCompare(a.last_seen),
  );
}

/** entityHref is the dashboard link of an entity slug (a / in a name is kept encoded). */
export function entityHref(slug: string): string {
  return `/entities/${encodeURIComponent(slug)}`;
}

/** debounce runs fn once, ms after the last call: for refetches on low-rate events. */
export function debounce(fn: () => void, ms: number): (() => void) & { cancel: () => void } {
  let t: ReturnType<typeof setTimeout> | undefined;
  const d = () => {
    clearTimeout(t);
    t = setTimeout(fn, ms);
  };
  d.cancel = () => clearTimeout(t);
  return d;
}

/**
 * frameBatch collects items and hands them to apply once per animation frame, so a burst
 * of 200 events a second becomes at most 60 small updates instead of 200 renders.
 */
export function frameBatch<T>(apply: (items: T[]) => void): ((item: T) => void) & { cancel: () => void } {
  let queue: T[] = [];
  let raf = 0;
  const push = (item: T) => {
    queue.push(item);
    if (raf) return;
    raf = requestAnimationFrame(() => {
      raf = 0;
      const items = queue;
      queue = [];
      apply(items);
    });
  };
  push.cancel = () => {
    if (raf) cancelAnimationFrame(raf);
    raf = 0;
    queue = [];
  };
  return push;
}

/** The metrics shown first when an entity has several (the most telling first). */
export const PREFERRED_METRICS = ['cpu_pct', 'mem_used_pct', 'load_per_cpu', 'disk_used_pct', 'http_latency_ms', 'tcp_connect_ms'];

export function attrText(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v;
  return JSON.stringify(v);
}
