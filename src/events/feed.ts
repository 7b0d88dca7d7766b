import type { MedplumClient } from '@medplum/core';
import type { Bundle, Resource } from '@medplum/fhirtypes';
import {
  EVENT_RESOURCE_TYPES,
  type EventReading,
  type EventResourceType,
  eventId,
  eventOf,
} from '../../bots/lib/events';
import type { EventType } from '../../contracts/events';

/**
 * Her event feed (contracts/events.ts): a changes feed of her own records, derived from what Medplum
 * keeps (each record's newest version and its instant), read with her token. Nothing is stored for it
 * and nothing is kept in the gateway: the cursor carries where the feed stands. No Node built-in: the
 * gateway also runs as a Worker.
 *
 * Why a cursor carries ids as well as an instant: Medplum stamps `meta.lastUpdated` when it starts a write,
 * and a write can commit after another that started later. So each look goes back LOOKBACK_MS before the
 * newest instant delivered, and skips the versions it delivered there (the cursor's `seen`, each with its
 * instant): a write that commits late is delivered late, not lost. When more of her versions than the
 * cursor can hold fall in that window (a batch written about her), the oldest are let go and the cursor
 * keeps where they ended (`from`): the next look starts there, so the feed always moves on.
 */

/** How far before the newest delivered instant each look reaches back for writes that committed late. */
export const LOOKBACK_MS = 5_000;
/**
 * Versions a cursor remembers at most (each about 18 characters of it). Past it the oldest are let go and
 * the next look starts at the oldest kept one's instant; versions of that very instant let go come again
 * (at least once). Only more than this many of her versions in one millisecond could be missed.
 */
const MAX_SEEN = 200;
/** Characters of a version id a cursor keeps: enough to tell one patient's versions of a few seconds apart. */
const SEEN_ID_LENGTH = 12;

export interface PatientEvent {
  id: string;
  type: EventType;
  occurredAt: string;
  subject: string;
  kind?: string;
}

/** An event with the cursor right after it (a stream's event id: resuming there starts after this event). */
export interface FedEvent {
  event: PatientEvent;
  after: FeedCursor;
}

export interface FeedCursor {
  /** The newest instant delivered (none before her first event). */
  t?: string;
  /** The versions delivered (or passed over) since LOOKBACK_MS before `t`: their ids, shortened, and instants. */
  seen: { id: string; at: number }[];
  /** Where the next look starts when it is later than LOOKBACK_MS before `t` (the window overflowed). */
  from?: number;
}

export const START: FeedCursor = { seen: [] };

/** A cursor as the API hands it out: base64url of its JSON (opaque to clients). */
export function encodeCursor(cursor: FeedCursor): string {
  // Instants as milliseconds before `t` (at most LOOKBACK_MS): short, and nothing to check but a range.
  const t = cursor.t ? Date.parse(cursor.t) : 0;
  const body = {
    t: cursor.t,
    s: cursor.seen.map((e) => `${e.id}.${t - e.at}`),
    ...(cursor.from !== undefined ? { b: t - cursor.from } : {}),
  };
  return btoa(JSON.stringify(body)).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
}

/** A cursor back from a client: exactly what encodeCursor makes, or undefined. */
export function decodeCursor(text: string): FeedCursor | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(atob(text.replaceAll('-', '+').replaceAll('_', '/')));
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return undefined;
  }
  const { t, s, b, ...rest } = parsed as { t?: unknown; s?: unknown; b?: unknown };
  // Only an instant as the feed writes one (toISOString, in years Medplum can search).
  const instant =
    typeof t === 'string' &&
    /^[1-9][0-9]{3}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$/.test(t) &&
    new Date(t).toISOString() === t
      ? t
      : undefined;
  const before = (n: unknown): n is number => Number.isInteger(n) && (n as number) >= 0 && (n as number) <= LOOKBACK_MS;
  const entries = Array.isArray(s)
    ? s.map((e) => (typeof e === 'string' ? /^([A-Za-z0-9-]{1,12})\.([0-9]{1,4})$/.exec(e) : null))
    : [];
  if (
    Object.keys(rest).length > 0 ||
    (t !== undefined && !instant) ||
    !Array.isArray(s) ||
    s.length > MAX_SEEN ||
    (s.length > 0 && !instant) ||
    !entries.every((m) => m !== null && before(Number(m[2]))) ||
    (b !== undefined && (!instant || !(b === -1 || before(b))))
  ) {
    return undefined;
  }
  const at = instant ? Date.parse(instant) : 0;
  return {
    t: instant,
    seen: entries.map((m) => ({ id: (m as RegExpExecArray)[1], at: at - Number((m as RegExpExecArray)[2]) })),
    ...(b !== undefined ? { from: at - (b as number) } : {}),
  };
}

