// Notification channels' health as the dashboard shows it (GET /api/v1/notifications/channels):
// a channel is failing from the attempt that made its consecutive failures reach the api's
// threshold (OIKOS_NOTIFY_FAILING_AFTER) until its next success. Plain functions, so the
// wording is unit-tested without a browser.
import type { Schemas } from './api/client';

export type Channel = Schemas['NotificationChannel'];

/** failingChannels are the enabled channels that are failing, the longest-failing first. */
export function failingChannels(list: readonly Channel[]): Channel[] {
  return list
    .filter((c) => c.enabled && c.state === 'failing')
    .sort((a, b) => Date.parse(a.failing_since ?? '') - Date.parse(b.failing_since ?? ''));
}

/** failingSummary is the alert's sentence, "" when nothing fails. */
export function failingSummary(list: readonly Channel[]): string {
  const f = failingChannels(list);
  if (f.length === 0) return '';
  const names = f.map((c) => c.name).join(', ');
  return f.length === 1
    ? `Notification channel ${names} is failing: its messages are queued and retried until it answers.`
    : `${f.length} notification channels are failing (${names}): their messages are queued and retried until they answer.`;
}

/** badge is the state chip's text: "failing · 7 in a row", "ok · 2 failed", "ok". */
export function badge(c: Channel): string {
  if (c.state === 'failing') return `failing · ${c.consecutive_failures} in a row`;
  if (c.consecutive_failures > 0) return `ok · ${c.consecutive_failures} failed`;
  return 'ok';
}
