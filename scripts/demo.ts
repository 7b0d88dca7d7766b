import { MedplumClient } from '@medplum/core';
import type { CarePlan, Practitioner, RequestGroup, Task } from '@medplum/fhirtypes';
import { EXTENSIONS, SYSTEMS } from '../contracts/systems';
import { type App, createApp, DEFAULT_LIMITS } from '../src/app';
import { signInClinician } from '../src/clinician';
import { nodeAssetLoader } from '../src/docs-assets-node';
import { createEdgeSigner } from '../src/edge/statement';
import { type LaunchedMedplum, launchEmbeddedMedplum } from '../src/embedded/launch';
import type { PatientEvent } from '../src/events/feed';
import { DEMO_PASSWORD, DEMO_TENANTS, demoDefinition, demoEmail } from '../src/provision/demo';
import { createPatientCareClient, PatientCareApiError } from '../src/sdk';
import { answerBloodPressureIntake } from './intake';

/**
 * `npm run demo`: the whole journey on a fresh embedded Medplum (in memory), narrated. Every step is
 * printed as the call a patient app makes through the SDK (`/v1/...`), or, for the clinician, the plain
 * FHIR write Medplum's app makes (`src/clinician/`), with what came back. Any unexpected answer stops
 * the demo with exit code 1.
 */
const PUBLIC_URL = 'http://localhost:8080';
const started = Date.now();
let step = 0;
/** Quiet: the journey runs without a word (the bench times it). */
let quiet = false;
const print = (text: string) => {
  if (!quiet) {
    console.log(text);
  }
};

const announce = (title: string) => print(`\n${++step}. ${title}`);
const note = (text: string) => print(`   ${text}`);
const brief = (value: unknown, max = 120): string => {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > max ? `${text.slice(0, max)}…` : text;
};

/** Secrets never printed: passwords, authorization codes and verifiers, tokens. */
const SECRET =
  /("?(password|code|code_verifier|codeVerifier|access_token|refresh_token|id_token)"?\s*[:=]\s*"?)[^"&,}]+/g;
const redact = (text: string): string => text.replace(SECRET, '$1…');

/** A fetch that prints each call and its answer, for one actor. */
function narrated(fetcher: typeof fetch, who: string, strip: string): typeof fetch {
  return async (input, init) => {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    const method = init?.method ?? (input instanceof Request ? input.method : 'GET');
    // Only sign-in traffic carries secrets (passwords, codes, tokens); elsewhere `code` is a FHIR code,
    // narrated as it is.
    const secret = /\/(auth|oauth2)\//.test(url.pathname);
    const shown = (text: string) => (secret ? redact(text) : text);
    const body = typeof init?.body === 'string' ? ` ${brief(shown(init.body), 110)}` : init?.body ? ' <bytes>' : '';
    print(`   ${who} → ${method} ${url.pathname.replace(strip, '')}${url.search}${body}`);
    const response = await fetcher(input, init);
    const text = await response.clone().text();
    print(`   ${' '.repeat(who.length)} ← ${response.status} ${brief(shown(text))}`);
    return response;
  };
}

function expect(condition: unknown, what: string): asserts condition {
  if (!condition) {
    throw new Error(`unexpected: ${what}`);
  }
}

// MedplumClient warns, with a stack, that it falls back to the plain PKCE method outside a browser
// (no `window.crypto`); the sign-in works the same. Not a step of the journey: not printed.
const warn = console.warn.bind(console);
console.warn = (...args: unknown[]) => {
  if (!String(args[0]).startsWith('Failed to hash code verifier')) {
    warn(...args);
  }
};

/**
 * The gateway over an embedded Medplum, in process, as `npm run demo` runs it (the bench too): the app
 * and a fetch that calls it.
 */
