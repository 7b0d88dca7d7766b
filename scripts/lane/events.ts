// Her event feed (GET /v1/events) on a real Medplum: the journey's events, only hers, and a wait answered by a change.
import { createPatientCareClient } from '../../src/sdk';
import {
  type AttackContext,
  describe,
  entriesOf,
  medplumCall,
  message,
  type Person,
  PUBLIC_URL,
  register,
  row,
  startAssessmentThroughGateway,
} from './common';

interface Feed {
  events: { id: string; type: string; occurredAt: string; subject: string }[];
  next: string;
}

/**
 * What the journey must have left in her feed (docs/decisions.md, "Her event feed"): each record's latest
 * state, so the visit moved and then fulfilled, her next visit to book ready; not the booking in between.
 */
const JOURNEY_EVENTS = ['task.ready', 'task.completed', 'offer.answered', 'visit.moved', 'visit.fulfilled'];

/**
 * (a) the journey patient's feed, read through the gateway page by page: the journey's events, oldest
 * first, each id once, every page continuing the one before; (b) alice (Northwind) and carol
 * (Southridge) read their own feeds: nothing of hers but what every patient of a tenant reads (agreements);
 * (d) the feed's one search, made directly on Medplum with each person's own token: hers in order, and
 * none of her Tasks or Appointments for bob, carol or the other tenant's clinician;
 * (c) a new Northwind patient waits on her feed (`wait=25`) while she starts an assessment through the
 * gateway: the wait answers with her new tasks.
 */
