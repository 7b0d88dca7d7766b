import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import type { RequestGroup, Task } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestHarness, type TestHarness } from 'wrangler';
import { SYSTEMS } from '../../contracts/systems';
import { signInClinician } from '../../src/clinician';
import { demoPatientTokens } from '../../src/embedded/demo-tokens';
import { type LaunchedMedplum, launchEmbeddedMedplum } from '../../src/embedded/launch';
import { DEMO_PASSWORD, demoDefinition, demoEmail } from '../../src/provision/demo';
import { createPatientCareClient } from '../../src/sdk';

/**
 * Issue 17 item 5: the Worker entry (`src/worker.ts`) serves every route, run in workerd (wrangler's
 * test harness, bundling it as `wrangler deploy` does, offline, on 127.0.0.1) against the embedded
 * Medplum over HTTP: the patient's side of the journey through the SDK, the clinician's through Medplum.
 */
let medplum: LaunchedMedplum;
let medplumServer: ReturnType<typeof serve>;
let medplumUrl: string;
let worker: TestHarness;
let tokens: Record<string, string>;

beforeAll(async () => {
  // The base URL is the issuer: known before Medplum starts, so the port is taken first.
  let handler: (r: Request) => Response | Promise<Response> = () => new Response(null, { status: 503 });
  medplumServer = serve({ fetch: (r) => handler(r), port: 0, hostname: '127.0.0.1' });
  await new Promise((resolve) => medplumServer.once('listening', resolve));
  medplumUrl = `http://127.0.0.1:${(medplumServer.address() as AddressInfo).port}/`;
  medplum = await launchEmbeddedMedplum({ dbPath: ':memory:', baseUrl: medplumUrl, definition: demoDefinition() });
  handler = (r) => medplum.app.fetch(r);
  tokens = await demoPatientTokens(medplum);
  worker = createTestHarness({
    root: process.cwd(),
    workers: [
      {
        configPath: './wrangler.toml',
        vars: { MEDPLUM_BASE_URL: medplumUrl, PROJECT_ID: medplum.project.id, PUBLIC_URL: 'https://gateway.test' },
        secrets: { EDGE_STATEMENT_KEY: medplum.edgeStatementKey },
      },
    ],
  });
  await worker.listen();
}, 60_000);

afterAll(async () => {
  await worker?.close();
  medplumServer?.close();
  medplum?.close();
});

/** The SDK, as a patient app uses it, pointed at the Worker. */
const sdkFor = (token: string) =>
  createPatientCareClient({
    baseUrl: 'https://gateway.test',
    accessToken: token,
    fetch: ((input: RequestInfo | URL, init?: RequestInit) => {
      const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
      return worker.fetch(`${url.pathname}${url.search}`, init as Parameters<TestHarness['fetch']>[1]);
    }) as unknown as typeof fetch,
  });

