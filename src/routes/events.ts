import type { Context } from 'hono';
import { type SSEStreamingApi, streamSSE } from 'hono/streaming';
import {
  DEFAULT_EVENTS_PER_PAGE,
  EventsSchema,
  eventsRoute,
  eventTicketRoute,
  MAX_EVENT_WAIT_SECONDS,
  MAX_EVENTS_PER_PAGE,
} from '../../contracts/events';
import { patientEventWebhook, testEventWebhook, WEBHOOK_SIGNATURE_SCHEME } from '../../contracts/webhooks';
import type { App, AppEnv } from '../app-env';
import type { EventTickets } from '../edge/event-ticket';
import { ApiError } from '../errors';
import { decodeCursor, encodeCursor, type FeedCursor, look, START } from '../events/feed';
import { medplumOf } from '../medplum/client';

/** Milliseconds between two looks while a call waits for her next event, or a stream is open. */
export const LOOK_EVERY_MS = 3_000;
/** Calls of one patient waiting (or streaming) at once: an app needs one; a second covers a reconnect. */
export const WAITING_PER_CALLER = 2;
/** Calls waiting or streaming at once on an instance (by default); beyond it a wait answers at once and a stream is one look. */
export const WAITING_TOTAL = 2_000;
/** How long a stream stays open before it ends (the client reconnects with `Last-Event-ID`). */
export const STREAM_MS = 5 * 60_000;

/**
 * Her event feed: one look at once, or looks every few seconds until an event comes or `wait` runs out;
 * with `Accept: text/event-stream`, the same feed as Server-Sent Events, resumed from `Last-Event-ID`.
 * A waiting call holds no admission place between its looks (`stepOut`), so waiting apps cannot fill the
 * instance; how many of hers wait at once is bounded instead (429 beyond WAITING_PER_CALLER), and so is
 * how many wait in all (beyond WAITING_TOTAL, waits answer at once: polling still works, never an outage).
 */
