import type { Appointment } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_EVENTS_PER_PAGE } from '../../contracts/events';
import { SYSTEMS } from '../../contracts/systems';
import { DEFAULT_LIMITS } from '../../src/app-env';
import { decodeCursor, encodeCursor } from '../../src/events/feed';
import type { DemoActor } from '../support/backend';
import { startTestGateway, type TestGateway, testApp } from '../support/gateway';
import { freshPatient } from '../support/patients';
import { scaled } from '../support/slowness';

/**
 * An attacker's second look at her event feed (GET /v1/events): crafted cursors, many of her records at
 * once, and streams that step around admission.
 */
interface Feed {
  events: { id: string; type: string; occurredAt: string; subject: string }[];
  next: string;
}

let gw: TestGateway;

beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw?.close());

async function feed(patient: DemoActor, query = ''): Promise<Feed> {
  const res = await gw.call('GET', `/v1/events${query}`, { token: patient.token });
  expect(res.status, res.text).toBe(200);
  return res.body as Feed;
}

const visitOf = (patient: DemoActor, i: number): Appointment => ({
  resourceType: 'Appointment',
  status: 'booked',
  start: new Date(Date.now() + 86_400_000 + i * 60_000).toISOString(),
  end: new Date(Date.now() + 86_400_000 + i * 60_000 + 1_800_000).toISOString(),
  participant: [{ actor: { reference: `Patient/${patient.patient.id}` }, status: 'accepted' }],
});

/**
 * Visits as the platform books them: written by the appointments bot (the system writes them here, naming
 * the bot as their author, as Medplum stamps a bot's writes), since only a bot's visit is an event.
 */
let booker: string | undefined;
const bookedMeta = async () => {
  booker ??= `Bot/${(await gw.backend.admin.searchOne('Bot', { identifier: `${SYSTEMS.bots}|appointments` }))?.id}`;
  return { project: gw.backend.project.id, author: { reference: booker } };
};

const visitFor = async (patient: DemoActor, i: number) =>
  gw.backend.systemRepo.createResource<Appointment>({ ...visitOf(patient, i), meta: await bookedMeta() });

describe('crafted cursors (held)', () => {
  it('a cursor from the far past, the far future, or with 200 made-up ids: 200, a bounded page, no 5xx', async () => {
    const dana = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const made = (t: number) =>
      Array.from({ length: 200 }, (_, i) => ({ id: `zz${String(i).padStart(10, '0')}`, at: t - (i % 5_000) }));
    for (const t of ['1000-01-01T00:00:00.000Z', '9999-12-31T23:59:59.999Z']) {
      const after = encodeCursor({ t, seen: made(Date.parse(t)) });
      expect(after.length).toBeLessThanOrEqual(6_000);
      const page = await feed(dana, `?limit=${MAX_EVENTS_PER_PAGE}&after=${after}`);
      expect(page.events.length).toBeLessThanOrEqual(MAX_EVENTS_PER_PAGE);
      expect(decodeCursor(page.next)).toBeDefined();
    }
    // 201 ids, ids without an instant, or an instant further back than the look-back: not cursors the feed gives out.
    const t = '2026-01-01T00:00:00.000Z';
    const refused = [
      encodeCursor({ t, seen: [...made(Date.parse(t)), { id: 'x', at: Date.parse(t) }] }),
      encodeCursor({ seen: made(Date.parse(t)) }),
      encodeCursor({ t, seen: [{ id: 'x', at: Date.parse(t) - 5_001 }] }),
      encodeCursor({ t, seen: [], from: Date.parse(t) - 5_001 }),
    ];
    for (const after of refused) {
      expect((await gw.call('GET', `/v1/events?after=${after}`, { token: dana.token })).status).toBe(400);
    }
    // A __proto__ key is an unknown field, not a way in.
    const proto = Buffer.from('{"t":"2026-01-01T00:00:00.000Z","s":[],"__proto__":{"x":1}}').toString('base64url');
    expect((await gw.call('GET', `/v1/events?after=${proto}`, { token: dana.token })).status).toBe(400);
  });

  it('a Last-Event-ID longer than a cursor may be: 400 before anything streams', async () => {
    const dana = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const response = await gw.app.fetch(
      new Request('http://gateway.test/v1/events', {
        headers: {
          authorization: `Bearer ${dana.token}`,
          accept: 'text/event-stream',
          'last-event-id': 'A'.repeat(6001),
        },
      }),
    );
    expect(response.status).toBe(400);
  });
});

