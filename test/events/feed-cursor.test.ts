import { describe, expect, it } from 'vitest';
import {
  decodeCursor,
  encodeCursor,
  type FeedCursor,
  LOOKBACK_MS,
  nextPage,
  type Source,
  START,
  type Version,
} from '../../src/events/feed';

/**
 * The feed's cursor, without a Medplum (src/events/feed.ts): what a client may hand back, and how one look's
 * versions become a page and the next cursor. The feed over her records is test/gateway/events.test.ts;
 * crafted cursors through the gateway, test/gateway/events-attacks.test.ts. Pure, so that `npm run
 * mutation` can run them against each mutant in milliseconds.
 */
const encode = (body: unknown) =>
  btoa(JSON.stringify(body)).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
const T = '2026-11-28T10:00:00.000Z';
const t0 = Date.parse(T);

describe('what a client may hand back', () => {
  it('exactly what encodeCursor makes comes back as it was: an instant, the versions seen, where to start', () => {
    const cursors: FeedCursor[] = [
      START,
      { t: T, seen: [] },
      {
        t: T,
        seen: [
          { id: 'abc-123', at: t0 },
          { id: 'def', at: t0 - LOOKBACK_MS },
        ],
      },
      { t: T, seen: [], from: t0 - 10 },
      { t: T, seen: [{ id: 'z', at: t0 - 1 }], from: t0 + 1 },
    ];
    for (const cursor of cursors) {
      expect(decodeCursor(encodeCursor(cursor))).toEqual(cursor.t ? cursor : { t: undefined, seen: [] });
    }
    // base64url: no padding, no + or /.
    expect(encodeCursor({ t: T, seen: [{ id: 'a'.repeat(12), at: t0 - 4999 }] })).toMatch(/^[A-Za-z0-9_-]+$/);
  });

  it('anything else is refused (undefined): not base64 JSON, not an object, other keys, a bad instant', () => {
    for (const text of ['', '%%%', encode('x'), encode([1]), encode(null), encode(42)]) {
      expect(decodeCursor(text), text).toBeUndefined();
    }
    expect(decodeCursor(encode({ s: [], x: 1 }))).toBeUndefined();
    expect(decodeCursor(encode({ t: T }))).toBeUndefined();
    expect(decodeCursor(encode({ t: T, s: 'a.1' }))).toBeUndefined();
    for (const t of ['2026-11-28T10:00:00Z', '2026-02-30T10:00:00.000Z', '0999-11-28T10:00:00.000Z', 1, '']) {
      expect(decodeCursor(encode({ t, s: [] })), String(t)).toBeUndefined();
    }
    expect(decodeCursor(encode({ s: [] }))).toEqual({ t: undefined, seen: [] });
    expect(decodeCursor(encode({ t: T, s: [] }))).toEqual({ t: T, seen: [] });
  });

  it('versions seen: a short id and milliseconds before the instant (0 to the look-back), at most 200, none without an instant', () => {
    const ok = (s: unknown[], b?: unknown) => decodeCursor(encode({ t: T, s, ...(b === undefined ? {} : { b }) }));
    expect(ok(['a.0', 'B-9.5000'])?.seen).toEqual([
      { id: 'a', at: t0 },
      { id: 'B-9', at: t0 - 5000 },
    ]);
    for (const entry of ['a.5001', 'a.-1', 'a', '.1', 'a_b.1', `${'a'.repeat(13)}.1`, 'a.1.2', 7, 'a.00001']) {
      expect(ok([entry]), String(entry)).toBeUndefined();
    }
    expect(ok(Array.from({ length: 200 }, (_, i) => `v${i}.1`))?.seen).toHaveLength(200);
    expect(ok(Array.from({ length: 201 }, (_, i) => `v${i}.1`))).toBeUndefined();
    expect(decodeCursor(encode({ s: ['a.1'] }))).toBeUndefined();
    // Where to start: -1 (just after the instant) or 0 to the look-back before it, and only with an instant.
    expect(ok([], -1)).toEqual({ t: T, seen: [], from: t0 + 1 });
    expect(ok([], 0)).toEqual({ t: T, seen: [], from: t0 });
    expect(ok([], 5000)).toEqual({ t: T, seen: [], from: t0 - 5000 });
    for (const b of [-2, 5001, 1.5, '1', null]) {
      expect(ok([], b), String(b)).toBeUndefined();
    }
    expect(decodeCursor(encode({ s: [], b: 0 }))).toBeUndefined();
  });
});

describe('the cursor’s rules (late writes are found, never lost)', () => {
  const source: Source = {
    resourceType: 'Task',
    eventOf: () => ({ type: 'task.ready' }),
  };
  const version = (id: string, at: number): Version => ({
    resource: {
      resourceType: 'Task',
      id,
      meta: { versionId: `${id}-v1-0000`, lastUpdated: new Date(at).toISOString() },
    } as Version['resource'],
    source,
    at,
  });
  const t0 = Date.parse('2026-11-28T10:00:00.000Z');

  it('a version written before the newest delivered, within the look-back, is delivered after it; once', () => {
    const first = nextPage([{ versions: [version('a', t0 + 1000)], full: false }], { seen: [] }, 'p', 10);
    expect(first.events.map((e) => e.event.subject)).toEqual(['Task/a']);
    // b committed late: its instant is before a's, within the look-back.
    const both = [version('b', t0 + 500), version('a', t0 + 1000)];
    const late = nextPage([{ versions: both, full: false }], first.next, 'p', 10);
    expect(late.events.map((e) => e.event.subject)).toEqual(['Task/b']);
    expect(nextPage([{ versions: both, full: false }], late.next, 'p', 10).events).toEqual([]);
    // Once past the look-back, what the cursor saw is dropped: the search no longer reaches it.
    const later = nextPage(
      [{ versions: [version('c', t0 + 1000 + LOOKBACK_MS + 1)], full: false }],
      late.next,
      'p',
      10,
    );
    expect(later.events.map((e) => e.event.subject)).toEqual(['Task/c']);
    expect(decodeCursor(encodeCursor(later.next))?.seen).toHaveLength(1);
  });

  it('a page stops before where a full answer ends: nothing beyond it is skipped, ties there wait', () => {
    const page = nextPage(
      [
        { versions: [version('a', t0 + 1), version('b', t0 + 3)], full: true },
        { versions: [version('x', t0 + 2), version('y', t0 + 4)], full: false },
      ],
      { seen: [] },
      'p',
      10,
    );
    // b is at the full answer's last instant: its source may hold more at that instant, so it comes next.
    expect(page.events.map((e) => e.event.subject)).toEqual(['Task/a', 'Task/x']);
    const after = nextPage(
      [
        { versions: [version('b', t0 + 3), version('c', t0 + 3)], full: false },
        { versions: [version('y', t0 + 4)], full: false },
      ],
      page.next,
      'p',
      10,
    );
    expect(after.events.map((e) => e.event.subject)).toEqual(['Task/b', 'Task/c', 'Task/y']);
  });

  it('a full page of one source, all at one instant, still moves on', () => {
    const same = [version('a', t0), version('b', t0), version('c', t0)];
    const first = nextPage([{ versions: same.slice(0, 2), full: true }], { seen: [] }, 'p', 2);
    expect(first.events).toHaveLength(2);
    const second = nextPage([{ versions: same, full: true }], first.next, 'p', 2);
    expect(second.events.map((e) => e.event.subject)).toEqual(['Task/c']);
  });
});
