import { describe, expect, it } from 'vitest';
import { ago, bytes, duration, when } from './format';

// ago formats with the browser's locale; the test builds the same formatter, so it checks
// which unit and which number ago picks, whatever the machine's locale.
const rtf = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto', style: 'short' });
const NOW = Date.parse('2026-03-01T12:00:00Z');
const before = (s: number) => new Date(NOW - s * 1000).toISOString();

describe('ago', () => {
  it('says never for no time, and passes through what is not a time', () => {
    expect(ago(null, NOW)).toBe('never');
    expect(ago(undefined, NOW)).toBe('never');
    expect(ago('', NOW)).toBe('never');
    expect(ago('not a time', NOW)).toBe('not a time');
  });

  it.each([
    [0, 0, 'second'],
    [10, -10, 'second'],
    [44, -44, 'second'],
    [45, -1, 'minute'],
    [155, -3, 'minute'], // 2.58 min rounds to 3
    [150, -2, 'minute'], // Math.round takes -2.5 to -2
    [2699, -45, 'minute'],
    [2700, -1, 'hour'],
    [5 * 3600, -5, 'hour'],
    [64799, -18, 'hour'],
    [64800, -1, 'day'],
    [10 * 86400, -10, 'day'],
  ] as const)('%i s ago is %i %s', (secs, n, unit) => {
    expect(ago(before(secs), NOW)).toBe(rtf.format(n, unit));
  });

  it('reads times in the future too', () => {
    expect(ago(before(-120), NOW)).toBe(rtf.format(2, 'minute'));
    expect(ago(before(-3 * 86400), NOW)).toBe(rtf.format(3, 'day'));
  });

  it('is English for an English locale', () => {
    const en = new Intl.RelativeTimeFormat('en', { numeric: 'auto', style: 'short' });
    // Guards the expectation above: numeric auto says "now" and "yesterday", not "0 sec".
    expect(en.format(0, 'second')).toBe('now');
    expect(en.format(-1, 'day')).toBe('yesterday');
  });
});

describe('when', () => {
  it('is the local date and time, or empty, or the input when it is not a time', () => {
    const iso = '2026-03-01T12:34:56Z';
    expect(when(iso)).toBe(new Date(iso).toLocaleString());
    expect(when(null)).toBe('');
    expect(when(undefined)).toBe('');
    expect(when('soon')).toBe('soon');
  });
});

describe('duration', () => {
  it.each([
    [0, '0 ms'],
    [0.4, '0 ms'],
    [850, '850 ms'],
    [999.4, '999 ms'],
    [1000, '1.0 s'],
    [12_400, '12.4 s'],
    [59_949, '59.9 s'],
    [60_000, '1 min 00 s'],
    [185_000, '3 min 05 s'],
    [3_599_999, '59 min 59 s'],
    [3_600_000, '1 h 0 min'],
    [7_800_000, '2 h 10 min'],
    [90_000_000, '25 h 0 min'],
  ])('%d ms is %j', (ms, want) => expect(duration(ms)).toBe(want));
});

describe('bytes', () => {
  it.each([
    [0, '0 B'],
    [512, '512 B'],
    [1023, '1023 B'],
    [1024, '1.0 KiB'],
    [1536, '1.5 KiB'],
    [1024 ** 2 * 3.25, '3.3 MiB'],
    [1024 ** 3 * 3.2, '3.2 GiB'],
    [1024 ** 4, '1.0 TiB'],
    [1024 ** 5, '1024.0 TiB'],
  ])('%d is %j', (n, want) => expect(bytes(n)).toBe(want));
});
