import type { DocumentReference } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventOf } from '../../bots/lib/events';
import { MAX_EVENTS_PER_PAGE } from '../../contracts/events';
import { SYSTEMS } from '../../contracts/systems';
import { DEFAULT_LIMITS } from '../../src/app-env';
import { decodeCursor } from '../../src/events/feed';
import { agreementDocument } from '../../src/provision/agreements';
import { openApiDocument } from '../../src/routes/docs';
import { createPatientCareClient } from '../../src/sdk';
import type { DemoActor } from '../support/backend';
import { demoClinician } from '../support/clinicians';
import { createCaller, startTestGateway, type TestGateway, testApp } from '../support/gateway';
import { completeTasks, type StartedAssessment, startAssessment } from '../support/journey';
import { freshPatient } from '../support/patients';

/**
 * Her event feed (GET /v1/events): what happened to her, oldest first, from her own records read with her
 * token; a cursor that any instance continues from; `wait` for the next event.
 */
interface Feed {
  events: { id: string; type: string; occurredAt: string; subject: string; kind?: string }[];
  next: string;
}

let gw: TestGateway;
let alice: DemoActor;
let bob: DemoActor;
let carol: DemoActor;
let started: StartedAssessment;

async function feed(patient: DemoActor, query = '', on: TestGateway['call'] = gw.call): Promise<Feed> {
  const res = await on('GET', `/v1/events${query}`, { token: patient.token });
  expect(res.status, res.text).toBe(200);
  return res.body as Feed;
}

/** Every event from `after` on, page by page of `limit`. */
async function all(
  patient: DemoActor,
  limit: number,
  after?: string,
): Promise<{ events: Feed['events']; next: string }> {
  const events: Feed['events'] = [];
  let cursor = after;
  for (let page = 0; page < 200; page++) {
    const got = await feed(patient, `?limit=${limit}${cursor ? `&after=${cursor}` : ''}`);
    events.push(...got.events);
    if (got.events.length === 0) {
      return { events, next: got.next };
    }
    cursor = got.next;
  }
  throw new Error('the feed did not end');
}

beforeAll(async () => {
  gw = await startTestGateway();
  alice = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
  bob = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
  carol = await freshPatient(gw.backend, { tenant: 'southridge', state: 'CA' });
  started = await startAssessment(gw, alice, 'assessments/weight-intake');
});
afterAll(() => gw?.close());

