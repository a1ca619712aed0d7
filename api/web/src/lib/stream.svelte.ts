// The tab's one server-sent-events connection to /api/v1/stream. Pages subscribe to the
// event types they care about and update their stores in place from each event; nothing
// refetches on high-rate events (execution.output arrives many times a second while a
// command runs). After a drop the browser's EventSource resumes with Last-Event-ID; when
// it gives up (the api restarted and refused, the cookie expired) we reconnect ourselves
// with ?last_event_id= so no event is missed, and check the session first.
import type { components } from './api/schema.gen';
import { session } from './session.svelte';
import { health } from './health.svelte';

/** StreamEvent is an event of the outbox as /api/v1/stream sends it (its data frame). */
export type StreamEvent = components['schemas']['Event'];

type Handler = (e: StreamEvent) => void;

interface Sub {
  match: (type: string) => boolean;
  fn: Handler;
}

type Status = 'idle' | 'connecting' | 'live' | 'reconnecting';

class Stream {
  status = $state<Status>('idle');
  /** lastId is the id of the newest event seen; the resume point after a drop. */
  lastId = 0;
  /** received counts events delivered (for tests and the status bar). */
  received = $state(0);
  private es: EventSource | null = null;
  private subs = new Set<Sub>();
  private retry = 1000;
  private timer: ReturnType<typeof setTimeout> | null = null;

  /**
   * on subscribes fn to events whose type equals one of types, or starts with one ending
   * in "." ("execution." is every execution event). It returns the unsubscribe function,
   * for a component's $effect teardown.
   */
  on(types: string[], fn: Handler): () => void {
    const match = (t: string) => types.some((p) => (p.endsWith('.') ? t.startsWith(p) : t === p));
    const sub = { match, fn };
    this.subs.add(sub);
    return () => this.subs.delete(sub);
  }

  start(): void {
    if (this.es) return;
    this.open();
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.es?.close();
    this.es = null;
    this.status = 'idle';
  }

  private open(): void {
    this.status = this.lastId ? 'reconnecting' : 'connecting';
    // unnamed=true: frames without an `event:` line, so EventSource hands every event to
    // onmessage whatever its type (the type is in the data).
    const url = this.lastId ? `/api/v1/stream?unnamed=true&last_event_id=${this.lastId}` : '/api/v1/stream?unnamed=true';
    const es = new EventSource(url, { withCredentials: true });
    this.es = es;
    es.onopen = () => {
      this.status = 'live';
      this.retry = 1000;
    };
    es.onmessage = (m) => this.deliver(m);
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED) {
        // The browser gave up (an HTTP error, not a dropped connection): reconnect
        // ourselves, after checking the cookie is still good.
        this.es = null;
        this.status = 'reconnecting';
        this.timer = setTimeout(() => void this.revive(), this.retry);
        this.retry = Math.min(this.retry * 2, 15000);
      } else {
        this.status = 'reconnecting';
      }
    };
  }

  private async revive(): Promise<void> {
    await session.load();
    if (health.degraded && session.status === 'signed-in') {
      // The api answered but cannot serve yet (its database is away): try again later.
      this.es = null;
      this.status = 'reconnecting';
      this.timer = setTimeout(() => void this.revive(), this.retry);
      this.retry = Math.min(this.retry * 2, 15000);
      return;
    }
    if (session.status !== 'signed-in') {
      session.expired('Your session has ended; sign in again.');
      return;
    }
    this.open();
  }

  private deliver(m: MessageEvent): void {
    let e: StreamEvent;
    try {
      e = JSON.parse(m.data as string) as StreamEvent;
    } catch {
      return;
    }
    const id = Number(m.lastEventId || e.id);
    if (id && id <= this.lastId) return; // a replay overlapping what we saw
    if (id) this.lastId = id;
    this.received++;
    for (const s of this.subs) {
      if (s.match(e.type)) {
        try {
          s.fn(e);
        } catch (err) {
          console.error('stream handler failed', e.type, err);
        }
      }
    }
  }
}

export const stream = new Stream();
