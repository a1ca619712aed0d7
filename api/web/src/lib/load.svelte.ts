// The state of the reads the dashboard's panels show through Loadable, written once.
//
// Load is one read: loading until its first answer, the message of the last failure in
// error (the next try clears it). The component keeps what the read returns in its own
// state; Load only says how the read went.
//
// CursorTrail is the api's cursor paging as the tables use it: the cursors of the pages
// come through, so "previous" goes back exactly (the api's cursors only go forward).
import { message } from './api/client';

export class Load<A extends unknown[] = []> {
  loading = $state(true);
  error = $state('');
  #read: (...args: A) => Promise<void>;

  constructor(read: (...args: A) => Promise<void>) {
    this.#read = read;
  }

  /** run reads once; it never throws (a failure is in error). */
  run = async (...args: A): Promise<void> => {
    this.error = '';
    try {
      await this.#read(...args);
    } catch (e) {
      this.error = message(e);
    } finally {
      this.loading = false;
    }
  };
}

export class CursorTrail {
  /** The cursor of each page come through; the first page has none. */
  cursors = $state<(string | undefined)[]>([undefined]);
  /** The current page's next_cursor: null on the last page. */
  next = $state<string | null>(null);
  #load: (cursor: string | undefined) => void;

  /** load reads the page at a cursor and sets next from its answer. */
  constructor(load: (cursor: string | undefined) => void) {
    this.#load = load;
  }

  /** The current page, from 1. */
  get page(): number {
    return this.cursors.length;
  }

  /** The current page's cursor. */
  get cursor(): string | undefined {
    return this.cursors[this.cursors.length - 1];
  }

  get hasPrev(): boolean {
    return this.cursors.length > 1;
  }

  /** Whether there is more than one page to move between (the pager is worth showing). */
  get paged(): boolean {
    return this.hasPrev || !!this.next;
  }

  /** restart forgets the pages come through and reads the first (a filter changed). */
  restart(): void {
    this.cursors = [undefined];
    this.#load(undefined);
  }

  forward = (): void => {
    const next = this.next;
    if (!next) return;
    this.cursors = [...this.cursors, next];
    this.#load(next);
  };

  back = (): void => {
    if (this.cursors.length < 2) return;
    this.cursors = this.cursors.slice(0, -1);
    this.#load(this.cursor);
  };

  /** reload reads the current page again. */
  reload = (): void => {
    this.#load(this.cursor);
  };
}

/**
 * Polled is a read done again every `every` ms while the page is visible, for what the
 * stream does not carry one change at a time (leases renewing, a channel's health): value
 * is the last answer (null until the first), error the last failure's message (a failed
 * refresh keeps the value shown), now when the last read ended, for "… ago".
 */
export class Polled<T> {
  value = $state<T | null>(null);
  error = $state('');
  now = $state(Date.now());
  #read: () => Promise<T>;
  #every: number;

  constructor(read: () => Promise<T>, every: number) {
    this.#read = read;
    this.#every = every;
  }

  /** refresh reads once; it never throws. */
  refresh = async (): Promise<void> => {
    try {
      this.value = await this.#read();
      this.error = '';
    } catch (e) {
      this.error = message(e);
    } finally {
      this.now = Date.now();
    }
  };

  /** start reads now and then every interval while the page is visible; it returns the stop, for an $effect. */
  start = (): (() => void) => {
    void this.refresh();
    const id = setInterval(() => {
      if (document.visibilityState === 'visible') void this.refresh();
    }, this.#every);
    return () => clearInterval(id);
  };
}