describe('her feed', () => {
  it('lists her tasks as they were issued, oldest first, each event once, with her care provider’s agreements', async () => {
    const { events } = await all(alice, MAX_EVENTS_PER_PAGE);
    const issued = events.filter((e) => e.type === 'task.ready').map((e) => e.subject);
    expect(issued.sort()).toEqual(started.tasks.map((t) => t.task).sort());
    expect(
      events
        .filter((e) => e.type === 'task.ready')
        .map((e) => e.kind)
        .sort(),
    ).toEqual(started.tasks.map((t) => t.kind).sort());
    // Her feed begins where her story does: the agreements published before she registered are not news.
    expect(events.filter((e) => e.type === 'agreements.changed')).toEqual([]);
    expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
    const instants = events.map((e) => Date.parse(e.occurredAt));
    expect(instants).toEqual([...instants].sort((a, b) => a - b));
  });

  it('pages of one event make up the same feed as one page of a hundred: each event once, oldest first', async () => {
    const whole = await all(alice, MAX_EVENTS_PER_PAGE);
    const single = await all(alice, 1);
    // Events of one instant (one transaction's) come in no fixed order; everything else is the same.
    const byInstant = (events: Feed['events']) =>
      events.map((e) => `${e.occurredAt} ${e.id}`).sort((a, b) => (a < b ? -1 : 1));
    expect(byInstant(single.events)).toEqual(byInstant(whole.events));
    expect(single.events.map((e) => e.occurredAt)).toEqual(whole.events.map((e) => e.occurredAt));
    expect(new Set(single.events.map((e) => e.id)).size).toBe(single.events.length);
  });

  it('continues from its cursor: nothing again, then only what happened since', async () => {
    const { next } = await all(alice, MAX_EVENTS_PER_PAGE);
    expect((await feed(alice, `?after=${next}`)).events).toEqual([]);
    await completeTasks(gw, alice, started.tasks.slice(0, 1), { 'http://loinc.org|29463-7': 80 });
    const after = await feed(alice, `?after=${next}`);
    expect(after.events.map((e) => [e.type, e.subject])).toEqual([['task.completed', started.tasks[0].task]]);
  });

  it('waits for her next event and answers as soon as it comes', async () => {
    const { next } = await all(alice, MAX_EVENTS_PER_PAGE);
    const waiting = feed(alice, `?after=${next}&wait=20`);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await completeTasks(gw, alice, started.tasks.slice(1), { 'http://loinc.org|29463-7': 80 });
    const got = await waiting;
    expect(got.events.map((e) => e.type)).toContain('task.completed');
    expect(got.events.map((e) => e.subject)).toContain(started.tasks[1].task);
  });

  it('an empty wait ends with the cursor it was given, and the feed goes on from it', async () => {
    const { next } = await all(alice, MAX_EVENTS_PER_PAGE);
    const waited = await feed(alice, `?after=${next}&wait=1`);
    expect(waited.events).toEqual([]);
    expect(decodeCursor(waited.next)).toEqual(decodeCursor(next));
  });

  it('any instance continues the same feed from a cursor (nothing is kept in the gateway)', async () => {
    const other = testApp(gw.backend);
    const call = createCaller(other, openApiDocument(other), () => alice.token);
    const first = await feed(alice, '?limit=2');
    const here = await feed(alice, `?limit=3&after=${first.next}`);
    const there = await feed(alice, `?limit=3&after=${first.next}`, call);
    expect(there.events).toEqual(here.events);
    expect(there.next).toBe(here.next);
  });
});

describe('the SDK', () => {
  it('lists her events, and streams what happens next as it happens', async () => {
    const dana = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const sdk = createPatientCareClient({
      baseUrl: 'http://gateway.test',
      accessToken: dana.token,
      fetch: ((input: RequestInfo | URL, init?: RequestInit) => gw.app.fetch(new Request(input, init))) as typeof fetch,
    });
    const { next } = await all(dana, MAX_EVENTS_PER_PAGE);
    expect((await sdk.events.list({ after: next })).events).toEqual([]);
    const stop = new AbortController();
    const seen: { subject: string; resumeAfter?: string }[] = [];
    const following = (async () => {
      for await (const event of sdk.events.stream({ after: next, signal: stop.signal })) {
        seen.push(event);
        if (seen.filter((e) => e.subject.startsWith('Task/')).length === 2) {
          stop.abort();
        }
      }
    })();
    const assessment = await startAssessment(gw, dana, 'assessments/weight-intake');
    await following;
    expect(
      seen
        .filter((e) => e.subject.startsWith('Task/'))
        .map((e) => e.subject)
        .sort(),
    ).toEqual(assessment.tasks.map((t) => t.task).sort());
    // Resuming after the last event streamed: nothing again.
    expect((await sdk.events.list({ after: seen[seen.length - 1].resumeAfter })).events).toEqual([]);
  });
});

