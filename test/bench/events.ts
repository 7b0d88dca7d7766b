import type { Appointment, Bot, ProjectMembership } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import { embeddedGateway } from '../../scripts/demo';
import { demoPatientTokens } from '../../src/embedded/demo-tokens';
import { launchEmbeddedMedplum } from '../../src/embedded/launch';
import { SEARCHES_PER_LOOK } from '../../src/events/feed';
import { demoDefinition } from '../../src/provision/demo';
import { LOOK_EVERY_MS } from '../../src/routes/events';

export interface EventsFigures {
  /** Seconds of idle waiting measured. */
  idleSeconds: number;
  /** Her FHIR quota points a minute while an app waits on her feed with nothing happening. */
  idlePointsPerMinute: number;
  /** Calls to Medplum a minute for that (what counts against Medplum's per-address limit). */
  idleRequestsPerMinute: number;
  /** Milliseconds from a write's commit to her waiting call's answer with it, per trial. */
  latenciesMs: number[];
}

/**
 * Her event feed's cost and latency, in process (`npm start`'s embedded Medplum, the gateway over it):
 * (1) an app waiting on her feed (`wait=25`, one call after another) while nothing happens, her FHIR quota
 * and calls to Medplum counted; (2) a change written to her record (a visit booked for her, by the admin)
 * at a random moment of a waiting call, and the time until that call answers with it.
 */
export async function runEventsBench(idleSeconds = 30, trials = 10): Promise<EventsFigures> {
  const medplum = await launchEmbeddedMedplum({ dbPath: ':memory:', definition: demoDefinition() });
  try {
    let medplumCalls = 0;
    const counted = ((input: RequestInfo | URL, init?: RequestInit) => {
      medplumCalls++;
      return medplum.fetch(input, init);
    }) as typeof fetch;
    const { fetch: gatewayFetch } = embeddedGateway(
      new Proxy(medplum, {
        get: (target, property) => (property === 'fetch' ? counted : Reflect.get(target, property)),
      }),
    );
    const token = (await demoPatientTokens(medplum)).alice;
    const patient = await medplum.admin.searchOne('Patient', { identifier: `${SYSTEMS.demoPatient}|alice` });
    const membership = (await medplum.admin.searchOne('ProjectMembership', {
      profile: `Patient/${patient?.id}`,
    })) as ProjectMembership;
    const feed = async (query: string) => {
      const res = await gatewayFetch(`http://localhost:8080/v1/events${query}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      if (res.status !== 200) {
        throw new Error(`GET /v1/events${query}: ${res.status} ${await res.text()}`);
      }
      return (await res.json()) as { events: { subject: string }[]; next: string };
    };
    let after = '';
    for (let page = await feed('?limit=100'); page.events.length > 0; page = await feed(`?limit=100&after=${after}`)) {
      after = page.next;
    }
    if (!after) {
      after = (await feed('?limit=100')).next;
    }

    // (1) Idle: waiting calls, one after another, nothing happening.
    medplum.quota.resetSpending();
    medplumCalls = 0;
    const idleEnds = Date.now() + idleSeconds * 1000;
    while (Date.now() < idleEnds) {
      const wait = Math.max(1, Math.min(25, Math.round((idleEnds - Date.now()) / 1000)));
      after = (await feed(`?after=${after}&wait=${wait}`)).next;
    }
    const points = medplum.quota.spending().get(membership.id as string) ?? 0;
    const idleCalls = medplumCalls;
    const perMinute = 60 / idleSeconds;

    // (2) Latency: a visit of hers written at a random moment of a waiting call.
    const latenciesMs: number[] = [];
    // Written as the appointments bot's (only a bot's visit is an event: bots/lib/events.ts).
    const booker = (await medplum.systemRepo.searchOne<Bot>({
      resourceType: 'Bot',
      filters: [{ code: 'identifier', operator: 'eq', value: `${SYSTEMS.bots}|appointments` }],
    })) as Bot;
    for (let trial = 0; trial < trials; trial++) {
      const waiting = feed(`?after=${after}&wait=25`).then((page) => ({ page, at: performance.now() }));
      await new Promise((resolve) => setTimeout(resolve, 200 + Math.random() * LOOK_EVERY_MS));
      const written = await medplum.systemRepo.createResource<Appointment>({
        resourceType: 'Appointment',
        meta: { project: medplum.project.id, author: { reference: `Bot/${booker.id}` } },
        status: 'booked',
        start: new Date(Date.now() + 86_400_000).toISOString(),
        end: new Date(Date.now() + 86_400_000 + 1_800_000).toISOString(),
        participant: [{ actor: { reference: `Patient/${patient?.id}` }, status: 'accepted' }],
      });
      const committed = performance.now();
      const { page, at } = await waiting;
      if (!page.events.some((e) => e.subject === `Appointment/${written.id}`)) {
        throw new Error(`trial ${trial}: the waiting call answered without the visit written`);
      }
      latenciesMs.push(at - committed);
      after = page.next;
    }
    return {
      idleSeconds,
      idlePointsPerMinute: Math.round(points * perMinute),
      idleRequestsPerMinute: Math.round(idleCalls * perMinute),
      latenciesMs,
    };
  } finally {
    medplum.close();
  }
}

export async function printEventsBench(): Promise<void> {
  const figures = await runEventsBench(Number(process.env.BENCH_EVENTS_IDLE_SECONDS ?? 30));
  const sorted = [...figures.latenciesMs].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))].toFixed(0);
  console.log('## Her event feed (GET /v1/events), in process');
  console.log(
    `   one app waiting on her feed (wait=25, one call after another), ${figures.idleSeconds} s with nothing happening; a look every ${LOOK_EVERY_MS / 1000} s, ${SEARCHES_PER_LOOK} searches a look`,
  );
  console.log('| measure | figure |');
  console.log('|---|---|');
  console.log(`| her FHIR quota a minute while idle | ${figures.idlePointsPerMinute} points (of her 50,000) |`);
  console.log(`| calls to Medplum a minute while idle | ${figures.idleRequestsPerMinute} |`);
  console.log(
    `| from a write's commit to her waiting call's answer, ${sorted.length} trials | p50 ${at(0.5)} ms, max ${sorted[sorted.length - 1].toFixed(0)} ms |`,
  );
}
