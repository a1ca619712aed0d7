// Who is signed in, and what the UI may offer them. The session itself is the HttpOnly
// cookie the api set at sign-in; this store only mirrors GET /api/v1/session. A readonly
// token gets a read-only UI (canWrite false: no approve, ack or chat buttons), and only an
// operator's session decides approvals (canDecide).
import type { components } from './api/schema.gen';

import { health, isDatabaseOutage } from './health.svelte';

type Session = components['schemas']['WebSession'];

type Status = 'loading' | 'signed-out' | 'signed-in';

class SessionStore {
  status = $state<Status>('loading');
  who = $state<Session | null>(null);
  /** notice explains why the user is looking at the sign-in (expired, signed out, restarted). */
  notice = $state('');

  canWrite = $derived(this.who?.role === 'operator' || this.who?.role === 'agent');
  canDecide = $derived(this.who?.role === 'operator');

  /** load asks the api whom the cookie stands for. */
  async load(): Promise<void> {
    try {
      const r = await fetch('/api/v1/session', { credentials: 'same-origin' });
      if (r.ok) {
        this.who = (await r.json()) as Session;
        this.status = 'signed-in';
        return;
      }
      if (r.status === 503 && this.status === 'signed-in' && isDatabaseOutage(await r.clone().json().catch(() => ({})))) {
        // The api is up but its database is not: the cookie cannot be checked now, which
        // says nothing about it. Stay signed in; the banner says the api is reconnecting.
        health.report('The api answered 503');
        return;
      }
      this.who = null;
      this.status = 'signed-out';
      if (r.status === 401) {
        // A cookie the api no longer accepts says why (expired, signed out, its token
        // revoked); a browser that never signed in gets the plain sign-in.
        const p = (await r.json().catch(() => ({}))) as { detail?: string };
        if (p.detail && /session/i.test(p.detail)) this.notice = sentence(p.detail);
      } else {
        this.notice = `The api answered ${r.status}; try again in a moment.`;
      }
    } catch {
      this.who = null;
      this.status = 'signed-out';
      this.notice = 'The api cannot be reached. It may be restarting; reload in a moment.';
    }
  }

  /** signIn exchanges a token for the session cookie; it returns an error message or ''. */
  async signIn(token: string): Promise<string> {
    let r: Response;
    try {
      r = await fetch('/api/v1/session', {
        method: 'POST',
        credentials: 'same-origin',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ token: token.trim() }),
      });
    } catch {
      return 'The api cannot be reached. Is oikos-api running?';
    }
    if (!r.ok) {
      const p = await r.json().catch(() => ({}));
      if (r.status === 401) return 'That token is not valid: it is unknown, mistyped or revoked.';
      // Too many attempts from this address: the api says the limit and when to try again.
      if (r.status === 429) return sentence((p as { detail?: string }).detail ?? 'too many sign-in attempts; try again in a minute');
      return (p as { detail?: string }).detail ?? `Sign-in failed (${r.status}).`;
    }
    this.who = (await r.json()) as Session;
    this.notice = '';
    this.status = 'signed-in';
    return '';
  }

  async signOut(): Promise<void> {
    await fetch('/api/v1/session', { method: 'DELETE', credentials: 'same-origin' }).catch(() => undefined);
    this.who = null;
    this.notice = 'Signed out.';
    this.status = 'signed-out';
  }

  /** expired is called when any call answers 401: the cookie expired or was revoked. */
  expired(why: string): void {
    if (this.status !== 'signed-in') return;
    this.who = null;
    this.notice = why;
    this.status = 'signed-out';
  }
}

/** sentence capitalises the api's detail for display ("the session expired; …"). */
function sentence(s: string): string {
  const t = s.trim();
  return t.charAt(0).toUpperCase() + t.slice(1) + (/[.!?]$/.test(t) ? '' : '.');
}

export const session = new SessionStore();