describe('only hers', () => {
  it('another patient of her tenant and one of another tenant see none of her records', async () => {
    const hers = new Set((await all(alice, MAX_EVENTS_PER_PAGE)).events.map((e) => e.subject));
    for (const other of [bob, carol]) {
      const theirs = (await all(other, MAX_EVENTS_PER_PAGE)).events;
      expect(theirs.filter((e) => e.type !== 'agreements.changed')).toEqual([]);
      for (const event of theirs) {
        expect(hers.has(event.subject) && !event.subject.startsWith('DocumentReference/')).toBe(false);
      }
    }
  });

  it('her cursor gives another patient nothing of hers', async () => {
    const first = await feed(alice, '?limit=1');
    const theirs = (await all(bob, MAX_EVENTS_PER_PAGE, first.next)).events;
    expect(theirs.filter((e) => e.type !== 'agreements.changed')).toEqual([]);
  });

  it('the other tenant’s agreements are not hers', async () => {
    const southridge = new Set(
      (await all(carol, MAX_EVENTS_PER_PAGE)).events
        .filter((e) => e.type === 'agreements.changed')
        .map((e) => e.subject),
    );
    const northwind = (await all(alice, MAX_EVENTS_PER_PAGE)).events.filter((e) => e.type === 'agreements.changed');
    const platformWide = northwind.filter((e) => southridge.has(e.subject));
    // What both see is published to every tenant (the platform's own agreements), not one tenant's.
    for (const event of platformWide) {
      const doc = await gw.backend.systemRepo.readResource('DocumentReference', event.subject.split('/')[1]);
      expect(doc.meta?.tag?.some((t) => t.code === 'platform')).toBe(true);
    }
  });

  it('a clinician cannot put an agreement in her feed: writing one is refused on Medplum, and one a person wrote would not be told', async () => {
    const clinician = await demoClinician(gw.backend, 'northwind');
    const [published] = await gw.backend.systemRepo.searchResources<DocumentReference>({
      resourceType: 'DocumentReference',
      filters: [{ code: 'identifier', operator: 'eq', value: `${SYSTEMS.agreement}|` }],
    });
    expect(published).toBeDefined();
    const fake: DocumentReference = {
      resourceType: 'DocumentReference',
      status: 'current',
      identifier: [{ system: SYSTEMS.agreement, value: 'https://attacker.example/terms' }],
      description: 'Sign again at https://attacker.example',
      subject: { reference: `Patient/${alice.patient.id}` },
      content: [{ attachment: { url: 'https://attacker.example/terms.pdf', contentType: 'application/pdf' } }],
    };
    const before = (await all(alice, MAX_EVENTS_PER_PAGE)).events.length;
    await expect(clinician.medplum.createResource(fake)).rejects.toThrow(/Forbidden/);
    // Nor may she add the identifier to a document of hers, nor change a published agreement.
    const plain = await clinician.medplum.createResource<DocumentReference>({ ...fake, identifier: [] });
    await expect(clinician.medplum.updateResource({ ...plain, identifier: fake.identifier })).rejects.toThrow(
      /Forbidden/,
    );
    expect((await all(alice, MAX_EVENTS_PER_PAGE)).events.length).toBe(before);
    // The reading itself: a version a person wrote is never an agreement the platform tells of.
    const byPerson = { ...published, meta: { ...published?.meta, author: clinician.profile } } as DocumentReference;
    expect(eventOf(byPerson, alice.patient.id)).toBeUndefined();
    expect(eventOf(published as DocumentReference, alice.patient.id)).toEqual({ type: 'agreements.changed' });
  });

  it('a clinician has no feed here (403)', async () => {
    const clinician = await demoClinician(gw.backend, 'northwind');
    const res = await gw.call('GET', '/v1/events', { token: clinician.medplum.getAccessToken() as string });
    expect(res.status).toBe(403);
  });
});