/** One type of her records, and what each version of one says happened. */
export interface Source {
  resourceType: EventResourceType;
  eventOf: (resource: Resource, patientId: string) => EventReading | undefined;
}

/** Each type of her records the feed reads, read by the events' one reading (bots/lib/events.ts). */
const SOURCES: Source[] = EVENT_RESOURCE_TYPES.map((resourceType) => ({ resourceType, eventOf }));

/** Versions a look reads beyond the page and what the cursor has seen (see `look`). */
const SILENT_ROOM = 20;

/** How many searches one look makes (the feed's cost, in her FHIR quota: 20 points each). */
export const SEARCHES_PER_LOOK = 1;

const shortId = (versionId: string): string => versionId.replaceAll(/[^A-Za-z0-9-]/g, '').slice(0, SEEN_ID_LENGTH);

export interface Version {
  resource: Resource & { id: string; meta: { versionId: string; lastUpdated: string } };
  source: Source;
  at: number;
}

/**
 * One look: her events after `cursor`, at most `limit`, oldest first, and the cursor after them. One search
 * of every type at once (`GET /fhir/R4?_type=Task,Appointment,DocumentReference`, Medplum's search of
 * several types: one search of her quota), with her token and no criteria of its own: what her access
 * policy lets her read of those types is what she is shown, each version then read for what it says
 * (only her own tasks and visits say anything). It asks for `limit` more versions than the cursor has
 * seen, from LOOKBACK_MS before its instant, oldest first.
 */
export async function look(
  medplum: MedplumClient,
  patientId: string,
  given: FeedCursor,
  limit: number,
): Promise<{ events: FedEvent[]; next: FeedCursor }> {
  // Her feed begins where her story does: a first look starts at her Patient's first version, so what was
  // published before she registered (every agreement's versions) is not told as news (issue 51 item 6).
  const cursor = given.t ? given : { ...given, from: await herStart(medplum, patientId) };
  const since =
    cursor.t || cursor.from !== undefined
      ? new Date(Math.max(cursor.t ? Date.parse(cursor.t) - LOOKBACK_MS : 0, cursor.from ?? 0)).toISOString()
      : undefined;
  // Room for versions that say nothing (a bot's own updates of her tasks): without it a page could end at
  // a horizon just before her next event and hand back nothing while there is something to tell.
  const count = limit + cursor.seen.length + SILENT_ROOM;
  const query = new URLSearchParams({
    _type: SOURCES.map((source) => source.resourceType).join(','),
    ...(since ? { _lastUpdated: `ge${since}` } : {}),
    _sort: '_lastUpdated',
    _count: String(count),
  });
  const bundle = (await medplum.get(`${new URL('fhir/R4', medplum.getBaseUrl()).href}?${query}`, {
    cache: 'no-cache',
  })) as Bundle;
  const versions = (bundle.entry ?? []).flatMap((e) => {
    const source = SOURCES.find((s) => s.resourceType === e.resource?.resourceType);
    return source && e.resource?.id && e.resource.meta?.versionId && e.resource.meta.lastUpdated
      ? [{ resource: e.resource as Version['resource'], source, at: Date.parse(e.resource.meta.lastUpdated) }]
      : [];
  });
  const page = nextPage([{ versions, full: (bundle.entry ?? []).length >= count }], cursor, patientId, limit);
  // A first look that took nothing hands back the first cursor (a start without an instant is not one).
  return page.next.t ? page : { ...page, next: given };
}

