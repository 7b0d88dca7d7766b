import { performance } from 'node:perf_hooks';
import { embeddedBackend, embeddedGateway, type JourneyResult, journey } from '../../scripts/demo';
import type { App } from '../../src/app';
import { launchEmbeddedMedplum } from '../../src/embedded/launch';
import { demoDefinition } from '../../src/provision/demo';
import { type Percentiles, percentiles } from './embedded-store';

export interface OperationFigure extends Percentiles {
  name: string;
  workflow: boolean;
  requestsPerSecond: number;
  requests: number;
  failures: number;
}

export interface OperationsBenchResult {
  concurrency: number;
  profile: OperationFigure;
  operations: OperationFigure[];
  /** Wall time of the whole journey (the demo's, every step, clinician included), in process. */
  journeyMs: number[];
}

const CONCURRENCY = 16;

interface Op {
  name: string;
  /** A workflow call (a bot runs): the ≤ 5x target applies. */
  workflow: boolean;
  method: string;
  path: string;
  body?: unknown;
  raw?: { data: Uint8Array<ArrayBuffer>; type: string };
}

/**
 * Issue 17: every operation of the document against `GET /v1/patient/profile`, in one process (the
 * gateway calling the embedded Medplum in memory), CONCURRENCY calls in flight, each for about
 * `seconds`; state-changing workflows are measured on what repeats them (a resume, a replay, the open
 * request answered again), since a first call happens once per patient (the spine, intake and scheduling
 * sections measure first calls). Then the whole journey's wall time, several times on one Medplum.
 */