export async function eventFeed(ctx: AttackContext, people: Map<string, Person>): Promise<void> {
  const family = 'events';
  const steps = {
    journey: `${family}: (a) the journey patient's feed through the gateway (GET /v1/events, pages of 20 after each other's cursor): ${JOURNEY_EVENTS.join(', ')} among its events, oldest first, no id twice`,
    others: `${family}: (b) alice (Northwind) and carol (Southridge) read their own feeds through the gateway: no subject of the journey patient's but the agreements every patient of her tenant reads`,
    direct: `${family}: (d) the feed's search directly on Medplum (GET fhir/R4?_type=Task,Appointment,DocumentReference&_sort=_lastUpdated&_count=1000, each person's own token): the journey patient reads her journey's records in _lastUpdated order (control); bob (Northwind patient), carol (Southridge patient) and the Southridge clinician read none of her Tasks or Appointments`,
    wait: `${family}: (c) a new Northwind patient (registered through Northwind's app, homed) waits on her feed (wait=25) and starts the weight assessment meanwhile: the wait answers with her new tasks (task.ready, their subjects the tasks POST /v1/assessments issued)`,
  };
  const read = async (person: Person, query: string): Promise<Feed> => {
    const res = await ctx.gatewayFetch(`${PUBLIC_URL}/v1/events${query}`, {
      headers: { authorization: `Bearer ${person.token}` },
    });
    if (res.status !== 200) {
      throw new Error(`GET /v1/events${query}: ${res.status} ${(await res.text()).slice(0, 300)}`);
    }
    return (await res.json()) as Feed;
  };
  const everything = async (person: Person): Promise<Feed['events']> => {
    const events: Feed['events'] = [];
    let after = '';
    for (let page = 0; page < 100; page++) {
      const got = await read(person, `?limit=20${after ? `&after=${after}` : ''}`);
      if (got.events.length === 0) {
        return events;
      }
      events.push(...got.events);
      after = got.next;
    }
    throw new Error('her feed did not end within 100 pages');
  };

  const maya = people.get('maya');
  let hers: Feed['events'] = [];
  if (!maya) {
    row(steps.journey, 'not reached', 'the journey left no patient');
  } else {
    try {
      hers = await everything(maya);
      const types = new Set(hers.map((e) => e.type));
      const missing = JOURNEY_EVENTS.filter((t) => !types.has(t));
      const instants = hers.map((e) => Date.parse(e.occurredAt));
      const ordered = instants.every((at, i) => i === 0 || instants[i - 1] <= at);
      const unique = new Set(hers.map((e) => e.id)).size === hers.length;
      const counts = [...types].map((t) => `${t} ${hers.filter((e) => e.type === t).length}`).join(', ');
      row(
        steps.journey,
        missing.length === 0 && ordered && unique ? 'ok' : 'FAILED',
        `${hers.length} events (${counts})${missing.length ? `; missing ${missing.join(', ')}` : ''}${ordered ? '' : '; not oldest first'}${unique ? '' : '; an id twice'}`,
      );
    } catch (err) {
      row(steps.journey, 'FAILED', message(err));
    }
  }

  try {
    const mine = new Set(hers.filter((e) => e.type !== 'agreements.changed').map((e) => e.subject));
    const leaks: string[] = [];
    const said: string[] = [];
    for (const key of ['alice', 'carol']) {
      const person = people.get(key);
      if (!person) {
        throw new Error(`${key} is not signed in`);
      }
      const theirs = await everything(person);
      leaks.push(...theirs.filter((e) => mine.has(e.subject)).map((e) => `${key}: ${e.type} ${e.subject}`));
      said.push(`${key} ${theirs.length} events`);
    }
    row(
      steps.others,
      leaks.length === 0 && mine.size > 0 ? 'held' : 'FAILED',
      `${said.join(', ')}; ${leaks.join('; ') || 'none of hers'}`,
    );
  } catch (err) {
    row(steps.others, 'FAILED', message(err));
  }

  try {
    const search = async (person: Person) => {
      const answer = await medplumCall(
        ctx.baseUrl,
        person.token,
        'GET',
        'fhir/R4?_type=Task,Appointment,DocumentReference&_sort=_lastUpdated&_count=1000',
      );
      if (answer.status !== 200) {
        throw new Error(`${person.who}: ${describe(answer)}`);
      }
      return entriesOf(answer.body);
    };
    const mine = new Set(
      hers.filter((e) => e.subject.startsWith('Task/') || e.subject.startsWith('Appointment/')).map((e) => e.subject),
    );
    const own = maya ? await search(maya) : [];
    const ownRefs = own.map((r) => `${r.resourceType}/${r.id}`);
    const instants = own.map((r) => r.meta?.lastUpdated ?? '');
    const control =
      mine.size > 0 && [...mine].every((s) => ownRefs.includes(s)) && instants.join() === [...instants].sort().join();
    const leaks: string[] = [];
    const said: string[] = [`the journey patient ${own.length} records, hers all among them: ${control}`];
    for (const key of ['bob', 'carol', 'southridge-clinician']) {
      const person = people.get(key);
      if (!person) {
        throw new Error(`${key} is not signed in`);
      }
      const theirs = (await search(person)).map((r) => `${r.resourceType}/${r.id}`);
      leaks.push(...theirs.filter((r) => mine.has(r)).map((r) => `${key}: ${r}`));
      said.push(`${key} ${theirs.length}`);
    }
    row(
      steps.direct,
      control && leaks.length === 0 ? 'held' : 'FAILED',
      `${said.join(', ')}; ${leaks.join('; ') || 'none of hers'}`,
    );
  } catch (err) {
    row(steps.direct, 'FAILED', message(err));
  }

  try {
    const person = { ...(await register(ctx.baseUrl, ctx.projectId, ctx.appIdOf('northwind'))), who: 'a new patient' };
    const api = createPatientCareClient({ baseUrl: PUBLIC_URL, accessToken: person.token, fetch: ctx.gatewayFetch });
    await api.patient.home();
    const { next } = await readAllNext(read, person, await read(person, '?limit=100'));
    const started = Date.now();
    const waiting = read(person, `?after=${next}&wait=25`);
    const assessment = await startAssessmentThroughGateway(api, 'assessments/weight-intake');
    const woke = await waiting;
    const issued = assessment.tasks.map((t) => t.task).sort();
    const heard = woke.events.filter((e) => e.type === 'task.ready').map((e) => e.subject);
    row(
      steps.wait,
      heard.length > 0 && heard.every((s) => issued.includes(s)) ? 'ok' : 'FAILED',
      `answered after ${((Date.now() - started) / 1000).toFixed(1)} s with ${woke.events.map((e) => `${e.type} ${e.subject}`).join(', ') || 'nothing'}; issued ${issued.join(', ')}`,
    );
  } catch (err) {
    row(steps.wait, 'FAILED', message(err));
  }
}

/** The cursor after everything of hers, from a first page on. */
async function readAllNext(
  read: (person: Person, query: string) => Promise<Feed>,
  person: Person,
  first: Feed,
): Promise<Feed> {
  let page = first;
  while (page.events.length > 0) {
    page = await read(person, `?limit=100&after=${page.next}`);
  }
  return page;
}