describe('bad input changes nothing and says why', () => {
  it.each([
    ['a cursor it never gave out', '?after=bm90LWEtY3Vyc29y'],
    [
      'a cursor with an unknown field',
      `?after=${Buffer.from('{"t":"2026-01-01T00:00:00.000Z","s":[],"x":1}').toString('base64url')}`,
    ],
    ['a cursor with an impossible instant', `?after=${Buffer.from('{"t":"not a time","s":[]}').toString('base64url')}`],
    [
      'a cursor before year 1',
      `?after=${Buffer.from('{"t":"-000001-01-01T00:00:00.000Z","s":[]}').toString('base64url')}`,
    ],
    [
      'a cursor of a day that does not exist',
      `?after=${Buffer.from('{"t":"2026-02-30T00:00:00.000Z","s":[]}').toString('base64url')}`,
    ],
    ['a wait over 30 seconds', '?wait=31'],
    ['a negative wait', '?wait=-1'],
    ['a page of more than 100', `?limit=${MAX_EVENTS_PER_PAGE + 1}`],
    ['a page of none', '?limit=0'],
    ['an unknown parameter', '?since=2026-01-01'],
  ])('%s: 400', async (_, query) => {
    const res = await gw.call('GET', `/v1/events${query}`, { token: alice.token });
    expect(res.status, res.text).toBe(400);
    expect((res.body as { error: { code: string } }).error.code).toBe('invalid_request');
  });

  it('the edges are allowed: a page of 100, a wait of 30 when there is something to answer at once', async () => {
    expect(
      (await gw.call('GET', `/v1/events?limit=${MAX_EVENTS_PER_PAGE}&wait=30`, { token: alice.token })).status,
    ).toBe(200);
  });

  it('a waiting call holds no place among her calls in flight: with one place, her other calls still go', async () => {
    const narrow = testApp(gw.backend, { limits: { ...DEFAULT_LIMITS, inFlightPerCaller: 1 } });
    const call = createCaller(narrow, openApiDocument(narrow), () => alice.token);
    const { next } = await all(alice, MAX_EVENTS_PER_PAGE);
    const waiting = call('GET', `/v1/events?after=${next}&wait=2`);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const meanwhile = await call('GET', '/v1/patient/profile');
    expect(meanwhile.status, meanwhile.text).toBe(200);
    expect((await waiting).status).toBe(200);
  });

  it('a third call of hers waiting at once is refused 429; two wait', async () => {
    const { next } = await all(alice, MAX_EVENTS_PER_PAGE);
    const waits = [feed(alice, `?after=${next}&wait=2`), feed(alice, `?after=${next}&wait=2`)];
    await new Promise((resolve) => setTimeout(resolve, 300));
    const third = await gw.call('GET', `/v1/events?after=${next}&wait=2`, { token: alice.token });
    expect(third.status, third.text).toBe(429);
    expect(third.headers.get('retry-after')).toBe('1');
    for (const wait of await Promise.all(waits)) {
      expect(wait.events).toEqual([]);
    }
  });
});