export function embeddedGateway(medplum: Awaited<ReturnType<typeof launchEmbeddedMedplum>>): {
  app: App;
  fetch: typeof fetch;
} {
  const app = createApp({
    medplum: { baseUrl: medplum.baseUrl, fetch: medplum.fetch },
    issuer: medplum.baseUrl,
    projectId: medplum.project.id,
    limits: DEFAULT_LIMITS,
    assets: nodeAssetLoader(),
    publicUrl: PUBLIC_URL,
    edgeSigner: createEdgeSigner(medplum.edgeStatementKey),
  });
  const gatewayFetch = ((input: RequestInfo | URL, init?: RequestInit) =>
    app.fetch(new Request(input, init))) as typeof fetch;
  return { app, fetch: gatewayFetch };
}

async function main(): Promise<void> {
  console.log('Patient Care API: the whole journey on a fresh embedded Medplum (in memory)');
  const medplum = await launchEmbeddedMedplum({ dbPath: ':memory:', definition: demoDefinition() });
  const { fetch: gatewayFetch } = embeddedGateway(medplum);
  try {
    await journey(embeddedBackend(medplum), gatewayFetch);
  } finally {
    medplum.close();
  }
  console.log(`\nDone in ${((Date.now() - started) / 1000).toFixed(1)} s: every answer was the one expected.`);
}

/**
 * The Medplum a journey runs against: the embedded one (in process) or a real server (over the network).
 * Nothing else of the backend is known to the journey, so the same steps run on both.
 */
export interface JourneyBackend {
  /** Medplum's base URL, ending in `/` (where patients register and clinicians sign in). */
  baseUrl: string;
  /** How to reach it. */
  fetch: typeof fetch;
  projectId: string;
  /** The client id of a demo tenant's patient app (`DEMO_TENANTS[].key`), which she registers through. */
  appIdOf(tenantKey: string): string;
  /**
   * Resolves once the Subscriptions woken so far have run, where the backend can tell (the embedded
   * Medplum); the journey polls either way, this only spares it the poll interval.
   */
  settle?(): Promise<void>;
}

/**
 * The demo tenants' patient apps on a provisioned Medplum, found by their provisioning tag (a real Medplum
 * chose their ids): `appIdOf` for a JourneyBackend. Asked once, as the project admin.
 */
export async function provisionedAppIds(admin: MedplumClient): Promise<(tenantKey: string) => string> {
  const appIds = new Map<string, string>();
  for (const tenant of DEMO_TENANTS) {
    const app = await admin.searchOne('ClientApplication', { _tag: `${SYSTEMS.provisioning}|app-${tenant.key}` });
    if (app?.id) {
      appIds.set(tenant.key, app.id);
    }
  }
  return (tenantKey) => {
    const id = appIds.get(tenantKey);
    if (!id) {
      throw new Error(`no ClientApplication tagged ${SYSTEMS.provisioning}|app-${tenantKey}`);
    }
    return id;
  };
}

/** The embedded Medplum as a journey's backend: its patient apps have the fixed ids of `DEMO_TENANTS`. */
export function embeddedBackend(medplum: LaunchedMedplum): JourneyBackend {
  return {
    baseUrl: medplum.baseUrl,
    fetch: medplum.fetch,
    projectId: medplum.project.id,
    appIdOf: (tenantKey) => {
      const tenant = DEMO_TENANTS.find((t) => t.key === tenantKey);
      if (!tenant) {
        throw new Error(`no demo tenant ${tenantKey}`);
      }
      return tenant.appId;
    },
    settle: () => medplum.subscriptions.idle(),
  };
}

/** What the journey leaves behind: the patient's token and the ids of what she did (the bench reuses them). */
export interface JourneyResult {
  token: string;
  /** Her Patient (`Patient/<id>`). */
  patient: string;
  /** The document she uploaded (`Binary/<id>`). */
  document: string;
  healthcareService: string;
  completedTask: string;
  offerTask: string;
  order: string;
  orderItems: { item: string; decision: 'accept'; fulfilment: 'delivery' }[];
  carePlan: string;
  visitTask: string;
  originalAppointment: string;
  /** The slot first booked (the original's), and the one the visit moved to. */
  bookedSlot: string;
  appointment: string;
  slot: string;
  practitioner: string;
  /** The next visit of her plan to book, issued when this one was fulfilled. */
  nextVisitTask: string;
  questionnaireResponse: string;
}