export async function runOperationsBench(options: {
  seconds: number;
  journeys: number;
}): Promise<OperationsBenchResult> {
  // Each journey on a fresh embedded Medplum, as `npm run demo` runs it (the on-call practitioner's
  // soonest slot is the one its visit starts in); the operations then on the last one.
  const journeyMs: number[] = [];
  let medplum: Awaited<ReturnType<typeof launchEmbeddedMedplum>> | undefined;
  let app: App | undefined;
  let state: JourneyResult | undefined;
  for (let i = 0; i < options.journeys; i++) {
    medplum?.close();
    medplum = await launchEmbeddedMedplum({ dbPath: ':memory:', definition: demoDefinition() });
    const gateway = embeddedGateway(medplum);
    app = gateway.app;
    const gatewayFetch = gateway.fetch;
    const t0 = performance.now();
    state = await journey(embeddedBackend(medplum), gatewayFetch, { silent: true });
    await medplum.subscriptions.idle();
    journeyMs.push(performance.now() - t0);
  }
  try {
    if (!app) {
      throw new Error('no journey ran');
    }
    const s = state as JourneyResult;
    const id = (reference: string) => reference.split('/')[1];
    const profile = await measure(
      app,
      s.token,
      { name: 'GET /v1/patient/profile', workflow: false, method: 'GET', path: '/v1/patient/profile' },
      options.seconds,
    );
    const window = {
      practitioner: s.practitioner,
      start: new Date().toISOString(),
      end: new Date(Date.now() + 7 * 86_400_000).toISOString(),
    };
    const png = Uint8Array.from(
      Buffer.from(
        'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
        'base64',
      ),
    );
    const ops: Op[] = [
      { name: 'GET /v1/config', workflow: false, method: 'GET', path: '/v1/config' },
      {
        name: 'POST /v1/patient/home (homed: answered as it is)',
        workflow: true,
        method: 'POST',
        path: '/v1/patient/home',
      },
      { name: 'GET /v1/protocols', workflow: false, method: 'GET', path: '/v1/protocols' },
      {
        name: 'GET /v1/agreements/requirements',
        workflow: true,
        method: 'GET',
        path: `/v1/agreements/requirements?healthcareService=${encodeURIComponent(s.healthcareService)}`,
      },
      {
        name: 'POST /v1/assessments (resume)',
        workflow: true,
        method: 'POST',
        path: '/v1/assessments',
        body: { healthcareService: s.healthcareService },
      },
      {
        name: 'POST /v1/tasks/{id}/complete (offer accepted: replay)',
        workflow: true,
        method: 'POST',
        path: `/v1/tasks/${id(s.offerTask)}/complete`,
        body: { decision: 'accept' },
      },
      {
        name: 'POST /v1/orders/{id}/decisions (placed: replay)',
        workflow: true,
        method: 'POST',
        path: `/v1/orders/${id(s.order)}/decisions`,
        body: { items: s.orderItems },
      },
      {
        name: 'POST /v1/requests (the open request again)',
        workflow: true,
        method: 'POST',
        path: '/v1/requests',
        body: { medication: 'http://www.nlm.nih.gov/research/umls/rxnorm|314076' },
      },
      {
        name: 'POST /v1/documents',
        workflow: false,
        method: 'POST',
        path: '/v1/documents?filename=photo.png',
        raw: { data: png, type: 'image/png' },
      },
      {
        name: 'GET /v1/availability (on-call, a week, first page)',
        workflow: true,
        method: 'GET',
        path: `/v1/availability?${new URLSearchParams(window)}`,
      },
      {
        name: 'GET /v1/availability (on-call, a week, per day)',
        workflow: true,
        method: 'GET',
        path: `/v1/availability?${new URLSearchParams({ ...window, view: 'days', timezone: 'America/Los_Angeles' })}`,
      },
      {
        name: 'POST /v1/appointments (booked: replay)',
        workflow: true,
        method: 'POST',
        path: '/v1/appointments',
        body: { task: s.visitTask, slot: s.bookedSlot },
      },
      {
        name: 'POST /v1/appointments/{id}/reschedule (moved: replay)',
        workflow: true,
        method: 'POST',
        path: `/v1/appointments/${id(s.originalAppointment)}/reschedule`,
        body: { slot: s.slot },
      },
      {
        name: 'POST /v1/appointments/{id}/cancel (cancelled: replay)',
        workflow: true,
        method: 'POST',
        path: `/v1/appointments/${id(s.originalAppointment)}/cancel`,
      },
      {
        name: 'GET /v1/appointments/{id}/segments',
        workflow: false,
        method: 'GET',
        path: `/v1/appointments/${id(s.appointment)}/segments`,
      },
      {
        name: 'POST /v1/appointments/{id}/encounter (started: resume)',
        workflow: true,
        method: 'POST',
        path: `/v1/appointments/${id(s.appointment)}/encounter`,
        body: {},
      },
      { name: 'GET /v1/fhir/{type}/{id} (CarePlan)', workflow: false, method: 'GET', path: `/v1/fhir/${s.carePlan}` },
      {
        name: 'GET /v1/fhir/{type} (Observation)',
        workflow: false,
        method: 'GET',
        path: '/v1/fhir/Observation?_count=20',
      },
      { name: 'GET /v1/openapi.json', workflow: false, method: 'GET', path: '/v1/openapi.json' },
    ];
    // Programs: the same patient enrolls in the monitoring program; its three calls are then repeated
    // (an existing enrollment, an active one, and a second plan revoked once).
    const call = async (method: string, path: string, body?: unknown) => {
      const response = await (app as App).request(path, {
        method,
        headers: { authorization: `Bearer ${s.token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      return (await response.json()) as Record<string, unknown>;
    };
    const { protocols } = (await call('GET', '/v1/protocols')) as {
      protocols: { healthcareService: string; protocol?: string }[];
    };
    const program = protocols.find((p) => p.protocol?.includes('programs/blood-pressure-monitoring'))
      ?.healthcareService as string;
    const { unmet } = (await call(
      'GET',
      `/v1/agreements/requirements?healthcareService=${encodeURIComponent(program)}`,
    )) as {
      unmet: unknown[];
    };
    if (unmet.length) {
      await call('POST', '/v1/agreements/acceptances', { agreements: unmet });
    }
    const { carePlan: enrollment } = (await call('POST', '/v1/enrollments', { healthcareService: program })) as {
      carePlan: string;
    };
    await call('POST', `/v1/enrollments/${id(enrollment)}/activate`);
    const profileNow = await call('GET', '/v1/patient/profile');
    const answers = await call('POST', '/v1/fhir/QuestionnaireResponse', {
      resourceType: 'QuestionnaireResponse',
      status: 'in-progress',
      questionnaire: 'https://patient-care.example/northwind/questionnaires/monthly-check-in|1',
    });
    ops.push(
      {
        name: 'POST /v1/enrollments (enrolled: answered as it is)',
        workflow: true,
        method: 'POST',
        path: '/v1/enrollments',
        body: { healthcareService: program },
      },
      {
        name: 'POST /v1/enrollments/{id}/activate (active: answered)',
        workflow: true,
        method: 'POST',
        path: `/v1/enrollments/${id(enrollment)}/activate`,
      },
      {
        name: 'DELETE /v1/enrollments/{id} (the treatment plan, then revoked: replay)',
        workflow: true,
        method: 'DELETE',
        path: `/v1/enrollments/${id(s.carePlan)}`,
      },
      {
        name: 'PUT /v1/fhir/Patient/{id}',
        workflow: false,
        method: 'PUT',
        path: `/v1/fhir/Patient/${profileNow.id}`,
        body: profileNow,
      },
      {
        name: 'POST /v1/fhir/QuestionnaireResponse',
        workflow: false,
        method: 'POST',
        path: '/v1/fhir/QuestionnaireResponse',
        body: { resourceType: 'QuestionnaireResponse', status: 'in-progress', questionnaire: answers.questionnaire },
      },
      {
        name: 'PUT /v1/fhir/QuestionnaireResponse/{id}',
        workflow: false,
        method: 'PUT',
        path: `/v1/fhir/QuestionnaireResponse/${answers.id}`,
        body: answers,
      },
    );
    const operations: OperationFigure[] = [];
    for (const op of ops) {
      operations.push(await measure(app, s.token, op, options.seconds));
    }
    return { concurrency: CONCURRENCY, profile, operations, journeyMs };
  } finally {
    medplum?.close();
  }
}

async function measure(app: App, token: string, op: Op, seconds: number): Promise<OperationFigure> {
  const send = async (): Promise<number> => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    let body: BodyInit | undefined;
    if (op.raw) {
      headers['content-type'] = op.raw.type;
      body = op.raw.data as Uint8Array<ArrayBuffer>;
    } else if (op.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(op.body);
    }
    const response = await app.request(op.path, { method: op.method, headers, body });
    await response.arrayBuffer();
    return response.status;
  };
  // Warm-up, and the answer it gives (a failure is counted, never hidden).
  for (let i = 0; i < 3; i++) {
    await send();
  }
  const samples: number[] = [];
  let failures = 0;
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < deadline || samples.length < CONCURRENCY) {
        const t0 = performance.now();
        const status = await send();
        samples.push(performance.now() - t0);
        if (status >= 300) {
          failures++;
        }
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  return {
    name: op.name,
    workflow: op.workflow,
    ...percentiles(samples),
    requestsPerSecond: samples.length / elapsed,
    requests: samples.length,
    failures,
  };
}