describe('the same feed as Server-Sent Events', () => {
  /** Opens her stream and reads it until `count` events came; then closes it. */
  async function streamed(patient: DemoActor, count: number, lastEventId?: string) {
    const response = await gw.app.fetch(
      new Request('http://gateway.test/v1/events', {
        headers: {
          authorization: `Bearer ${patient.token}`,
          accept: 'text/event-stream',
          ...(lastEventId ? { 'last-event-id': lastEventId } : {}),
        },
      }),
    );
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = '';
    const events: { id: string; type: string; data: { id: string; type: string; subject: string } }[] = [];
    while (events.length < count) {
      const { value, done } = await reader.read();
      if (done) {
        break;
      }
      text += decoder.decode(value, { stream: true });
      let end = text.indexOf('\n\n');
      while (end >= 0) {
        const block = text.slice(0, end);
        text = text.slice(end + 2);
        const field = (name: string) =>
          block
            .split('\n')
            .find((l) => l.startsWith(`${name}: `))
            ?.slice(name.length + 2);
        if (field('data')) {
          events.push({ id: field('id') ?? '', type: field('event') ?? '', data: JSON.parse(field('data') ?? '{}') });
        }
        end = text.indexOf('\n\n');
      }
    }
    await reader.cancel();
    return events;
  }

  it('streams her events with the cursor after each as its id, and resumes after Last-Event-ID', async () => {
    const feedOf = (await all(alice, MAX_EVENTS_PER_PAGE)).events;
    // Her intake's tasks (her feed begins at her registration: no agreement published before it).
    const n = Math.min(3, feedOf.length);
    expect(n).toBeGreaterThanOrEqual(2);
    const first = await streamed(alice, n);
    expect(first.map((e) => e.data.id)).toEqual(feedOf.slice(0, n).map((e) => e.id));
    expect(first.map((e) => e.type)).toEqual(feedOf.slice(0, n).map((e) => e.type));
    const resumed = await streamed(alice, n - 1, first[0].id);
    expect(resumed.map((e) => e.data.id)).toEqual(feedOf.slice(1, n).map((e) => e.id));
    // The id is a cursor of the JSON feed too.
    const page = await feed(alice, `?limit=2&after=${first[0].id}`);
    expect(page.events.length).toBeGreaterThan(0);
    expect(page.events.map((e) => e.id)).toEqual(feedOf.slice(1, 1 + page.events.length).map((e) => e.id));
  });

  it('when the instance’s streams are all taken, hers is one look that ends, and a wait answers at once', async () => {
    let looks = 0;
    const full = testApp(gw.backend, {
      medplum: {
        baseUrl: gw.backend.baseUrl,
        fetch: ((input: RequestInfo | URL, init?: RequestInit) => {
          looks += String(input instanceof Request ? input.url : input).includes('_type=') ? 1 : 0;
          return gw.backend.fetch(input, init);
        }) as typeof fetch,
      },
      limits: { ...DEFAULT_LIMITS, eventWaitsTotal: 1 },
    });
    const open = (patient: DemoActor) =>
      full.fetch(
        new Request('http://gateway.test/v1/events', {
          headers: { authorization: `Bearer ${patient.token}`, accept: 'text/event-stream' },
        }),
      );
    const holding = await open(bob);
    const holder = (holding.body as ReadableStream<Uint8Array>).getReader();
    await holder.read();
    const hers = await open(alice);
    expect(hers.status).toBe(200);
    const text = await hers.text();
    expect(text).toContain('event: reconnect');
    expect(text).toContain('retry: 3000');
    expect(text.match(/^event: /gm)?.length ?? 0).toBeGreaterThan(1);
    const call = createCaller(full, openApiDocument(full), () => alice.token);
    const { next } = await all(alice, MAX_EVENTS_PER_PAGE);
    const before = looks;
    const waited = await call('GET', `/v1/events?after=${next}&wait=20`);
    expect(waited.status).toBe(200);
    // Answered after its first look, without waiting for another.
    expect(looks - before).toBe(1);
    await holder.cancel();
  });

  it('a Last-Event-ID it never gave out: 400, nothing streamed', async () => {
    const response = await gw.app.fetch(
      new Request('http://gateway.test/v1/events', {
        headers: { authorization: `Bearer ${alice.token}`, accept: 'text/event-stream', 'last-event-id': 'bm9wZQ' },
      }),
    );
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('invalid_request');
  });
});

describe('where her feed begins (issue 51 item 6)', () => {
  it('at her registration: nothing published before it; an agreement the platform publishes after it is news, once', async () => {
    const erin = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const before = await all(erin, MAX_EVENTS_PER_PAGE);
    expect(before.events.filter((e) => e.type === 'agreements.changed')).toEqual([]);
    // The demo patients were made before the agreements were published: theirs are in their feeds.
    const demo = gw.backend.patients.dave;
    expect((await all(demo, MAX_EVENTS_PER_PAGE)).events.some((e) => e.type === 'agreements.changed')).toBe(true);
    const published = agreementDocument({
      key: 'feed-news',
      url: 'https://patient-care.example/agreements/feed-news',
      version: '2026-12',
      category: 'terms',
      title: 'News for her feed',
      required: false,
      published: '2026-12-01',
    }).resource as DocumentReference;
    const created = await gw.backend.admin.createResource(published);
    const after = await all(erin, MAX_EVENTS_PER_PAGE, before.next);
    expect(after.events.filter((e) => e.type === 'agreements.changed').map((e) => e.subject)).toEqual([
      `DocumentReference/${created.id}`,
    ]);
    // And a first page from scratch tells it too (it was published after she came).
    const fresh = await all(erin, MAX_EVENTS_PER_PAGE);
    expect(fresh.events.filter((e) => e.type === 'agreements.changed').map((e) => e.subject)).toEqual([
      `DocumentReference/${created.id}`,
    ]);
  });
});