describe('src/worker.ts in workerd', () => {
  it('serves the reference page and the document, and refuses a call without a token', async () => {
    expect((await worker.fetch('/v1/openapi.json')).status).toBe(200);
    const page = await worker.fetch('/');
    expect(page.status).toBe(200);
    await page.arrayBuffer();
    const anonymous = await worker.fetch('/v1/patient/profile');
    expect(anonymous.status).toBe(401);
    await anonymous.arrayBuffer();
  });

  it('carries the whole journey of a demo patient: intake, review, offer, order, visit', async () => {
    const api = sdkFor(tokens.alice);
    const { protocols } = await api.protocols.list();
    const check = protocols.find((p) => 'assessment' in p && p.assessment?.includes('blood-pressure-check'));
    expect(check).toBeDefined();
    const service = check?.healthcareService as string;
    await api.agreements.accept((await api.agreements.requirements({ healthcareService: service })).unmet);
    const assessment = await api.assessments.start({ healthcareService: service });
    for (const task of assessment.tasks) {
      if (task.kind === 'questionnaire') {
        const answers = await api.fhir.createQuestionnaireResponse({
          resourceType: 'QuestionnaireResponse',
          status: 'completed',
          questionnaire: task.questionnaire,
          item: [
            { linkId: 'diagnosed', answer: [{ valueBoolean: true }] },
            { linkId: 'medication', answer: [{ valueBoolean: false }] },
          ],
        });
        await api.tasks.complete(task.task, { questionnaireResponse: `QuestionnaireResponse/${answers.id}` });
      } else {
        await api.tasks.complete(task.task, {
          measurements: [
            { code: 'http://loinc.org|8480-6', value: 150, unit: 'mm[Hg]' },
            { code: 'http://loinc.org|8462-4', value: 95, unit: 'mm[Hg]' },
          ],
        });
      }
    }

    // The clinician, in Medplum's app (over HTTP): review and selection; the bots answer.
    const clinician = await signInClinician({
      baseUrl: medplumUrl,
      email: demoEmail('clinician', 'northwind'),
      password: DEMO_PASSWORD,
      projectId: medplum.project.id,
    });
    const alice = `Patient/${(await api.patient.profile()).id}`;
    const mine = (t: Task) => t.for?.reference === alice;
    const review = (await clinician.queue()).find((t) => t.code?.coding?.[0]?.code === 'review-intake' && mine(t));
    expect(review).toBeDefined();
    await clinician.assignCondition(review?.id as string, 'I10');
    await medplum.subscriptions.idle();
    const selection = (await clinician.queue()).find(
      (t) => t.code?.coding?.[0]?.code === 'select-treatment' && mine(t),
    );
    expect(selection).toBeDefined();
    const option = selection?.input?.find((i) => i.valueCanonical?.includes('amlodipine'))?.valueCanonical as string;
    await clinician.select(selection?.id as string, option);
    await medplum.subscriptions.idle();

    // Back to the patient, through the Worker.
    const offers = await api.fhir.search<Task>('Task', {
      code: `${SYSTEMS.taskKind}|treatment-offer`,
      status: 'ready',
    });
    const offer = offers.entry?.[0]?.resource as Task;
    const accepted = await api.tasks.complete(`Task/${offer.id}`, { decision: 'accept' });
    expect(accepted.carePlan).toMatch(/^CarePlan\//);
    const groupId = String(offer.focus?.reference).split('/')[1];
    const group = await api.fhir.read<RequestGroup>('RequestGroup', groupId);
    const placed = await api.orders.decide(`RequestGroup/${group.id}`, {
      items: (group.action ?? []).map((a) => ({
        item: a.resource?.reference as string,
        decision: 'accept' as const,
        fulfilment: 'pickup' as const,
      })),
    });
    expect(placed.status).toBe('completed');
    let visit: Task | undefined;
    for (const reference of accepted.tasks ?? []) {
      const task = await api.fhir.read<Task>('Task', reference.split('/')[1]);
      if (task.code?.coding?.[0]?.code === 'schedule-visit') {
        visit = task;
      }
    }
    expect(visit).toBeDefined();
    const ortiz = (await api.fhir.search('Practitioner', { name: 'Ortiz' })).entry?.[0]?.resource;
    const now = Date.now();
    const free = await api.availability.get({
      practitioner: `Practitioner/${ortiz?.id}`,
      start: new Date(now).toISOString(),
      end: new Date(now + 2 * 86_400_000).toISOString(),
      count: '2',
    });
    const [soonest, later] = free.slots ?? [];
    const booked = await api.appointments.book({ task: `Task/${visit?.id}`, slot: later.slot });
    const moved = await api.appointments.reschedule(booked.appointment, { slot: soonest.slot });
    expect(moved.replaces).toBe(booked.appointment);
    const started = await api.appointments.encounter(moved.appointment, {});
    expect(started.segment.status).toBe('in-progress');
  }, 60_000);
});
