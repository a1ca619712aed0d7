// Whether the api can do its work. While Postgres is away the api stays up but answers
// every call 503 (problem type database-unavailable) and its /healthz says since when; the
// event stream may stay open with nothing on it. Such a 503 marks the dashboard degraded: the
// banner says it is reconnecting, and /healthz is asked again with a growing back-off
// (1 s doubling to 15 s) until it answers 200, when the banner goes and pages reload.

/** nextDelay is the back-off after a failed check: doubled, capped at 15 s. */
export function nextDelay(ms: number): number {
  return Math.min(Math.max(ms, 1000) * 2, 15000);
}

/** reasonOf is what to tell a person from /healthz's body (or a problem's detail). */
export function reasonOf(body: unknown): string {
  const b = (body ?? {}) as { database?: { reachable?: boolean; unreachable_since?: string }; detail?: string };
  if (b.database && b.database.reachable === false) {
    const since = b.database.unreachable_since ? new Date(b.database.unreachable_since) : null;
    return since && !Number.isNaN(since.getTime())
      ? `The database has been unreachable since ${since.toLocaleTimeString()}`
      : 'The database is unreachable';
  }
  return b.detail ? String(b.detail) : 'The api cannot do its work right now';
}

/**
 * isDatabaseOutage says whether a 503's problem document is the database being away. Other
 * 503s (the agent down behind chat or the model check) are that call's own error: taking
 * them for an outage would show the banner, find /healthz healthy and reload the page, over
 * and over.
 */
export function isDatabaseOutage(body: unknown): boolean {
  const t = (body ?? {}) as { type?: unknown };
  return typeof t.type === 'string' && t.type.endsWith('database-unavailable');
}

type Fetch = (input: string) => Promise<Response>;

export class Health {
  degraded = $state(false);
  reason = $state('');
  /** retryIn is the delay, in ms, before the next check. */
  retryIn = $state(0);
  /** recoveries counts returns to healthy (pages reload on it). */
  recoveries = $state(0);
  private delay = 1000;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private readonly get: Fetch;

  constructor(get?: Fetch) {
    this.get = get ?? ((u) => fetch(u, { credentials: 'same-origin' }));
  }

  /** report is told of every 503 the api answered; it starts the checks once. */
  report(reason: string): void {
    if (reason) this.reason = reason;
    if (this.degraded) return;
    this.degraded = true;
    this.delay = 1000;
    this.schedule();
  }

  /** check asks /healthz once; it returns whether the api is healthy again. */
  async check(): Promise<boolean> {
    this.timer = null;
    try {
      const r = await this.get('/healthz');
      const body = await r.json().catch(() => ({}));
      if (r.ok) {
        this.degraded = false;
        this.reason = '';
        this.retryIn = 0;
        this.recoveries++;
        return true;
      }
      this.reason = reasonOf(body);
    } catch {
      this.reason = 'The api cannot be reached';
    }
    this.delay = nextDelay(this.delay);
    this.schedule();
    return false;
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private schedule(): void {
    if (this.timer) return;
    this.retryIn = this.delay;
    this.timer = setTimeout(() => void this.check(), this.delay);
  }
}

export const health = new Health();
