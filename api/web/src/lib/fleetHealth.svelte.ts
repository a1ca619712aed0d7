// The overview's live picture of fleet health: the counts of GET /health/summary and the
// entities that are not up, kept current from health.changed / health.stale events
// without refetching. Events are applied to a keyed map and the view is told once per
// animation frame, so a storm of 200 events a second costs at most 60 small updates.
//
// Events are applied against what the snapshot says (an entity not in the not-up list is
// up), not against the event's "from", so an event already counted in the snapshot (it
// arrived while the summary was being read) changes nothing.
import { api, ok, type Schemas } from './api/client';
import { frameBatch, healthChange, healthRank, isHealth, type HealthChange, type HealthState } from './fleet';

type Counts = Schemas['HealthSummary']['counts'];
type Wrong = Schemas['HealthEntity'];

export class FleetHealth {
  counts = $state<Counts>({ up: 0, degraded: 0, down: 0, unknown: 0, stale: 0, maintenance: 0 });
  /** version changes once per applied batch; the sorted list derives from it. */
  version = $state(0);
  loaded = $state(false);
  private wrong = new Map<string, Wrong>();
  /** Entities in maintenance: counted apart whatever their health, so their events move no count. */
  private maintenance = new Set<string>();
  /** Types whose entities the rollup leaves out (check and its subtypes). */
  private excluded = new Set<string>(['check']);
  private buffer: HealthChange[] | null = [];
  private push = frameBatch<HealthChange>((cs) => this.apply(cs));

  /** load reads the summary; events that arrive meanwhile are applied after it. */
  async load(): Promise<void> {
    this.buffer = [];
    const [sum, types, maint] = await Promise.all([
      ok(api.GET('/api/v1/health/summary', { params: { query: { health: 'down,degraded,stale,unknown' } } })),
      ok(api.GET('/api/v1/ontology/types')).catch(() => null),
      ok(api.GET('/api/v1/entities', { params: { query: { state: 'maintenance', limit: 500 } } })).catch(() => null),
    ]);
    if (types) this.excluded = descendants(types.items, 'check');
    this.maintenance = new Set((maint?.items ?? []).map((e) => e.id));
    this.wrong = new Map(sum.entities.map((e) => [e.id, e]));
    this.counts = { ...sum.counts };
    this.loaded = true;
    const pending = this.buffer ?? [];
    this.buffer = null;
    this.apply(pending);
  }

  /** onEvent is the stream handler: subscribe it before load(). */
  onEvent = (e: Parameters<typeof healthChange>[0]): void => {
    const c = healthChange(e);
    if (!c) return;
    if (this.buffer) this.buffer.push(c);
    else this.push(c);
  };

  stop(): void {
    this.push.cancel();
  }

  /** list is the entities that are not up, worst first, then by slug (the api's order). */
  list(): Wrong[] {
    void this.version;
    return [...this.wrong.values()].sort((a, b) => healthRank(a.health) - healthRank(b.health) || a.slug.localeCompare(b.slug));
  }

  private apply(cs: HealthChange[]): void {
    if (cs.length === 0) return;
    const counts = { ...this.counts };
    for (const c of cs) {
      const type = c.slug.split(':', 1)[0];
      if (type && this.excluded.has(type)) continue;
      if (!isHealth(c.to)) continue;
      const known = this.wrong.get(c.entityId);
      // Not in the list: the snapshot has it up, unless it was not monitored before ("").
      const prev: HealthState | null = known ? known.health : isHealth(c.from) ? 'up' : null;
      if (prev === c.to && (!known || known.reason === c.reason)) continue;
      if (prev !== c.to && !this.maintenance.has(c.entityId)) {
        if (prev) counts[prev] = Math.max(0, counts[prev] - 1);
        counts[c.to] += 1;
      }
      if (c.to === 'up') {
        this.wrong.delete(c.entityId);
      } else {
        const name = c.slug.slice(type.length + 1);
        this.wrong.set(c.entityId, {
          id: c.entityId,
          slug: c.slug,
          type: known?.type ?? type,
          name: known?.name ?? name,
          state: known?.state ?? '',
          health: c.to,
          reason: c.reason,
          last_check_at: known?.last_check_at ?? null,
          changed_at: prev === c.to && known ? known.changed_at : c.at,
        });
      }
    }
    this.counts = counts;
    this.version++;
  }
}

/** descendants is a type and every type below it (through parent). */
function descendants(types: Schemas['EntityType'][], root: string): Set<string> {
  const out = new Set<string>([root]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const t of types) {
      if (!out.has(t.name) && out.has(t.parent)) {
        out.add(t.name);
        grew = true;
      }
    }
  }
  return out;
}