export interface JourneyOptions {
  /** Without a word (the bench times it; the real-Medplum lane prints its own table). */
  silent?: boolean;
  /**
   * Filled in as the journey goes: the steps begun (the last one is where it stopped, if it threw) and
   * what it has made so far, so a caller can go on with what exists when a later step fails.
   */
  progress?: JourneyProgress;
  /** Told of each event her app waited for on her feed, and when its call answered (the bench's latency from a write to her app). */
  onHeard?: (event: PatientEvent, heardAt: number) => void;
}

export interface JourneyProgress extends Partial<JourneyResult> {
  steps: string[];
}

/** How long a journey waits for work a Subscription does (Medplum delivers through a queue). */
const WAIT = { everyMs: 250, deadlineMs: 30_000 };

/** Where a patient app stands in her event feed, and what it has heard and not yet used. */
interface Listening {
  after?: string;
  /** Heard and not yet used: each event, when its page came, and whether that call waited for it. */
  heard: { event: PatientEvent; heardAt: number; waited: boolean }[];
  onHeard?: JourneyOptions['onHeard'];
}

/**
 * What a patient app does instead of polling: waits on her event feed (`GET /v1/events`, `wait` 25 s) until
 * the event `wanted` picks comes, 30 s at most. What it hears meanwhile is kept for the next wait (two of
 * her records can change in one step).
 */
async function hear(
  backend: JourneyBackend,
  api: ReturnType<typeof createPatientCareClient>,
  listening: Listening,
  what: string,
  wanted: (event: PatientEvent) => boolean,
): Promise<PatientEvent> {
  const start = Date.now();
  let calls = 0;
  await backend.settle?.();
  for (;;) {
    const index = listening.heard.findIndex(({ event }) => wanted(event));
    if (index >= 0) {
      const [{ event, heardAt, waited }] = listening.heard.splice(index, 1);
      note(
        `(${what}: ${event.type} ${event.subject}, heard on her feed after ${calls} call(s), ${((Date.now() - start) / 1000).toFixed(1)} s)`,
      );
      // How long after its write her app heard it, when it came to a call that waited for it.
      if (waited) {
        listening.onHeard?.(event, heardAt);
      }
      return event;
    }
    if (Date.now() - start > WAIT.deadlineMs) {
      throw new Error(`unexpected: ${what} was not heard on her feed within ${WAIT.deadlineMs / 1000} s`);
    }
    const waiting = calls > 0;
    const page = await api.events.list({
      ...(listening.after ? { after: listening.after } : {}),
      ...(waiting ? { wait: '25' } : {}),
    });
    calls++;
    listening.after = page.next;
    const heardAt = Date.now();
    listening.heard.push(...page.events.map((event) => ({ event, heardAt, waited: waiting })));
  }
}

/**
 * Polls `probe` (every 250 ms, 30 s at most) until it answers something: what a Subscription makes
 * arrives after the write that woke it, seconds later on a real Medplum. Only the first probe is
 * narrated; how long it took is.
 */
async function waitFor<T>(backend: JourneyBackend, what: string, probe: () => Promise<T | undefined>): Promise<T> {
  const start = Date.now();
  let polls = 0;
  const wasQuiet = quiet;
  try {
    for (;;) {
      await backend.settle?.();
      const found = await probe();
      polls++;
      if (found !== undefined) {
        if (polls > 1) {
          quiet = wasQuiet;
          note(`(${what}: there after ${polls} polls, ${((Date.now() - start) / 1000).toFixed(1)} s)`);
        }
        return found;
      }
      if (Date.now() - start > WAIT.deadlineMs) {
        throw new Error(`unexpected: ${what} did not appear within ${WAIT.deadlineMs / 1000} s (${polls} polls)`);
      }
      quiet = true;
      await new Promise((resolve) => setTimeout(resolve, WAIT.everyMs));
    }
  } finally {
    quiet = wasQuiet;
  }
}

/**
 * The whole journey (patient through the SDK against `gatewayFetch`, clinician through Medplum), on any
 * backend, narrated unless `silent`.
 */
