import { describe, expect, it } from 'vitest';
import { cronMatches } from '../../src/embedded/cron';

const at = (iso: string) => new Date(iso);

describe('cron strings (Bot.cronString, five fields, UTC)', () => {
  it('matches steps, ranges, lists and single values', () => {
    expect(cronMatches('*/10 * * * *', at('2026-11-23T10:20:00Z'))).toBe(true);
    expect(cronMatches('*/10 * * * *', at('2026-11-23T10:21:00Z'))).toBe(false);
    expect(cronMatches('0 9-17 * * 1-5', at('2026-11-23T09:00:00Z'))).toBe(true); // a Monday
    expect(cronMatches('0 9-17 * * 1-5', at('2026-11-22T09:00:00Z'))).toBe(false); // a Sunday
    expect(cronMatches('5,35 * * * *', at('2026-11-23T03:35:00Z'))).toBe(true);
    expect(cronMatches('0 0 1 1 *', at('2027-01-01T00:00:00Z'))).toBe(true);
    expect(cronMatches('10-40/15 * * * *', at('2026-11-23T03:25:00Z'))).toBe(true);
    expect(cronMatches('10-40/15 * * * *', at('2026-11-23T03:30:00Z'))).toBe(false);
  });

  it('never matches an invalid string', () => {
    for (const bad of ['', '* * * *', '61 * * * *', '*/0 * * * *', 'a * * * *', '5-1 * * * *', '* * * * * *']) {
      expect(cronMatches(bad, at('2026-11-23T00:00:00Z')), bad).toBe(false);
    }
  });
});