/** When her Patient was first written (its oldest version; her own history, which her policy lets her read). */
async function herStart(medplum: MedplumClient, patientId: string): Promise<number | undefined> {
  const history = (await medplum.get(
    `${new URL(`fhir/R4/Patient/${encodeURIComponent(patientId)}/_history`, medplum.getBaseUrl()).href}?_count=1000`,
    { cache: 'no-cache' },
  )) as Bundle;
  // (A failure here is the feed's failure, as its search's is: never a feed that silently starts elsewhere.)
  const instants = (history.entry ?? [])
    .map((e) => Date.parse(e.resource?.meta?.lastUpdated ?? ''))
    .filter((at) => Number.isFinite(at));
  return instants.length > 0 ? Math.min(...instants) : undefined;
}

/** The merge of one look's answers (exported for its tests: the cursor's rules are here). */
export function nextPage(
  answers: { versions: Version[]; full: boolean }[],
  cursor: FeedCursor,
  patientId: string,
  limit: number,
): { events: FedEvent[]; next: FeedCursor } {
  // Beyond the end of a full answer its source may hold versions not read yet: the page stops there.
  const horizon = Math.min(
    ...answers.filter((a) => a.full && a.versions.length > 0).map((a) => a.versions[a.versions.length - 1].at),
  );
  const seen = new Set(cursor.seen.map((e) => e.id));
  const unseen = answers.flatMap((a) => a.versions).filter((v) => !seen.has(shortId(v.resource.meta.versionId)));
  // Before the horizon every source's versions are all here, so their order is the same whatever the page
  // size; at the horizon a full source may have more at that instant (Medplum orders ties as it likes), so
  // those wait for the next look, unless they are all there is (then the feed still moves on).
  const complete = unseen.filter((v) => v.at < horizon);
  const fresh = (complete.length > 0 ? complete : unseen.filter((v) => v.at <= horizon)).sort(
    (a, b) => a.at - b.at || (a.resource.meta.versionId < b.resource.meta.versionId ? -1 : 1),
  );
  const events: FedEvent[] = [];
  const taken: Version[] = [];
  for (const version of fresh) {
    const said = version.source.eventOf(version.resource, patientId);
    if (said && events.length === limit) {
      break;
    }
    // A version that says nothing is passed over, and remembered as passed.
    taken.push(version);
    if (said) {
      const { resourceType, id, meta } = version.resource;
      events.push({
        event: {
          id: eventId(version.resource),
          ...said,
          occurredAt: meta.lastUpdated,
          subject: `${resourceType}/${id}`,
        },
        after: advance(cursor, taken),
      });
    }
  }
  return { events, next: advance(cursor, taken) };
}

/**
 * The cursor after these versions: the newest instant, and what was taken within LOOKBACK_MS of it (and
 * not before where looks start), at most MAX_SEEN of the newest. When some had to be let go, looks start at
 * the oldest kept one's instant; when all kept share one instant, just after it, so the feed moves on.
 */
function advance(cursor: FeedCursor, taken: Version[]): FeedCursor {
  if (taken.length === 0) {
    return cursor;
  }
  const newest = Math.max(cursor.t ? Date.parse(cursor.t) : 0, ...taken.map((v) => v.at));
  const start = Math.max(newest - LOOKBACK_MS, cursor.from ?? 0);
  const all = [...cursor.seen, ...taken.map((v) => ({ id: shortId(v.resource.meta.versionId), at: v.at }))]
    .filter((e) => e.at >= start)
    .sort((a, b) => a.at - b.at);
  const kept = all.slice(-MAX_SEEN);
  let from = cursor.from !== undefined && cursor.from > newest - LOOKBACK_MS ? cursor.from : undefined;
  if (kept.length < all.length) {
    from = kept[0].at === newest ? newest + 1 : kept[0].at;
  }
  return {
    t: new Date(newest).toISOString(),
    seen: from !== undefined && from > newest ? [] : kept,
    ...(from !== undefined ? { from } : {}),
  };
}