export function registerEventRoutes(app: App, waitingTotal = WAITING_TOTAL, tickets?: EventTickets): void {
  const waiting = waitingCount(waitingTotal);
  // What a tenant's backend receives (sent by the webhooks bot, not served here): in the document's `webhooks`.
  app.openAPIRegistry.registerComponent('securitySchemes', 'webhookSignature', WEBHOOK_SIGNATURE_SCHEME);
  app.openAPIRegistry.registerWebhook(patientEventWebhook);
  app.openAPIRegistry.registerWebhook(testEventWebhook);
  app.openapi(eventTicketRoute, async (c) => {
    // Asked with her token in the header (a ticket opens only the feed, never another ticket).
    const token = /^Bearer (\S+)$/.exec(c.req.header('authorization') ?? '')?.[1];
    if (!tickets || !token) {
      throw new ApiError('upstream_unavailable', 'Tickets are not offered by this gateway', {});
    }
    // Her session as Medplum knows it now (a revoked sign-in is refused here, not a minute later).
    await medplumOf(c).readResource('Patient', c.get('session').patientId);
    const sealed = await tickets.seal(token);
    return c.json({ ...sealed, url: `/v1/events?ticket=${sealed.ticket}` }, 201);
  });
  app.openapi(eventsRoute, async (c) => {
    const query = c.req.valid('query');
    const streaming = (c.req.header('accept') ?? '').includes('text/event-stream');
    const given = streaming ? (c.req.header('last-event-id') ?? query.after) : query.after;
    const cursor = given === undefined || given === '' ? START : cursorFrom(given, streaming);
    const limit = query.limit ? Number(query.limit) : DEFAULT_EVENTS_PER_PAGE;
    const { patientId, profile } = c.get('session');
    const medplum = medplumOf(c);
    if (streaming) {
      const place = waiting.enter(profile);
      if (place === 'caller') {
        throw tooManyWaiting();
      }
      if (place === 'total') {
        // The instance's streams are all taken: hers is one look and ends (with when to reconnect), a
        // poll in a stream's clothes, so a crowd of streams never keeps her from her events. The look is
        // made here, while admission still holds her place, not after the answer began.
        const page = await look(medplum, patientId, cursor, MAX_EVENTS_PER_PAGE);
        return streamSSE(
          c,
          async (sse) => {
            await writeEvents(sse, page);
            await sse.writeSSE({ event: 'reconnect', data: '{}', retry: LOOK_EVERY_MS });
          },
          logStreamError,
        );
      }
      return stream(c, { cursor, patientId, leave: () => waiting.leave(profile) });
    }
    const waitMs = Math.min(Number(query.wait ?? '0'), MAX_EVENT_WAIT_SECONDS) * 1000;
    let page = await look(medplum, patientId, cursor, limit);
    if (page.events.length > 0 || waitMs === 0) {
      return answer(c, page);
    }
    const place = waiting.enter(profile);
    if (place === 'caller') {
      throw tooManyWaiting();
    }
    if (place === 'total') {
      return answer(c, page);
    }
    try {
      const deadline = Date.now() + waitMs;
      const gone = c.req.raw.signal;
      while (page.events.length === 0 && Date.now() < deadline && !gone.aborted) {
        const pause = Math.min(LOOK_EVERY_MS, deadline - Date.now());
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
      waiting.leave(profile);
    }
    return answer(c, page);
  });
}

function answer(c: Context<AppEnv>, page: Awaited<ReturnType<typeof look>>) {
  return c.json(EventsSchema.parse({ events: page.events.map((e) => e.event), next: encodeCursor(page.next) }), 200);
}

function cursorFrom(text: string, streaming: boolean): FeedCursor {
  const cursor = /^[A-Za-z0-9_-]{1,6000}$/.test(text) ? decodeCursor(text) : undefined;
  if (!cursor) {
    const path = streaming ? 'Last-Event-ID' : 'after';
    throw new ApiError('invalid_request', 'This cursor is not one the feed gave out', {
      issues: [{ path, message: 'not a cursor of this feed' }],
    });
  }
  return cursor;
}

const tooManyWaiting = () =>
  new ApiError(
    'rate_limited',
    `At most ${WAITING_PER_CALLER} calls of one account wait for events at once`,
    { retryAfter: 1 },
    { 'Retry-After': '1' },
  );

/**
 * The feed as Server-Sent Events: each event's `id` is the cursor right after it (what `Last-Event-ID`
 * resumes from), its `event` the type, its `data` the event as JSON. A look every LOOK_EVERY_MS, each
 * admitted as a call of hers (skipped while she is at her limit); a comment line keeps idle connections
 * open; the stream ends after STREAM_MS.
 */
function stream(
  c: Context<AppEnv>,
  { cursor, patientId, leave }: { cursor: FeedCursor; patientId: string; leave: () => void },
): Response {
  const medplum = medplumOf(c);
  const admitted = c.get('admitted');
  return streamSSE(
    c,
    async (sse) => {
      let at = cursor;
      // Her leaving ends the pause between looks at once, so her place is given back at once.
      const gone = new AbortController();
      sse.onAbort(() => gone.abort());
      const ends = Date.now() + STREAM_MS;
      try {
        while (!gone.signal.aborted && Date.now() < ends) {
          const release = admitted ? admitted() : () => undefined;
          if (release) {
            let page: Awaited<ReturnType<typeof look>>;
            try {
              page = await look(medplum, patientId, at, MAX_EVENTS_PER_PAGE);
            } finally {
              release();
            }
            await writeEvents(sse, page);
            at = page.next;
            if (page.events.length === MAX_EVENTS_PER_PAGE) {
              continue;
            }
          }
          await sse.write(': waiting\n\n');
          await sleep(LOOK_EVERY_MS, gone.signal);
        }
      } finally {
        leave();
      }
    },
    logStreamError,
  );
}

/** A look's events as Server-Sent Events: each `id` the cursor right after it, `event` its type, `data` it. */
async function writeEvents(sse: SSEStreamingApi, page: Awaited<ReturnType<typeof look>>): Promise<void> {
  for (const { event, after } of page.events) {
    await sse.writeSSE({ id: encodeCursor(after), event: event.type, data: JSON.stringify(event) });
  }
}

/**
 * A look that failed after the stream began (her token expired, Medplum unavailable): the stream ends,
 * and what is logged is where, never the error's text (it may hold patient data), as errorResponse does.
 */
async function logStreamError(err: Error): Promise<void> {
  const frames = (err.stack ?? '')
    .split('\n')
    .slice(1, 6)
    .map((l) => l.trim());
  console.error(JSON.stringify({ level: 'error', error: err.name, where: 'event stream', frames }));
}

/** Calls waiting (or streaming) now: per caller and in all. */
function waitingCount(limit: number) {
  const perCaller = new Map<string, number>();
  let total = 0;
  return {
    enter(caller: string): 'ok' | 'caller' | 'total' {
      const mine = perCaller.get(caller) ?? 0;
      if (mine >= WAITING_PER_CALLER) {
        return 'caller';
      }
      if (total >= limit) {
        return 'total';
      }
      perCaller.set(caller, mine + 1);
      total++;
      return 'ok';
    },
    leave(caller: string): void {
      const mine = (perCaller.get(caller) ?? 1) - 1;
      if (mine > 0) {
        perCaller.set(caller, mine);
      } else {
        perCaller.delete(caller);
      }
      total--;
    },
  };
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
