import { describe, expect, it } from 'vitest';
import { badge, failingChannels, failingSummary, type Channel } from './notify';

const channel = (name: string, extra: Partial<Channel> = {}): Channel => ({
  id: name,
  name,
  kind: 'webhook',
  url: 'http://127.0.0.1/…',
  url_ref: 'stored:' + name,
  secret_ref: null,
  quiet_start: null,
  quiet_end: null,
  timezone: 'UTC',
  enabled: true,
  created_at: '2026-12-07T10:00:00Z',
  updated_at: '2026-12-07T10:00:00Z',
  last_ok_at: null,
  last_error: null,
  state: 'ok',
  consecutive_failures: 0,
  last_failure_at: null,
  failing_since: null,
  rules: [],
  ...extra,
});

const failing = (name: string, since: string, n = 5) =>
  channel(name, { state: 'failing', consecutive_failures: n, failing_since: since, last_failure_at: since, last_error: '503' });

describe('notification channel health', () => {
  it('lists the enabled failing channels, longest-failing first', () => {
    const list = [
      channel('ok'),
      failing('late', '2026-12-07T11:00:00Z'),
      failing('early', '2026-12-07T10:00:00Z'),
      { ...failing('off', '2026-12-07T09:00:00Z'), enabled: false },
    ];
    expect(failingChannels(list).map((c) => c.name)).toEqual(['early', 'late']);
  });
  it('says nothing when every channel works', () => {
    expect(failingSummary([channel('a'), channel('b', { consecutive_failures: 2 })])).toBe('');
  });
  it('names the failing channels', () => {
    expect(failingSummary([failing('ntfy', '2026-12-07T10:00:00Z')])).toContain('Notification channel ntfy is failing');
    expect(failingSummary([failing('a', '2026-12-07T10:00:00Z'), failing('b', '2026-12-07T10:01:00Z')])).toContain(
      '2 notification channels are failing (a, b)',
    );
  });
  it('badges the state with the failures in a row', () => {
    expect(badge(failing('a', '2026-12-07T10:00:00Z', 7))).toBe('failing · 7 in a row');
    expect(badge(channel('b', { consecutive_failures: 2 }))).toBe('ok · 2 failed');
    expect(badge(channel('c'))).toBe('ok');
  });
});