describe('many of her records within the look-back', () => {
  it(
    'more than 200 + limit of her records written within 5 s: the feed still reaches what comes after',
    async () => {
      const erin = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
      // A bulk write about her (a clinician's batch, a bot's import): 320 records in one transaction, so all
      // within the look-back, many at one instant (written as the system, whose quota does not run out).
      const meta = await bookedMeta();
      await gw.backend.systemRepo.withTransaction(
        async (repo) => {
          for (let i = 0; i < 320; i++) {
            await repo.createResource<Appointment>({ ...visitOf(erin, i), meta });
          }
        },
        { resourceTypes: ['Appointment'] },
      );
      const last = await visitFor(erin, 999);
      const delivered = new Set<string>();
      let after = '';
      let pages = 0;
      for (; pages < 12 && !delivered.has(`Appointment/${last.id}`); pages++) {
        const page = await feed(erin, `?limit=${MAX_EVENTS_PER_PAGE}${after ? `&after=${after}` : ''}`);
        for (const event of page.events) {
          delivered.add(event.subject);
        }
        if (page.events.length === 0) {
          break;
        }
        after = page.next;
      }
      // 321 visits need 4 pages of 100 (a few more when a page ends among visits of one instant): the cursor
      // lets the oldest it saw go and starts where they ended, so it never cycles on the first visits.
      expect(delivered.has(`Appointment/${last.id}`), `after ${pages} pages, ${delivered.size} visits`).toBe(true);
      // And none of the batch is lost on the way.
      expect([...delivered].filter((s) => s.startsWith('Appointment/'))).toHaveLength(321);
    },
    scaled(60_000),
  );
});

describe('streams when the instance’s waits are all taken', () => {
  it(
    'a stream that is one look still counts among her calls in flight',
    async () => {
      const fay = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
      let inFlight = 0;
      let most = 0;
      const app = testApp(gw.backend, {
        medplum: {
          baseUrl: gw.backend.baseUrl,
          fetch: (async (input: RequestInfo | URL, init?: RequestInit) => {
            const url = String(input instanceof Request ? input.url : input);
            if (!url.includes('_type=')) {
              return gw.backend.fetch(input, init);
            }
            inFlight++;
            most = Math.max(most, inFlight);
            try {
              // A search that takes a while (a busy Medplum).
              await new Promise((resolve) => setTimeout(resolve, 300));
              return await gw.backend.fetch(input, init);
            } finally {
              inFlight--;
            }
          }) as typeof fetch,
        },
        // One call of hers in flight at once; every stream place on the instance taken (as 1,000 accounts
        // with two streams each would take them: self-registration is open).
        limits: { ...DEFAULT_LIMITS, inFlightPerCaller: 1, eventWaitsTotal: 0 },
      });
      const responses = await Promise.all(
        Array.from({ length: 10 }, () =>
          app.fetch(
            new Request('http://gateway.test/v1/events', {
              headers: { authorization: `Bearer ${fay.token}`, accept: 'text/event-stream' },
            }),
          ),
        ),
      );
      const statuses = responses.map((r) => r.status);
      await Promise.all(responses.map((r) => r.text()));
      // Admission lets one call of hers in at once (the others 429), so Medplum sees one of her searches
      // at a time: the one look is made while admission holds her place, not after the answer began.
      expect({ most, admitted: statuses.filter((s) => s === 200).length }).toEqual({
        most: 1,
        admitted: expect.any(Number),
      });
    },
    scaled(30_000),
  );
});

describe('a stream the client leaves (held)', () => {
  it(
    'frees her waiting place: after two streams are cancelled, a third opens',
    async () => {
      const gus = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
      const open = () =>
        gw.app.fetch(
          new Request('http://gateway.test/v1/events', {
            headers: { authorization: `Bearer ${gus.token}`, accept: 'text/event-stream' },
          }),
        );
      const first = [await open(), await open()];
      for (const response of first) {
        expect(response.status).toBe(200);
        const reader = (response.body as ReadableStream<Uint8Array>).getReader();
        await reader.read();
        await reader.cancel();
      }
      // Each stream notices at once (its pause between looks ends when she leaves) and gives her place back.
      await new Promise((resolve) => setTimeout(resolve, 100));
      const third = await open();
      expect(third.status).toBe(200);
      await (third.body as ReadableStream<Uint8Array>).cancel();
    },
    scaled(20_000),
  );
});