export async function journey(
  backend: JourneyBackend,
  gatewayFetch: typeof fetch,
  options: JourneyOptions = {},
): Promise<JourneyResult> {
  quiet = options.silent ?? false;
  step = 0;
  const progress: JourneyProgress = options.progress ?? { steps: [] };
  const say = (title: string) => {
    progress.steps.push(title);
    announce(title);
  };
  const northwind = DEMO_TENANTS[0];
  const medplumFetch = narrated(backend.fetch, 'patient app (Medplum)', '');

  say(`A new patient signs up through Medplum's registration, in ${northwind.name}'s patient app`);
  const auth = new MedplumClient({ baseUrl: backend.baseUrl, fetch: medplumFetch, cacheTime: 0 });
  const user = await auth.startNewUser({
    firstName: 'Maya',
    lastName: 'Lopez',
    email: `maya.lopez.${Date.now()}@example.com`,
    password: 'a long enough demo password',
    projectId: backend.projectId,
    clientId: backend.appIdOf(northwind.key),
    recaptchaToken: '',
  });
  const registered = await auth.startNewPatient({ login: user.login, projectId: backend.projectId });
  await auth.processCode(registered.code as string);
  progress.token = auth.getAccessToken() as string;
  const api = createPatientCareClient({
    baseUrl: PUBLIC_URL,
    accessToken: auth.getAccessToken() as string,
    fetch: narrated(gatewayFetch, 'patient app', ''),
  });

  // Her app follows her event feed from the start (instead of polling for what the platform does).
  const listening: Listening = { heard: [], onHeard: options.onHeard };

  say('She is homed in the tenant of the app she registered through, and adds her address');
  const home = await api.patient.home();
  progress.patient = home.patient;
  note(`her tenant: ${home.organization}`);
  const profile = await api.patient.profile();
  await api.fhir.updatePatient({
    ...(profile as typeof profile & { id: string }),
    address: [{ line: ['12 Palm Street'], city: 'Fresno', state: 'CA', postalCode: '93701', country: 'US' }],
  });

  say('She reads the catalog');
  const { protocols } = await api.protocols.list();
  const check = protocols.find((p) => 'assessment' in p && p.assessment?.includes('blood-pressure-check'));
  expect(check, 'the blood-pressure check is in her catalog');
  note(`offerings: ${protocols.map((p) => p.name).join('; ')}`);

  say('She starts the blood-pressure check and meets the agreements gate');
  try {
    await api.assessments.start({ healthcareService: check.healthcareService });
    expect(false, 'the start should have been gated');
  } catch (err) {
    expect(err instanceof PatientCareApiError && err.code === 'consent_required', 'a 409 consent_required');
    note('409 consent_required: the agreements she must accept first');
  }
  const { unmet } = await api.agreements.requirements({ healthcareService: check.healthcareService });
  await api.agreements.accept(unmet);

  say('She completes the intake: a questionnaire with an uploaded document, and her readings');
  const assessment = await api.assessments.start({ healthcareService: check.healthcareService });
  const png = Uint8Array.from(
    Buffer.from(
      'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
      'base64',
    ),
  );
  const photo = await api.documents.upload(png, { contentType: 'image/png', filename: 'reading.png' });
  progress.document = photo.url;
  const questionnaireResponse = await answerBloodPressureIntake(api, assessment, photo);
  progress.questionnaireResponse = questionnaireResponse;

  say("The clinician signs in to Medplum's app, claims the review and assigns a condition (ICD-10-CM I10)");
  const clinician = await signInClinician({
    baseUrl: backend.baseUrl,
    fetch: narrated(backend.fetch, "clinician (Medplum's app)", ''),
    email: demoEmail('clinician', northwind.key),
    password: DEMO_PASSWORD,
    projectId: backend.projectId,
  });
  const review = await waitFor(backend, 'the intake review in her queue', async () =>
    (await clinician.queue()).find((t) => t.for?.reference === home.patient),
  );
  await clinician.assignCondition(review.id, 'I10');

  say('Eligibility arrives (a Subscription wakes the platform): advisory, with its provenance');
  const selection = await waitFor(backend, 'the selection task in her queue', async () =>
    (await clinician.queue()).find(
      (t) => t.for?.reference === home.patient && t.code?.coding?.[0]?.code === 'select-treatment',
    ),
  );
  for (const option of (selection.input ?? []).filter((i) => i.valueCanonical)) {
    const eligible = option.extension?.find((e) => e.url === EXTENSIONS.eligible)?.valueBoolean;
    const preferred = option.extension?.some((e) => e.url === EXTENSIONS.guidelinePreferred);
    note(
      `${option.valueCanonical}: ${eligible ? 'eligible' : 'not eligible'}${preferred ? ' (guideline-preferred, a label)' : ''}`,
    );
  }
  const guidance = selection.contained?.find((r) => r.resourceType === 'GuidanceResponse') as
    | { performer?: { reference?: string } }
    | undefined;
  note(`performed by ${guidance?.performer?.reference} (the eligibility engine), from pinned versions`);

  say('The clinician selects amlodipine; the platform composes the pinned consent bundle');
  const amlodipine = selection.input?.find((i) => i.valueCanonical?.includes('amlodipine'))?.valueCanonical as string;
  await clinician.select(selection.id, amlodipine);

  say('She sees her offer and accepts it: the treatment Consent and the active CarePlan, in one step');
  const offered = await hear(backend, api, listening, 'her offer', (e) => e.type === 'offer.ready');
  const offer = await api.fhir.read<Task>('Task', offered.subject.split('/')[1]);
  progress.offerTask = `Task/${offer.id}`;
  const accepted = await api.tasks.complete(`Task/${offer.id}`, { decision: 'accept' });
  expect(accepted.carePlan && accepted.consent, 'a CarePlan and a Consent');
  progress.carePlan = accepted.carePlan;

  say('She decides the order: delivered to her home');
  const order = offer.focus?.reference as string;
  const group = await api.fhir.read<RequestGroup>('RequestGroup', order.split('/')[1]);
  const orderItems = (group.action ?? []).map((a) => ({
    item: a.resource?.reference as string,
    decision: 'accept' as const,
    fulfilment: 'delivery' as const,
  }));
  const placed = await api.orders.decide(order, { items: orderItems });
  note(`order ${placed.order}: ${placed.status}; ${placed.items.map((i) => `${i.item} ${i.intent}`).join(', ')}`);

  say('Her plan is active, instantiating exactly the versions she accepted');
  const plan = await api.fhir.read<CarePlan>('CarePlan', (accepted.carePlan as string).split('/')[1]);
  expect(plan.status === 'active', 'an active plan');
  note(`${plan.instantiatesCanonical?.join(', ')}`);

  say('She books the follow-up video visit the plan issued, with the visit team its task names');
  const { tasks: open } = await api.tasks.list();
  const toBook = open.find(
    (t) => t.kind === 'schedule-visit' && t.visitType === 'video-visit' && accepted.tasks?.includes(t.task),
  );
  expect(toBook?.careTeam, 'a video visit to book, naming its visit team');
  const now = new Date();
  const window = { start: now.toISOString(), end: new Date(now.getTime() + 7 * 86_400_000).toISOString() };
  const free = await api.availability.get({ careTeam: toBook.careTeam, ...window, count: '20' });
  const [soonest] = free.slots ?? [];
  // Booked at a later time first, so that the reschedule moves her visit earlier.
  const later = free.slots?.find((s) => s.start > soonest.start) ?? free.slots?.[1];
  expect(soonest && later, 'free slots');
  note(`${toBook.careTeam}: first free ${soonest.start} (${soonest.practitioner}), then ${later.start}`);
  const booked = await api.appointments.book({ task: toBook.task, slot: later.slot });
  progress.originalAppointment = booked.appointment;

  say('She reschedules it to the soonest slot: the original is cancelled and a linked replacement booked, in one step');
  const moved = await api.appointments.reschedule(booked.appointment, { slot: soonest.slot });
  note(`${moved.appointment} replaces ${moved.replaces}, ${moved.start}`);
  progress.appointment = moved.appointment;

  say('Her visit opens: she starts its first segment');
  const segments = await api.appointments.segments(moved.appointment);
  note(segments.segments.map((s) => `${s.position}. ${s.purpose} (${s.status})`).join('; '));
  const startedSegment = await api.appointments.encounter(moved.appointment, {});
  expect(startedSegment.segment.status === 'in-progress', 'the segment started');

  say(
    "Her visit's practitioner signs in to Medplum's Provider app and finishes each segment she starts; the platform fulfils the visit and her plan issues the next one",
  );
  // The practitioner the visit is with signs in as herself (each visit practitioner has a demo login).
  const seen = await clinician.medplum.readReference<Practitioner>({ reference: soonest.practitioner });
  const key = seen.meta?.tag?.find((t) => t.system === SYSTEMS.provisioning)?.code?.replace('visit-practitioner-', '');
  expect(key, "the visit practitioner's demo login");
  const practitioner = await signInClinician({
    baseUrl: backend.baseUrl,
    fetch: narrated(backend.fetch, 'practitioner (Provider app)', ''),
    email: demoEmail(key, northwind.key),
    password: DEMO_PASSWORD,
    projectId: backend.projectId,
  });
  for (const [index, segment] of segments.segments.entries()) {
    if (index > 0) {
      await api.appointments.encounter(moved.appointment, {});
    }
    await practitioner.finishEncounter(segment.encounter.split('/')[1] as string);
  }
  await hear(
    backend,
    api,
    listening,
    'her visit fulfilled',
    (e) => e.type === 'visit.fulfilled' && e.subject === moved.appointment,
  );
  const fulfilled = await api.appointments.get(moved.appointment);
  note(
    `${fulfilled.appointment}: ${fulfilled.status}; ${fulfilled.segments.map((s) => `${s.position} ${s.status}`).join(', ')}`,
  );
  const issued = await hear(
    backend,
    api,
    listening,
    'the next visit to book',
    (e) => e.type === 'task.ready' && e.kind === 'schedule-visit' && e.subject !== toBook.task,
  );
  const nextVisit = (await api.tasks.list()).tasks.find((t) => t.task === issued.subject && t.notBefore);
  expect(nextVisit, 'her next visit to book, not before a date');
  note(`next: ${nextVisit.task}, ${nextVisit.description ?? 'a visit'}, not before ${nextVisit.notBefore}`);
  progress.nextVisitTask = nextVisit.task;

  say('The journey view, assembled from her EpisodeOfCare key (every resource carries its tag)');
  const tag = `${SYSTEMS.episode}|${assessment.episodeOfCare}`;
  // What she and her clinician write themselves (answers, the Condition) is reached from these: the
  // completed task's output, the CarePlan's `addresses`.
  for (const type of [
    'Task',
    'Observation',
    'RequestGroup',
    'MedicationRequest',
    'Consent',
    'CarePlan',
    'ServiceRequest',
    'Appointment',
    'Encounter',
  ]) {
    const found = await api.fhir.search(type as 'Task', { _tag: tag });
    note(`${type}: ${(found.entry ?? []).length}`);
  }
  const result: JourneyResult = {
    token: auth.getAccessToken() as string,
    patient: home.patient,
    document: photo.url as string,
    healthcareService: check.healthcareService,
    completedTask: assessment.tasks[0].task,
    offerTask: `Task/${offer.id}`,
    order,
    orderItems,
    carePlan: accepted.carePlan as string,
    visitTask: toBook.task,
    originalAppointment: booked.appointment,
    bookedSlot: later.slot,
    appointment: moved.appointment,
    slot: soonest.slot,
    practitioner: soonest.practitioner,
    nextVisitTask: nextVisit.task,
    questionnaireResponse,
  };
  Object.assign(progress, result);
  return result;
}

// Run as a script (`npm run demo`), not when the bench imports the journey.
if (process.argv[1]?.endsWith('demo.ts')) {
  main().catch((err: unknown) => {
    console.error(`\nThe demo stopped: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  });
}
