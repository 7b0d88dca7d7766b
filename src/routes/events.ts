import { DEFAULT_EVENTS_PER_PAGE, EventsSchema, eventsRoute, MAX_EVENT_WAIT_SECONDS } from '../../contracts/events';
import type { App } from '../app-env';
import { ApiError } from '../errors';
import { decodeCursor, encodeCursor, type FeedCursor, look, START } from '../events/feed';
import { medplumOf } from '../medplum/client';

/** Seconds between two looks while a call waits for her next event. */
export const LOOK_EVERY_MS = 3_000;
/** Calls of one patient waiting at once (an app needs one; a second covers a reconnect). */
export const WAITING_PER_CALLER = 2;

/**
 * Her event feed: one look at once, or looks every few seconds until an event comes or `wait` runs out.
 * A waiting call holds no admission place between its looks (`stepOut`), so waiting apps cannot fill the
 * instance; how many of hers wait at once is bounded instead (429 beyond WAITING_PER_CALLER).
 */
export function registerEventRoutes(app: App, clock: () => number = Date.now): void {
  const waiting = new Map<string, number>();
  app.openapi(eventsRoute, async (c) => {
    const query = c.req.valid('query');
    const cursor: FeedCursor | undefined = query.after === undefined ? START : decodeCursor(query.after);
    if (!cursor) {
      throw new ApiError('invalid_request', 'This cursor is not one the feed gave out', {
        issues: [{ path: 'after', message: 'not a cursor of this feed' }],
      });
    }
    const limit = query.limit ? Number(query.limit) : DEFAULT_EVENTS_PER_PAGE;
    const waitMs = Math.min(Number(query.wait ?? '0'), MAX_EVENT_WAIT_SECONDS) * 1000;
    const { patientId, profile } = c.get('session');
    const medplum = medplumOf(c);
    let page = await look(medplum, patientId, cursor, limit);
    if (page.events.length > 0 || waitMs === 0) {
      return c.json(EventsSchema.parse({ events: page.events, next: encodeCursor(page.next) }), 200);
    }
    const already = waiting.get(profile) ?? 0;
    if (already >= WAITING_PER_CALLER) {
      throw new ApiError(
        'rate_limited',
        `At most ${WAITING_PER_CALLER} calls of one account wait for events at once`,
        { retryAfter: 1 },
        { 'Retry-After': '1' },
      );
    }
    waiting.set(profile, already + 1);
    try {
      const deadline = clock() + waitMs;
      const gone = c.req.raw.signal;
      while (page.events.length === 0 && clock() < deadline && !gone.aborted) {
        const pause = Math.min(LOOK_EVERY_MS, deadline - clock());
        const stepOut = c.get('stepOut');
        const paused = stepOut
          ? await stepOut(() => sleep(pause, gone))
          : { value: await sleep(pause, gone), readmitted: true };
        if (!paused.readmitted || gone.aborted) {
          break;
        }
        page = await look(medplum, patientId, page.next, limit);
      }
    } finally {
      const left = (waiting.get(profile) ?? 1) - 1;
      if (left > 0) {
        waiting.set(profile, left);
      } else {
        waiting.delete(profile);
      }
    }
    return c.json(EventsSchema.parse({ events: page.events, next: encodeCursor(page.next) }), 200);
  });
}

/** Resolves after `ms`, or at once when the call is given up. */
function sleep(ms: number, gone: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (gone.aborted) {
      resolve();
      return;
    }
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      gone.removeEventListener('abort', done);
      resolve();
    }
    gone.addEventListener('abort', done);
  });
}
