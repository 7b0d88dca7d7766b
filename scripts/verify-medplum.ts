import { createHash, randomBytes } from 'node:crypto';
import { MedplumClient } from '@medplum/core';
import type {
  Appointment,
  Attachment,
  AuditEvent,
  Basic,
  Bot,
  Bundle,
  CarePlan,
  CareTeam,
  ClientApplication,
  Coding,
  Condition,
  Consent,
  DetectedIssue,
  DocumentReference,
  Encounter,
  Location,
  Media,
  Organization,
  Patient,
  Practitioner,
  PractitionerRole,
  Questionnaire,
  QuestionnaireResponse,
  RequestGroup,
  Resource,
  Schedule,
  ServiceRequest,
  Slot,
  Task,
  TaskOutput,
  ValueSet,
  ValueSetExpansionContains,
} from '@medplum/fhirtypes';
import { canonicalJson } from '../bots/lib/canonical';
import { binaryIdOf, defaultStorageBaseUrl } from '../contracts/attachments';
import { EXTENSIONS, FULFILMENT_METHODS, SYSTEMS } from '../contracts/systems';
import type { PatientTask } from '../contracts/tasks';
import {
  CONDITION_ITEM,
  FORM_INPUT,
  formReference,
  OPTION_ITEM,
  PROVIDER_APP_OUTPUT,
  RESPONSE_OUTPUT,
  responseOutput,
  responseReference,
  WORK_FORMS,
} from '../contracts/work-forms';
import { type AppDeps, createApp, DEFAULT_LIMITS } from '../src/app';
import { CREDENTIAL_HELP, CREDENTIAL_OPTIONS, credentialsFrom, parseCommand } from '../src/cli/options';
import { type Clinician, clinicianInvite, signInClinician } from '../src/clinician';
import { createEdgeSigner } from '../src/edge/statement';
import { loadFhirSchema } from '../src/embedded/schema';
import { applyDefinition, type ProvisionReport } from '../src/provision/apply';
import { readBotBundles } from '../src/provision/bundles';
import { DEMO_PASSWORD, DEMO_TENANTS, demoDefinition, demoEmail } from '../src/provision/demo';
import { createPatientCareClient, PatientCareApiError } from '../src/sdk';
import { type JourneyBackend, type JourneyProgress, journey } from './demo';
import { answerBloodPressureIntake } from './intake';
import { botRunsOf, roundTripsByBot, roundTripTable, servedLines, topLevelServerMs } from './round-trips';

/**
 * `npm run verify:medplum -- [--project-id ID] [--wait-cron-minutes N] [--verbose]`, Medplum's credentials
 * from the environment (`--help`): the real-Medplum lane (DESIGN section 6). Against a real Medplum
 * project, as its project admin: provisions the demo definition twice (the second run must write
 * nothing), runs `npm run demo`'s whole journey through an in-process gateway pointed at it, makes the
 * attacks that need only HTTP calls (directly on Medplum with real tokens, and through the gateway),
 * checks the demo calendars and the cron bot, and prints one markdown table. Exit code 1 when any row
 * FAILED. Not part of `npm test`: it needs a real Medplum. docs/real-medplum.md.
 */

type Result = 'ok' | 'held' | 'FAILED' | 'not reached' | 'pending';

interface Row {
  step: string;
  result: Result;
  detail: string;
}

const rows: Row[] = [];
const row = (step: string, result: Result, detail: string): void => {
  rows.push({ step, result, detail });
  console.error(`${result.padEnd(11)} ${step}${detail ? ` — ${detail}` : ''}`);
};

const PUBLIC_URL = 'http://localhost:8080';
const DAY = 86_400_000;

const message = (err: unknown): string => {
  if (err instanceof PatientCareApiError) {
    const details = err.details ? ` ${JSON.stringify(err.details).slice(0, 200)}` : '';
    return `${err.status} ${err.code}: ${err.message}${details}`;
  }
  return err instanceof Error ? err.message : String(err);
};

// MedplumClient warns, with a stack, that it falls back to the plain PKCE method outside a browser.
const warn = console.warn.bind(console);
console.warn = (...args: unknown[]) => {
  if (!String(args[0]).startsWith('Failed to hash code verifier')) {
    warn(...args);
  }
};

interface Answer {
  status: number;
  text: string;
  body: unknown;
  contentType: string;
  bytes: number;
}

async function answerOf(response: Response): Promise<Answer> {
  const raw = new Uint8Array(await response.arrayBuffer());
  const text = new TextDecoder().decode(raw);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return {
    status: response.status,
    text,
    body,
    contentType: response.headers.get('content-type') ?? '',
    bytes: raw.byteLength,
  };
}

/**
 * One HTTP call to Medplum with a token. The admin's own look-ups wait out the FHIR quota (429).
 * `extended`: Medplum's extended mode (`X-Medplum: extended`, what MedplumClient, and so Medplum's app
 * and the bots, always send): a resource then shows `meta.author`, the writer Medplum stamped.
 */
async function medplumCall(
  baseUrl: string,
  token: string,
  method: string,
  path: string,
  options: { body?: unknown; waitOutQuota?: boolean; extended?: boolean } = {},
): Promise<Answer> {
  for (let attempt = 0; ; attempt++) {
    const response = await fetch(new URL(path, baseUrl), {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        accept: 'application/fhir+json, application/json',
        ...(options.body === undefined ? {} : { 'content-type': 'application/fhir+json' }),
        ...(options.extended ? { 'x-medplum': 'extended' } : {}),
      },
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });
    const answer = await answerOf(response);
    if (answer.status !== 429 || !options.waitOutQuota || attempt >= 3) {
      return answer;
    }
    const wait = /"msBeforeNext"\s*:\s*(\d+)/.exec(answer.text.replaceAll('\\"', '"'))?.[1];
    const ms = Math.min(Number(wait ?? 20_000) + 500, 65_000);
    console.error(`            (the admin's FHIR quota is spent: waiting ${(ms / 1000).toFixed(0)} s)`);
    await new Promise((resolve) => setTimeout(resolve, ms));
  }
}

const entriesOf = (body: unknown): Resource[] =>
  ((body as Bundle | undefined)?.entry ?? []).map((e) => e.resource).filter((r): r is Resource => Boolean(r));

/** What came back, in a few words: status, and what the body is. */
function describe(answer: Answer): string {
  const body = answer.body as (Resource & { issue?: { details?: { text?: string } }[] }) | undefined;
  if (answer.status >= 400) {
    const text = body?.issue?.[0]?.details?.text ?? (body as { error?: { code?: string } })?.error?.code;
    return `${answer.status}${text ? ` (${String(text).slice(0, 80)})` : ''}`;
  }
  if (body?.resourceType === 'Bundle') {
    return `${answer.status}, a Bundle of ${entriesOf(body).length}`;
  }
  if (body?.resourceType) {
    return `${answer.status}, ${body.resourceType}/${body.id ?? ''}`;
  }
  return `${answer.status}, ${answer.contentType.split(';')[0] || 'a body'} of ${answer.bytes} bytes`;
}

const REFUSED = [403, 404];
/** A write Medplum must not take: a writeConstraint refuses it (403), or validation (400). */
const REJECTED = [400, 403];

const LANE_COMMAND = {
  name: 'verify:medplum',
  summary:
    'The real-Medplum lane: against a FRESH project (npm run bootstrap), as its project admin, provisions the demo definition twice, runs the whole journey through an in-process gateway, makes the attacks that need only HTTP, checks the demo calendars and the cron bot, and prints one markdown table; exit code 1 when any row FAILED. Never on a project patients use: it provisions the demo people.',
  options: {
    ...CREDENTIAL_OPTIONS,
    'project-id': { type: 'string' },
    'wait-cron-minutes': { type: 'string', default: '0' },
    'medplum-log': { type: 'string' },
    verbose: { type: 'boolean', default: false },
  },
  help: [
    ...CREDENTIAL_HELP,
    "  --project-id ID             the project (checked against the client's)",
    '  --wait-cron-minutes N       wait up to N minutes for a run of the cron bot (default 0: report it as it is)',
    "  --medplum-log PATH          Medplum's request log (logRequests on): each bot's round trips after the table",
    '  --verbose                   narrate the journey as npm run demo does',
    '  --help                      this text',
  ],
} as const;

async function main(): Promise<void> {
  const values = parseCommand(LANE_COMMAND);
  if (!values) {
    return;
  }
  const credentials = credentialsFrom(values);
  const waitCronMinutes = Number(values['wait-cron-minutes']);
  if ('missing' in credentials || !Number.isFinite(waitCronMinutes) || waitCronMinutes < 0) {
    console.error(
      `${'missing' in credentials ? credentials.missing : '--wait-cron-minutes takes a number of minutes'}\n(see npm run verify:medplum -- --help)`,
    );
    process.exitCode = 2;
    return;
  }
  const { baseUrl, clientId, clientSecret } = credentials;
  const startedAt = new Date();

  const health = await answerOf(await fetch(new URL('healthcheck', baseUrl)));
  const version =
    (health.body as { version?: string } | undefined)?.version ?? `unknown (healthcheck ${health.status})`;

  loadFhirSchema();
  // Every call provisioning makes is seen here: what it wrote is known even when a run throws.
  const calls: string[] = [];
  const observed: typeof fetch = async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : input);
    const method = init?.method ?? (input instanceof Request ? input.method : 'GET');
    const response = await fetch(input, init);
    calls.push(`${method} ${url.pathname.replace(/^\/fhir\/R4\//, '')} -> ${response.status}`);
    return response;
  };
  const admin = new MedplumClient({ baseUrl, cacheTime: 0, fetch: observed });
  await admin.startClientLogin(clientId, clientSecret);
  const adminToken = admin.getAccessToken() as string;
  const me = (await admin.get('auth/me', { cache: 'no-cache' })) as { project?: { id?: string; reference?: string } };
  const projectId = me.project?.id ?? me.project?.reference?.split('/')[1] ?? '';
  if (values['project-id'] && values['project-id'] !== projectId) {
    console.error(`The client is a member of project ${projectId}, not ${values['project-id']}`);
    process.exitCode = 2;
    return;
  }
  console.error(`Medplum ${version} at ${baseUrl}, project ${projectId}\n`);
  const adminGet = (path: string) => medplumCall(baseUrl, adminToken, 'GET', path, { waitOutQuota: true });

  // 1. Provisioning, twice: the second run writes nothing.
  const definition = demoDefinition();
  const edgeStatementKey = process.env.EDGE_STATEMENT_KEY || randomBytes(32).toString('base64url');
  /** One run; what it wrote: every call but reads, searches and the bots it runs at the end. */
  const provision = async (label: string): Promise<{ report?: ProvisionReport; writes: string[] }> => {
    const t0 = Date.now();
    const from = calls.length;
    const writesSince = () =>
      calls
        .slice(from)
        .filter((c) => !/^(GET|HEAD) /.test(c) && !/\/_search |\/\$execute /.test(c) && !c.includes('oauth2/'));
    const seconds = () => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
    try {
      const report = await applyDefinition(admin, definition, {
        bundles: readBotBundles(definition),
        edgeStatementKey,
      });
      const counts = `created ${report.created.length}, updated ${report.updated.length}, unchanged ${report.unchanged.length}, deployed ${report.deployed.length} (of the definition's ${definition.bots.length} bots)`;
      row(label, 'ok', `${counts}, ${calls.length - from} calls (${seconds()})`);
      return { report, writes: writesSince() };
    } catch (err) {
      row(label, 'FAILED', `after ${seconds()}, at ${calls.at(-1) ?? 'the first call'}: ${message(err)}`);
      return { writes: writesSince() };
    }
  };
  const first = await provision('provisioning (demo definition)');
  const second = await provision('provisioning again');
  // Judged on the calls seen, so that a run that throws at its end (a bot it runs) still answers.
  const reported = second.report ? [...second.report.created, ...second.report.updated] : [];
  const wrote = [...new Set([...second.writes, ...reported])];
  row(
    'provisioning again writes nothing',
    wrote.length === 0 ? 'ok' : 'FAILED',
    wrote.length === 0
      ? `no create, update, patch, delete or deploy${second.report ? `; ${second.report.unchanged.length} unchanged` : ''}${first.report ? '' : ' (the first run failed)'}`
      : `wrote ${wrote.slice(0, 8).join(', ')}${wrote.length > 8 ? ` (+${wrote.length - 8})` : ''}`,
  );

  // The demo patient apps, found by provisioning key (a real Medplum chose their ids).
  const appIds = new Map<string, string>();
  for (const tenant of DEMO_TENANTS) {
    const found = await adminGet(
      `fhir/R4/ClientApplication?_tag=${encodeURIComponent(`${SYSTEMS.provisioning}|app-${tenant.key}`)}`,
    );
    const app = entriesOf(found.body)[0] as ClientApplication | undefined;
    if (app?.id) {
      appIds.set(tenant.key, app.id);
    }
  }
  const progress: JourneyProgress = { steps: [] };
  let interactionOrder: Promise<void> | undefined;
  const backend: JourneyBackend = {
    baseUrl,
    fetch: globalThis.fetch,
    projectId,
    appIdOf: (tenantKey) => {
      const id = appIds.get(tenantKey);
      if (!id) {
        throw new Error(`no ClientApplication tagged ${SYSTEMS.provisioning}|app-${tenantKey}`);
      }
      return id;
    },
    // The journey's first wait is for the intake review, before her clinician assigns the condition
    // that wakes eligibility: the admin gives the patient an active spironolactone order there, so that
    // the engine finds the lisinopril interaction and a DetectedIssue exists for the mitigation rows.
    settle: async () => {
      if (progress.patient && !interactionOrder) {
        interactionOrder = spironolactoneOrder(baseUrl, adminToken, progress.patient);
      }
      await interactionOrder;
    },
  };

  // 2. The whole journey, the patient through the SDK against in-process gateways on this Medplum: TWO
  // instances built alike (each with its own caches, admission counters and token-key cache), her calls
  // served by each in turn (round robin per request), as behind a load balancer (docs/deploy.md, "Several
  // instances"). Each instance's bot runs are counted (its `Bot/$execute` calls), and all of them together.
  const executes = { count: 0 };
  const instances = GATEWAY_NAMES.map((name) =>
    gatewayInstance(name, baseUrl, executes, {
      issuer: baseUrl,
      projectId,
      limits: DEFAULT_LIMITS,
      publicUrl: PUBLIC_URL,
      edgeSigner: createEdgeSigner(edgeStatementKey),
    }),
  );
  /** Every call made through the round robin: which instance served it, and its status. */
  const served: ServedCall[] = [];
  let turn = 0;
  const gatewayFetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const instance = instances[turn++ % instances.length];
    const request = new Request(input, init);
    const call: ServedCall = {
      instance: instance.name,
      method: request.method,
      path: new URL(request.url).pathname,
      status: 0,
    };
    served.push(call);
    const response = await instance.fetch(request);
    call.status = response.status;
    return response;
  }) as typeof fetch;
  // Just before the journey decides its order, what she can read of it: her open tasks and a decision with
  // methods not allowed (refused, nothing written); then the journey's own call, as it made it.
  let orderProbe: OrderProbe | undefined;
  const made: MadeCall[] = [];
  const journeyFetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    if (repeatableOf(request.method, new URL(request.url).pathname)) {
      made.push({
        method: request.method,
        url: request.url,
        authorization: request.headers.get('authorization') ?? '',
        body: await request.clone().text(),
      });
    }
    const decision =
      request.method === 'POST' ? /^\/v1\/orders\/([^/]+)\/decisions$/.exec(new URL(request.url).pathname) : null;
    if (decision && !orderProbe) {
      orderProbe = await probeOrder(gatewayFetch, request.clone(), `RequestGroup/${decision[1]}`);
    }
    return gatewayFetch(request);
  }) as typeof fetch;
  const journeyStart = Date.now();
  const journeyCalls = served.length;
  let journeyError: unknown;
  try {
    await journey(backend, journeyFetch, { silent: !values.verbose, progress });
  } catch (err) {
    journeyError = err;
  }
  const journeyEnd = Date.now();
  const journeyServed = served.slice(journeyCalls);
  progress.steps.forEach((title, i) => {
    const failed = journeyError !== undefined && i === progress.steps.length - 1;
    row(`journey ${i + 1}. ${title}`, failed ? 'FAILED' : 'ok', failed ? message(journeyError) : '');
  });
  if (journeyError === undefined) {
    row(
      'the whole journey',
      'ok',
      `${progress.steps.length} steps in ${((Date.now() - journeyStart) / 1000).toFixed(1)} s`,
    );
    await journeyEnding(baseUrl, adminToken, gatewayFetch, progress);
  } else {
    row(`journey after step ${progress.steps.length}`, 'not reached', 'the journey stopped at the step above');
  }

  nGatewaysJourney(journeyServed, instances, journeyError, progress.steps.length);

  // Finished work made again: answered from her own reads, as the bot answers it. Each
  // repeat through the other instance than the one before (the round robin), then a few of them through
  // each instance in turn (N gateways).
  if (journeyError === undefined) {
    const repeatCalls = served.length;
    await repeats(baseUrl, made, gatewayFetch, executes);
    nGatewaysRepeats(served.slice(repeatCalls), instances);
    await acrossInstances(made, instances);
  } else {
    for (const step of [N_GATEWAYS_REPEATS_STEP, `${N_GATEWAYS} (b): her finished workflow calls again`]) {
      row(step, 'not reached', 'the journey stopped');
    }
  }

  // 3. Attacks that need only HTTP: directly on Medplum with real tokens, and through the gateway.
  await attacks({
    baseUrl,
    projectId,
    adminToken,
    adminGet,
    gatewayFetch,
    progress,
    edgeStatementKey,
    appIdOf: backend.appIdOf,
    orderProbe,
    repeat: (calls) => repeats(baseUrl, calls, gatewayFetch, executes),
    instances,
  });

  // 4. Calendars and cron.
  await calendars(adminGet);
  await cron(adminGet, waitCronMinutes);

  // 5. The table.
  const failed = rows.filter((r) => r.result === 'FAILED').length;
  const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ');
  console.log(`## Real-Medplum lane: Medplum ${version}, ${startedAt.toISOString()}\n`);
  console.log(
    `${rows.length} rows: ${rows.filter((r) => r.result === 'ok' || r.result === 'held').length} ok or held, ${failed} FAILED, ${rows.filter((r) => r.result === 'not reached').length} not reached, ${rows.filter((r) => r.result === 'pending').length} pending.\n`,
  );
  console.log('| step | result | detail |');
  console.log('|---|---|---|');
  for (const r of rows) {
    console.log(`| ${cell(r.step)} | ${r.result === 'FAILED' ? '**FAILED**' : r.result} | ${cell(r.detail)} |`);
  }
  if (values['medplum-log'] && journeyError === undefined) {
    await printRoundTrips(adminGet, values['medplum-log'], new Date(journeyStart), new Date(journeyEnd));
  }
  process.exitCode = failed > 0 ? 1 : 0;
}

/**
 * Where the journey ends (its last steps, since 11517dc): her visit fulfilled by the platform once its
 * practitioner finished every segment, and the next visit of her plan to book. As the admin reads them
 * (extended: who wrote the Appointment's last version) and as she reads them through the gateway.
 */
async function journeyEnding(
  baseUrl: string,
  adminToken: string,
  gatewayFetch: typeof fetch,
  progress: JourneyProgress,
): Promise<void> {
  const read = (path: string) =>
    medplumCall(baseUrl, adminToken, 'GET', `fhir/R4/${path}`, { waitOutQuota: true, extended: true });
  const hers = async (path: string) =>
    answerOf(
      await gatewayFetch(`${PUBLIC_URL}${path}`, { headers: { authorization: `Bearer ${progress.token ?? ''}` } }),
    );
  const fulfilledStep =
    "journey: its visit fulfilled (as the admin reads it: the Appointment fulfilled, every segment finished by the visit's practitioner, the visit's request (Appointment.basedOn) completed by the visit-completion Bot; GET /v1/appointments/{id} through the gateway: fulfilled)";
  const nextStep =
    'journey: the next visit to book (a ready schedule-visit Task of hers, restriction.period.start about a month on, based on her CarePlan; in GET /v1/tasks with notBefore that start)';
  if (!progress.appointment || !progress.nextVisitTask) {
    row(fulfilledStep, 'FAILED', 'the journey reported no fulfilled visit or no next visit task');
    row(nextStep, 'FAILED', 'the journey reported no next visit task');
    return;
  }
  try {
    const bot = entriesOf(
      (await read(`Bot?identifier=${encodeURIComponent(`${SYSTEMS.bots}|visit-completion`)}`)).body,
    )[0] as Bot | undefined;
    const appointment = (await read(progress.appointment)).body as Appointment | undefined;
    const requestRef = appointment?.basedOn?.[0]?.reference;
    const request = requestRef ? ((await read(requestRef)).body as ServiceRequest | undefined) : undefined;
    const segments = entriesOf(
      (await read(`Encounter?appointment=${progress.appointment}&_count=50`)).body,
    ) as Encounter[];
    const seen = await hers(`/v1/appointments/${progress.appointment.split('/')[1]}`);
    const view = seen.body as { status?: string; segments?: { position: number; status: string }[] } | undefined;
    const good =
      appointment?.status === 'fulfilled' &&
      Boolean(bot?.id) &&
      request?.status === 'completed' &&
      request.meta?.author?.reference === `Bot/${bot?.id}` &&
      segments.length > 0 &&
      segments.every((e) => e.status === 'finished' && e.meta?.author?.reference === progress.practitioner) &&
      seen.status === 200 &&
      view?.status === 'fulfilled';
    row(
      fulfilledStep,
      good ? 'ok' : 'FAILED',
      `${progress.appointment}@${appointment?.meta?.versionId} ${appointment?.status}, its last version written by ${appointment?.meta?.author?.reference ?? 'nobody'}; ${requestRef ?? 'no request'} ${request?.status ?? ''}, written by ${request?.meta?.author?.reference ?? 'nobody'}${request?.meta?.author?.reference === `Bot/${bot?.id}` ? ' (the visit-completion bot)' : ` (the visit-completion bot is Bot/${bot?.id})`}; segments ${segments.map((e) => `Encounter/${e.id} ${e.status} by ${e.meta?.author?.reference}`).join(', ')} (the visit's practitioner: ${progress.practitioner}); her GET /v1/appointments/{id}: ${describe(seen)}${view?.status ? `, ${view.status}; ${(view.segments ?? []).map((s) => `${s.position} ${s.status}`).join(', ')}` : ''}`,
    );
  } catch (err) {
    row(fulfilledStep, 'FAILED', `the call threw: ${message(err)}`);
  }
  try {
    const task = (await read(progress.nextVisitTask)).body as Task | undefined;
    const start = task?.restriction?.period?.start;
    const days = start ? (Date.parse(start) - Date.now()) / DAY : Number.NaN;
    const listed = await hers('/v1/tasks');
    const shown = ((listed.body as { tasks?: PatientTask[] } | undefined)?.tasks ?? []).find(
      (t) => t.task === progress.nextVisitTask,
    );
    const good =
      task?.status === 'ready' &&
      task.code?.coding?.some((c) => c.system === SYSTEMS.taskKind && c.code === 'schedule-visit') === true &&
      task.for?.reference === progress.patient &&
      task.basedOn?.some((b) => b.reference === progress.carePlan) === true &&
      days > 27 &&
      days < 32 &&
      shown?.notBefore === start;
    row(
      nextStep,
      good ? 'ok' : 'FAILED',
      `${progress.nextVisitTask} ${task?.status}, ${task?.code?.coding?.map((c) => c.code).join(', ')}, for ${task?.for?.reference}, basedOn ${task?.basedOn?.map((b) => b.reference).join(', ')} (her plan: ${progress.carePlan}), restriction.period.start ${start} (${days.toFixed(1)} days on); her GET /v1/tasks: ${describe(listed)}, ${shown ? `${shown.task} ${shown.kind}, notBefore ${shown.notBefore}` : 'NOT listing it'}`,
    );
  } catch (err) {
    row(nextStep, 'FAILED', `the call threw: ${message(err)}`);
  }
}

/** A workflow call the journey made that repeats finished work when made again. */
interface MadeCall {
  method: string;
  url: string;
  authorization: string;
  body: string;
}

/**
 * The workflow routes whose repeats the gateway answers from the patient's own reads (src/medplum/
 * finished-work.ts), and the bot input each route sends (src/routes/): the bot's own answer to the same
 * call is what the repeat must equal.
 */
const REPEATABLE: { method: string; path: RegExp; bot: string; input: (id: string, body: object) => object }[] = [
  {
    method: 'POST',
    path: /^\/v1\/tasks\/([^/]+)\/complete$/,
    bot: 'complete-task',
    input: (id, body) => ({ task: id, ...body }),
  },
  {
    method: 'POST',
    path: /^\/v1\/orders\/([^/]+)\/decisions$/,
    bot: 'decide-order',
    input: (id, body) => ({ order: id, ...body }),
  },
  { method: 'POST', path: /^\/v1\/assessments()$/, bot: 'start-assessment', input: (_, body) => body },
  {
    method: 'POST',
    path: /^\/v1\/appointments()$/,
    bot: 'appointments',
    input: (_, body) => ({ operation: 'book', ...body }),
  },
  ...(['reschedule', 'cancel', 'encounter'] as const).map((operation) => ({
    method: 'POST',
    path: new RegExp(`^/v1/appointments/([^/]+)/${operation}$`),
    bot: 'appointments',
    input: (id: string, body: object) => ({ operation, appointment: id, ...body }),
  })),
  {
    method: 'POST',
    path: /^\/v1\/enrollments()$/,
    bot: 'enrollment',
    input: (_, body) => ({ operation: 'enroll', ...body }),
  },
  {
    method: 'POST',
    path: /^\/v1\/enrollments\/([^/]+)\/activate$/,
    bot: 'enrollment',
    input: (id) => ({ operation: 'activate', carePlan: id }),
  },
  {
    method: 'DELETE',
    path: /^\/v1\/enrollments\/([^/]+)$/,
    bot: 'enrollment',
    input: (id) => ({ operation: 'unenroll', carePlan: id }),
  },
];

const repeatableOf = (method: string, path: string) =>
  REPEATABLE.filter((r) => r.method === method)
    .map((r) => ({ ...r, id: r.path.exec(path)?.[1] }))
    .find((r) => r.id !== undefined);

/**
 * Each repeatable call of the journey made again through the gateway: 200, no bot run, and the same
 * answer as the bot's own to the same call now (run directly, with her token), the bot's `ok` and
 * `created` aside. The state may have moved on since (a visit booked, then moved and started), so the
 * bot's answer now, not the first one, is the measure.
 */
async function repeats(
  baseUrl: string,
  made: MadeCall[],
  gatewayFetch: typeof fetch,
  executes: { count: number },
): Promise<void> {
  const seen = new Set<string>();
  for (const call of made) {
    const key = `${call.method} ${call.url} ${call.body}`;
    if (seen.has(key)) {
      continue;
    }
    seen.add(key);
    const path = new URL(call.url).pathname;
    const route = repeatableOf(call.method, path);
    if (!route) {
      continue;
    }
    const before = executes.count;
    const again = await answerOf(
      await gatewayFetch(
        new Request(call.url, {
          method: call.method,
          headers: {
            authorization: call.authorization,
            ...(call.body ? { 'content-type': 'application/json' } : {}),
          },
          body: call.body || undefined,
        }),
      ),
    );
    const runs = executes.count - before;
    const input = route.input(route.id ?? '', call.body ? (JSON.parse(call.body) as object) : {});
    const token = call.authorization.replace(/^Bearer /, '');
    const bot = await medplumCall(
      baseUrl,
      token,
      'POST',
      `fhir/R4/Bot/$execute?identifier=${encodeURIComponent(`${SYSTEMS.bots}|${route.bot}`)}`,
      { body: input },
    );
    const { ok: _ok, created: _created, ...botAnswer } = (bot.body ?? {}) as Record<string, unknown>;
    const refusal = (bot.body as { ok?: boolean; error?: BotError } | undefined)?.error;
    if (bot.status === 200 && botAnswer.error !== undefined && refusal) {
      // The state moved on so that the call repeats no finished work (a segment start once the journey's
      // visit is fulfilled): the bot refuses it now, and the gateway must answer that refusal (it asks the bot).
      const error = errorOf(again);
      const { requestId: _requestId, ...details } = error.details ?? {};
      const sameRefusal =
        again.status === refusal.status &&
        error.code === refusal.code &&
        error.message === refusal.message &&
        canonicalJson(details) === canonicalJson(refusal.details ?? {});
      row(
        `repeat: ${call.method} ${path.replace(/[0-9a-f-]{36}/g, '{id}')} again, once the state moved on (the bot refuses it now): the gateway answers the bot's refusal`,
        sameRefusal ? 'ok' : 'FAILED',
        `${again.status} ${error.code ?? ''} "${error.message ?? ''}" ${JSON.stringify(details)}, ${runs} bot run${runs === 1 ? '' : 's'}; the bot's own answer now ${sameRefusal ? 'the same refusal' : `differs: ${bot.text.slice(0, 200)} vs ${again.text.slice(0, 200)}`}`,
      );
      continue;
    }
    const same = canonicalJson(again.body) === canonicalJson(botAnswer);
    const step = `repeat: ${call.method} ${path.replace(/[0-9a-f-]{36}/g, '{id}')} again, answered by the gateway from her reads`;
    row(
      step,
      again.status === 200 && runs === 0 && same ? 'ok' : 'FAILED',
      `${again.status}, ${runs} bot run${runs === 1 ? '' : 's'}; the bot's own answer now ${same ? 'the same' : `differs: ${bot.text.slice(0, 200)} vs ${again.text.slice(0, 200)}`}`,
    );
  }
}

/** The gateway instances of the lane, in their round-robin order. */
const GATEWAY_NAMES = ['A', 'B'] as const;

/** One gateway instance of the lane: its own `createApp`, a fetch that calls it, its own bot-run count. */
interface GatewayInstance {
  name: string;
  fetch: typeof fetch;
  /** Its `Bot/$execute` calls to Medplum. */
  executes: { count: number };
}

/**
 * A gateway instance as a process runs one: `createApp` with these settings over Medplum at `baseUrl`.
 * Nothing is shared with another instance but Medplum itself (no module-level state in src/app.ts or
 * src/medplum/: each instance has its own catalog cache, admission counters and token verifier). Its
 * `Bot/$execute` calls are counted on it and in `total`.
 */
function gatewayInstance(
  name: string,
  baseUrl: string,
  total: { count: number },
  deps: Omit<AppDeps, 'medplum'>,
): GatewayInstance {
  const executes = { count: 0 };
  const app = createApp({
    ...deps,
    medplum: {
      baseUrl,
      fetch: ((input: RequestInfo | URL, init?: RequestInit) => {
        if ((input instanceof Request ? input.url : input.toString()).includes('/Bot/$execute')) {
          executes.count++;
          total.count++;
        }
        return fetch(input, init);
      }) as typeof fetch,
    },
  });
  return {
    name,
    executes,
    fetch: ((input: RequestInfo | URL, init?: RequestInit) => app.fetch(new Request(input, init))) as typeof fetch,
  };
}

/** A call made through the lane's round robin: the instance that served it, and what it answered. */
interface ServedCall {
  instance: string;
  method: string;
  path: string;
  status: number;
}

const N_GATEWAYS = 'N gateways';
const N_GATEWAYS_REPEATS_STEP = `${N_GATEWAYS} (a): the repeats of her finished work were served alternately by instances A and B too (each by the other instance than the one before)`;

/** How calls were shared: per instance, its count and statuses (`A 23 (200 x15, 201 x8)`). */
function servedBy(calls: ServedCall[], instances: GatewayInstance[]): string {
  return instances
    .map((instance) => {
      const mine = calls.filter((c) => c.instance === instance.name);
      const statuses = new Map<number, number>();
      for (const c of mine) {
        statuses.set(c.status, (statuses.get(c.status) ?? 0) + 1);
      }
      const histogram = [...statuses.entries()]
        .sort(([a], [b]) => a - b)
        .map(([status, n]) => `${status} x${n}`)
        .join(', ');
      return `${instance.name} ${mine.length}${histogram ? ` (${histogram})` : ''}`;
    })
    .join('; ');
}

/** Calls shared alike: every instance served some, counts within one of each other, and each call by the other instance than the one before. */
function sharedAlike(calls: ServedCall[], instances: GatewayInstance[]): { good: boolean; why: string } {
  const counts = instances.map((instance) => calls.filter((c) => c.instance === instance.name).length);
  const alternate = calls.findIndex((c, i) => i > 0 && c.instance === calls[i - 1].instance);
  const spread = Math.max(...counts) - Math.min(...counts);
  const good = counts.every((n) => n > 0) && spread <= 1 && alternate === -1;
  const why =
    alternate === -1
      ? 'each call served by the other instance than the one before'
      : `calls ${alternate} and ${alternate + 1} both served by ${calls[alternate].instance} (${calls[alternate].method} ${calls[alternate].path})`;
  return { good, why: `${why}; counts differ by ${spread}` };
}

/**
 * N gateways (a): the journey's patient calls (and the lane's probe of her order, made in the journey)
 * were served alternately by the two instances, and the journey, which checks every answer (it throws on
 * an unexpected one), went through.
 */
function nGatewaysJourney(
  calls: ServedCall[],
  instances: GatewayInstance[],
  journeyError: unknown,
  steps: number,
): void {
  const { good, why } = sharedAlike(calls, instances);
  row(
    `${N_GATEWAYS} (a): the journey's patient calls through the gateway (with the lane's probe of her order made within it: her GET /v1/tasks and a decision it expects refused, 422) were served alternately by two gateway instances (A and B: two createApp over this Medplum, each with its own caches, admission counters and token-key cache), every instance some, the counts within one, every answer as the journey expected`,
    good && journeyError === undefined ? 'ok' : 'FAILED',
    `${calls.length} calls: ${servedBy(calls, instances)}; ${why}; ${journeyError === undefined ? `the journey checked each answer and went through its ${steps} steps` : `the journey stopped at step ${steps}: ${message(journeyError)}`}; the instances in call order: ${calls.map((c) => c.instance).join('')}`,
  );
}

/** N gateways (a), the repeats: the `repeat:` rows' gateway calls were alternately served too. */
function nGatewaysRepeats(calls: ServedCall[], instances: GatewayInstance[]): void {
  const { good, why } = sharedAlike(calls, instances);
  row(
    N_GATEWAYS_REPEATS_STEP,
    good ? 'ok' : 'FAILED',
    `${calls.length} calls: ${servedBy(calls, instances)}; ${why}; the instances in call order: ${calls.map((c) => c.instance).join('')}`,
  );
}

/** A gateway answer's body without its request ids (each call has its own). */
function withoutRequestIds(value: unknown): unknown {
  if (Array.isArray(value)) {
    return value.map(withoutRequestIds);
  }
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([key]) => key !== 'requestId')
        .map(([key, inner]) => [key, withoutRequestIds(inner)]),
    );
  }
  return value;
}

/**
 * N gateways (b): the journey's finished workflow calls (task completions, the order's decisions, the
 * assessment start, the booking, the reschedule) made again through instance A and then through instance
 * B: the same answer (status and body but request ids), 200, and neither instance made a `Bot/$execute`
 * (each answered the repeat from her own reads, src/medplum/finished-work.ts). The segment start is left
 * out: once her visit is fulfilled the bot refuses it, and the gateway asks the bot for that refusal.
 */
async function acrossInstances(made: MadeCall[], instances: GatewayInstance[]): Promise<void> {
  const seen = new Set<string>();
  let index = 0;
  for (const call of made) {
    const key = `${call.method} ${call.url} ${call.body}`;
    const path = new URL(call.url).pathname;
    if (seen.has(key) || !repeatableOf(call.method, path) || /\/encounter$/.test(path)) {
      continue;
    }
    seen.add(key);
    index++;
    const template = path.replace(/[0-9a-f-]{36}/g, '{id}');
    const step = `${N_GATEWAYS} (b): the journey's finished call ${index}, ${call.method} ${template}, again through instance A and through instance B: 200 from each, the same answer (status and body but request ids), no Bot/$execute by either`;
    try {
      const answers: { instance: string; answer: Answer; runs: number }[] = [];
      for (const instance of instances) {
        const before = instance.executes.count;
        const answer = await answerOf(
          await instance.fetch(
            new Request(call.url, {
              method: call.method,
              headers: {
                authorization: call.authorization,
                ...(call.body ? { 'content-type': 'application/json' } : {}),
              },
              body: call.body || undefined,
            }),
          ),
        );
        answers.push({ instance: instance.name, answer, runs: instance.executes.count - before });
      }
      const bodies = answers.map((a) => canonicalJson(withoutRequestIds(a.answer.body)));
      const same =
        bodies.every((b) => b === bodies[0]) && answers.every((a) => a.answer.status === answers[0].answer.status);
      const good = same && answers.every((a) => a.answer.status === 200 && a.runs === 0);
      row(
        step,
        good ? 'ok' : 'FAILED',
        `${answers.map((a) => `${a.instance}: ${gatewayDescribe(a.answer)}, ${a.runs} bot run${a.runs === 1 ? '' : 's'}`).join('; ')}; ${same ? `the same answer (${bodies[0].length} characters: ${bodies[0].slice(0, 160)}${bodies[0].length > 160 ? '…' : ''})` : `answers differ: ${answers.map((a) => `${a.instance} ${a.answer.text.slice(0, 200)}`).join(' vs ')}`}`,
      );
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  if (index === 0) {
    row(
      `${N_GATEWAYS} (b): her finished workflow calls again`,
      'FAILED',
      'the journey made no repeatable workflow call',
    );
  }
}

/** A bot's refusal as data (`{ok: false, error}`). */
interface BotError {
  status?: number;
  code?: string;
  message?: string;
  details?: Record<string, unknown>;
}

/** The journey's server time on a real Medplum stays within this (what she waits for, all steps together). */
const JOURNEY_SERVER_MS_TARGET = 2_000;

/**
 * With `--medplum-log` (Medplum's log, `logRequests` on): each bot run's sequential round trips over the
 * journey, and the server time of the journey's own calls (scripts/round-trips.ts). After the table: they
 * are figures, not guarantees, and never fail the lane.
 */
async function printRoundTrips(
  adminGet: (path: string) => Promise<Answer>,
  logPath: string,
  from: Date,
  to: Date,
): Promise<void> {
  // Medplum writes a line when the response closes: give the last ones a moment.
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const lines = servedLines(logPath, from, new Date(to.getTime() + 5_000));
  const bots = entriesOf((await adminGet('fhir/R4/Bot?_count=100')).body) as Bot[];
  const audits = entriesOf(
    (
      await adminGet(
        `fhir/R4/AuditEvent?date=ge${new Date(from.getTime() - 2_000).toISOString()}&_count=1000&_sort=-_lastUpdated`,
      )
    ).body,
  ) as AuditEvent[];
  const runs = botRunsOf(lines, bots, audits);
  const journeyLines = lines.filter((l) => l.start <= to.getTime());
  const serverMs = topLevelServerMs(journeyLines);
  console.log('\n## Round trips per bot run on this Medplum (its request log over the journey)\n');
  if (lines.length === 0) {
    console.log(`No "Request served" line in ${logPath} over the journey: is Medplum's \`logRequests\` on?`);
    return;
  }
  console.log(roundTripTable(roundTripsByBot(runs)));
  const topLevel = journeyLines.filter((l) => !l.profile?.startsWith('Bot/')).length;
  console.log(
    `\nthe whole journey on this Medplum: ${topLevel} calls of its own (patient, clinician, sign-in, the lane's admin), ${serverMs} ms of server time (target <= ${JOURNEY_SERVER_MS_TARGET} ms: ${serverMs <= JOURNEY_SERVER_MS_TARGET ? 'met' : 'NOT MET'}); ${runs.length} bot runs, ${runs.reduce((n, r) => n + r.requests.length, 0)} bot requests`,
  );
}

const RXNORM = 'http://www.nlm.nih.gov/research/umls/rxnorm';

/**
 * The precondition of the mitigation rows: an active order of spironolactone (RxNorm 9997) for the
 * journey patient, written by the project admin in her tenant before her review, so that the eligibility
 * engine finds the lisinopril interaction (potassium-sparing-diuretic) and records a DetectedIssue. The
 * journey selects amlodipine, which the order does not concern. Never throws: a failure is a row.
 */
async function spironolactoneOrder(baseUrl: string, adminToken: string, patient: string): Promise<void> {
  const step = 'precondition: an active spironolactone order (RxNorm 9997) for the journey patient, before her review';
  try {
    const read = await medplumCall(baseUrl, adminToken, 'GET', `fhir/R4/${patient}`, { waitOutQuota: true });
    const accounts = (read.body as Resource | undefined)?.meta?.accounts;
    const written = await medplumCall(baseUrl, adminToken, 'POST', 'fhir/R4/MedicationRequest', {
      waitOutQuota: true,
      body: {
        resourceType: 'MedicationRequest',
        ...(accounts?.length ? { meta: { accounts } } : {}),
        status: 'active',
        intent: 'order',
        subject: { reference: patient },
        medicationCodeableConcept: {
          coding: [{ system: RXNORM, code: '9997', display: 'spironolactone' }],
          text: 'spironolactone',
        },
      },
    });
    row(
      step,
      written.status === 201 ? 'ok' : 'FAILED',
      `${describe(written)}, written by the admin, in ${accounts?.map((a) => a.reference).join(', ') || 'no account'}`,
    );
  } catch (err) {
    row(step, 'FAILED', message(err));
  }
}

interface Person {
  who: string;
  token: string;
  profile: string;
}

/** Signs a demo person in through Medplum's own login (email and password, then the code). */
async function signIn(baseUrl: string, projectId: string, who: string, email: string): Promise<Person> {
  const client = new MedplumClient({ baseUrl, cacheTime: 0 });
  const login = await client.startLogin({ email, password: DEMO_PASSWORD, projectId });
  if (!login.code) {
    throw new Error(`${email}: Medplum asked for more than a password`);
  }
  await client.processCode(login.code);
  const profile = client.getProfile();
  return { who, token: client.getAccessToken() as string, profile: `${profile?.resourceType}/${profile?.id}` };
}

/** A new patient registered through a tenant's app (`auth/newuser` -> `auth/newpatient`), never homed. */
async function register(baseUrl: string, projectId: string, clientId: string): Promise<Person> {
  const client = new MedplumClient({ baseUrl, cacheTime: 0 });
  const user = await client.startNewUser({
    firstName: 'Nina',
    lastName: 'Newcomer',
    email: `newcomer.${Date.now()}@example.com`,
    password: 'a long enough lane password',
    projectId,
    clientId,
    recaptchaToken: '',
  });
  const registered = await client.startNewPatient({ login: user.login, projectId });
  await client.processCode(registered.code as string);
  const profile = client.getProfile();
  return {
    who: 'a new patient, not yet homed',
    token: client.getAccessToken() as string,
    profile: `${profile?.resourceType}/${profile?.id}`,
  };
}

interface AttackContext {
  baseUrl: string;
  projectId: string;
  adminToken: string;
  adminGet: (path: string) => Promise<Answer>;
  gatewayFetch: typeof fetch;
  progress: JourneyProgress;
  edgeStatementKey: string;
  /** A demo tenant's patient app (found by provisioning key), to register a new patient through. */
  appIdOf: (tenantKey: string) => string;
  /** What she read of the journey's order just before it decided it (undefined: it decided none). */
  orderProbe?: OrderProbe;
  /** Makes workflow calls again through the gateway and compares them with the bots' own answers (`repeats`). */
  repeat: (made: MadeCall[]) => Promise<void>;
  /** The gateway instances behind `gatewayFetch` (its round robin), each to call directly (N gateways). */
  instances: GatewayInstance[];
}

async function attacks(ctx: AttackContext): Promise<void> {
  const { baseUrl, projectId, progress } = ctx;
  const people = new Map<string, Person>();
  for (const [key, who, email] of [
    ['alice', 'alice (Northwind patient)', demoEmail('alice', 'northwind')],
    ['bob', 'bob (Northwind patient)', demoEmail('bob', 'northwind')],
    ['carol', 'carol (Southridge patient)', demoEmail('carol', 'southridge')],
    ['northwind-clinician', 'the Northwind clinician', demoEmail('clinician', 'northwind')],
    ['southridge-clinician', 'the Southridge clinician', demoEmail('clinician', 'southridge')],
  ] as const) {
    try {
      people.set(key, await signIn(baseUrl, projectId, who, email));
    } catch (err) {
      row(`sign-in: ${who}`, 'FAILED', message(err));
    }
  }
  if (progress.token && progress.patient) {
    people.set('maya', { who: 'the journey patient', token: progress.token, profile: progress.patient });
  }

  const direct = (person: Person, method: string, path: string, body?: unknown) =>
    medplumCall(baseUrl, person.token, method, `fhir/R4/${path}`, { body });
  const gateway = async (person: Person, path: string) =>
    answerOf(await ctx.gatewayFetch(`${PUBLIC_URL}${path}`, { headers: { authorization: `Bearer ${person.token}` } }));
  const viaGateway = (person: Person, path: string) => gateway(person, `/v1/fhir/${path}`);

  /**
   * One attack: `attacker` does `call`; held when Medplum (or the gateway) refuses it (403/404), or, for a
   * search, when nothing of `forbidden` comes back, or, for a write a writeConstraint or the validator
   * must stop (`rejected`), when it answers 400/403. `needs.missing` says why a target may be absent.
   */
  const attack = async (
    what: string,
    needs: { attacker?: string; target?: string; missing?: string },
    call: (attacker: Person, target: string) => Promise<Answer>,
    expect: 'refused' | 'nothing' | 'rejected' = 'refused',
  ): Promise<void> => {
    const attacker = needs.attacker ? people.get(needs.attacker) : undefined;
    if (!attacker || !needs.target) {
      row(
        `attack: ${what}`,
        'not reached',
        !attacker ? 'the attacker could not sign in' : (needs.missing ?? 'the journey did not make it'),
      );
      return;
    }
    try {
      const answer = await call(attacker, needs.target);
      const targetId = needs.target.split('/').pop() as string;
      const leaked =
        expect === 'nothing' && answer.status === 200 && entriesOf(answer.body).some((r) => r.id === targetId);
      const held =
        (expect === 'rejected' ? REJECTED : REFUSED).includes(answer.status) ||
        (expect === 'nothing' && answer.status === 200 && !leaked);
      const expected = { refused: '403/404', nothing: 'nothing of it', rejected: '403/400' }[expect];
      row(`attack: ${what}`, held ? 'held' : 'FAILED', `expected ${expected}, got ${describe(answer)}`);
    } catch (err) {
      row(`attack: ${what}`, 'FAILED', `the call threw: ${message(err)}`);
    }
  };
  /** What must still work, so that the refusals above are refusals of something real. */
  const control = async (
    what: string,
    person: Person | undefined,
    target: string | undefined,
    call: () => Promise<Answer>,
    expected: { status?: number; missing?: string } = {},
  ): Promise<Answer | undefined> => {
    if (!person || !target) {
      row(`control: ${what}`, 'not reached', !person ? 'could not sign in' : (expected.missing ?? 'nothing to read'));
      return undefined;
    }
    const status = expected.status ?? 200;
    try {
      const answer = await call();
      row(
        `control: ${what}`,
        answer.status === status ? 'ok' : 'FAILED',
        `expected ${status}, got ${describe(answer)}`,
      );
      return answer;
    } catch (err) {
      row(`control: ${what}`, 'FAILED', `the call threw: ${message(err)}`);
      return undefined;
    }
  };

  const binary = progress.document; // Binary/<id>
  const patient = progress.patient;
  const response = progress.questionnaireResponse || undefined;
  const observation = patient
    ? entriesOf((await ctx.adminGet(`fhir/R4/Observation?subject=${patient}&_count=1`)).body)[0]
    : undefined;
  const observationRef = observation ? `Observation/${observation.id}` : undefined;
  const maya = people.get('maya');

  // The journey patient's uploaded document (Binary.securityContext = her Patient): hers through
  // GET /v1/documents/{id} alone; nobody reads a Binary by id on Medplum (5.0.10 does not check its context).
  const documentPath = `/v1/documents/${binary?.split('/')[1]}`;
  await control('the journey patient reads her own document through GET /v1/documents/{id}', maya, binary, () =>
    gateway(maya as Person, documentPath),
  );
  // The record plane honours `_summary=count` (fb45500): no page size of the gateway's own after it, which
  // Medplum would read as a request for a page.
  const countStep =
    'control: the journey patient counts her Patient through the gateway (GET /v1/fhir/Patient?_summary=count): total 1, no entries';
  if (!maya) {
    row(countStep, 'not reached', 'the journey did not make it');
  } else {
    try {
      const counted = await viaGateway(maya, 'Patient?_summary=count');
      const bundle = counted.body as Bundle | undefined;
      const entries = bundle?.entry?.length ?? 0;
      const good = counted.status === 200 && bundle?.resourceType === 'Bundle' && bundle.total === 1 && entries === 0;
      row(
        countStep,
        good ? 'ok' : 'FAILED',
        `expected 200, a Bundle with total 1 and no entry; got ${describe(counted)}${bundle?.resourceType === 'Bundle' ? `, type ${bundle.type}, total ${bundle.total ?? 'absent'}, ${entries} entr${entries === 1 ? 'y' : 'ies'}` : ''}`,
      );
    } catch (err) {
      row(countStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  for (const attacker of ['bob', 'carol']) {
    const who = people.get(attacker)?.who ?? attacker;
    await attack(`${who} reads the journey patient's uploaded Binary directly`, { attacker, target: binary }, (a, t) =>
      direct(a, 'GET', t),
    );
    await attack(
      `${who} reads the journey patient's uploaded Binary through GET /v1/fhir/Binary/{id}`,
      { attacker, target: binary },
      (a, t) => viaGateway(a, t),
    );
    await attack(
      `${who} reads the journey patient's document through GET /v1/documents/{id}`,
      { attacker, target: binary },
      (a) => gateway(a, documentPath),
    );
  }
  await attack(
    "the Southridge clinician reads the journey patient's uploaded Binary directly",
    { attacker: 'southridge-clinician', target: binary },
    (a, t) => direct(a, 'GET', t),
  );

  // Another patient's record.
  for (const [attacker, target, label] of [
    ['bob', patient, "the journey patient's Patient"],
    ['carol', patient, "the journey patient's Patient"],
    ['bob', response, "the journey patient's QuestionnaireResponse"],
    ['carol', response, "the journey patient's QuestionnaireResponse"],
    ['bob', observationRef, "the journey patient's Observation"],
    ['carol', observationRef, "the journey patient's Observation"],
  ] as const) {
    const who = people.get(attacker)?.who ?? attacker;
    await attack(`${who} reads ${label} directly`, { attacker, target }, (a, t) => direct(a, 'GET', t));
    await attack(`${who} reads ${label} through the gateway`, { attacker, target }, (a, t) => viaGateway(a, t));
  }
  const alice = people.get('alice');
  const aliceWeight = alice
    ? entriesOf((await ctx.adminGet(`fhir/R4/Observation?subject=${alice.profile}&_count=1`)).body)[0]
    : undefined;
  await attack(
    "bob (Northwind patient) reads alice's Patient directly",
    { attacker: 'bob', target: alice?.profile },
    (a, t) => direct(a, 'GET', t),
  );
  await attack(
    "bob (Northwind patient) searches alice's Observations (Observation?subject=)",
    { attacker: 'bob', target: aliceWeight ? `Observation/${aliceWeight.id}` : undefined },
    (a) => direct(a, 'GET', `Observation?subject=${alice?.profile}`),
    'nothing',
  );
  await attack(
    "carol (Southridge patient) reads alice's body-weight Observation directly",
    { attacker: 'carol', target: aliceWeight ? `Observation/${aliceWeight.id}` : undefined },
    (a, t) => direct(a, 'GET', t),
  );

  // A clinician of the other tenant.
  await control(
    'the Northwind clinician reads the journey patient (her tenant)',
    people.get('northwind-clinician'),
    patient,
    () => direct(people.get('northwind-clinician') as Person, 'GET', patient as string),
  );
  await attack(
    'the Southridge clinician reads the journey patient directly',
    { attacker: 'southridge-clinician', target: patient },
    (a, t) => direct(a, 'GET', t),
  );
  await attack(
    'the Southridge clinician searches the journey patient (Patient?_id=)',
    { attacker: 'southridge-clinician', target: patient },
    (a, t) => direct(a, 'GET', `Patient?_id=${t.split('/')[1]}`),
    'nothing',
  );
  await attack(
    "the Southridge clinician searches the journey patient's Observations",
    { attacker: 'southridge-clinician', target: observationRef },
    () => direct(people.get('southridge-clinician') as Person, 'GET', `Observation?subject=${patient}`),
    'nothing',
  );

  // The clinician's writes the policy narrows (src/provision/definition.ts, clinician policy).
  // MITIGATION_ONLY: a finding (DetectedIssue) changes only by appending mitigations, each authored by the
  // writer herself (`%profile`); the recorded ones stay. The lane has one clinician per tenant, so "a
  // colleague" is the visit practitioner of the journey's first free slot (a practitioner of her tenant's
  // visit team), else the Southridge clinician.
  const clinician = people.get('northwind-clinician');
  const findings = patient
    ? (entriesOf((await ctx.adminGet(`fhir/R4/DetectedIssue?patient=${patient}&_count=20`)).body) as DetectedIssue[])
    : [];
  const finding =
    findings.find((f) => f.code?.coding?.some((c) => c.code === 'potassium-sparing-diuretic')) ?? findings[0];
  const findingRef = finding ? `DetectedIssue/${finding.id}` : undefined;
  const noFinding = patient
    ? 'no DetectedIssue for the journey patient (see the precondition row)'
    : 'the journey did not make it';
  const colleague = progress.practitioner ?? people.get('southridge-clinician')?.profile;
  const mitigationBy = (author: string, text: string) => ({
    action: { text },
    date: new Date().toISOString(),
    author: { reference: author },
  });
  /** The finding as the clinician reads it now, with `change` applied to its mitigations, PUT back. */
  const mitigate = async (
    person: Person,
    target: string,
    change: (recorded: NonNullable<DetectedIssue['mitigation']>) => DetectedIssue['mitigation'],
  ): Promise<Answer> => {
    const current = await direct(person, 'GET', target);
    if (current.status !== 200) {
      // Not a refusal of the write: the row is FAILED ("the call threw"), never held.
      throw new Error(`she could not read ${target} to write it: ${describe(current)}`);
    }
    const issue = current.body as DetectedIssue;
    return direct(person, 'PUT', target, { ...issue, mitigation: change(issue.mitigation ?? []) });
  };
  await attack(
    `the Northwind clinician records a mitigation in a colleague's name (author ${colleague ?? '?'}) on the journey patient's finding`,
    { attacker: 'northwind-clinician', target: colleague ? findingRef : undefined, missing: noFinding },
    (a, t) => mitigate(a, t, (recorded) => [...recorded, mitigationBy(colleague as string, 'reviewed, proceed')]),
    'rejected',
  );
  const own = await control(
    "the Northwind clinician appends a mitigation of her own to the journey patient's finding",
    clinician,
    findingRef,
    () =>
      mitigate(clinician as Person, findingRef as string, (recorded) => [
        ...recorded,
        mitigationBy((clinician as Person).profile, 'Potassium monitored (lane control)'),
      ]),
    { missing: noFinding },
  );
  const ownVersion = own?.status === 200 ? (own.body as DetectedIssue) : undefined;
  const recorded = ownVersion?.mitigation;
  await attack(
    'the Northwind clinician rewrites the mitigation she recorded (action and author changed)',
    { attacker: 'northwind-clinician', target: recorded?.length ? findingRef : undefined, missing: noFinding },
    (a, t) =>
      mitigate(a, t, (now) =>
        now.map((m, i) =>
          i === now.length - 1 ? { ...m, action: { text: 'reviewed, proceed' }, author: { reference: colleague } } : m,
        ),
      ),
    'rejected',
  );
  if (findingRef && recorded) {
    const after = (await ctx.adminGet(`fhir/R4/${findingRef}`)).body as DetectedIssue | undefined;
    const same =
      after?.meta?.versionId === ownVersion?.meta?.versionId &&
      JSON.stringify(after?.mitigation) === JSON.stringify(recorded);
    row(
      'the refused mitigation writes changed nothing',
      same ? 'ok' : 'FAILED',
      `${findingRef}: ${after?.mitigation?.length ?? 0} mitigation(s), by ${after?.mitigation?.map((m) => m.author?.reference).join(', ') || 'nobody'}; version ${after?.meta?.versionId}${same ? ", the control's" : " (NOT the control's)"}`,
    );
  }

  // QUEUE_CREATES: the platform's kinds of task (SYSTEMS.taskKind) are issued by bots only.
  const journeyPatient = patient
    ? ((await ctx.adminGet(`fhir/R4/${patient}`)).body as Resource | undefined)
    : undefined;
  const tenantAccounts = journeyPatient?.meta?.accounts;
  const taskFor = (person: Person, fields: Partial<Task> & Pick<Task, 'status'>): Task => ({
    resourceType: 'Task',
    ...(tenantAccounts?.length ? { meta: { accounts: tenantAccounts } } : {}),
    intent: 'order',
    for: { reference: patient as string },
    owner: { reference: person.profile },
    ...fields,
  });
  const reviewIntake = { coding: [{ system: SYSTEMS.taskKind, code: 'review-intake' }] };
  await attack(
    'the Northwind clinician creates a review-intake Task (SYSTEMS.taskKind), completed, her own, for the journey patient',
    { attacker: 'northwind-clinician', target: patient },
    (a) => direct(a, 'POST', 'Task', taskFor(a, { status: 'completed', code: reviewIntake })),
    'rejected',
  );
  await attack(
    'the Northwind clinician creates a review-intake Task (SYSTEMS.taskKind), ready, her own, for the journey patient',
    { attacker: 'northwind-clinician', target: patient },
    (a) => direct(a, 'POST', 'Task', taskFor(a, { status: 'ready', code: reviewIntake })),
    'rejected',
  );
  await control(
    'the Northwind clinician creates a plain Task (no task kind), ready, her own, for the journey patient',
    clinician,
    patient,
    () =>
      direct(
        clinician as Person,
        'POST',
        'Task',
        taskFor(clinician as Person, { status: 'ready', code: { text: 'Call the patient back (lane control)' } }),
      ),
    { status: 201 },
  );

  // QUEUE_TRANSITIONS and QUEUE_CREATES with `inMyQueues`: a queue's work is claimed, released, edited or
  // added only by a clinician whose membership's `queues` parameter lists the queue. The demo
  // Northwind clinician works the Northwind intake queue; the admin invites a second Northwind clinician
  // who works none (test/support/clinicians.ts freshClinician with `member: false`).
  const byTag = async (type: string, key: string): Promise<Resource | undefined> =>
    entriesOf(
      (await ctx.adminGet(`fhir/R4/${type}?_tag=${encodeURIComponent(`${SYSTEMS.provisioning}|${key}`)}`)).body,
    )[0];
  const northwind = await byTag('Organization', 'org-northwind');
  const intakeQueue = await byTag('CareTeam', 'queue-northwind-intake-review');
  const clinicianPolicy = await byTag('AccessPolicy', 'policy-clinician');
  const queueRef = intakeQueue?.id ? `CareTeam/${intakeQueue.id}` : undefined;
  const northwindRef = northwind?.id ? `Organization/${northwind.id}` : undefined;
  const adminWrite = (method: string, path: string, body: unknown) =>
    medplumCall(baseUrl, ctx.adminToken, method, path, { body, waitOutQuota: true });
  /** A precondition the admin writes: a row of its own, and what was written (undefined if it was not). */
  const adminCreate = async <T extends Resource>(step: string, body: T): Promise<T | undefined> => {
    try {
      const created = await adminWrite('POST', `fhir/R4/${body.resourceType}`, body);
      row(`precondition: ${step}`, created.status === 201 ? 'ok' : 'FAILED', `${describe(created)}, by the admin`);
      return created.status === 201 ? (created.body as T) : undefined;
    } catch (err) {
      row(`precondition: ${step}`, 'FAILED', message(err));
      return undefined;
    }
  };
  const outsiderStep = 'precondition: the admin invites a second Northwind clinician who works no queue (queues {})';
  if (northwindRef && clinicianPolicy?.id) {
    const email = `lane-outsider-${Date.now()}@northwind.example`;
    try {
      const invited = await adminWrite(
        'POST',
        `admin/projects/${projectId}/invite`,
        clinicianInvite({
          firstName: 'Olive',
          lastName: 'Outsider',
          email,
          password: DEMO_PASSWORD,
          policy: `AccessPolicy/${clinicianPolicy.id}`,
          organization: northwindRef,
          queues: [],
        }),
      );
      if (invited.status !== 200 && invited.status !== 201) {
        row(outsiderStep, 'FAILED', `admin/projects/:id/invite: ${describe(invited)}`);
      } else {
        const outsider = await signIn(baseUrl, projectId, 'the Northwind clinician outside the queue', email);
        people.set('outsider', outsider);
        row(outsiderStep, 'ok', `${outsider.profile}, clinician policy, organization ${northwindRef}; signed in`);
      }
    } catch (err) {
      row(outsiderStep, 'FAILED', message(err));
    }
  } else {
    row(outsiderStep, 'FAILED', 'no Northwind Organization or clinician AccessPolicy found by provisioning tag');
  }
  const queued =
    patient && queueRef
      ? await adminCreate<Task>(
          'the admin issues a ready review-intake Task in the Northwind intake queue, for the journey patient',
          {
            resourceType: 'Task',
            ...(tenantAccounts?.length ? { meta: { accounts: tenantAccounts } } : {}),
            status: 'ready',
            intent: 'order',
            priority: 'routine',
            code: reviewIntake,
            description: 'Review the completed intake (lane, made by the admin)',
            for: { reference: patient },
            authoredOn: new Date().toISOString(),
            owner: { reference: queueRef },
          },
        )
      : undefined;
  const queuedRef = queued?.id ? `Task/${queued.id}` : undefined;
  const noQueued = patient
    ? 'the admin could not issue the queue task (see the precondition row)'
    : 'the journey did not make it';
  const outsider = people.get('outsider');
  await attack(
    "the Northwind clinician outside the queue claims the admin's ready review-intake Task in the Northwind intake queue (owner herself, in-progress)",
    { attacker: 'outsider', target: queuedRef, missing: noQueued },
    (a, t) => direct(a, 'PUT', t, { ...queued, owner: { reference: a.profile }, status: 'in-progress' }),
    'rejected',
  );
  await attack(
    'the Northwind clinician outside the queue adds a note to that queue Task (owner and status unchanged)',
    { attacker: 'outsider', target: queuedRef, missing: noQueued },
    (a, t) => direct(a, 'PUT', t, { ...queued, note: [{ text: 'looked at it (lane attack)' }] }),
    'rejected',
  );
  await attack(
    'the Northwind clinician outside the queue creates a plain Task (no task kind), ready, owned by the Northwind intake queue',
    { attacker: 'outsider', target: patient && queueRef ? queueRef : undefined },
    (a, t) =>
      direct(a, 'POST', 'Task', {
        ...taskFor(a, { status: 'ready', code: { text: 'Call the patient back (lane attack)' } }),
        owner: { reference: t },
      }),
    'rejected',
  );
  // So that her refusals are the queue's: the same Task, owned by herself, is hers to create.
  await control(
    'the Northwind clinician outside the queue creates that plain Task owned by herself instead',
    outsider,
    patient,
    () =>
      direct(
        outsider as Person,
        'POST',
        'Task',
        taskFor(outsider as Person, { status: 'ready', code: { text: 'Call the patient back (lane control)' } }),
      ),
    { status: 201 },
  );
  /** The queue task as the admin reads it now, compared with what it should still be. */
  const queuedNow = async (step: string, expected: Task | undefined, owner: string | undefined, status: string) => {
    if (!queuedRef || !expected) {
      return;
    }
    const now = (await ctx.adminGet(`fhir/R4/${queuedRef}`)).body as Task | undefined;
    const same =
      now?.meta?.versionId === expected.meta?.versionId &&
      now?.owner?.reference === owner &&
      now?.status === status &&
      !now?.note;
    row(
      step,
      same ? 'ok' : 'FAILED',
      `${queuedRef}: ${now?.status}, owner ${now?.owner?.reference}, ${now?.note?.length ?? 0} note(s); version ${now?.meta?.versionId}${same ? ' as expected' : ` (expected ${expected.meta?.versionId}, ${status}, owner ${owner})`}`,
    );
  };
  if (outsider) {
    await queuedNow(
      "the refused writes of the clinician outside the queue changed nothing (the admin's version)",
      queued,
      queueRef,
      'ready',
    );
  }
  const otherQueue =
    queuedRef && northwindRef
      ? await adminCreate<CareTeam>('the admin makes another Northwind queue (a CareTeam no clinician works)', {
          resourceType: 'CareTeam',
          meta: { accounts: [{ reference: northwindRef }] },
          status: 'active',
          name: 'Another Northwind queue (lane)',
          category: [{ coding: [{ system: SYSTEMS.careQueue, code: 'intake-review' }] }],
          managingOrganization: [{ reference: northwindRef }],
        })
      : undefined;
  const claim = await control(
    "the Northwind clinician, who works the queue, claims the admin's queue Task (owner herself, in-progress)",
    clinician,
    queuedRef,
    () =>
      direct(clinician as Person, 'PUT', queuedRef as string, {
        ...queued,
        owner: { reference: (clinician as Person).profile },
        status: 'in-progress',
        executionPeriod: { start: new Date().toISOString() },
      }),
    { missing: noQueued },
  );
  const claimed = claim?.status === 200 ? (claim.body as Task) : undefined;
  await attack(
    `the Northwind clinician, having claimed it, moves it to another queue of her tenant she does not work (${otherQueue?.id ? `CareTeam/${otherQueue.id}` : '?'}, ready)`,
    {
      attacker: 'northwind-clinician',
      target: claimed && otherQueue?.id ? queuedRef : undefined,
      missing: claimed ? 'the admin could not make the other queue' : 'her claim (the control above) failed',
    },
    (a, t) => direct(a, 'PUT', t, { ...claimed, owner: { reference: `CareTeam/${otherQueue?.id}` }, status: 'ready' }),
    'rejected',
  );
  if (claimed) {
    await queuedNow(
      "the refused move changed nothing (the claim's version)",
      claimed,
      clinician?.profile,
      'in-progress',
    );
  }
  const unclaim = await control(
    'the Northwind clinician unclaims it: back to the Northwind intake queue, ready',
    clinician,
    claimed ? queuedRef : undefined,
    () =>
      direct(clinician as Person, 'PUT', queuedRef as string, {
        ...claimed,
        owner: { reference: queueRef },
        status: 'ready',
      }),
    { missing: 'her claim (the control above) failed' },
  );
  if (unclaim?.status === 200) {
    await queuedNow(
      'the queue Task ends where it began: ready, owned by the Northwind intake queue',
      unclaim.body as Task,
      queueRef,
      'ready',
    );
  }

  // Clinician work as forms: who answers an intake review's form decides what eligibility does.
  await workForms(ctx, people, queueRef);

  // Terminology: the clinician policy reads, read-only, the ValueSets and CodeSystems Medplum
  // keeps in its R4 project (MEDPLUM_R4_PROJECT), so that Medplum's app can `ValueSet/$expand` a coded
  // field's binding; her own tenant's catalog stays hers (catalogReads), the other tenant's out of reach,
  // and a patient gains nothing of FHIR's own terminology.
  const TASK_STATUS_VS = 'http://hl7.org/fhir/ValueSet/task-status';
  const TASK_STATUS_CS = 'http://hl7.org/fhir/task-status';
  const expand = (person: Person, url: string, filter?: string) =>
    direct(
      person,
      'GET',
      `ValueSet/$expand?url=${encodeURIComponent(url)}${filter ? `&filter=${encodeURIComponent(filter)}` : ''}`,
    );
  /** The codes of an expansion, nested `contains` included. */
  const codesOf = (answer: Answer): string[] => {
    const codes: string[] = [];
    const walk = (list: ValueSetExpansionContains[] | undefined) => {
      for (const c of list ?? []) {
        if (c.code) {
          codes.push(c.code);
        }
        walk(c.contains);
      }
    };
    const body = answer.body as ValueSet | undefined;
    if (answer.status === 200 && body?.resourceType === 'ValueSet') {
      walk(body.expansion?.contains);
    }
    return codes;
  };
  /** An expansion in a few words: its total and its codes; anything else as `describe` says it. */
  const expansion = (answer: Answer): string => {
    const body = answer.body as ValueSet | undefined;
    if (answer.status !== 200 || body?.resourceType !== 'ValueSet') {
      return describe(answer);
    }
    const codes = codesOf(answer);
    const total = body.expansion?.total === undefined ? '' : `, total ${body.expansion.total}`;
    return `200, an expansion of ${codes.length} code(s)${total}: ${codes.slice(0, 15).join(', ') || 'none'}${codes.length > 15 ? ', …' : ''}`;
  };
  /** A row judged on what came back (not only its status): `judge` says whether it is as it must be. */
  const judged = async (
    kind: 'control' | 'attack',
    what: string,
    person: Person | undefined,
    call: (person: Person) => Promise<Answer>,
    expected: string,
    judge: (answer: Answer) => boolean | Promise<boolean>,
    note: (answer: Answer, pass: boolean) => string | Promise<string> = () => '',
  ): Promise<void> => {
    if (!person) {
      row(`${kind}: ${what}`, 'not reached', 'could not sign in');
      return;
    }
    try {
      const answer = await call(person);
      const pass = await judge(answer);
      const good = kind === 'control' ? 'ok' : 'held';
      row(
        `${kind}: ${what}`,
        pass ? good : 'FAILED',
        `expected ${expected}, got ${expansion(answer)}${await note(answer, pass)}`,
      );
    } catch (err) {
      row(`${kind}: ${what}`, 'FAILED', `the call threw: ${message(err)}`);
    }
  };
  const hasAll = (answer: Answer, codes: string[]) => codes.every((c) => codesOf(answer).includes(c));
  await judged(
    'control',
    `the Northwind clinician expands FHIR's ${TASK_STATUS_VS} (ValueSet/$expand)`,
    clinician,
    (p) => expand(p, TASK_STATUS_VS),
    '200 with ready, in-progress, completed',
    (a) => hasAll(a, ['ready', 'in-progress', 'completed']),
  );
  await judged(
    'control',
    `the Northwind clinician expands ${TASK_STATUS_VS} with filter=prog`,
    clinician,
    (p) => expand(p, TASK_STATUS_VS, 'prog'),
    '200 with in-progress',
    (a) => hasAll(a, ['in-progress']),
  );
  // The tenants' condition catalogs (src/provision/catalog.ts conditionCatalog), found by provisioning tag.
  const northwindCatalog = (await byTag('ValueSet', 'catalog-northwind-conditions')) as ValueSet | undefined;
  const southridgeCatalog = (await byTag('ValueSet', 'catalog-southridge-conditions')) as ValueSet | undefined;
  if (northwindCatalog?.url) {
    const url = northwindCatalog.url;
    // Medplum checks a ValueSet's listed codes against their code system (expand.ts computeExpansion):
    // provisioning writes the catalogs' ICD-10-CM codes as a CodeSystem (catalog.ts catalogCodeSystem,
    // content `example`), which the clinician policy reads (catalogReads('CodeSystem')).
    await judged(
      'control',
      `the Northwind clinician expands her tenant's condition catalog (${url}, version ${northwindCatalog.version})`,
      clinician,
      (p) => expand(p, url),
      '200 with I10',
      (a) => a.status === 200 && hasAll(a, ['I10']),
      // Whether a refusal is the policy's: the project admin's answer to the same expansion.
      async (_a, pass) =>
        pass
          ? ''
          : `; the project admin's same expansion: ${expansion(await medplumCall(baseUrl, ctx.adminToken, 'GET', `fhir/R4/ValueSet/$expand?url=${encodeURIComponent(url)}`, { waitOutQuota: true }))}`,
    );
  } else {
    row(
      "control: the Northwind clinician expands her tenant's condition catalog",
      'not reached',
      'no ValueSet tagged catalog-northwind-conditions',
    );
  }
  if (southridgeCatalog?.url) {
    const url = southridgeCatalog.url;
    await judged(
      'attack',
      `the Northwind clinician expands the Southridge condition catalog (${url})`,
      clinician,
      (p) => expand(p, url),
      '400/403/404, or no codes',
      (a) => [400, 403, 404].includes(a.status) || (a.status >= 200 && a.status < 300 && codesOf(a).length === 0),
    );
  } else {
    row(
      'attack: the Northwind clinician expands the Southridge condition catalog',
      'not reached',
      'no ValueSet tagged catalog-southridge-conditions',
    );
  }
  const patientTerm = people.get('bob');
  await judged(
    'attack',
    `bob (Northwind patient) expands FHIR's ${TASK_STATUS_VS}`,
    patientTerm,
    (p) => expand(p, TASK_STATUS_VS),
    'not 2xx, or no codes',
    (a) => a.status < 200 || a.status >= 300 || codesOf(a).length === 0,
  );
  await judged(
    'attack',
    `bob (Northwind patient) searches FHIR's CodeSystem?url=${TASK_STATUS_CS}`,
    patientTerm,
    (p) => direct(p, 'GET', `CodeSystem?url=${encodeURIComponent(TASK_STATUS_CS)}`),
    '403/404, or an empty Bundle',
    (a) => REFUSED.includes(a.status) || (a.status === 200 && entriesOf(a.body).length === 0),
  );
  await judged(
    'control',
    `the Northwind clinician searches FHIR's CodeSystem?url=${TASK_STATUS_CS}`,
    clinician,
    (p) => direct(p, 'GET', `CodeSystem?url=${encodeURIComponent(TASK_STATUS_CS)}`),
    '200, a Bundle of 1',
    (a) => a.status === 200 && entriesOf(a.body).length === 1,
  );

  // Her own tenant's Organization (a patient's managingOrganization, which Medplum's app reads): the
  // clinician policy's read-only `Organization?_id=%organization.id`; the other tenant's stays out of reach.
  const southridgeOrg = await byTag('Organization', 'org-southridge');
  const southridgeRef = southridgeOrg?.id ? `Organization/${southridgeOrg.id}` : undefined;
  await control(
    "the Northwind clinician reads her own tenant's Organization (Northwind)",
    clinician,
    northwindRef,
    () => direct(clinician as Person, 'GET', northwindRef as string),
    { missing: 'no Organization tagged org-northwind' },
  );
  await attack(
    'the Northwind clinician reads the Southridge Organization',
    { attacker: 'northwind-clinician', target: southridgeRef, missing: 'no Organization tagged org-southridge' },
    (a, t) => direct(a, 'GET', t),
  );
  const orgBefore = northwindRef ? ((await ctx.adminGet(`fhir/R4/${northwindRef}`)).body as Resource) : undefined;
  const orgName = (org: Resource | undefined) => (org as { name?: string } | undefined)?.name;
  await attack(
    "the Northwind clinician renames her own tenant's Organization (PUT, name changed)",
    {
      attacker: 'northwind-clinician',
      target: orgBefore?.id ? northwindRef : undefined,
      missing: 'the admin could not read the Northwind Organization',
    },
    (a, t) => direct(a, 'PUT', t, { ...orgBefore, name: `${orgName(orgBefore)} (renamed by the lane)` }),
    'rejected',
  );
  if (northwindRef && orgBefore?.id) {
    const orgAfter = (await ctx.adminGet(`fhir/R4/${northwindRef}`)).body as Resource | undefined;
    const same = orgAfter?.meta?.versionId === orgBefore.meta?.versionId && orgName(orgAfter) === orgName(orgBefore);
    row(
      'the refused rename changed nothing (the Northwind Organization, read back by the admin)',
      same ? 'ok' : 'FAILED',
      `${northwindRef}: name "${orgName(orgAfter)}", version ${orgAfter?.meta?.versionId}${same ? ' as before' : ` (expected "${orgName(orgBefore)}", version ${orgBefore.meta?.versionId})`}`,
    );
  }

  // Bots: their code, and $execute of a bot patients may not run.
  const botOf = async (key: string): Promise<Bot | undefined> =>
    entriesOf((await ctx.adminGet(`fhir/R4/Bot?identifier=${encodeURIComponent(`${SYSTEMS.bots}|${key}`)}`)).body)[0] as
      | Bot
      | undefined;
  // A real Medplum answers a Bot's code as a presigned storage URL (`<base>storage/<id>/<version>?...`).
  const binaryOf = (url: string | undefined): string | undefined => {
    const id = url?.startsWith('Binary/') ? url.slice(7) : /\/storage\/([\w-]+)\//.exec(url ?? '')?.[1];
    return id ? `Binary/${id.split('/')[0]}` : undefined;
  };
  const completeTask = await botOf('complete-task');
  const code = binaryOf(completeTask?.executableCode?.url);
  const source = binaryOf(completeTask?.sourceCode?.url);
  await control(
    "the admin reads a bot's code Binary (Bot.executableCode.url)",
    { who: 'admin', token: ctx.adminToken, profile: '' },
    code,
    () => medplumCall(baseUrl, ctx.adminToken, 'GET', `fhir/R4/${code}`),
  );
  for (const attacker of ['bob', 'northwind-clinician']) {
    const who = people.get(attacker)?.who ?? attacker;
    await attack(
      `${who} reads the complete-task bot's code Binary (executableCode)`,
      { attacker, target: code },
      (a, t) => direct(a, 'GET', t),
    );
    await attack(
      `${who} reads the complete-task bot's source Binary (sourceCode)`,
      { attacker, target: source },
      (a, t) => direct(a, 'GET', t),
    );
  }
  // A patient may read the bots she runs, but not where their code is (reads.test.ts).
  const patientBot = people.get('bob');
  if (patientBot && completeTask?.id) {
    const answer = await direct(patientBot, 'GET', `Bot/${completeTask.id}`);
    const shows = /executableCode|sourceCode/.test(answer.text);
    row(
      'attack: bob (Northwind patient) reads the complete-task Bot: where its code is',
      shows ? 'FAILED' : 'held',
      `expected no executableCode/sourceCode, got ${describe(answer)}${shows ? ' showing them' : ''}`,
    );
  }
  // GET /v1/agreements/requirements is a read the gateway computes with her own token (082b830): the
  // journey's step 4 and each form case's intake ask it through the gateway; no bot of it is provisioned.
  const requirementsBot = await botOf('agreement-requirements');
  row(
    'no agreement-requirements bot is provisioned (the gateway computes GET /v1/agreements/requirements)',
    requirementsBot ? 'FAILED' : 'ok',
    requirementsBot
      ? `Bot/${requirementsBot.id} has the identifier ${SYSTEMS.bots}|agreement-requirements (a project provisioned before 082b830?)`
      : `no Bot with the identifier ${SYSTEMS.bots}|agreement-requirements`,
  );
  for (const key of ['eligibility', 'compose-offer', 'reconcile', 'materialize-slots', 'sms-opt-out']) {
    const bot = await botOf(key);
    await attack(
      `bob (Northwind patient) runs the ${key} bot ($execute), not a patient's`,
      { attacker: 'bob', target: bot?.id ? `Bot/${bot.id}` : undefined },
      (a, t) => direct(a, 'POST', `${t}/$execute`, {}),
    );
  }

  // Bot-only writes.
  const bob = people.get('bob');
  await attack(
    'bob (Northwind patient) creates a CarePlan for himself directly',
    { attacker: 'bob', target: bob?.profile },
    (a) =>
      direct(a, 'POST', 'CarePlan', {
        resourceType: 'CarePlan',
        status: 'active',
        intent: 'plan',
        subject: { reference: a.profile },
      }),
  );
  await attack(
    'bob (Northwind patient) creates a Consent for himself directly',
    { attacker: 'bob', target: bob?.profile },
    (a) =>
      direct(a, 'POST', 'Consent', {
        resourceType: 'Consent',
        status: 'active',
        scope: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/consentscope', code: 'treatment' }] },
        category: [{ coding: [{ system: 'http://loinc.org', code: '59284-0' }] }],
        patient: { reference: a.profile },
        dateTime: new Date().toISOString(),
      }),
  );
  // Nobody chooses a tenant by sending meta.accounts: Medplum keeps what a non-admin sends whenever it
  // derives none itself (a patient not yet homed, an upload naming no patient).
  const southridge = entriesOf(
    (await ctx.adminGet(`fhir/R4/Organization?_tag=${encodeURIComponent(`${SYSTEMS.provisioning}|org-southridge`)}`))
      .body,
  )[0];
  const elsewhere = southridge?.id ? [{ reference: `Organization/${southridge.id}` }] : undefined;
  try {
    const newcomer = await register(baseUrl, projectId, ctx.appIdOf('northwind'));
    people.set('newcomer', newcomer);
  } catch (err) {
    row('sign-up: a new Northwind patient, not yet homed', 'FAILED', message(err));
  }
  await attack(
    'a new patient, not yet homed, puts herself in Southridge (her Patient with meta.accounts)',
    { attacker: 'newcomer', target: elsewhere ? people.get('newcomer')?.profile : undefined },
    async (a, t) => {
      const own = await direct(a, 'GET', t);
      return direct(a, 'PUT', t, { ...(own.body as object), meta: { accounts: elsewhere } });
    },
  );
  await attack(
    'bob (Northwind patient) files an upload in Southridge (a Binary with meta.accounts)',
    { attacker: 'bob', target: elsewhere ? bob?.profile : undefined },
    (a) =>
      direct(a, 'POST', 'Binary', {
        resourceType: 'Binary',
        contentType: 'application/pdf',
        data: btoa('%PDF-1.7 filed elsewhere'),
        securityContext: { reference: a.profile },
        meta: { accounts: elsewhere },
      }),
  );
  await attack(
    'bob (Northwind patient) reads the Project (its secrets hold the edge key)',
    { attacker: 'bob', target: `Project/${projectId}` },
    (a, t) => direct(a, 'GET', t),
  );
  for (const key of ['bob', 'northwind-clinician']) {
    const person = people.get(key);
    if (!person) {
      continue;
    }
    const answer = await medplumCall(baseUrl, person.token, 'GET', 'auth/me');
    const shows = answer.text.includes(ctx.edgeStatementKey);
    row(
      `attack: ${person.who} reads auth/me: the Project's secrets`,
      answer.status === 200 && !shows ? 'held' : 'FAILED',
      `expected 200 without the edge-statement key, got ${answer.status}${shows ? ' WITH the key' : ''}`,
    );
  }

  await patientBounds(ctx, people);

  // Whom she books with: a schedule-visit task names her tenant's visit team
  // (input `care-team` under SYSTEMS.taskKind), and her policy reads her tenant's visit teams (CareTeam
  // category SYSTEMS.careTeam|visits, in her tenant), never a clinicians' work queue (SYSTEMS.careQueue)
  // nor another tenant's visit team.
  const northwindTeam = await byTag('CareTeam', 'visit-team-northwind');
  const northwindTeamRef = northwindTeam?.id ? `CareTeam/${northwindTeam.id}` : undefined;
  const teamStep =
    "control: the journey patient's schedule-visit task (GET /v1/fhir/Task?code=…|schedule-visit through the gateway) names a care-team (input 'care-team' under SYSTEMS.taskKind): her tenant's visit team";
  let visitTeam: string | undefined;
  if (!maya) {
    row(teamStep, 'not reached', 'the journey did not make it');
  } else {
    try {
      const found = await viaGateway(
        maya,
        `Task?code=${encodeURIComponent(`${SYSTEMS.taskKind}|schedule-visit`)}&_count=20`,
      );
      const tasks = entriesOf(found.body) as Task[];
      const named = tasks.map((t) => ({
        task: t,
        team: t.input?.find((i) => i.type?.coding?.some((c) => c.system === SYSTEMS.taskKind && c.code === 'care-team'))
          ?.valueReference?.reference,
      }));
      visitTeam = named.find((n) => n.team)?.team;
      const teams = [...new Set(named.map((n) => n.team ?? 'none'))];
      const stored = visitTeam
        ? ((await ctx.adminGet(`fhir/R4/${visitTeam}`)).body as CareTeam | undefined)
        : undefined;
      const categories = (stored?.category ?? []).flatMap((c) => c.coding ?? []).map((c) => `${c.system}|${c.code}`);
      const good =
        found.status === 200 &&
        tasks.length > 0 &&
        named.every((n) => n.team !== undefined) &&
        teams.length === 1 &&
        visitTeam !== undefined &&
        visitTeam === northwindTeamRef &&
        categories.includes(`${SYSTEMS.careTeam}|visits`);
      row(
        teamStep,
        good ? 'ok' : 'FAILED',
        `expected each of her schedule-visit Tasks to name ${northwindTeamRef ?? 'the CareTeam tagged visit-team-northwind (none found)'}; got ${gatewayDescribe(found)}: ${named.map((n) => `Task/${n.task.id} ${n.task.status} -> ${n.team ?? 'no care-team input'}`).join(', ') || 'no schedule-visit Task'}${stored ? `; ${visitTeam} is "${stored.name}", category ${categories.join(', ') || 'none'}` : ''}`,
      );
    } catch (err) {
      row(teamStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  const noTeam = maya ? 'her schedule-visit task names no care-team (the row above)' : 'the journey did not make it';
  await control(
    'the journey patient reads the visit team her task names, directly on Medplum (her token)',
    maya,
    visitTeam,
    () => direct(maya as Person, 'GET', visitTeam as string),
    { missing: noTeam },
  );
  await control(
    'the journey patient reads the visit team her task names through the gateway (GET /v1/fhir/CareTeam/{id})',
    maya,
    visitTeam,
    () => viaGateway(maya as Person, visitTeam as string),
    { missing: noTeam },
  );
  const availabilityStep =
    'control: the journey patient asks for the free slots of the visit team her task names (GET /v1/availability?careTeam=…, the next 7 days, through the gateway)';
  if (!maya || !visitTeam) {
    row(availabilityStep, 'not reached', noTeam);
  } else {
    try {
      const now = Date.now();
      const served = await gateway(
        maya,
        `/v1/availability?${new URLSearchParams({
          careTeam: visitTeam,
          start: new Date(now).toISOString(),
          end: new Date(now + 7 * DAY).toISOString(),
        })}`,
      );
      const slots = (served.body as { slots?: unknown[] } | undefined)?.slots;
      row(
        availabilityStep,
        served.status === 200 ? 'ok' : 'FAILED',
        `expected 200, got ${gatewayDescribe(served)}${slots ? `, ${slots.length} slot(s)` : ''}`,
      );
    } catch (err) {
      row(availabilityStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  const noQueue = 'no CareTeam tagged queue-northwind-intake-review';
  await attack(
    "the journey patient reads the Northwind intake-review queue's CareTeam (a clinicians' work queue) directly",
    { attacker: 'maya', target: queueRef, missing: noQueue },
    (a, t) => direct(a, 'GET', t),
  );
  await attack(
    "the journey patient reads the Northwind intake-review queue's CareTeam through the gateway",
    { attacker: 'maya', target: queueRef, missing: noQueue },
    (a, t) => viaGateway(a, t),
  );
  await attack(
    'carol (Southridge patient) reads the Northwind visit team directly',
    { attacker: 'carol', target: northwindTeamRef, missing: 'no CareTeam tagged visit-team-northwind' },
    (a, t) => direct(a, 'GET', t),
  );
  await attack(
    'carol (Southridge patient) reads the Northwind visit team through the gateway',
    { attacker: 'carol', target: northwindTeamRef, missing: 'no CareTeam tagged visit-team-northwind' },
    (a, t) => viaGateway(a, t),
  );
  // Her search: whatever it lists, no work queue (the provisioned one, and the other the admin made above).
  const searchStep =
    'attack: the journey patient searches CareTeam directly on Medplum (CareTeam?_count=100): no work queue (category SYSTEMS.careQueue) in the Bundle';
  if (!maya) {
    row(searchStep, 'not reached', 'the journey did not make it');
  } else {
    try {
      const searched = await direct(maya, 'GET', 'CareTeam?_count=100');
      const listed = entriesOf(searched.body) as CareTeam[];
      const isQueue = (t: CareTeam) =>
        (t.category ?? []).some((c) => c.coding?.some((k) => k.system === SYSTEMS.careQueue));
      const queues = listed.filter(isQueue);
      const held = REFUSED.includes(searched.status) || (searched.status === 200 && queues.length === 0);
      row(
        searchStep,
        held ? 'held' : 'FAILED',
        `expected 403/404, or a Bundle without a queue; got ${describe(searched)}${
          listed.length
            ? `: ${listed
                .map(
                  (t) =>
                    `CareTeam/${t.id} (${
                      (t.category ?? [])
                        .flatMap((c) => c.coding ?? [])
                        .map((k) => k.code)
                        .join(', ') || 'no category'
                    }${isQueue(t) ? ', A QUEUE' : ''})`,
                )
                .join(', ')}`
            : ''
        }`,
      );
    } catch (err) {
      row(searchStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }

  await addressNeeded(ctx);
  await orderTasks(ctx, people);
  await evidence(ctx, people);
  await licensureAtCare(ctx);
  await conditionRevised(ctx, people, queueRef);
  await asyncVisitReviewed(ctx, people, queueRef);
  await visitCompleted(ctx, people);
  await idempotencyKeys(ctx, people);
}

const ICD10CM = 'http://hl7.org/fhir/sid/icd-10-cm';
/** How a task output is named: `'questionnaire-response'` (its text) or `coding 'questionnaire-response'`. */
const outputName = (output: TaskOutput): string =>
  output.type?.text !== undefined
    ? `'${output.type.text}'`
    : `coding '${output.type?.coding?.map((c) => c.code).join(', ')}'`;
/** How long the lane waits for what a Subscription does (Medplum delivers through a queue). */
const SUBSCRIPTION_WAIT_MS = 30_000;
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The admin's read in extended mode: `meta.author` shown (who wrote each version, as the bots see it). */
const adminRead = (ctx: AttackContext, path: string) =>
  medplumCall(ctx.baseUrl, ctx.adminToken, 'GET', path, { waitOutQuota: true, extended: true });

/** A task's stored form (contracts/work-forms.ts: `focus` and first input -> `Questionnaire/<id>`), as one reads it. */
interface StoredForm {
  /** `Questionnaire/<id>` (formReference), undefined when the task points at no stored form. */
  reference?: string;
  /** What the read answered. */
  answer?: Answer;
  form?: Questionnaire & { id: string };
}

/**
 * The stored form a task points at, read with `token` (a person's, or the admin's) in extended mode, so
 * that `meta.author` (the Bot that stored it) shows. Clinician work carries no contained form since 65cd263.
 */
async function readForm(baseUrl: string, token: string, task: Task | undefined): Promise<StoredForm> {
  const reference = task ? formReference(task) : undefined;
  if (!reference) {
    return {};
  }
  const answer = await medplumCall(baseUrl, token, 'GET', `fhir/R4/${reference}`, {
    waitOutQuota: true,
    extended: true,
  });
  return {
    reference,
    answer,
    form: answer.status === 200 ? (answer.body as Questionnaire & { id: string }) : undefined,
  };
}

/** A stored form in a few words: its reference, url|version, writer and accounts. */
const formSaid = (stored: StoredForm): string =>
  !stored.reference
    ? 'no stored form (focus and first input naming the same Questionnaire/<id>)'
    : !stored.form
      ? `${stored.reference}: ${stored.answer ? describe(stored.answer) : 'not read'}`
      : `${stored.reference} ${stored.form.url}|${stored.form.version}, written by ${stored.form.meta?.author?.reference ?? 'nobody'}, accounts ${stored.form.meta?.accounts?.map((a) => a.reference).join(', ') || 'none'}`;

/** A new Northwind patient (signed in) and her intake review as the complete-task bot issued it, with its stored form. */
interface IntakeReview {
  patient: Person;
  review: Task & { id: string };
  /** The review's stored form, as the admin read it (the Questionnaire `focus` and the first input name). */
  form: Questionnaire & { id: string };
  /** The patient's tenant (her Patient's `meta.accounts`, as the admin reads them). */
  tenant: string[];
}

/**
 * A new patient registers through Northwind's app and completes the blood-pressure intake through the
 * gateway (the journey's steps 1 to 5, without the upload): the complete-task bot issues her intake
 * review in the Northwind intake queue, and stores its form (contracts/work-forms.ts: a Questionnaire of
 * her tenant, written by the Bot, that the review's `focus` and first input name). One row says what was
 * issued; undefined when it was not as it must be.
 */
async function intakeReview(
  ctx: AttackContext,
  label: string,
  queueRef: string | undefined,
): Promise<IntakeReview | undefined> {
  const step = `precondition: a new patient (${label}) registers through Northwind's app and completes the blood-pressure intake through the gateway: the complete-task bot issues her intake review in the Northwind intake queue, its form stored (focus and first input -> Questionnaire/<id> of url ${WORK_FORMS.assignCondition}, written by a Bot, meta.accounts the patient's tenant; reasonReference her EpisodeOfCare)`;
  try {
    const client = new MedplumClient({ baseUrl: ctx.baseUrl, cacheTime: 0 });
    const user = await client.startNewUser({
      firstName: 'Rhea',
      lastName: `Review (${label})`,
      email: `lane.form.${Date.now()}@example.com`,
      password: 'a long enough lane password',
      projectId: ctx.projectId,
      clientId: ctx.appIdOf('northwind'),
      recaptchaToken: '',
    });
    const registered = await client.startNewPatient({ login: user.login, projectId: ctx.projectId });
    await client.processCode(registered.code as string);
    const token = client.getAccessToken() as string;
    const api = createPatientCareClient({ baseUrl: PUBLIC_URL, accessToken: token, fetch: ctx.gatewayFetch });
    const home = await api.patient.home();
    const profile = await api.patient.profile();
    await api.fhir.updatePatient({
      ...(profile as typeof profile & { id: string }),
      address: [{ line: ['7 Form Lane'], city: 'Fresno', state: 'CA', postalCode: '93701', country: 'US' }],
    });
    const { protocols } = await api.protocols.list();
    const check = protocols.find((p) => 'assessment' in p && p.assessment?.includes('blood-pressure-check'));
    if (!check) {
      row(step, 'FAILED', `${home.patient}: the blood-pressure check is not in her catalog`);
      return undefined;
    }
    const { unmet } = await api.agreements.requirements({ healthcareService: check.healthcareService });
    await api.agreements.accept(unmet);
    const assessment = await api.assessments.start({ healthcareService: check.healthcareService });
    await answerBloodPressureIntake(api, assessment);
    const search = `fhir/R4/Task?code=${encodeURIComponent(`${SYSTEMS.taskKind}|review-intake`)}&patient=${home.patient}`;
    const start = Date.now();
    let review: Task | undefined;
    for (;;) {
      review = entriesOf((await adminRead(ctx, search)).body)[0] as Task | undefined;
      if (review || Date.now() - start > SUBSCRIPTION_WAIT_MS) {
        break;
      }
      await pause(1000);
    }
    if (!review?.id) {
      row(step, 'FAILED', `${home.patient}: no review-intake Task of hers within ${SUBSCRIPTION_WAIT_MS / 1000} s`);
      return undefined;
    }
    const stored = await readForm(ctx.baseUrl, ctx.adminToken, review);
    const form = stored.form;
    const first = review.input?.[0];
    const reference = first?.type?.text === FORM_INPUT ? first.valueReference?.reference : undefined;
    const choices = (form?.item?.find((i) => i.linkId === CONDITION_ITEM)?.answerOption ?? []).map(
      (o) => o.valueCoding?.code,
    );
    const author = review.meta?.author?.reference ?? '';
    const tenant = (
      ((await adminRead(ctx, `fhir/R4/${home.patient}`)).body as Resource | undefined)?.meta?.accounts ?? []
    )
      .map((a) => a.reference ?? '')
      .filter(Boolean);
    const formAccounts = (form?.meta?.accounts ?? []).map((a) => a.reference ?? '');
    const good =
      review.status === 'ready' &&
      review.owner?.reference === queueRef &&
      author.startsWith('Bot/') &&
      review.reasonReference?.reference?.startsWith('EpisodeOfCare/') === true &&
      form !== undefined &&
      form.url === WORK_FORMS.assignCondition &&
      form.meta?.author?.reference?.startsWith('Bot/') === true &&
      tenant.length > 0 &&
      sameSet(formAccounts, tenant) &&
      choices.includes('I10');
    row(
      step,
      good ? 'ok' : 'FAILED',
      `${home.patient} (tenant ${tenant.join(', ') || 'none'}); Task/${review.id} ${review.status}, owner ${review.owner?.reference}${review.owner?.reference === queueRef ? ' (the Northwind intake queue)' : ''}, written by ${author || 'nobody'}, reasonReference ${review.reasonReference?.reference ?? 'none'}, focus ${review.focus?.reference ?? 'none'}, first input '${first?.type?.text ?? ''}' -> ${reference ?? 'none'}: ${form ? `a stored Questionnaire, ${formSaid(stored)}${sameSet(formAccounts, tenant) ? " (the patient's tenant)" : " (NOT the patient's tenant)"}, item '${CONDITION_ITEM}' of ${choices.length} choice(s): ${choices.join(', ')}` : formSaid(stored)}`,
    );
    return good && form
      ? {
          patient: { who: `the new patient (${label})`, token, profile: home.patient },
          review: review as Task & { id: string },
          form,
          tenant,
        }
      : undefined;
  } catch (err) {
    row(step, 'FAILED', message(err));
    return undefined;
  }
}

/**
 * Clinician work as forms (bots/lib/work-forms.ts), on a real Medplum: a new Northwind patient's
 * intake review is claimed by the Northwind clinician and completed with a QuestionnaireResponse as its
 * output `questionnaire-response`. Eligibility records the Condition (identifier
 * `eligibilityKey|Task/<review>`, her as asserter) and issues the selection only for answers whose
 * writer (`meta.author`, stamped by Medplum) is the clinician who completes the review: her own, not a
 * colleague's she hands in, not the patient's. Each case has a patient and a review of its own. Then the
 * clinician policy's OWN_ANSWERS_ONLY (ownAnswers): a clinician's answers name no one but herself, and
 * nobody's submitted answers, nor a colleague's draft, are hers to change.
 */
async function workForms(ctx: AttackContext, people: Map<string, Person>, queueRef: string | undefined): Promise<void> {
  const clinician = people.get('northwind-clinician');
  const colleague = people.get('outsider');
  const southridge = people.get('southridge-clinician');
  const direct = (person: Person, method: string, path: string, body?: unknown) =>
    medplumCall(ctx.baseUrl, person.token, method, `fhir/R4/${path}`, { body, extended: true });
  const eligibility = entriesOf(
    (await ctx.adminGet(`fhir/R4/Bot?identifier=${encodeURIComponent(`${SYSTEMS.bots}|eligibility`)}`)).body,
  )[0] as Bot | undefined;
  const steps = {
    control:
      "control: the Northwind clinician claims the new patient's intake review, answers its stored form with her own QuestionnaireResponse as the admin app writes it (completed, subject the patient, condition I10, author herself) and completes the review with it as output 'questionnaire-response'",
    believed:
      "control: eligibility believes her answers: the Condition keyed by the review (SYSTEMS.eligibilityKey|Task/<review>) appears, I10, asserter and recorder her, her response its evidence; and a ready select-treatment Task, reasonReference that Condition (versioned), its form stored (Questionnaire/<id> of url select-treatment, written by a Bot, meta.accounts the patient's tenant) with its options",
    southridge:
      "attack: the Southridge clinician writes a QuestionnaireResponse to the review's form about a Northwind patient (subject the patient, author herself)",
    colleague:
      "attack: a Northwind colleague (the clinician outside the queue, clinician policy) writes the answers to the review's form (I10, no author: her policy lets her name only herself); the Northwind clinician claims the review and completes it with the colleague's QuestionnaireResponse as 'questionnaire-response'",
    inHerName:
      "attack: a Northwind colleague (the clinician outside the queue) writes the answers to the review's form in the Northwind clinician's name (I10, `author` the Northwind clinician)",
    patient:
      "attack: the new patient writes a QuestionnaireResponse to the review's form herself, directly on Medplum (her token, subject and author herself, I10); the Northwind clinician claims the review and completes it with it as 'questionnaire-response'",
    // OWN_ANSWERS_ONLY (ownAnswers, below).
    pinned:
      "the journey's review and selection, completed through the clinician helper (src/clinician `answer`, which writes as Medplum's Provider app since 65cd263, no longer a pinned version): output 'QuestionnaireResponse' -> QuestionnaireResponse/<id> (unversioned), that response completed, written by her (meta.author), to the form's url without a version, source her, no subject, no author",
    intake:
      "attack: the Northwind clinician rewrites the journey patient's submitted intake QuestionnaireResponse (her yes/no answers flipped)",
    colleagueDraft:
      "precondition: a Northwind colleague (the clinician outside the queue) writes a draft of answers to a review's form (in-progress, no author) about the form case's patient",
    signColleagues:
      "attack: the Northwind clinician takes over the colleague's draft (author herself, still in-progress)",
    submitColleagues:
      "attack: the Northwind clinician submits the colleague's draft (status completed, nothing else changed)",
    patientsName:
      "attack: the Northwind clinician writes answers to a review's form in the patient's name (author the patient, I10)",
    ownDraft:
      'control: the Northwind clinician writes her own draft (in-progress, author herself) and changes it (condition R03.0 instead of I10)',
    ownSubmit: 'control: the Northwind clinician submits her own draft (status completed)',
    ownSubmitted: 'attack: the Northwind clinician changes her own submitted answers (condition back to I10)',
    ownHandedIn:
      "attack: the Northwind clinician changes the answers she handed in for her review, the Condition's evidence (condition R03.0 instead of I10)",
    // Answers as Medplum's app writes them (95e27f7; found driving the app on a real Medplum).
    appShaped:
      "control: answers as Medplum's app writes them: the Northwind clinician claims a new patient's review, answers its form with the condition as a coding without a system ({code: 'I10', display: 'I10'}: the app's coding field can only '+ Create I10') and completes the review naming the output by a coding (type.coding [{code: 'questionnaire-response'}]: the app's CodeableConcept field cannot write text)",
    appShapedBelieved:
      "control: eligibility believes them as the form's own choice: the Condition keyed by the review is I10 with the catalog's system and display ('Essential (primary) hypertension'), asserter her; a ready select-treatment Task",
    appShapedSelection:
      "control: the selection answered the same way (the amlodipine option's canonical as a coding without a system, the output named by a coding): compose-offer composes the offer (the selection's businessStatus offer-composed, the patient's treatment-offer Task)",
    colleagueWhy:
      "the refused hand-in (a colleague's answers, the attack above) says why on the review: businessStatus 'no-answers' and statusReason.text, written once by the eligibility bot",
    // The stored form (65cd263): read in its tenant only, written by the bots only (formRights, below).
    formRead:
      "control: the Northwind clinician reads the stored review form (Questionnaire/<id>, the Northwind patient's tenant) directly on Medplum",
    formReadSouthridge: 'attack: the Southridge clinician reads the stored Northwind review form (Questionnaire/<id>)',
    formSearchSouthridge: `attack: the Southridge clinician searches the work forms (Questionnaire?url=${WORK_FORMS.assignCondition}): nothing of the Northwind review form`,
    formReadPatient: 'attack: the patient reads the stored form of her own review (Questionnaire/<id>)',
    formPostClinician: `attack: the Northwind clinician creates a Questionnaire (a work form: url ${WORK_FORMS.assignCondition}, the review form's items)`,
    formPutClinician:
      'attack: the Northwind clinician rewrites the stored review form (PUT, one more condition choice)',
    formPostPatient: `attack: the patient creates a Questionnaire (a work form: url ${WORK_FORMS.assignCondition}, the review form's items)`,
    formPutPatient: 'attack: the patient rewrites the stored form of her own review (PUT, one more condition choice)',
    // Medplum's Provider app's way (65cd263): providerApp, below.
    providerClaim:
      "control: the Provider app's claim in two updates: the Northwind clinician sets herself as the owner of a new patient's review (PUT, no If-Match, status still ready), then its status in-progress (PUT, no If-Match)",
    providerAnswers:
      "control: answers as Medplum's Provider app writes them: her QuestionnaireResponse in-progress (questionnaire the stored form's url without version, source her, no subject, no author: 201, written by her, meta.accounts her tenant by the clinician policy's compartment), the review's output replaced by 'QuestionnaireResponse' -> it (200), the review completed while the response is still in-progress (200): eligibility runs on the completed review and writes nothing yet; then the response completed (200)",
    providerBelieved: `control: the completed answers wake eligibility (Subscription QuestionnaireResponse?status=completed&questionnaire=${WORK_FORMS.assignCondition}: a run of the eligibility bot naming the response): the Condition keyed by the review (I10, asserter her, her response its evidence) and a ready select-treatment Task`,
    providerSelection: `control: the selection the Provider app's way (the two-step claim, the amlodipine option as its stored form offers it, the response in-progress, the output, the completion, then the response completed): compose-offer runs on the completed selection and writes nothing yet; woken by the completed answers (Subscription QuestionnaireResponse?status=completed&questionnaire=${WORK_FORMS.selectTreatment}: a run naming the response), it composes the offer (businessStatus offer-composed, a ready treatment-offer Task instantiating the option)`,
  };
  if (!clinician || !eligibility?.id) {
    for (const step of Object.values(steps)) {
      row(step, 'not reached', !clinician ? 'the Northwind clinician could not sign in' : 'no eligibility Bot');
    }
    return;
  }
  const her = clinician.profile;

  /** The condition `code` as a review's stored form offers it (I10, R03.0, E66.9), as an item of answers. */
  const conditionItem = (form: Questionnaire | undefined, code = 'I10'): QuestionnaireResponse['item'] => {
    const coding = form?.item
      ?.find((i) => i.linkId === CONDITION_ITEM)
      ?.answerOption?.find((o) => o.valueCoding?.code === code)?.valueCoding ?? { system: ICD10CM, code };
    return [{ linkId: CONDITION_ITEM, answer: [{ valueCoding: coding }] }];
  };
  /**
   * Answers to a review's stored form as the admin app writes them: completed, the condition I10 as the
   * form offers it, about the patient; no `author` when undefined.
   */
  const answersTo = (form: Questionnaire, subject: string, author: string | undefined): QuestionnaireResponse => ({
    resourceType: 'QuestionnaireResponse',
    questionnaire: form.url,
    status: 'completed',
    subject: { reference: subject },
    ...(author ? { author: { reference: author } as QuestionnaireResponse['author'] } : {}),
    authored: new Date().toISOString(),
    item: conditionItem(form),
  });

  /**
   * The Northwind clinician reads and claims the review (as Medplum's app does: the Task as she reads it,
   * owner herself, in-progress), `writer` writes `answers`, and she completes the review naming them.
   * What each write answered; `response` when the answers were written, `completed` when she completed.
   */
  const handIn = async (
    review: Task,
    writer: Person,
    answers: QuestionnaireResponse,
    output: (reference: string) => TaskOutput = responseOutput,
  ) => {
    const said: string[] = [];
    const read = await direct(clinician, 'GET', `Task/${review.id}`);
    if (read.status !== 200) {
      return { said: [`her read of Task/${review.id}: ${describe(read)}`], stopped: 'read' as const };
    }
    const claim = await direct(clinician, 'PUT', `Task/${review.id}`, {
      ...(read.body as Task),
      owner: { reference: her },
      status: 'in-progress',
      executionPeriod: { start: new Date().toISOString() },
    });
    said.push(`her claim ${describe(claim)}`);
    if (claim.status !== 200) {
      return { said, stopped: 'claim' as const };
    }
    const written = await direct(writer, 'POST', 'QuestionnaireResponse', answers);
    const response = written.status === 201 ? (written.body as QuestionnaireResponse) : undefined;
    said.push(
      `the answers by ${writer.who}: ${describe(written)}${response ? ` (meta.author ${response.meta?.author?.reference}, author ${response.author?.reference ?? 'none'})` : ''}`,
    );
    if (!response?.id) {
      return { said, stopped: 'answers' as const, written };
    }
    const claimed = claim.body as Task;
    const done = await direct(clinician, 'PUT', `Task/${review.id}`, {
      ...claimed,
      status: 'completed',
      output: [output(`QuestionnaireResponse/${response.id}`)],
      executionPeriod: { ...claimed.executionPeriod, end: new Date().toISOString() },
    });
    said.push(
      `her completion with output ${outputName(output(''))} -> QuestionnaireResponse/${response.id}: ${describe(done)}`,
    );
    return { said, response, stopped: done.status === 200 ? undefined : ('completion' as const), done };
  };

  /**
   * What eligibility did about a review, as the admin reads it: its runs on the review (AuditEvents of
   * the eligibility Bot naming the Task), the patient's Conditions and select-treatment Tasks (those
   * keyed by the review apart). Polled every second until `enough`, or 30 s.
   */
  const aftermath = async (review: Task, patient: string, enough: (seen: Aftermath) => boolean) => {
    const started = Date.now();
    const key = `Task/${review.id}`;
    const keyed = (r: Condition | Task) =>
      r.identifier?.some((i) => i.system === SYSTEMS.eligibilityKey && i.value === key) ?? false;
    for (;;) {
      const [events, conditions, selections] = await Promise.all([
        adminRead(ctx, `fhir/R4/AuditEvent?entity=${key}&_count=20`),
        adminRead(ctx, `fhir/R4/Condition?subject=${patient}&_count=20`),
        adminRead(
          ctx,
          `fhir/R4/Task?patient=${patient}&code=${encodeURIComponent(`${SYSTEMS.taskKind}|select-treatment`)}&_count=20`,
        ),
      ]);
      const seen: Aftermath = {
        runs: (entriesOf(events.body) as AuditEvent[]).filter(
          (e) => e.source?.observer?.reference === `Bot/${eligibility.id}`,
        ),
        conditions: entriesOf(conditions.body) as Condition[],
        selections: entriesOf(selections.body) as Task[],
        keyedCondition: undefined,
        keyedSelection: undefined,
        seconds: (Date.now() - started) / 1000,
      };
      seen.keyedCondition = seen.conditions.find(keyed);
      seen.keyedSelection = seen.selections.find(keyed);
      if (enough(seen) || Date.now() - started > SUBSCRIPTION_WAIT_MS) {
        return seen;
      }
      await pause(1000);
    }
  };
  const runsOf = (seen: Aftermath) =>
    seen.runs.length === 0
      ? `no run of the eligibility bot on it within ${SUBSCRIPTION_WAIT_MS / 1000} s`
      : `the eligibility bot ran on it ${seen.runs.length} time(s) (AuditEvent outcome ${seen.runs.map((r) => r.outcome).join(', ')})`;

  /**
   * An attack's verdict: held when a write of it was refused (400/403/404), or when everything was
   * written and the eligibility bot ran on the completed review (outcome 0: it returned, it did not
   * throw) and wrote nothing (no Condition of the patient, no select-treatment Task of hers); FAILED when
   * anything appeared, or when the bot did not run or failed (nothing proven). Medplum keeps a subscription
   * bot's console, not what it returned, so its reason is not in the AuditEvent: the control differs only
   * in who wrote the answers.
   */
  const judgeAttack = async (step: string, intake: IntakeReview | undefined, writer: Person | undefined) => {
    if (!intake || !writer) {
      row(
        step,
        'not reached',
        !intake ? 'no intake review (see the precondition row)' : 'the writer could not sign in',
      );
      return;
    }
    try {
      // The patient names herself; a colleague no one (the policy lets a clinician name only herself).
      const written = answersTo(
        intake.form,
        intake.patient.profile,
        writer === intake.patient ? intake.patient.profile : undefined,
      );
      const handed = await handIn(intake.review, writer, written);
      if (handed.stopped === 'read' || handed.stopped === 'claim') {
        row(step, 'FAILED', `the attack could not be staged: ${handed.said.join('; ')}`);
        return;
      }
      if (handed.stopped === 'answers' && handed.written && [400, 403, 404].includes(handed.written.status)) {
        row(step, 'held', `refused outright: ${handed.said.join('; ')}`);
        return;
      }
      if (handed.stopped) {
        const refused = handed.done && REJECTED.includes(handed.done.status);
        row(
          step,
          refused ? 'held' : 'FAILED',
          `${refused ? 'refused at her completion' : 'unexpected'}: ${handed.said.join('; ')}`,
        );
        return;
      }
      const seen = await aftermath(intake.review, intake.patient.profile, (s) => s.runs.length > 0);
      // The bot's writes are done when its AuditEvent is written; look once more, a second later.
      if (seen.runs.length > 0) {
        await pause(1000);
      }
      const after = seen.runs.length > 0 ? await aftermath(intake.review, intake.patient.profile, () => true) : seen;
      const wrote = after.conditions.length > 0 || after.selections.length > 0;
      // A run that failed (outcome not 0) wrote nothing for another reason: nothing would be proven.
      const held = after.runs.some((r) => r.outcome === '0') && !wrote;
      row(
        step,
        held ? 'held' : 'FAILED',
        `expected the eligibility bot to run and write nothing; ${handed.said.join('; ')}; then ${runsOf(after)}${seen.runs.length > 0 ? `, seen after ${seen.seconds.toFixed(1)} s` : ''}; a second later the patient has ${after.conditions.length} Condition(s)${after.keyedCondition ? ` (Condition/${after.keyedCondition.id} keyed by the review, asserter ${after.keyedCondition.asserter?.reference})` : ''} and ${after.selections.length} select-treatment Task(s)${after.keyedSelection ? ` (Task/${after.keyedSelection.id}, ${after.keyedSelection.status})` : ''}`,
      );
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
    }
  };

  /** The patient's QuestionnaireResponses as the admin finds them (ids), to tell that a refused create wrote nothing. */
  const responsesOf = async (patient: string) =>
    entriesOf((await adminRead(ctx, `fhir/R4/QuestionnaireResponse?subject=${patient}&_count=100`)).body).map(
      (r) => r.id,
    );

  /**
   * A create the clinician policy must refuse (OWN_ANSWERS_ONLY): `writer` POSTs `body(intake)`; held when
   * refused (400/403) and the patient's QuestionnaireResponses, as the admin finds them, are those of before.
   */
  const refusedCreate = async (
    step: string,
    writer: Person | undefined,
    intake: IntakeReview | undefined,
    body: (intake: IntakeReview) => QuestionnaireResponse,
    noWriter: string,
  ): Promise<void> => {
    if (!writer || !intake) {
      row(step, 'not reached', !writer ? noWriter : 'no intake review (see the precondition row)');
      return;
    }
    try {
      const before = await responsesOf(intake.patient.profile);
      const written = await direct(writer, 'POST', 'QuestionnaireResponse', body(intake));
      const after = await responsesOf(intake.patient.profile);
      const same = after.length === before.length && after.every((id) => before.includes(id));
      row(
        step,
        REJECTED.includes(written.status) && same ? 'held' : 'FAILED',
        `expected 403/400 and nothing written; got ${describe(written)}; ${intake.patient.profile} has ${after.length} QuestionnaireResponse(s)${same ? ', as before' : ` (${before.length} before)`}`,
      );
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
    }
  };

  /**
   * A write to answers already written that the clinician policy must refuse (OWN_ANSWERS_ONLY):
   * `attacker` reads `target` (as Medplum's app would) and PUTs it back with `change` applied; held when
   * refused (400/403) and the admin reads the very version it read before (its `versionId`).
   */
  const frozen = async (
    step: string,
    attacker: Person | undefined,
    target: string | undefined,
    missing: string,
    change: (response: QuestionnaireResponse) => QuestionnaireResponse,
  ): Promise<void> => {
    if (!attacker || !target) {
      row(step, 'not reached', !attacker ? 'the attacker could not sign in' : missing);
      return;
    }
    try {
      const before = (await adminRead(ctx, `fhir/R4/${target}`)).body as QuestionnaireResponse | undefined;
      const read = await direct(attacker, 'GET', target);
      if (read.status !== 200) {
        // Not a refusal of the write: nothing was tried, nothing proven.
        row(step, 'FAILED', `the attack could not be staged: her read of ${target}: ${describe(read)}`);
        return;
      }
      const written = await direct(attacker, 'PUT', target, change(read.body as QuestionnaireResponse));
      const after = (await adminRead(ctx, `fhir/R4/${target}`)).body as QuestionnaireResponse | undefined;
      const same = after?.meta?.versionId !== undefined && after.meta.versionId === before?.meta?.versionId;
      row(
        step,
        REJECTED.includes(written.status) && same ? 'held' : 'FAILED',
        `expected 403/400 and the same version; got ${describe(written)}; ${target} (${after?.status}, author ${after?.author?.reference ?? 'none'}, written by ${after?.meta?.author?.reference}): version ${after?.meta?.versionId}${same ? ' as before' : ` (was ${before?.meta?.versionId})`}`,
      );
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
    }
  };

  /**
   * OWN_ANSWERS_ONLY (the clinician policy's QuestionnaireResponse writes, 0caf264): a clinician's
   * answers are hers alone (no author, or herself), she changes only her own draft (`in-progress`, author
   * herself), and once submitted they are frozen; nobody else's is hers to change. `intake`: a new
   * Northwind patient and her review (its form), for the answers written here.
   */
  const ownAnswers = async (intake: IntakeReview | undefined, handed: QuestionnaireResponse | undefined) => {
    const noIntake = 'no intake review (see the precondition rows)';
    // The journey's review and selection, completed through src/clinician (`answer`): as the Provider app
    // writes them since 65cd263 (the output `QuestionnaireResponse`, unversioned; no pinned version).
    const journeyPatient = ctx.progress.patient;
    if (!journeyPatient) {
      row(steps.pinned, 'not reached', 'the journey did not make it');
    } else {
      try {
        const said: string[] = [];
        let good = true;
        for (const kind of ['review-intake', 'select-treatment']) {
          const task = entriesOf(
            (
              await adminRead(
                ctx,
                `fhir/R4/Task?patient=${journeyPatient}&code=${encodeURIComponent(`${SYSTEMS.taskKind}|${kind}`)}&status=completed&_count=5`,
              )
            ).body,
          ).find((t) => responseReference(t as Task)) as Task | undefined;
          if (!task) {
            good = false;
            said.push(`no completed ${kind} Task of the journey patient handing in answers`);
            continue;
          }
          const output = task.output?.find((o) => o.valueReference?.reference === responseReference(task));
          const reference = output?.valueReference?.reference ?? '';
          const unversioned = /^QuestionnaireResponse\/[^/]+$/.test(reference);
          const response = unversioned
            ? ((await adminRead(ctx, `fhir/R4/${reference}`)).body as QuestionnaireResponse | undefined)
            : undefined;
          const form = (await readForm(ctx.baseUrl, ctx.adminToken, task)).form;
          const ok =
            output?.type?.text === PROVIDER_APP_OUTPUT &&
            (task.output?.length ?? 0) === 1 &&
            unversioned &&
            response?.status === 'completed' &&
            response.meta?.author?.reference === clinician.profile &&
            form?.url !== undefined &&
            response.questionnaire === form.url &&
            response.source?.reference === clinician.profile &&
            response.subject === undefined &&
            response.author === undefined;
          good &&= ok;
          said.push(
            `${kind} Task/${task.id}: ${task.output?.length ?? 0} output(s), ${output ? outputName(output) : 'none'} -> ${reference || 'nothing'}${unversioned ? '' : ' (NOT unversioned)'}${
              response
                ? `, ${response.status}, written by ${response.meta?.author?.reference ?? '?'}${response.meta?.author?.reference === clinician.profile ? ' (her)' : ' (NOT her)'}, questionnaire ${response.questionnaire}${response.questionnaire === form?.url ? " (the stored form's url)" : ` (NOT the stored form's url ${form?.url})`}, source ${response.source?.reference ?? 'none'}, subject ${response.subject?.reference ?? 'none'}, author ${response.author?.reference ?? 'none'}`
                : ''
            }`,
          );
        }
        row(steps.pinned, good ? 'ok' : 'FAILED', said.join('; '));
      } catch (err) {
        row(steps.pinned, 'FAILED', `the call threw: ${message(err)}`);
      }
    }

    // The patient's submitted intake: the journey patient's (else the new patient's).
    const journeyIntake = ctx.progress.questionnaireResponse || undefined;
    let intakeAnswers = journeyIntake;
    if (!intakeAnswers && intake) {
      const own = entriesOf(
        (await adminRead(ctx, `fhir/R4/QuestionnaireResponse?subject=${intake.patient.profile}&_count=20`)).body,
      ).find((r) => (r as QuestionnaireResponse).meta?.author?.reference === intake.patient.profile);
      intakeAnswers = own ? `QuestionnaireResponse/${own.id}` : undefined;
    }
    const flipped = (items: QuestionnaireResponse['item']): QuestionnaireResponse['item'] =>
      items?.map((i) => ({
        ...i,
        answer: i.answer?.map((a) => (a.valueBoolean === undefined ? a : { ...a, valueBoolean: !a.valueBoolean })),
      }));
    await frozen(
      `${steps.intake}${journeyIntake ? '' : " (the form case patient's instead: the journey did not make it)"}`,
      clinician,
      intakeAnswers,
      'no intake answers of a patient (the journey and the form cases did not make it)',
      (r) => ({ ...r, item: flipped(r.item) }),
    );

    // A colleague's draft: not hers to take over, nor to submit.
    let draft: QuestionnaireResponse | undefined;
    if (!colleague || !intake) {
      row(
        steps.colleagueDraft,
        'not reached',
        !colleague ? 'the clinician outside the queue could not sign in' : noIntake,
      );
    } else {
      try {
        const written = await direct(colleague, 'POST', 'QuestionnaireResponse', {
          ...answersTo(intake.form, intake.patient.profile, undefined),
          status: 'in-progress',
        });
        draft = written.status === 201 ? (written.body as QuestionnaireResponse) : undefined;
        row(
          steps.colleagueDraft,
          draft?.meta?.author?.reference === colleague.profile ? 'ok' : 'FAILED',
          `expected 201, written by her; got ${describe(written)}${draft ? `, ${draft.status}, written by ${draft.meta?.author?.reference}, author ${draft.author?.reference ?? 'none'}` : ''}`,
        );
      } catch (err) {
        row(steps.colleagueDraft, 'FAILED', `the call threw: ${message(err)}`);
      }
    }
    const draftRef = draft?.id ? `QuestionnaireResponse/${draft.id}` : undefined;
    const noDraft = "no colleague's draft (see the precondition row)";
    await frozen(steps.signColleagues, clinician, draftRef, noDraft, (r) => ({
      ...r,
      author: { reference: her } as QuestionnaireResponse['author'],
    }));
    await frozen(steps.submitColleagues, clinician, draftRef, noDraft, (r) => ({ ...r, status: 'completed' }));

    // In the patient's name.
    await refusedCreate(
      steps.patientsName,
      clinician,
      intake,
      (i) => answersTo(i.form, i.patient.profile, i.patient.profile),
      'the Northwind clinician could not sign in',
    );

    // Her own: a draft she may change and submit; once submitted, frozen.
    let submitted: QuestionnaireResponse | undefined;
    if (!intake) {
      row(steps.ownDraft, 'not reached', noIntake);
      row(steps.ownSubmit, 'not reached', noIntake);
    } else {
      try {
        const created = await direct(clinician, 'POST', 'QuestionnaireResponse', {
          ...answersTo(intake.form, intake.patient.profile, her),
          status: 'in-progress',
        });
        const createdBody = created.status === 201 ? (created.body as QuestionnaireResponse) : undefined;
        const changed = createdBody?.id
          ? await direct(clinician, 'PUT', `QuestionnaireResponse/${createdBody.id}`, {
              ...createdBody,
              item: conditionItem(intake.form, 'R03.0'),
            })
          : undefined;
        const ownDraft = changed?.status === 200 ? (changed.body as QuestionnaireResponse) : undefined;
        row(
          steps.ownDraft,
          ownDraft ? 'ok' : 'FAILED',
          `expected 201, then 200; got ${describe(created)}${createdBody ? ` (in-progress, written by ${createdBody.meta?.author?.reference})` : ''}${changed ? `; ${describe(changed)}${ownDraft ? `, ${ownDraft.status}, condition ${ownDraft.item?.[0]?.answer?.[0]?.valueCoding?.code}, version ${ownDraft.meta?.versionId}` : ''}` : ''}`,
        );
        if (!ownDraft?.id) {
          row(steps.ownSubmit, 'not reached', 'her draft (the control above) failed');
        } else {
          const done = await direct(clinician, 'PUT', `QuestionnaireResponse/${ownDraft.id}`, {
            ...ownDraft,
            status: 'completed',
          });
          submitted = done.status === 200 ? (done.body as QuestionnaireResponse) : undefined;
          row(
            steps.ownSubmit,
            submitted?.status === 'completed' ? 'ok' : 'FAILED',
            `expected 200, completed; got ${describe(done)}${submitted ? `, ${submitted.status}, version ${submitted.meta?.versionId}` : ''}`,
          );
        }
      } catch (err) {
        row(steps.ownDraft, 'FAILED', `the call threw: ${message(err)}`);
      }
    }
    await frozen(
      steps.ownSubmitted,
      clinician,
      submitted?.id ? `QuestionnaireResponse/${submitted.id}` : undefined,
      'her submitted draft (the controls above) failed',
      (r) => ({ ...r, item: conditionItem(intake?.form, 'I10') }),
    );
    await frozen(
      steps.ownHandedIn,
      clinician,
      handed?.id ? `QuestionnaireResponse/${handed.id}` : undefined,
      'her hand-in (the control above) failed',
      (r) => ({ ...r, item: conditionItem(intake?.form, 'R03.0') }),
    );
  };

  /**
   * Answers as Medplum's app writes them (found driving the app on a real Medplum): its coding
   * field writes `{code, display: code}` and no system, and its CodeableConcept field names the output by
   * a coding, never by text. A new patient's review answered so, then her selection the same way.
   */
  const appShaped = async () => {
    const appCoding = (code: string): Coding => ({ code, display: code });
    const appOutput = (reference: string): TaskOutput => ({
      type: { coding: [{ code: RESPONSE_OUTPUT, display: RESPONSE_OUTPUT }] },
      valueReference: { reference },
    });
    const later = [steps.appShapedBelieved, steps.appShapedSelection];
    const intake = await intakeReview(ctx, "answers as Medplum's app writes them", queueRef);
    if (!intake) {
      for (const step of [steps.appShaped, ...later]) {
        row(step, 'not reached', 'no intake review (see the precondition row)');
      }
      return;
    }
    try {
      const patient = intake.patient.profile;
      const answers: QuestionnaireResponse = {
        ...answersTo(intake.form, patient, her),
        item: [{ linkId: CONDITION_ITEM, answer: [{ valueCoding: appCoding('I10') }] }],
      };
      const handed = await handIn(intake.review, clinician, answers, appOutput);
      const response = handed.response;
      row(
        steps.appShaped,
        !handed.stopped && response?.meta?.author?.reference === her ? 'ok' : 'FAILED',
        `expected her claim 200, her answers 201 (meta.author her), her completion 200; got ${handed.said.join('; ')}; her answer ${JSON.stringify(response?.item?.[0]?.answer?.[0]?.valueCoding ?? null)}`,
      );
      if (handed.stopped || !response?.id) {
        for (const step of later) {
          row(step, 'not reached', 'the hand-in above did not complete');
        }
        return;
      }
      // The catalog's own coding of I10, as the review's form offers it.
      const offered = intake.form.item
        ?.find((i) => i.linkId === CONDITION_ITEM)
        ?.answerOption?.find((o) => o.valueCoding?.code === 'I10')?.valueCoding;
      const seen = await aftermath(
        intake.review,
        patient,
        (s) => s.keyedCondition !== undefined && s.keyedSelection?.status === 'ready',
      );
      const condition = seen.keyedCondition;
      const selection = seen.keyedSelection;
      const coding = condition?.code?.coding ?? [];
      const evidence = condition?.evidence?.flatMap((e) => e.detail ?? []).map((d) => d.reference) ?? [];
      const good =
        offered?.display !== undefined &&
        offered.display !== 'I10' &&
        coding.length === 1 &&
        coding[0].system === ICD10CM &&
        coding[0].code === 'I10' &&
        coding[0].display === offered.display &&
        condition?.asserter?.reference === her &&
        evidence.includes(`QuestionnaireResponse/${response.id}`) &&
        selection?.status === 'ready';
      row(
        steps.appShapedBelieved,
        good ? 'ok' : 'FAILED',
        `the form offers ${JSON.stringify(offered ?? null)}; after ${seen.seconds.toFixed(1)} s: ${
          condition
            ? `Condition/${condition.id}: code ${JSON.stringify(coding)}, ${condition.verificationStatus?.coding?.[0]?.code}, asserter ${condition.asserter?.reference}${condition.asserter?.reference === her ? ' (her)' : ' (NOT her)'}, evidence ${evidence.join(', ') || 'none'}`
            : `no Condition keyed by Task/${intake.review.id} (${seen.conditions.length} Condition(s) of the patient)`
        }; ${selection ? `Task/${selection.id} select-treatment ${selection.status}` : `no select-treatment Task keyed by the review (${seen.selections.length} of the patient)`}; ${runsOf(seen)}`,
      );
      if (selection?.status !== 'ready') {
        row(steps.appShapedSelection, 'not reached', 'no ready selection (the row above)');
        return;
      }
      // Her read of the selection's stored form (as Medplum's app loads it).
      const selectionForm = await readForm(ctx.baseUrl, clinician.token, selection);
      const option = (selectionForm.form?.item?.find((i) => i.linkId === OPTION_ITEM)?.answerOption ?? [])
        .map((o) => o.valueCoding?.code ?? '')
        .find((code) => code.includes('amlodipine'));
      if (!option) {
        row(
          steps.appShapedSelection,
          'FAILED',
          `Task/${selection.id}: its form offers no amlodipine option (${formSaid(selectionForm)})`,
        );
        return;
      }
      const chosen = await handIn(
        selection,
        clinician,
        {
          resourceType: 'QuestionnaireResponse',
          questionnaire: WORK_FORMS.selectTreatment,
          status: 'completed',
          subject: { reference: patient },
          author: { reference: her } as QuestionnaireResponse['author'],
          authored: new Date().toISOString(),
          item: [{ linkId: OPTION_ITEM, answer: [{ valueCoding: appCoding(option) }] }],
        },
        appOutput,
      );
      if (chosen.stopped) {
        row(steps.appShapedSelection, 'FAILED', `the hand-in stopped at ${chosen.stopped}: ${chosen.said.join('; ')}`);
        return;
      }
      const started = Date.now();
      let after: Task | undefined;
      let offer: Task | undefined;
      for (;;) {
        const [read, offers] = await Promise.all([
          adminRead(ctx, `fhir/R4/Task/${selection.id}`),
          adminRead(
            ctx,
            `fhir/R4/Task?patient=${patient}&code=${encodeURIComponent(`${SYSTEMS.taskKind}|treatment-offer`)}&_count=5`,
          ),
        ]);
        after = read.body as Task | undefined;
        offer = entriesOf(offers.body)[0] as Task | undefined;
        if ((offer && after?.businessStatus) || Date.now() - started > SUBSCRIPTION_WAIT_MS) {
          break;
        }
        await pause(1000);
      }
      const group = offer?.focus?.reference?.startsWith('RequestGroup/')
        ? ((await adminRead(ctx, `fhir/R4/${offer.focus.reference}`)).body as {
            instantiatesCanonical?: string[];
          })
        : undefined;
      const composed =
        after?.businessStatus?.text === 'offer-composed' &&
        offer?.status === 'ready' &&
        (group?.instantiatesCanonical ?? []).includes(option);
      row(
        steps.appShapedSelection,
        composed ? 'ok' : 'FAILED',
        `${chosen.said.join('; ')}; after ${((Date.now() - started) / 1000).toFixed(1)} s: Task/${selection.id} ${after?.status}, businessStatus ${after?.businessStatus?.text ?? 'none'}${after?.statusReason?.text ? ` (${after.statusReason.text})` : ''}; ${offer ? `the offer Task/${offer.id} ${offer.status}, ${offer.focus?.reference} instantiates ${(group?.instantiatesCanonical ?? []).join(', ') || 'nothing'}` : 'no treatment-offer Task of the patient'}`,
      );
    } catch (err) {
      row(steps.appShaped, 'FAILED', `the call threw: ${message(err)}`);
    }
  };

  /**
   * A hand-in the platform did nothing with says why on the task (bots/lib/queues.ts markUnanswered):
   * `businessStatus` 'no-answers' and the reason in `statusReason.text`, written once (the mark wakes the
   * bot again, which then writes nothing). Read by the admin once the bot has run twice, or after 30 s.
   */
  const saysWhy = async (step: string, intake: IntakeReview | undefined) => {
    if (!intake) {
      row(step, 'not reached', 'no intake review (see the precondition row)');
      return;
    }
    try {
      const key = `Task/${intake.review.id}`;
      const started = Date.now();
      let review: Task | undefined;
      let runs: AuditEvent[] = [];
      for (;;) {
        const [read, events] = await Promise.all([
          adminRead(ctx, `fhir/R4/${key}`),
          adminRead(ctx, `fhir/R4/AuditEvent?entity=${key}&_count=20`),
        ]);
        review = read.body as Task | undefined;
        runs = (entriesOf(events.body) as AuditEvent[]).filter(
          (e) => e.source?.observer?.reference === `Bot/${eligibility.id}`,
        );
        if ((review?.statusReason?.text && runs.length >= 2) || Date.now() - started > SUBSCRIPTION_WAIT_MS) {
          break;
        }
        await pause(1000);
      }
      const versions = entriesOf((await adminRead(ctx, `fhir/R4/${key}/_history?_count=50`)).body) as Task[];
      const marks = versions.filter((v) => v.meta?.author?.reference === `Bot/${eligibility.id}`).length;
      const reason = review?.statusReason?.text ?? '';
      const good = review?.businessStatus?.text === 'no-answers' && reason.length > 0 && marks === 1;
      row(
        step,
        good ? 'ok' : 'FAILED',
        `${key} ${review?.status}, businessStatus ${review?.businessStatus?.text ?? 'none'}, statusReason.text ${reason ? `"${reason}"` : 'none'}; ${versions.length} version(s), ${marks} by the eligibility bot; ${runs.length} run(s) of the bot on it (outcome ${runs.map((r) => r.outcome).join(', ') || '-'})`,
      );
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
    }
  };

  /**
   * Each review carries its form as text too (bc53859, contracts/work-forms.ts formInstructions: Medplum's
   * app shows nothing of a contained resource): a `note` naming the form's url and its `condition` item.
   * The journey's review (completed through src/clinician) and a fresh one (as the bot issued it).
   */
  const formAsText = async (fresh: IntakeReview | undefined) => {
    const step = `control: the review Tasks carry their form as text (Task.note): the form's url ${WORK_FORMS.assignCondition} and its item '${CONDITION_ITEM}' (the journey's review, and a fresh review as issued)`;
    try {
      const reviews: { label: string; task: Task }[] = [];
      const journeyPatient = ctx.progress.patient;
      const journeys = journeyPatient
        ? (entriesOf(
            (
              await adminRead(
                ctx,
                `fhir/R4/Task?patient=${journeyPatient}&code=${encodeURIComponent(`${SYSTEMS.taskKind}|review-intake`)}&_count=5`,
              )
            ).body,
          ) as Task[])
        : [];
      // The journey's own review (the one she handed her answers in with), not the queue task the admin
      // issued above for the same patient.
      const journeyReview = journeys.find((t) => responseReference(t)) ?? journeys.find((t) => formReference(t));
      if (journeyReview) {
        reviews.push({ label: "the journey's review", task: journeyReview });
      }
      if (fresh) {
        reviews.push({ label: 'a fresh review', task: fresh.review });
      }
      if (reviews.length === 0) {
        row(step, 'not reached', 'no review (the journey and the precondition above did not make it)');
        return;
      }
      const names = (task: Task) => {
        const notes = (task.note ?? []).map((n) => n.text ?? '');
        const text = notes.find((n) => n.includes(WORK_FORMS.assignCondition)) ?? '';
        return {
          text,
          notes: notes.length,
          url: text.includes(WORK_FORMS.assignCondition),
          item: text.split('\n').some((line) => line.startsWith(`- ${CONDITION_ITEM}`)),
        };
      };
      const seen = reviews.map((r) => ({ ...r, ...names(r.task) }));
      const good = (journeyPatient ? journeyReview !== undefined : true) && seen.every((s) => s.url && s.item);
      row(
        step,
        good ? 'ok' : 'FAILED',
        `${journeyPatient && !journeyReview ? 'no review-intake Task of the journey patient; ' : ''}${seen
          .map(
            (s) =>
              `${s.label} Task/${s.task.id} (${s.task.status}): ${s.notes} note(s)${
                s.text
                  ? `, one naming the form's url${s.item ? ` and item '${CONDITION_ITEM}'` : ` but NOT item '${CONDITION_ITEM}'`}: "${s.text.split('\n').slice(0, 2).join(' / ').slice(0, 300)}"`
                  : `, none naming ${WORK_FORMS.assignCondition}`
              }`,
          )
          .join('; ')}`,
      );
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
    }
  };

  /**
   * The stored review form (65cd263, contracts/work-forms.ts): a Questionnaire of the patient's tenant,
   * read by her tenant's clinicians (the clinician policy's read-only, tenant-scoped Questionnaire), by no
   * clinician of another tenant and by no patient; and a Questionnaire is written by the bots only (a
   * clinician's or a patient's POST or PUT: 403, nothing written).
   */
  const formRights = async (intake: IntakeReview | undefined) => {
    const all = [
      steps.formRead,
      steps.formReadSouthridge,
      steps.formSearchSouthridge,
      steps.formReadPatient,
      steps.formPostClinician,
      steps.formPutClinician,
      steps.formPostPatient,
      steps.formPutPatient,
    ];
    if (!intake) {
      for (const step of all) {
        row(step, 'not reached', 'no intake review (see the precondition row)');
      }
      return;
    }
    const target = `Questionnaire/${intake.form.id}`;
    const reads: [string, Person | undefined, number[]][] = [
      [steps.formRead, clinician, [200]],
      [steps.formReadSouthridge, southridge, [404]],
      [steps.formReadPatient, intake.patient, [403, 404]],
    ];
    for (const [step, person, expected] of reads) {
      if (!person) {
        row(step, 'not reached', 'could not sign in');
        continue;
      }
      try {
        const answer = await direct(person, 'GET', target);
        const good =
          expected.includes(answer.status) &&
          (answer.status !== 200 || (answer.body as Questionnaire).url === intake.form.url);
        row(
          step,
          good ? (expected.includes(200) ? 'ok' : 'held') : 'FAILED',
          `${target}: expected ${expected.join('/')}, got ${describe(answer)}`,
        );
      } catch (err) {
        row(step, 'FAILED', `the call threw: ${message(err)}`);
      }
    }
    if (!southridge) {
      row(steps.formSearchSouthridge, 'not reached', 'could not sign in');
    } else {
      try {
        const found = await direct(
          southridge,
          'GET',
          `Questionnaire?url=${encodeURIComponent(WORK_FORMS.assignCondition)}&_count=100`,
        );
        const leaked = entriesOf(found.body).some((r) => r.id === intake.form.id);
        row(
          steps.formSearchSouthridge,
          REFUSED.includes(found.status) || (found.status === 200 && !leaked) ? 'held' : 'FAILED',
          `expected 403/404, or a Bundle without ${target}; got ${describe(found)}${leaked ? ` WITH ${target}` : ''}`,
        );
      } catch (err) {
        row(steps.formSearchSouthridge, 'FAILED', `the call threw: ${message(err)}`);
      }
    }
    // One more condition choice: what a rewrite of the form would slip in.
    const withChoice = (form: Questionnaire): Questionnaire['item'] =>
      form.item?.map((item) =>
        item.linkId === CONDITION_ITEM
          ? {
              ...item,
              answerOption: [
                ...(item.answerOption ?? []),
                { valueCoding: { system: ICD10CM, code: 'Z99.89', display: 'lane attack' } },
              ],
            }
          : item,
      );
    const creates: [string, Person | undefined][] = [
      [steps.formPostClinician, clinician],
      [steps.formPostPatient, intake.patient],
    ];
    for (const [step, person] of creates) {
      if (!person) {
        row(step, 'not reached', 'could not sign in');
        continue;
      }
      try {
        const version = `lane-attack-${Date.now()}`;
        const written = await direct(person, 'POST', 'Questionnaire', {
          resourceType: 'Questionnaire',
          url: WORK_FORMS.assignCondition,
          version,
          status: 'active',
          title: 'Assign a condition (lane attack)',
          item: withChoice(intake.form),
        } satisfies Questionnaire);
        const found = entriesOf(
          (await adminRead(ctx, `fhir/R4/Questionnaire?version=${encodeURIComponent(version)}`)).body,
        );
        row(
          step,
          written.status === 403 && found.length === 0 ? 'held' : 'FAILED',
          `expected 403 and nothing written; got ${describe(written)}; the admin finds ${found.length} Questionnaire(s) of version ${version}`,
        );
      } catch (err) {
        row(step, 'FAILED', `the call threw: ${message(err)}`);
      }
    }
    const updates: [string, Person | undefined][] = [
      [steps.formPutClinician, clinician],
      [steps.formPutPatient, intake.patient],
    ];
    for (const [step, person] of updates) {
      if (!person) {
        row(step, 'not reached', 'could not sign in');
        continue;
      }
      try {
        const before = (await adminRead(ctx, `fhir/R4/${target}`)).body as Questionnaire | undefined;
        if (!before?.meta?.versionId) {
          row(step, 'FAILED', `the attack could not be staged: the admin could not read ${target}`);
          continue;
        }
        const written = await direct(person, 'PUT', target, { ...before, item: withChoice(before) });
        const after = (await adminRead(ctx, `fhir/R4/${target}`)).body as Questionnaire | undefined;
        const same = after?.meta?.versionId === before.meta.versionId;
        row(
          step,
          written.status === 403 && same ? 'held' : 'FAILED',
          `expected 403 and the same version; got ${describe(written)}; ${target} version ${after?.meta?.versionId}${same ? ' as before' : ` (was ${before.meta.versionId})`}`,
        );
      } catch (err) {
        row(step, 'FAILED', `the call threw: ${message(err)}`);
      }
    }
  };

  /**
   * Medplum's Provider app's way with clinician work (65cd263, contracts/work-forms.ts), on a new patient's
   * review and then its selection: the claim as two updates (herself as owner, status still ready; then
   * in-progress), neither with If-Match; her answers saved in-progress (the form's url without version,
   * `source` her, no subject or author), the task's output replaced by them (`QuestionnaireResponse`),
   * the task completed while they are still in-progress, then they are completed. The bot woken by the
   * completed task finds the answers pending and writes nothing; the Subscription on completed answers
   * (`QuestionnaireResponse?status=completed&questionnaire=<url>`) wakes it again, and it acts: proof that
   * its criteria match on a real Medplum (a run of the bot whose AuditEvent names the response).
   */
  const providerApp = async () => {
    const later = [steps.providerAnswers, steps.providerBelieved, steps.providerSelection];
    const intake = await intakeReview(ctx, "answers as Medplum's Provider app writes them", queueRef);
    if (!intake) {
      for (const step of [steps.providerClaim, ...later]) {
        row(step, 'not reached', 'no intake review (see the precondition row)');
      }
      return;
    }
    const patient = intake.patient.profile;
    const composeOffer = entriesOf(
      (await ctx.adminGet(`fhir/R4/Bot?identifier=${encodeURIComponent(`${SYSTEMS.bots}|compose-offer`)}`)).body,
    )[0] as Bot | undefined;
    /** The runs of `bot` on `entity` (its AuditEvents naming it), as the admin finds them. */
    const runsOn = async (entity: string, bot: string | undefined) =>
      (entriesOf((await adminRead(ctx, `fhir/R4/AuditEvent?entity=${entity}&_count=20`)).body) as AuditEvent[]).filter(
        (e) => e.source?.observer?.reference === `Bot/${bot}`,
      );
    const runsSaid = (runs: AuditEvent[]) =>
      `${runs.length} run(s)${runs.length ? ` (outcome ${runs.map((r) => r.outcome).join(', ')})` : ''}`;
    /** The two-step claim, as the Provider app saves the assignee and then the status. */
    const claimTwoSteps = async (taskId: string) => {
      const said: string[] = [];
      const read = await direct(clinician, 'GET', `Task/${taskId}`);
      if (read.status !== 200) {
        return { said: [`her read of Task/${taskId}: ${describe(read)}`] };
      }
      const assigned = await direct(clinician, 'PUT', `Task/${taskId}`, {
        ...(read.body as Task),
        owner: { reference: her },
      });
      const first = assigned.status === 200 ? (assigned.body as Task) : undefined;
      said.push(
        `the owner: ${describe(assigned)}${first ? ` (${first.status}, owner ${first.owner?.reference})` : ''}`,
      );
      if (!first) {
        return { said };
      }
      const started = await direct(clinician, 'PUT', `Task/${taskId}`, { ...first, status: 'in-progress' });
      const second = started.status === 200 ? (started.body as Task) : undefined;
      said.push(
        `the status: ${describe(started)}${second ? ` (${second.status}, owner ${second.owner?.reference})` : ''}`,
      );
      const good =
        first.status === 'ready' &&
        first.owner?.reference === her &&
        second?.status === 'in-progress' &&
        second.owner?.reference === her;
      return { said, claimed: good ? second : undefined };
    };
    /**
     * Her answers the Provider app's way on a claimed task; `wrote` says what the bot wrote (undefined:
     * nothing), asked once its run on the completed task is seen, before the answers are completed.
     */
    const answerTheProviderWay = async (
      task: Task,
      form: Questionnaire,
      items: QuestionnaireResponse['item'],
      bot: string | undefined,
      wrote: () => Promise<string | undefined>,
    ) => {
      const said: string[] = [];
      const saved = await direct(clinician, 'POST', 'QuestionnaireResponse', {
        resourceType: 'QuestionnaireResponse',
        questionnaire: form.url,
        status: 'in-progress',
        authored: new Date().toISOString(),
        source: { reference: her } as QuestionnaireResponse['source'],
        item: items,
      } satisfies QuestionnaireResponse);
      const response = saved.status === 201 ? (saved.body as QuestionnaireResponse & { id: string }) : undefined;
      const accounts = (response?.meta?.accounts ?? []).map((a) => a.reference ?? '');
      said.push(
        `her answers: ${describe(saved)}${response ? ` (${response.status}, written by ${response.meta?.author?.reference}, questionnaire ${response.questionnaire}, source ${response.source?.reference}, subject ${response.subject?.reference ?? 'none'}, accounts ${accounts.join(', ') || 'none'}${sameSet(accounts, intake.tenant) ? ' (her tenant)' : ' (NOT her tenant)'})` : ''}`,
      );
      if (!response || response.meta?.author?.reference !== her || !sameSet(accounts, intake.tenant)) {
        return { said };
      }
      const output = await direct(clinician, 'PUT', `Task/${task.id}`, {
        ...task,
        output: [
          {
            type: { text: PROVIDER_APP_OUTPUT },
            valueReference: { reference: `QuestionnaireResponse/${response.id}` },
          },
        ],
      });
      said.push(`the output: ${describe(output)}`);
      if (output.status !== 200) {
        return { said, response };
      }
      const done = await direct(clinician, 'PUT', `Task/${task.id}`, { ...(output.body as Task), status: 'completed' });
      said.push(`the completion: ${describe(done)}`);
      if (done.status !== 200) {
        return { said, response };
      }
      // The bot's run on the completed task: the answers are still in-progress (pending), nothing written.
      const started = Date.now();
      let pendingRuns: AuditEvent[] = [];
      for (;;) {
        pendingRuns = await runsOn(`Task/${task.id}`, bot);
        if (pendingRuns.length > 0 || Date.now() - started > SUBSCRIPTION_WAIT_MS) {
          break;
        }
        await pause(1000);
      }
      if (pendingRuns.length > 0) {
        await pause(1000);
      }
      const early = await wrote();
      said.push(
        `on the completed task, while the answers are in-progress: ${runsSaid(pendingRuns)} of the bot${pendingRuns.length ? '' : ` within ${SUBSCRIPTION_WAIT_MS / 1000} s`}, ${early ? `it WROTE ${early}` : 'nothing written'}`,
      );
      const completed = await direct(clinician, 'PUT', `QuestionnaireResponse/${response.id}`, {
        ...response,
        status: 'completed',
      });
      said.push(`her answers completed: ${describe(completed)}`);
      const good = pendingRuns.some((r) => r.outcome === '0') && !early && completed.status === 200;
      return { said, response, good };
    };

    // (d) The claim in two updates.
    const claim = await claimTwoSteps(intake.review.id);
    row(
      steps.providerClaim,
      claim.claimed ? 'ok' : 'FAILED',
      `expected 200 (ready, owner her), then 200 (in-progress, owner her); got ${claim.said.join('; ')}`,
    );
    if (!claim.claimed) {
      for (const step of later) {
        row(step, 'not reached', 'the two-step claim above failed');
      }
      return;
    }
    try {
      // (c) Her answers, the review completed before them.
      const reviewKey = `Task/${intake.review.id}`;
      const answered = await answerTheProviderWay(
        claim.claimed,
        intake.form,
        conditionItem(intake.form),
        eligibility.id,
        async () => {
          const seen = await aftermath(intake.review, patient, () => true);
          const what = [
            seen.keyedCondition ? `Condition/${seen.keyedCondition.id}` : '',
            seen.keyedSelection ? `Task/${seen.keyedSelection.id}` : '',
          ].filter(Boolean);
          return what.length ? what.join(', ') : undefined;
        },
      );
      row(steps.providerAnswers, answered.good ? 'ok' : 'FAILED', answered.said.join('; '));
      const response = answered.response;
      if (!answered.good || !response) {
        row(steps.providerBelieved, 'not reached', 'the hand-in above did not go as the Provider app makes it');
        row(steps.providerSelection, 'not reached', 'the hand-in above did not go as the Provider app makes it');
        return;
      }
      const responseRef = `QuestionnaireResponse/${response.id}`;
      const seen = await aftermath(
        intake.review,
        patient,
        (s) => s.keyedCondition !== undefined && s.keyedSelection?.status === 'ready',
      );
      const woken = await runsOn(responseRef, eligibility.id);
      const condition = seen.keyedCondition;
      const selection = seen.keyedSelection;
      const evidence = condition?.evidence?.flatMap((e) => e.detail ?? []).map((d) => d.reference ?? '') ?? [];
      const believed =
        woken.some((r) => r.outcome === '0') &&
        condition?.asserter?.reference === her &&
        condition.code?.coding?.some((c) => c.system === ICD10CM && c.code === 'I10') === true &&
        evidence.some((e) => e === responseRef || e.startsWith(`${responseRef}/_history/`)) &&
        selection?.status === 'ready';
      row(
        steps.providerBelieved,
        believed ? 'ok' : 'FAILED',
        `after ${seen.seconds.toFixed(1)} s: ${runsSaid(woken)} of the eligibility bot naming ${responseRef}; ${
          condition
            ? `Condition/${condition.id} (keyed by ${reviewKey}): ${condition.code?.coding?.map((c) => `${c.system}|${c.code}`).join(', ')}, asserter ${condition.asserter?.reference}${condition.asserter?.reference === her ? ' (her)' : ' (NOT her)'}, evidence ${evidence.join(', ') || 'none'}`
            : `no Condition keyed by ${reviewKey} (${seen.conditions.length} Condition(s) of the patient)`
        }; ${selection ? `Task/${selection.id} select-treatment ${selection.status}` : `no select-treatment Task keyed by the review (${seen.selections.length} of the patient)`}; ${runsOf(seen)} (the review's)`,
      );
      if (!believed || !selection?.id) {
        row(steps.providerSelection, 'not reached', 'no ready selection (the row above)');
        return;
      }
      // The selection the same way: compose-offer.
      const selectionClaim = await claimTwoSteps(selection.id);
      if (!selectionClaim.claimed) {
        row(
          steps.providerSelection,
          'FAILED',
          `the two-step claim of Task/${selection.id}: ${selectionClaim.said.join('; ')}`,
        );
        return;
      }
      const stored = await readForm(ctx.baseUrl, clinician.token, selectionClaim.claimed);
      const chosen = stored.form?.item
        ?.find((i) => i.linkId === OPTION_ITEM)
        ?.answerOption?.map((o) => o.valueCoding)
        .find((c) => c?.code?.includes('amlodipine'));
      if (!stored.form || !chosen?.code) {
        row(
          steps.providerSelection,
          'FAILED',
          `Task/${selection.id}: her read of its form: ${formSaid(stored)}, no amlodipine option`,
        );
        return;
      }
      const offerOf = async () => {
        const [read, offers] = await Promise.all([
          adminRead(ctx, `fhir/R4/Task/${selection.id}`),
          adminRead(
            ctx,
            `fhir/R4/Task?patient=${patient}&code=${encodeURIComponent(`${SYSTEMS.taskKind}|treatment-offer`)}&_count=5`,
          ),
        ]);
        return { after: read.body as Task | undefined, offer: entriesOf(offers.body)[0] as Task | undefined };
      };
      const selected = await answerTheProviderWay(
        selectionClaim.claimed,
        stored.form,
        [{ linkId: OPTION_ITEM, answer: [{ valueCoding: chosen }] }],
        composeOffer?.id,
        async () => {
          const { after, offer } = await offerOf();
          const what = [
            offer ? `Task/${offer.id} (treatment-offer)` : '',
            after?.businessStatus?.text ? `businessStatus ${after.businessStatus.text}` : '',
          ].filter(Boolean);
          return what.length ? what.join(', ') : undefined;
        },
      );
      if (!selected.good || !selected.response) {
        row(steps.providerSelection, 'FAILED', `the hand-in: ${selected.said.join('; ')}`);
        return;
      }
      const selectedRef = `QuestionnaireResponse/${selected.response.id}`;
      const started = Date.now();
      let now: { after: Task | undefined; offer: Task | undefined };
      for (;;) {
        now = await offerOf();
        if ((now.offer && now.after?.businessStatus) || Date.now() - started > SUBSCRIPTION_WAIT_MS) {
          break;
        }
        await pause(1000);
      }
      const { after, offer } = now;
      const group = offer?.focus?.reference?.startsWith('RequestGroup/')
        ? ((await adminRead(ctx, `fhir/R4/${offer.focus.reference}`)).body as { instantiatesCanonical?: string[] })
        : undefined;
      const wokenBy = await runsOn(selectedRef, composeOffer?.id);
      const composed =
        wokenBy.some((r) => r.outcome === '0') &&
        after?.businessStatus?.text === 'offer-composed' &&
        offer?.status === 'ready' &&
        (group?.instantiatesCanonical ?? []).includes(chosen.code);
      row(
        steps.providerSelection,
        composed ? 'ok' : 'FAILED',
        `${selectionClaim.said.join('; ')}; ${selected.said.join('; ')}; after ${((Date.now() - started) / 1000).toFixed(1)} s: ${runsSaid(wokenBy)} of the compose-offer bot naming ${selectedRef}; Task/${selection.id} ${after?.status}, businessStatus ${after?.businessStatus?.text ?? 'none'}${after?.statusReason?.text ? ` (${after.statusReason.text})` : ''}; ${offer ? `the offer Task/${offer.id} ${offer.status}, ${offer.focus?.reference} instantiates ${(group?.instantiatesCanonical ?? []).join(', ') || 'nothing'}` : 'no treatment-offer Task of the patient'}`,
      );
    } catch (err) {
      row(steps.providerAnswers, 'FAILED', `the call threw: ${message(err)}`);
    }
  };

  // The control: her own answers.
  const mine = await intakeReview(ctx, 'her own answers', queueRef);
  await formAsText(mine);
  await formRights(mine);
  /** The answers she handed in for her review (the Condition's evidence), when the control got that far. */
  let handedIn: QuestionnaireResponse | undefined;
  if (!mine) {
    row(steps.control, 'not reached', 'no intake review (see the precondition row)');
    row(steps.believed, 'not reached', 'no intake review (see the precondition row)');
  } else {
    try {
      const handed = await handIn(mine.review, clinician, answersTo(mine.form, mine.patient.profile, her));
      const response = handed.response;
      const mineByHer = response?.meta?.author?.reference === her;
      handedIn = !handed.stopped ? response : undefined;
      row(
        steps.control,
        !handed.stopped && mineByHer ? 'ok' : 'FAILED',
        `expected her claim 200, her answers 201 (meta.author her), her completion 200; got ${handed.said.join('; ')}`,
      );
      if (handed.stopped || !response?.id) {
        row(steps.believed, 'not reached', 'the hand-in above did not complete');
      } else {
        const seen = await aftermath(
          mine.review,
          mine.patient.profile,
          (s) => s.keyedCondition !== undefined && s.keyedSelection?.status === 'ready',
        );
        const condition = seen.keyedCondition;
        const selection = seen.keyedSelection;
        const evidence = condition?.evidence?.flatMap((e) => e.detail ?? []).map((d) => d.reference) ?? [];
        const conditionGood =
          condition !== undefined &&
          condition.asserter?.reference === her &&
          condition.recorder?.reference === her &&
          condition.code?.coding?.some((c) => c.system === ICD10CM && c.code === 'I10') === true &&
          condition.subject?.reference === mine.patient.profile &&
          evidence.includes(`QuestionnaireResponse/${response.id}`);
        const storedSelection = await readForm(ctx.baseUrl, ctx.adminToken, selection);
        const selectionForm = storedSelection.form;
        const options = (selectionForm?.item?.find((i) => i.linkId === OPTION_ITEM)?.answerOption ?? []).length;
        const formAccounts = (selectionForm?.meta?.accounts ?? []).map((a) => a.reference ?? '');
        const selectionGood =
          selection?.status === 'ready' &&
          selectionForm?.url === WORK_FORMS.selectTreatment &&
          selectionForm.meta?.author?.reference?.startsWith('Bot/') === true &&
          sameSet(formAccounts, mine.tenant) &&
          selection.reasonReference?.reference?.startsWith(`Condition/${condition?.id}/_history/`) === true &&
          options > 0;
        row(
          steps.believed,
          conditionGood && selectionGood ? 'ok' : 'FAILED',
          `after ${seen.seconds.toFixed(1)} s: ${
            condition
              ? `Condition/${condition.id} (written by ${condition.meta?.author?.reference}): ${condition.code?.coding?.map((c) => c.code).join(', ')}, ${condition.verificationStatus?.coding?.[0]?.code}, asserter ${condition.asserter?.reference}, recorder ${condition.recorder?.reference}${condition.asserter?.reference === her ? ' (her)' : ' (NOT her)'}, evidence ${evidence.join(', ') || 'none'}`
              : `no Condition keyed by Task/${mine.review.id} (${seen.conditions.length} Condition(s) of the patient)`
          }; ${
            selection
              ? `Task/${selection.id} select-treatment ${selection.status}, owner ${selection.owner?.reference}, reasonReference ${selection.reasonReference?.reference ?? 'none'}, its stored form ${selectionForm ? `${formSaid(storedSelection)}${sameSet(formAccounts, mine.tenant) ? " (the patient's tenant)" : " (NOT the patient's tenant)"} with ${options} option(s)` : formSaid(storedSelection)}`
              : `no select-treatment Task keyed by the review (${seen.selections.length} of the patient)`
          }; ${runsOf(seen)}`,
        );
      }
    } catch (err) {
      row(steps.control, 'FAILED', `the call threw: ${message(err)}`);
    }
  }

  await appShaped();
  await providerApp();

  // A colleague's answers, written in her name: Medplum stamps who wrote them (meta.author).
  const colleagues = await intakeReview(ctx, "a colleague's answers", queueRef);
  if (!southridge || !colleagues) {
    row(
      steps.southridge,
      'not reached',
      !southridge ? 'could not sign in' : 'no intake review (see the precondition row)',
    );
  } else {
    try {
      const written = await direct(
        southridge,
        'POST',
        'QuestionnaireResponse',
        answersTo(colleagues.form, colleagues.patient.profile, southridge.profile),
      );
      row(
        steps.southridge,
        [400, 403, 404].includes(written.status) ? 'held' : 'FAILED',
        `expected 400/403/404, got ${describe(written)}`,
      );
    } catch (err) {
      row(steps.southridge, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  // In her name: the policy refuses it outright (OWN_ANSWERS_ONLY: no author, or the writer herself).
  await refusedCreate(
    steps.inHerName,
    colleague,
    colleagues,
    (intake) => answersTo(intake.form, intake.patient.profile, her),
    'the clinician outside the queue could not sign in',
  );
  await judgeAttack(steps.colleague, colleagues, colleague);
  await saysWhy(steps.colleagueWhy, colleagues);

  // The patient's own answers to the clinician's form.
  const patients = await intakeReview(ctx, "the patient's own answers", queueRef);
  await judgeAttack(steps.patient, patients, patients?.patient);

  await ownAnswers(mine ?? colleagues ?? patients, handedIn);
}

/** What eligibility did about one review, as the admin reads it. */
interface Aftermath {
  runs: AuditEvent[];
  conditions: Condition[];
  selections: Task[];
  keyedCondition: Condition | undefined;
  keyedSelection: Task | undefined;
  seconds: number;
}

/** A gateway answer with the header a throttled one carries. */
type GatewayAnswer = Answer & { retryAfter: string | null };

/** The envelope of a gateway error (`{error: {code, message, details}}`). */
const errorOf = (answer: Answer): { code?: string; message?: string; details?: Record<string, unknown> } =>
  (answer.body as { error?: { code?: string; message?: string; details?: Record<string, unknown> } } | undefined)
    ?.error ?? {};

/** A gateway answer in a few words; a 5xx prominently, with the gateway's message (a search Medplum refused). */
const gatewayDescribe = (answer: Answer): string =>
  answer.status >= 500
    ? `a ${answer.status} (SERVER ERROR): ${errorOf(answer).code ?? ''} ${errorOf(answer).message ?? answer.text.slice(0, 200)}`
    : describe(answer);

/**
 * What the patient bots bound, on a real Medplum: the daily cap of POST /v1/requests (request-review,
 * `REQUESTS_PER_DAY`, its `authoredon`/`authored` searches) and the days view of GET /v1/availability
 * (read in start order, `inStartOrder`) against the slots view paged to its end.
 */
async function patientBounds(ctx: AttackContext, people: Map<string, Person>): Promise<void> {
  const call = async (
    person: Person,
    method: string,
    path: string,
    body?: unknown,
    through: typeof fetch = ctx.gatewayFetch,
  ): Promise<GatewayAnswer> => {
    const response = await through(`${PUBLIC_URL}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${person.token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { ...(await answerOf(response)), retryAfter: response.headers.get('retry-after') };
  };

  // 1. The daily cap: bob (no request of his before) opens 10 distinct ones, the 11th is 429, the first again 200.
  // N gateways (c): his requests go through the instances in turn (the 1st through A, the 2nd through B, ...,
  // 5 each), the 11th through A, then again through B: the cap is counted in Medplum, not per instance.
  const bob = people.get('bob');
  const LIMIT = 10;
  const codes = Array.from({ length: LIMIT + 1 }, (_, i) => String(900000 + i));
  const medication = (code: string) => ({ medication: `${RXNORM}|${code}` });
  const instanceOf = (i: number) => ctx.instances[i % ctx.instances.length];
  const capRows = [
    `requests: bob (Northwind patient) opens ${LIMIT} distinct medication requests (RxNorm ${codes[0]}..${codes[LIMIT - 1]}, POST /v1/requests), each 201`,
    `requests: bob's 11th distinct request (RxNorm ${codes[LIMIT]}) is 429 rate_limited with Retry-After, details.retryAfter and details.limit ${LIMIT}`,
    `${N_GATEWAYS} (c): request caps across instances: bob's ${LIMIT} requests went through instances A and B in turn (neither saw ${LIMIT}); his 11th distinct request, refused through ${instanceOf(LIMIT).name}, made again through the other instance, ${instanceOf(LIMIT + 1).name}: refused the same (429 rate_limited, the same message, details.limit ${LIMIT}, Retry-After within 5 s of the first refusal's); his proposals, read by the admin, still ${LIMIT}`,
    `requests: bob asks again for his first (RxNorm ${codes[0]}), open: 200, the same request`,
    "requests: the refused 11th wrote nothing (bob's proposals, read by the admin)",
  ];
  const countProposals = async (person: Person) => {
    const counted = await ctx.adminGet(
      `fhir/R4/MedicationRequest?subject=${person.profile}&intent=proposal&authoredon=ge${new Date(Date.now() - DAY).toISOString()}&_summary=count`,
    );
    return { counted, total: (counted.body as Bundle | undefined)?.total };
  };
  if (!bob) {
    for (const step of capRows) {
      row(step, 'not reached', 'bob could not sign in');
    }
  } else {
    let first: GatewayAnswer | undefined;
    try {
      const answers: GatewayAnswer[] = [];
      for (const [i, code] of codes.slice(0, LIMIT).entries()) {
        answers.push(await call(bob, 'POST', '/v1/requests', medication(code), instanceOf(i).fetch));
      }
      first = answers[0];
      const wrong = answers.findIndex(
        (a) => a.status !== 201 || !/^MedicationRequest\//.test(String((a.body as { request?: string })?.request)),
      );
      const through = ctx.instances
        .map((instance) => `${answers.filter((_, i) => instanceOf(i) === instance).length} through ${instance.name}`)
        .join(', ');
      row(
        capRows[0],
        wrong === -1 ? 'ok' : 'FAILED',
        wrong === -1
          ? `10 x 201 (${through}, in turn), each a MedicationRequest and its review Task (the first ${(first.body as { request?: string }).request})`
          : `statuses ${answers.map((a) => a.status).join(', ')}; request ${wrong + 1} (RxNorm ${codes[wrong]}, through ${instanceOf(wrong).name}): ${gatewayDescribe(answers[wrong])}`,
      );
    } catch (err) {
      row(capRows[0], 'FAILED', `the call threw: ${message(err)}`);
    }
    let over: GatewayAnswer | undefined;
    try {
      over = await call(bob, 'POST', '/v1/requests', medication(codes[LIMIT]), instanceOf(LIMIT).fetch);
      const error = errorOf(over);
      const header = Number(over.retryAfter);
      const retryAfter = error.details?.retryAfter;
      const good =
        over.status === 429 &&
        error.code === 'rate_limited' &&
        Number.isInteger(header) &&
        header > 0 &&
        header <= 86_400 &&
        typeof retryAfter === 'number' &&
        retryAfter > 0 &&
        error.details?.limit === LIMIT;
      row(
        capRows[1],
        good ? 'ok' : 'FAILED',
        `expected 429 rate_limited, Retry-After 1..86400, details {retryAfter, limit: ${LIMIT}}; got ${gatewayDescribe(over)} through ${instanceOf(LIMIT).name}, Retry-After ${over.retryAfter ?? 'absent'}, error.code ${error.code ?? 'absent'}, details ${JSON.stringify(error.details ?? null)}`,
      );
    } catch (err) {
      row(capRows[1], 'FAILED', `the call threw: ${message(err)}`);
    }
    try {
      const other = instanceOf(LIMIT + 1);
      const again = await call(bob, 'POST', '/v1/requests', medication(codes[LIMIT]), other.fetch);
      const [a, b] = [errorOf(over ?? again), errorOf(again)];
      const { counted, total } = await countProposals(bob);
      const secondsApart = Math.abs(Number(a.details?.retryAfter) - Number(b.details?.retryAfter));
      const good =
        over?.status === 429 &&
        again.status === 429 &&
        b.code === 'rate_limited' &&
        b.code === a.code &&
        b.message === a.message &&
        b.details?.limit === LIMIT &&
        a.details?.limit === LIMIT &&
        Number.isInteger(Number(again.retryAfter)) &&
        Number(again.retryAfter) > 0 &&
        secondsApart <= 5 &&
        counted.status === 200 &&
        total === LIMIT;
      row(
        capRows[2],
        good ? 'ok' : 'FAILED',
        `through ${instanceOf(LIMIT).name}: ${over ? `${gatewayDescribe(over)}, "${a.message ?? ''}" details ${JSON.stringify(withoutRequestIds(a.details ?? null))}` : 'no answer'}; through ${other.name}: ${gatewayDescribe(again)}, Retry-After ${again.retryAfter ?? 'absent'}, "${b.message ?? ''}" details ${JSON.stringify(withoutRequestIds(b.details ?? null))} (retryAfter ${secondsApart} s apart); his proposals authored in the last day, as the admin counts them: ${counted.status === 200 ? total : describe(counted)}`,
      );
    } catch (err) {
      row(capRows[2], 'FAILED', `the call threw: ${message(err)}`);
    }
    try {
      const again = await call(bob, 'POST', '/v1/requests', medication(codes[0]));
      const was = (first?.body as { request?: string; task?: string } | undefined) ?? {};
      const now = (again.body as { request?: string; task?: string } | undefined) ?? {};
      const same =
        again.status === 200 && now.request !== undefined && now.request === was.request && now.task === was.task;
      row(
        capRows[3],
        same ? 'ok' : 'FAILED',
        `expected 200 with ${was.request ?? 'the first answer'} and ${was.task ?? 'its Task'}; got ${gatewayDescribe(again)}${again.status < 300 ? `, ${now.request} and ${now.task}` : ''}`,
      );
    } catch (err) {
      row(capRows[3], 'FAILED', `the call threw: ${message(err)}`);
    }
    const { counted, total } = await countProposals(bob);
    row(
      capRows[4],
      counted.status === 200 && total === LIMIT ? 'ok' : 'FAILED',
      `expected ${LIMIT} MedicationRequest proposals of ${bob.profile} authored in the last day; got ${counted.status === 200 ? total : describe(counted)}`,
    );
  }

  // 2. The days view against the slots view: alice (Northwind, California), the Northwind visit team, 14 days.
  const alice = people.get('alice');
  const step =
    'availability: alice (Northwind, CA), the Northwind visit team, the next 14 days: the days view (America/Los_Angeles) sums to the slots view paged to its end';
  const team = entriesOf(
    (await ctx.adminGet(`fhir/R4/CareTeam?_tag=${encodeURIComponent(`${SYSTEMS.provisioning}|visit-team-northwind`)}`))
      .body,
  )[0];
  if (!alice || !team?.id) {
    row(step, 'not reached', !alice ? 'alice could not sign in' : 'no CareTeam tagged visit-team-northwind');
    return;
  }
  try {
    const now = new Date();
    const window = {
      careTeam: `CareTeam/${team.id}`,
      start: now.toISOString(),
      end: new Date(now.getTime() + 14 * DAY).toISOString(),
    };
    const t0 = Date.now();
    const days = await call(
      alice,
      'GET',
      `/v1/availability?${new URLSearchParams({ ...window, view: 'days', timezone: 'America/Los_Angeles' })}`,
    );
    const daysMs = Date.now() - t0;
    const dayList = (days.body as { days?: { date: string; count: number }[] } | undefined)?.days ?? [];
    const daySum = dayList.reduce((sum, d) => sum + d.count, 0);
    // materialize-slots' one run at provisioning makes the soonest Slots only (SLOTS_PER_RUN): the later dates are 0.
    const withSlots = dayList.filter((d) => d.count > 0);
    const ids = new Set<string>();
    let listed = 0;
    let pages = 0;
    let inOrder = true;
    let lastStart = '';
    let cursor: string | undefined;
    let pageError: GatewayAnswer | undefined;
    const t1 = Date.now();
    do {
      const page = await call(
        alice,
        'GET',
        `/v1/availability?${new URLSearchParams({ ...window, view: 'slots', count: '200', ...(cursor ? { cursor } : {}) })}`,
      );
      pages++;
      if (page.status !== 200) {
        pageError = page;
        break;
      }
      const body = page.body as { slots?: { slot: string; start: string }[]; next?: string };
      for (const slot of body.slots ?? []) {
        listed++;
        ids.add(slot.slot);
        inOrder &&= Date.parse(slot.start) >= Date.parse(lastStart || slot.start);
        lastStart = slot.start;
      }
      cursor = body.next;
    } while (cursor && pages < 100);
    const slotsMs = Date.now() - t1;
    const good =
      days.status === 200 && !pageError && !cursor && daySum === listed && listed === ids.size && listed > 0 && inOrder;
    row(
      step,
      good ? 'ok' : 'FAILED',
      days.status !== 200
        ? `the days view: ${gatewayDescribe(days)}`
        : pageError
          ? `the slots view, page ${pages}: ${gatewayDescribe(pageError)}`
          : `days view: ${daySum} slots over ${dayList.length} dates, ${withSlots.length} of them with slots (${withSlots[0]?.date ?? '-'}..${withSlots.at(-1)?.date ?? '-'}) (${daysMs} ms); slots view: ${listed} slots (${ids.size} distinct${inOrder ? ', in start order' : ', NOT in start order'}) in ${pages} page(s) of at most 200 (${slotsMs} ms)${cursor ? ', still a next cursor after 100 pages' : ''}${daySum === listed ? '' : `; MISMATCH of ${daySum - listed}`}`,
    );
  } catch (err) {
    row(step, 'FAILED', `the call threw: ${message(err)}`);
  }
}

/**
 * What the service needs of her, an address with a country and a state, is
 * asked for; an answer that depends on it says what is missing and how to give it. A new Northwind patient,
 * homed, her Patient as Medplum's registration leaves it (a name, no address), through the in-process
 * gateway on this Medplum: GET /v1/protocols withholds the area-limited offerings and says so
 * (`incomplete`), GET /v1/availability (the availability bot) is 409 invalid_state naming the missing
 * fields; once she PUTs her address, both answer in full.
 */
async function addressNeeded(ctx: AttackContext): Promise<void> {
  const steps = [
    "address: a new Northwind patient, registered through Northwind's app and homed, her Patient with no address (as Medplum's registration leaves it): GET /v1/protocols is 200 with incomplete {missing: [Patient.address[0].country, Patient.address[0].state], withheld > 0, fix: 'PUT /v1/fhir/Patient/<her id>'}",
    'address: her GET /v1/availability (the Northwind visit team, the next 7 days) is 409 invalid_state with details.missing (country, state) and the same fix',
    'address: once she PUTs her address (US, CA) through the gateway, GET /v1/protocols answers in full (no incomplete, the withheld offerings listed) and GET /v1/availability is 200',
  ];
  const team = entriesOf(
    (await ctx.adminGet(`fhir/R4/CareTeam?_tag=${encodeURIComponent(`${SYSTEMS.provisioning}|visit-team-northwind`)}`))
      .body,
  )[0];
  let person: Person;
  let patientId: string;
  try {
    person = await register(ctx.baseUrl, ctx.projectId, ctx.appIdOf('northwind'));
    const api = createPatientCareClient({ baseUrl: PUBLIC_URL, accessToken: person.token, fetch: ctx.gatewayFetch });
    const home = await api.patient.home();
    patientId = home.patient.split('/')[1];
  } catch (err) {
    row(steps[0], 'FAILED', `the precondition threw: ${message(err)}`);
    row(steps[1], 'not reached', 'no patient (the row above)');
    row(steps[2], 'not reached', 'no patient (the row above)');
    return;
  }
  const call = async (method: string, path: string, body?: unknown): Promise<Answer> =>
    answerOf(
      await ctx.gatewayFetch(`${PUBLIC_URL}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${person.token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
    );
  const me = `/v1/fhir/Patient/${patientId}`;
  const fix = `PUT ${me}`;
  const missing = ['Patient.address[0].country', 'Patient.address[0].state'];
  const sameList = (a: unknown, b: string[]) => JSON.stringify(a) === JSON.stringify(b);
  const now = Date.now();
  const availabilityPath = `/v1/availability?${new URLSearchParams({
    careTeam: `CareTeam/${team?.id}`,
    start: new Date(now).toISOString(),
    end: new Date(now + 7 * DAY).toISOString(),
  })}`;
  type Protocols = { protocols?: unknown[]; incomplete?: { missing?: unknown; withheld?: number; fix?: string } };
  let listed = 0;
  let withheld = 0;
  try {
    const stored = (await ctx.adminGet(`fhir/R4/Patient/${patientId}`)).body as { address?: unknown[] } | undefined;
    const partial = await call('GET', '/v1/protocols');
    const body = partial.body as Protocols | undefined;
    listed = body?.protocols?.length ?? 0;
    withheld = body?.incomplete?.withheld ?? 0;
    const good =
      (stored?.address ?? []).length === 0 &&
      partial.status === 200 &&
      sameList(body?.incomplete?.missing, missing) &&
      withheld > 0 &&
      body?.incomplete?.fix === fix;
    row(
      steps[0],
      good ? 'ok' : 'FAILED',
      `Patient/${patientId}, ${(stored?.address ?? []).length} address(es) as the admin reads her; GET /v1/protocols: ${gatewayDescribe(partial)}, ${listed} offering(s), incomplete ${JSON.stringify(body?.incomplete ?? null)}`,
    );
  } catch (err) {
    row(steps[0], 'FAILED', `the call threw: ${message(err)}`);
  }
  if (!team?.id) {
    row(steps[1], 'not reached', 'no CareTeam tagged visit-team-northwind');
  } else {
    try {
      const refused = await call('GET', availabilityPath);
      const error = errorOf(refused);
      const good =
        refused.status === 409 &&
        error.code === 'invalid_state' &&
        sameList(error.details?.missing, missing) &&
        error.details?.fix === fix;
      row(
        steps[1],
        good ? 'ok' : 'FAILED',
        `expected 409 invalid_state, details {missing: ${JSON.stringify(missing)}, fix: '${fix}'}; got ${gatewayDescribe(refused)}, error ${JSON.stringify({ code: error.code, message: error.message, details: error.details })}`,
      );
    } catch (err) {
      row(steps[1], 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  try {
    const read = await call('GET', me);
    const written = await call('PUT', me, {
      ...(read.body as Resource),
      address: [{ line: ['9 Address Lane'], city: 'Fresno', state: 'CA', postalCode: '93701', country: 'US' }],
    });
    const full = await call('GET', '/v1/protocols');
    const body = full.body as Protocols | undefined;
    const served = team?.id ? await call('GET', availabilityPath) : undefined;
    const slots = (served?.body as { slots?: unknown[] } | undefined)?.slots;
    const good =
      written.status === 200 &&
      full.status === 200 &&
      body?.incomplete === undefined &&
      (body?.protocols?.length ?? 0) === listed + withheld &&
      served?.status === 200;
    row(
      steps[2],
      good ? 'ok' : 'FAILED',
      `her PUT ${me}: ${gatewayDescribe(written)}; GET /v1/protocols: ${gatewayDescribe(full)}, ${body?.protocols?.length ?? 0} offering(s) (${listed} + ${withheld} withheld before), incomplete ${JSON.stringify(body?.incomplete ?? null)}; GET /v1/availability: ${served ? `${gatewayDescribe(served)}${slots ? `, ${slots.length} slot(s)` : ''}` : 'not asked (no visit team)'}`,
    );
  } catch (err) {
    row(steps[2], 'FAILED', `the call threw: ${message(err)}`);
  }
  await enrollmentRepeats(ctx, person);
}

/**
 * The new patient of `addressNeeded` (homed, with her address) enrolls in Northwind's
 * monitoring program, activates it and unenrolls, through the gateway; after each step the same call is
 * made again (`repeats`): answered from her own reads, no bot run, as the enrollment bot answers it now.
 */
async function enrollmentRepeats(ctx: AttackContext, person: Person): Promise<void> {
  const step = 'repeat: her enrollment, activation and unenrollment, each made again';
  const made: MadeCall[] = [];
  const recording = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    if (new URL(request.url).pathname.startsWith('/v1/enrollments')) {
      made.length = 0;
      made.push({
        method: request.method,
        url: request.url,
        authorization: request.headers.get('authorization') ?? '',
        body: await request.clone().text(),
      });
    }
    return ctx.gatewayFetch(request);
  }) as typeof fetch;
  try {
    const api = createPatientCareClient({ baseUrl: PUBLIC_URL, accessToken: person.token, fetch: recording });
    const { protocols } = await api.protocols.list();
    const program = protocols.find(
      (p) => p.type === 'program' && p.protocol.includes('programs/blood-pressure-monitoring'),
    );
    if (!program) {
      row(step, 'FAILED', 'no blood-pressure monitoring program among her offerings');
      return;
    }
    const { unmet } = await api.agreements.requirements({ healthcareService: program.healthcareService });
    if (unmet.length > 0) {
      await api.agreements.accept(unmet);
    }
    const { carePlan } = await api.enrollments.create({ healthcareService: program.healthcareService });
    await ctx.repeat(made);
    await api.enrollments.activate(carePlan);
    await ctx.repeat(made);
    await api.enrollments.delete(carePlan);
    await ctx.repeat(made);
  } catch (err) {
    row(step, 'FAILED', `the call threw: ${message(err)}`);
  }
}

/** What the lane saw of the journey's order just before the journey decided it (`probeOrder`). */
interface OrderProbe {
  /** `RequestGroup/<id>`. */
  order: string;
  /** The journey's decisions, as it sent them: every item of the order. */
  items: { item: string; decision?: string; fulfilment?: string }[];
  /** Her GET /v1/tasks then. */
  tasks?: Answer;
  /** Each item accepted with a method her task does not allow, and its answer. */
  sent?: { item: string; fulfilment: string }[];
  refused?: Answer;
  error?: string;
}

/**
 * Before the journey's own decision: her open tasks through the gateway (her
 * token, from the journey's call), and a decision of the same order accepting each item with a method not
 * among those her task allows, which decide-order refuses (422) before it writes anything. Never throws.
 */
async function probeOrder(gatewayFetch: typeof fetch, request: Request, order: string): Promise<OrderProbe> {
  const probe: OrderProbe = { order, items: [] };
  try {
    probe.items = ((await request.json()) as { items?: OrderProbe['items'] }).items ?? [];
    const headers = new Headers(request.headers);
    headers.delete('content-length');
    // The journey's call carries the SDK's Idempotency-Key: the probe is another request, so never with
    // that key (the gateway would answer the journey's own call 422 idempotency_key_reused); a key of its own.
    headers.delete('idempotency-key');
    probe.tasks = await answerOf(await gatewayFetch(`${PUBLIC_URL}/v1/tasks`, { headers }));
    const view = ((probe.tasks.body as { tasks?: PatientTask[] } | undefined)?.tasks ?? []).find(
      (t) => t.kind === 'order-decisions' && t.offer === order,
    );
    probe.sent = probe.items.map(({ item }) => {
      const allowed = view?.items?.find((i) => i.item === item)?.allowed ?? ['delivery', 'pickup'];
      return { item, fulfilment: FULFILMENT_METHODS.find((m) => !allowed.includes(m)) ?? 'at-home-kit' };
    });
    headers.set('content-type', 'application/json');
    headers.set('idempotency-key', crypto.randomUUID());
    probe.refused = await answerOf(
      await gatewayFetch(`${PUBLIC_URL}/v1/orders/${order.split('/')[1]}/decisions`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ items: probe.sent.map((s) => ({ ...s, decision: 'accept' })) }),
      }),
    );
  } catch (err) {
    probe.error = message(err);
  }
  return probe;
}

const sameSet = (a: readonly string[], b: readonly string[]): boolean =>
  a.length === b.length && a.every((x) => b.includes(x)) && b.every((x) => a.includes(x));

/**
 * Her open tasks and the order-decisions task (GET /v1/tasks): the
 * complete-task bot names each item of the order she accepted with the methods her tenant's policy allows
 * where she lives, as decide-order accepts them; GET /v1/tasks lists her open tasks, each with the call
 * that completes it, and nobody else's.
 */
async function orderTasks(ctx: AttackContext, people: Map<string, Person>): Promise<void> {
  const { progress, orderProbe: probe } = ctx;
  const maya = people.get('maya');
  const methods = (extensions: { url?: string; valueCode?: string }[] | undefined) =>
    (extensions ?? []).filter((e) => e.url === EXTENSIONS.fulfilmentMethod).map((e) => e.valueCode as string);
  const list = (allowed: Record<string, readonly string[]>) =>
    Object.entries(allowed)
      .map(([item, m]) => `${item}: ${m.join(', ') || 'none'}`)
      .join('; ');

  // 1. Before she decided: the task view (items[].allowed) and decide-order's refusal agree.
  const viewStep =
    'control: before the journey decides its order, her GET /v1/tasks (gateway) lists its order-decisions task naming each item of the order with allowed methods (items[].allowed, delivery among them), and a decision accepting each item with a method not allowed is 422 invalid_fulfilment whose details.allowed is the same, item for item';
  if (!probe) {
    row(viewStep, 'not reached', 'the journey decided no order');
  } else if (probe.error || !probe.tasks || !probe.refused) {
    row(viewStep, 'FAILED', `the calls threw: ${probe.error ?? 'no answer'}`);
  } else {
    const views = (probe.tasks.body as { tasks?: PatientTask[] } | undefined)?.tasks ?? [];
    const view = views.find((t) => t.kind === 'order-decisions' && t.offer === probe.order);
    const viewed: Record<string, string[]> = Object.fromEntries((view?.items ?? []).map((i) => [i.item, i.allowed]));
    const refusal = errorOf(probe.refused);
    const refusedAllowed = (refusal.details?.allowed ?? {}) as Record<string, string[]>;
    const orderItems = probe.items.map((i) => i.item);
    const good =
      probe.tasks.status === 200 &&
      view !== undefined &&
      view.status === 'ready' &&
      view.complete.startsWith(`POST /v1/orders/${probe.order.split('/')[1]}/decisions`) &&
      sameSet(Object.keys(viewed), orderItems) &&
      orderItems.length > 0 &&
      probe.items.every((i) => (viewed[i.item] ?? []).includes(i.fulfilment ?? '')) &&
      probe.refused.status === 422 &&
      refusal.code === 'invalid_fulfilment' &&
      sameSet(Object.keys(refusedAllowed), orderItems) &&
      orderItems.every((item) => sameSet(refusedAllowed[item] ?? [], viewed[item] ?? []));
    row(
      viewStep,
      good ? 'ok' : 'FAILED',
      `her GET /v1/tasks: ${gatewayDescribe(probe.tasks)}, ${views.length} open task(s)${
        view
          ? `, ${view.task} (${view.status}, complete "${view.complete}"): ${list(viewed) || 'no items'}`
          : `, none of kind order-decisions for ${probe.order}`
      }; the journey decides ${probe.items.map((i) => `${i.item} ${i.fulfilment ?? i.decision}`).join(', ')}; accepting ${
        probe.sent?.map((s) => `${s.item} ${s.fulfilment}`).join(', ') ?? 'nothing'
      }: ${gatewayDescribe(probe.refused)}, details.allowed ${list(refusedAllowed) || 'absent'}`,
    );
  }

  // 2. The Task as the bot wrote it (the admin reads it after she decided): one order-item input per item
  // of the order, its methods her tenant Organization's fulfilment-policy for her country and the item's kind.
  const taskStep =
    "control: the journey's order-decisions Task (admin, after she decided): one input per item of the order (type order-item under SYSTEMS.taskKind, valueReference MedicationRequest/<id>), its fulfilment-method extensions her tenant Organization's fulfilment-policy for her country and MedicationRequest (delivery, pickup for the US)";
  const order = probe?.order;
  if (!progress.patient || !order) {
    row(taskStep, 'not reached', !progress.patient ? 'the journey did not make it' : 'the journey decided no order');
  } else {
    try {
      const found = await ctx.adminGet(
        `fhir/R4/Task?${new URLSearchParams({ code: `${SYSTEMS.taskKind}|order-decisions`, focus: order, subject: progress.patient })}`,
      );
      const tasks = entriesOf(found.body) as Task[];
      const task = tasks[0];
      const group = (await ctx.adminGet(`fhir/R4/${order}`)).body as RequestGroup | undefined;
      const orderItems = (group?.action ?? []).map((a) => a.resource?.reference ?? 'no resource');
      const patient = (await ctx.adminGet(`fhir/R4/${progress.patient}`)).body as Patient | undefined;
      const country = patient?.address?.[0]?.country;
      const tenantRef = patient?.managingOrganization?.reference;
      const tenant = tenantRef
        ? ((await ctx.adminGet(`fhir/R4/${tenantRef}`)).body as Organization | undefined)
        : undefined;
      const policy = (kind: string) =>
        (tenant?.extension ?? [])
          .filter((e) => e.url === EXTENSIONS.fulfilmentPolicy)
          .filter(
            (e) =>
              e.extension?.find((p) => p.url === 'country')?.valueCode === country &&
              e.extension?.find((p) => p.url === 'kind')?.valueCode === kind,
          )
          .flatMap((e) => (e.extension ?? []).filter((p) => p.url === 'method').map((p) => p.valueCode as string));
      const inputs = (task?.input ?? []).filter((i) =>
        i.type?.coding?.some((c) => c.system === SYSTEMS.taskKind && c.code === 'order-item'),
      );
      const named = Object.fromEntries(
        inputs.map((i) => [i.valueReference?.reference ?? 'no valueReference', methods(i.extension)]),
      );
      const expected = policy('MedicationRequest');
      const good =
        found.status === 200 &&
        tasks.length === 1 &&
        inputs.length === orderItems.length &&
        orderItems.length > 0 &&
        sameSet(Object.keys(named), orderItems) &&
        orderItems.every((item) => item.startsWith('MedicationRequest/') && sameSet(named[item] ?? [], expected)) &&
        (country !== 'US' || sameSet(expected, ['delivery', 'pickup']));
      row(
        taskStep,
        good ? 'ok' : 'FAILED',
        `${describe(found)}, ${tasks.length} order-decisions Task(s)${task ? ` (Task/${task.id} ${task.status})` : ''}: ${list(named) || 'no order-item input'}; ${order}'s items ${orderItems.join(', ') || 'none'}; her country ${country ?? 'none'}, ${tenantRef ?? 'no tenant'}'s policy for MedicationRequest there: ${expected.join(', ') || 'none'}`,
      );
    } catch (err) {
      row(taskStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }

  // 3. Her open tasks through the gateway after the journey: each with `complete`, each hers; and the lists
  // of bob (Northwind) and carol (Southridge) hold none of hers (nor hers any of theirs).
  const listOf = async (person: Person) => {
    const answer = await answerOf(
      await ctx.gatewayFetch(`${PUBLIC_URL}/v1/tasks`, { headers: { authorization: `Bearer ${person.token}` } }),
    );
    return { answer, tasks: (answer.body as { tasks?: PatientTask[] } | undefined)?.tasks ?? [] };
  };
  const listStep =
    'control: the journey patient lists her open tasks through the gateway (GET /v1/tasks, her token): 200, each task with its kind and `complete` (the call that completes it), each a Task whose `for` is her Patient (the admin reads them)';
  const hers = new Set<string>();
  const earlier = (probe?.tasks?.body as { tasks?: PatientTask[] } | undefined)?.tasks ?? [];
  for (const t of earlier) {
    hers.add(t.task);
  }
  if (!maya || !progress.patient) {
    row(listStep, 'not reached', 'the journey did not make it');
  } else {
    try {
      const { answer, tasks } = await listOf(maya);
      for (const t of tasks) {
        hers.add(t.task);
      }
      const ids = tasks.map((t) => t.task.split('/')[1]);
      const stored = ids.length
        ? (entriesOf((await ctx.adminGet(`fhir/R4/Task?_id=${ids.join(',')}&_count=${ids.length}`)).body) as Task[])
        : [];
      const notHers = ids.filter((id) => stored.find((t) => t.id === id)?.for?.reference !== progress.patient);
      const uncompletable = tasks.filter((t) => !t.complete?.startsWith('POST /v1/'));
      const kinds = [...new Set(tasks.map((t) => t.kind))];
      const good =
        answer.status === 200 &&
        tasks.length > 0 &&
        uncompletable.length === 0 &&
        notHers.length === 0 &&
        tasks.every((t) => t.status === 'ready');
      row(
        listStep,
        good ? 'ok' : 'FAILED',
        `expected 200 with open tasks, each with complete and hers; got ${gatewayDescribe(answer)}, ${tasks.length} task(s) (${kinds.map((k) => `${k} ${tasks.filter((t) => t.kind === k).length}`).join(', ') || 'none'}; statuses ${[...new Set(tasks.map((t) => t.status))].join(', ') || 'none'}), e.g. "${tasks[0]?.complete ?? 'none'}"${uncompletable.length ? `; WITHOUT complete: ${uncompletable.map((t) => t.task).join(', ')}` : ''}${notHers.length ? `; NOT HERS: ${notHers.map((id) => `Task/${id}`).join(', ')}` : ''}`,
      );
    } catch (err) {
      row(listStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  for (const key of ['bob', 'carol'] as const) {
    const other = people.get(key);
    const step = `attack: ${other?.who ?? key} lists his or her open tasks through the gateway (GET /v1/tasks): none of the journey patient's tasks (those her lists before and after the journey's order named)`;
    if (!other || hers.size === 0) {
      row(step, 'not reached', !other ? 'the attacker could not sign in' : 'her lists named no task');
      continue;
    }
    try {
      const { answer, tasks } = await listOf(other);
      const leaked = tasks.filter((t) => hers.has(t.task));
      const held = REFUSED.includes(answer.status) || (answer.status === 200 && leaked.length === 0);
      row(
        step,
        held ? 'held' : 'FAILED',
        `expected 200 (or 403/404) without her ${hers.size} task(s); got ${gatewayDescribe(answer)}, ${tasks.length} task(s) of his or her own${leaked.length ? `, HERS: ${leaked.map((t) => t.task).join(', ')}` : ''}`,
      );
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
}

/**
 * The evidence (bots/lib/evidence.ts): the complete-task bot copies her checked
 * uploads into her record, a Media for a photo and a DocumentReference for a PDF, each a `data:` URL, so that
 * her tenant's clinicians see them with no Binary grant (Medplum 5.0.10 reads any Binary by id whatever its
 * securityContext). On the journey patient's intake photo, and on a PDF a new Northwind patient sends with
 * her intake: the copy is hers and her tenant's clinicians' to read, nobody's to write but the bot's, and
 * no clinician or other patient reads the upload itself.
 */
async function evidence(ctx: AttackContext, people: Map<string, Person>): Promise<void> {
  const { progress } = ctx;
  const northwind = people.get('northwind-clinician');
  const southridge = people.get('southridge-clinician');
  const upload = progress.document; // Binary/<id>
  const patient = progress.patient;
  const direct = (person: Person, method: string, path: string, body?: unknown) =>
    medplumCall(ctx.baseUrl, person.token, method, `fhir/R4/${path}`, { body });
  const viaGateway = async (person: Person, path: string) =>
    answerOf(
      await ctx.gatewayFetch(`${PUBLIC_URL}/v1/fhir/${path}`, { headers: { authorization: `Bearer ${person.token}` } }),
    );
  const origins = { baseUrl: ctx.baseUrl, storageBaseUrl: defaultStorageBaseUrl(ctx.baseUrl) };
  const sha1 = (bytes: Uint8Array) => createHash('sha1').update(bytes).digest('base64');
  /** A `data:<type>;base64,<bytes>` URL's type and bytes (undefined for any other URL). */
  const dataOf = (url: string | undefined) => {
    const parsed = /^data:([^;,]+);base64,(.*)$/s.exec(url ?? '');
    return parsed ? { contentType: parsed[1], bytes: new Uint8Array(Buffer.from(parsed[2], 'base64')) } : undefined;
  };
  /** The upload's bytes as the admin downloads them (`GET Binary/<id>`, raw). */
  const uploaded = async (binary: string): Promise<Uint8Array | undefined> => {
    const response = await fetch(new URL(`fhir/R4/${binary}`, ctx.baseUrl), {
      headers: { authorization: `Bearer ${ctx.adminToken}`, accept: '*/*' },
    });
    return response.ok ? new Uint8Array(await response.arrayBuffer()) : undefined;
  };
  const evidenceMark = (binary: string) => `${SYSTEMS.evidence}|${binary}`;
  const marks = (r: Media | DocumentReference, binary: string) =>
    (r.identifier ?? []).some((i) => i.system === SYSTEMS.evidence && i.value === binary);
  /** The copies of `binary` in `subject`'s record, as the admin reads them (extended: `meta.author` shows). */
  const copiesOf = async <T extends Media | DocumentReference>(
    type: T['resourceType'],
    subject: string,
    binary: string,
  ): Promise<T[]> =>
    (entriesOf((await adminRead(ctx, `fhir/R4/${type}?subject=${subject}&_count=100`)).body) as T[]).filter((r) =>
      marks(r, binary),
    );
  const completeTask = entriesOf(
    (await ctx.adminGet(`fhir/R4/Bot?identifier=${encodeURIComponent(`${SYSTEMS.bots}|complete-task`)}`)).body,
  )[0] as Bot | undefined;
  const completeTaskRef = completeTask?.id ? `Bot/${completeTask.id}` : undefined;
  const accountsOf = async (subject: string) =>
    (((await adminRead(ctx, `fhir/R4/${subject}`)).body as Resource | undefined)?.meta?.accounts ?? [])
      .map((a) => a.reference ?? '')
      .filter(Boolean);
  /**
   * A copy as the bot must have written it: the mark of her upload, her as subject, written by the
   * complete-task Bot, a `data:` URL of the upload's type whose bytes are the upload's (the admin's
   * download, and the sha1 her answers' attachment carries), in her tenant. Returns the row's verdict.
   */
  const judgeCopy = async (
    copy: Media | DocumentReference | undefined,
    content: Attachment | undefined,
    subject: string,
    binary: string,
    claimed: Attachment | undefined,
  ): Promise<{ good: boolean; said: string }> => {
    if (!copy) {
      return { good: false, said: `no ${evidenceMark(binary)} copy in ${subject}'s record` };
    }
    const data = dataOf(content?.url);
    const stored = await uploaded(binary);
    const tenant = await accountsOf(subject);
    const accounts = (copy.meta?.accounts ?? []).map((a) => a.reference ?? '');
    const author = copy.meta?.author?.reference ?? '';
    const sameBytes = data !== undefined && stored !== undefined && Buffer.from(data.bytes).equals(Buffer.from(stored));
    const hash = data ? sha1(data.bytes) : undefined;
    const subjectRef = (copy as { subject?: { reference?: string } }).subject?.reference;
    const good =
      subjectRef === subject &&
      completeTaskRef !== undefined &&
      author === completeTaskRef &&
      data !== undefined &&
      data.contentType === claimed?.contentType &&
      sameBytes &&
      hash !== undefined &&
      hash === claimed?.hash &&
      content?.hash === claimed?.hash &&
      tenant.length > 0 &&
      sameSet(accounts, tenant);
    return {
      good,
      said: `${copy.resourceType}/${copy.id} (${copy.status}), identifier ${(copy.identifier ?? []).map((i) => `${i.system}|${i.value}`).join(', ')}, subject ${subjectRef}, written by ${author || 'nobody'}${author && author === completeTaskRef ? ' (the complete-task Bot)' : ` (the complete-task Bot is ${completeTaskRef ?? 'not found'})`}; content ${content?.contentType}, ${content?.size} bytes, url ${data ? `data:${data.contentType};base64,… (${data.bytes.byteLength} bytes)` : (content?.url?.slice(0, 60) ?? 'none')}; ${sameBytes ? "the bytes of the admin's download of" : `NOT the bytes of (${stored?.byteLength ?? 'no'} bytes)`} ${binary}; sha1 ${hash ?? 'none'}${hash === claimed?.hash ? ' = ' : ' != '}her attachment's hash ${claimed?.hash ?? 'none'}; meta.accounts ${accounts.join(', ') || 'none'}${sameSet(accounts, tenant) ? " (her tenant's)" : ` (her tenant: ${tenant.join(', ') || 'none'})`}`,
    };
  };
  /** One call whose status must be one of `expected`: held/ok, else FAILED; the row names the exact status. */
  const expectStatus = async (
    step: string,
    person: Person | undefined,
    target: string | undefined,
    missing: string,
    expected: number[],
    call: (person: Person, target: string) => Promise<Answer>,
    pass: 'held' | 'ok' = 'held',
  ): Promise<Answer | undefined> => {
    if (!person || !target) {
      row(step, 'not reached', !person ? 'could not sign in' : missing);
      return undefined;
    }
    try {
      const answer = await call(person, target);
      row(
        step,
        expected.includes(answer.status) ? pass : 'FAILED',
        `expected ${expected.join('/')}, got ${gatewayDescribe(answer)}`,
      );
      return answer;
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
      return undefined;
    }
  };

  // 1. The journey patient's intake photo, copied into her record as a Media.
  const answers = progress.questionnaireResponse
    ? ((await adminRead(ctx, `fhir/R4/${progress.questionnaireResponse}`)).body as QuestionnaireResponse | undefined)
    : undefined;
  const attachmentsOf = (response: QuestionnaireResponse | undefined): Attachment[] => {
    const walk = (items: QuestionnaireResponse['item']): Attachment[] =>
      (items ?? []).flatMap((i) => [
        ...(i.answer ?? []).flatMap((a) => (a.valueAttachment ? [a.valueAttachment] : [])),
        ...walk(i.item),
      ]);
    return walk(response?.item);
  };
  const photo = attachmentsOf(answers).find((a) => upload && `Binary/${binaryIdOf(a.url, origins)}` === upload);
  const copyStep =
    "evidence: the journey patient's intake photo is a Media of her record (identifier evidence|Binary/<her upload>), written by the complete-task Bot, a data: URL whose bytes are her upload's (sha1 = her attachment's hash), meta.accounts her tenant";
  let media: Media | undefined;
  if (!patient || !upload) {
    row(copyStep, 'not reached', 'the journey did not make it');
  } else {
    try {
      const copies = await copiesOf<Media>('Media', patient, upload);
      media = copies[0];
      const { good, said } = await judgeCopy(media, media?.content, patient, upload, photo);
      row(
        copyStep,
        good && copies.length === 1 ? 'ok' : 'FAILED',
        `${copies.length} cop${copies.length === 1 ? 'y' : 'ies'}; ${said}${photo ? '' : `; no attachment naming ${upload} in ${progress.questionnaireResponse}`}`,
      );
    } catch (err) {
      row(copyStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  const mediaRef = media?.id ? `Media/${media.id}` : undefined;
  const noMedia = patient ? 'no evidence Media (the row above)' : 'the journey did not make it';

  // 2. Who reads the copy: her tenant's clinician (by id and by search), nobody else.
  const readStep =
    "evidence: control: the Northwind clinician reads the journey patient's evidence Media: 200, its data: URL as stored";
  let read: Answer | undefined;
  if (!northwind || !mediaRef) {
    row(readStep, 'not reached', !northwind ? 'could not sign in' : noMedia);
  } else {
    try {
      read = await direct(northwind, 'GET', mediaRef);
      const url = read.status === 200 ? (read.body as Media).content?.url : undefined;
      const data = dataOf(url);
      const same = url !== undefined && url === media?.content?.url;
      row(
        readStep,
        read.status === 200 && data !== undefined && same ? 'ok' : 'FAILED',
        `expected 200 with the stored data: URL; got ${describe(read)}${read.status === 200 ? `, url ${data ? `data:${data.contentType};base64,… (${data.bytes.byteLength} bytes)` : (url?.slice(0, 60) ?? 'none')}${same ? ', as stored' : ', NOT as stored'}` : ''}`,
      );
    } catch (err) {
      row(readStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  const searchStep = (who: string) => `evidence: ${who} searches Media?subject=<the journey patient>`;
  if (northwind && mediaRef) {
    try {
      const found = await direct(northwind, 'GET', `Media?subject=${patient}`);
      const listed = entriesOf(found.body).some((r) => `Media/${r.id}` === mediaRef);
      row(
        `${searchStep('control: the Northwind clinician')}: the evidence Media is listed`,
        found.status === 200 && listed ? 'ok' : 'FAILED',
        `expected 200 listing ${mediaRef}; got ${describe(found)}${listed ? ', listed' : ', NOT listed'}`,
      );
    } catch (err) {
      row(`${searchStep('control: the Northwind clinician')}: the evidence Media is listed`, 'FAILED', message(err));
    }
  }
  await expectStatus(
    "evidence: attack: the Southridge clinician reads the journey patient's evidence Media",
    southridge,
    mediaRef,
    noMedia,
    [404],
    (p, t) => direct(p, 'GET', t),
  );
  if (southridge && mediaRef) {
    const step = `${searchStep('attack: the Southridge clinician')}: not listed`;
    try {
      const found = await direct(southridge, 'GET', `Media?subject=${patient}`);
      const all = await direct(southridge, 'GET', 'Media?_count=100');
      const leaked = [found, all].some((a) => entriesOf(a.body).some((r) => `Media/${r.id}` === mediaRef));
      const held = !leaked && [found, all].every((a) => a.status === 200 || REFUSED.includes(a.status));
      row(
        step,
        held ? 'held' : 'FAILED',
        `expected 200 (or 403/404) without ${mediaRef}; got Media?subject=: ${describe(found)}, Media?_count=100: ${describe(all)}${leaked ? ', LISTED' : ''}`,
      );
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  for (const key of ['bob', 'carol', 'maya'] as const) {
    const person = people.get(key);
    const who = key === 'maya' ? 'the journey patient herself' : (person?.who ?? key);
    await expectStatus(
      `evidence: attack: ${who} reads the journey patient's evidence Media directly on Medplum`,
      person,
      mediaRef,
      noMedia,
      REFUSED,
      (p, t) => direct(p, 'GET', t),
    );
  }
  for (const key of ['bob', 'maya'] as const) {
    const person = people.get(key);
    const who = key === 'maya' ? 'the journey patient herself' : (person?.who ?? key);
    const step = `evidence: attack: ${who} reads the evidence Media through the gateway (GET /v1/fhir/Media/{id}): not 200`;
    if (!person || !mediaRef) {
      row(step, 'not reached', !person ? 'could not sign in' : noMedia);
      continue;
    }
    try {
      const answer = await viaGateway(person, mediaRef);
      row(step, answer.status !== 200 ? 'held' : 'FAILED', `expected not 200, got ${gatewayDescribe(answer)}`);
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
    }
  }

  // 3. Who reads the upload itself: no clinician (no Binary grant at all), and no other patient (Binary create only).
  for (const [key, expected, why] of [
    ['northwind-clinician', [403], 'no Binary in the clinician policy'],
    ['southridge-clinician', [403], 'no Binary in the clinician policy'],
    ['bob', REFUSED, 'Binary create only in the patient policy'],
    ['carol', REFUSED, 'Binary create only in the patient policy'],
  ] as const) {
    const person = people.get(key);
    await expectStatus(
      `evidence: attack: ${person?.who ?? key} reads the journey patient's upload directly (GET Binary/<id>; ${why})`,
      person,
      upload,
      'the journey did not make it',
      [...expected],
      (p, t) => direct(p, 'GET', t),
    );
  }

  // 4. Attachment URLs are presigned for a reader who may read the Binary: her clinician may not, so her
  // intake's photo stays `Binary/<id>` to her (the admin, who may, gets a presigned URL).
  const presignStep =
    "evidence: control: the Northwind clinician reads the journey patient's intake QuestionnaireResponse: the photo's url is Binary/<id>, not presigned (she cannot read the Binary)";
  if (!northwind || !progress.questionnaireResponse || !upload) {
    row(presignStep, 'not reached', !northwind ? 'could not sign in' : 'the journey did not make it');
  } else {
    try {
      const hers = await direct(northwind, 'GET', progress.questionnaireResponse);
      const urls = attachmentsOf(hers.body as QuestionnaireResponse).map((a) => a.url ?? 'none');
      row(
        presignStep,
        hers.status === 200 && urls.length === 1 && urls[0] === upload ? 'ok' : 'FAILED',
        `expected 200 with one attachment, url ${upload}; got ${describe(hers)}, url(s) ${urls.join(', ') || 'none'}; the admin's read of it: ${photo?.url?.replace(/Signature=[^&]*/, 'Signature=…') ?? 'no attachment'}`,
      );
    } catch (err) {
      row(presignStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }

  // 5. Nobody but the bot writes a copy or changes one: the Northwind clinician may not make one up (Media is
  // read-only to her; NOT_EVIDENCE on DocumentReference), nor edit the bot's; a plain DocumentReference
  // (no evidence identifier) is hers to write, so the refusals are the mark's.
  const forgedUrl = `data:image/png;base64,${Buffer.from('not her photo').toString('base64')}`;
  const forgedMedia = (subject: string, binary: string): Media => ({
    resourceType: 'Media',
    identifier: [{ system: SYSTEMS.evidence, value: binary }],
    status: 'completed',
    subject: { reference: subject },
    content: { contentType: 'image/png', title: 'reading.png', url: forgedUrl },
  });
  // In her tenant, as the lane's other clinician writes are (Medplum derives it from the subject anyway).
  const tenantAccounts = patient ? await accountsOf(patient) : [];
  const forgedDocument = (subject: string, binary: string | undefined): DocumentReference => ({
    resourceType: 'DocumentReference',
    ...(tenantAccounts.length ? { meta: { accounts: tenantAccounts.map((reference) => ({ reference })) } } : {}),
    ...(binary ? { identifier: [{ system: SYSTEMS.evidence, value: binary }] } : {}),
    status: 'current',
    subject: { reference: subject },
    description: binary ? 'Uploaded by the patient with her answers' : 'A note of the clinician (lane control)',
    content: [{ attachment: { contentType: 'application/pdf', url: 'data:application/pdf;base64,JVBERi0xLjQK' } }],
  });
  const before = patient && upload ? await copiesOf<Media>('Media', patient, upload) : [];
  const documentsBefore =
    patient && upload ? await copiesOf<DocumentReference>('DocumentReference', patient, upload) : [];
  await expectStatus(
    "evidence: attack: the Northwind clinician creates a Media carrying the evidence identifier of the journey patient's upload (subject her)",
    northwind,
    patient && upload ? patient : undefined,
    'the journey did not make it',
    [403],
    (p, t) => direct(p, 'POST', 'Media', forgedMedia(t, upload as string)),
  );
  await expectStatus(
    "evidence: attack: the Northwind clinician creates a DocumentReference carrying the evidence identifier of the journey patient's upload (subject her)",
    northwind,
    patient && upload ? patient : undefined,
    'the journey did not make it',
    [403],
    (p, t) => direct(p, 'POST', 'DocumentReference', forgedDocument(t, upload)),
  );
  await expectStatus(
    'evidence: control: the Northwind clinician creates a plain DocumentReference (no evidence identifier) about the journey patient',
    northwind,
    patient,
    'the journey did not make it',
    [201],
    (p, t) => direct(p, 'POST', 'DocumentReference', forgedDocument(t, undefined)),
    'ok',
  );
  await expectStatus(
    "evidence: attack: the Northwind clinician rewrites the journey patient's evidence Media (PUT, its data: URL another image's)",
    northwind,
    mediaRef,
    noMedia,
    [403],
    (p, t) => {
      const current = (read?.status === 200 ? read.body : media) as Media;
      return direct(p, 'PUT', t, { ...current, content: { ...current.content, url: forgedUrl } });
    },
  );

  // A PDF: a new Northwind patient sends one with her intake (the journey's photo is an image), so that there
  // is an evidence DocumentReference to attack.
  const pdfStep =
    "precondition: evidence: a new Northwind patient uploads a PDF (POST /v1/documents) and attaches it to her blood-pressure intake through the gateway: the complete-task Bot copies it into her record as a DocumentReference (identifier evidence|Binary/<upload>, a data:application/pdf URL whose bytes are the upload's, meta.accounts her tenant)";
  let pdfPatient: Person | undefined;
  let documentCopy: DocumentReference | undefined;
  try {
    const client = new MedplumClient({ baseUrl: ctx.baseUrl, cacheTime: 0 });
    const user = await client.startNewUser({
      firstName: 'Petra',
      lastName: 'Pdf',
      email: `lane.evidence.${Date.now()}@example.com`,
      password: 'a long enough lane password',
      projectId: ctx.projectId,
      clientId: ctx.appIdOf('northwind'),
      recaptchaToken: '',
    });
    const registered = await client.startNewPatient({ login: user.login, projectId: ctx.projectId });
    await client.processCode(registered.code as string);
    const token = client.getAccessToken() as string;
    const api = createPatientCareClient({ baseUrl: PUBLIC_URL, accessToken: token, fetch: ctx.gatewayFetch });
    const home = await api.patient.home();
    pdfPatient = { who: 'the PDF patient', token, profile: home.patient };
    const profile = await api.patient.profile();
    await api.fhir.updatePatient({
      ...(profile as typeof profile & { id: string }),
      address: [{ line: ['3 Paper Lane'], city: 'Fresno', state: 'CA', postalCode: '93701', country: 'US' }],
    });
    const { protocols } = await api.protocols.list();
    const check = protocols.find((p) => 'assessment' in p && p.assessment?.includes('blood-pressure-check'));
    if (!check) {
      throw new Error(`${home.patient}: the blood-pressure check is not in her catalog`);
    }
    const { unmet } = await api.agreements.requirements({ healthcareService: check.healthcareService });
    await api.agreements.accept(unmet);
    const assessment = await api.assessments.start({ healthcareService: check.healthcareService });
    const pdf = new TextEncoder().encode('%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n');
    const sent = await api.documents.upload(pdf, { contentType: 'application/pdf', filename: 'labs.pdf' });
    await answerBloodPressureIntake(api, assessment, sent);
    // The bot writes the copy in the completion's own transaction; a few seconds' grace all the same.
    let copies: DocumentReference[] = [];
    for (const start = Date.now(); ; await pause(1000)) {
      copies = await copiesOf<DocumentReference>('DocumentReference', home.patient, sent.url as string);
      if (copies.length > 0 || Date.now() - start > 10_000) {
        break;
      }
    }
    documentCopy = copies[0];
    const { good, said } = await judgeCopy(
      documentCopy,
      documentCopy?.content?.[0]?.attachment,
      home.patient,
      sent.url as string,
      sent,
    );
    row(
      pdfStep,
      good && copies.length === 1 ? 'ok' : 'FAILED',
      `${home.patient}, her upload ${sent.url} (${sent.contentType}, ${sent.size} bytes); ${copies.length} cop${copies.length === 1 ? 'y' : 'ies'}; ${said}`,
    );
  } catch (err) {
    row(pdfStep, 'FAILED', message(err));
  }
  const documentRef = documentCopy?.id ? `DocumentReference/${documentCopy.id}` : undefined;
  const noDocument = 'no evidence DocumentReference (the precondition above)';
  await expectStatus(
    "evidence: control: the Northwind clinician reads the PDF patient's evidence DocumentReference",
    northwind,
    documentRef,
    noDocument,
    [200],
    (p, t) => direct(p, 'GET', t),
    'ok',
  );
  const forgedCopy = documentCopy
    ? {
        ...documentCopy,
        content: [{ attachment: { contentType: 'application/pdf', url: 'data:application/pdf;base64,JVBERi0=' } }],
      }
    : undefined;
  await expectStatus(
    "evidence: attack: the Northwind clinician rewrites the PDF patient's evidence DocumentReference (PUT, its data: URL another PDF's)",
    northwind,
    documentRef,
    noDocument,
    [403],
    (p, t) => direct(p, 'PUT', t, forgedCopy),
  );
  await expectStatus(
    'evidence: attack: the PDF patient herself rewrites her evidence DocumentReference directly (PUT)',
    pdfPatient,
    documentRef,
    noDocument,
    REFUSED,
    (p, t) => direct(p, 'PUT', t, forgedCopy),
  );

  // What the refused writes left: the same copies, each at the bot's version.
  const leftStep =
    'evidence: the refused writes changed nothing (the copies, read back by the admin: the same ones, at the versions the bot wrote)';
  if (patient && upload) {
    try {
      const after = await copiesOf<Media>('Media', patient, upload);
      const documentsAfter = await copiesOf<DocumentReference>('DocumentReference', patient, upload);
      const pdfAfter =
        documentRef && documentCopy
          ? ((await adminRead(ctx, `fhir/R4/${documentRef}`)).body as DocumentReference | undefined)
          : undefined;
      const versions = (list: Resource[]) => list.map((r) => `${r.resourceType}/${r.id}@${r.meta?.versionId}`).sort();
      const same =
        JSON.stringify(versions(after)) === JSON.stringify(versions(before)) &&
        documentsAfter.length === documentsBefore.length &&
        (!documentCopy || pdfAfter?.meta?.versionId === documentCopy.meta?.versionId);
      row(
        leftStep,
        same ? 'ok' : 'FAILED',
        `the journey patient: Media ${versions(after).join(', ') || 'none'} (before: ${versions(before).join(', ') || 'none'}), ${documentsAfter.length} evidence DocumentReference(s) of her upload (before: ${documentsBefore.length}); ${documentRef ? `${documentRef}: version ${pdfAfter?.meta?.versionId}${pdfAfter?.meta?.versionId === documentCopy?.meta?.versionId ? ", the bot's" : ` (the bot's: ${documentCopy?.meta?.versionId})`}` : 'no PDF copy'}`,
      );
    } catch (err) {
      row(leftStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
}

/** A new patient of the lane's own (the visit families'): her identity, her schedule-visit task, her plan. */
interface NewVisitor {
  person: Person;
  patient: string;
  task: string;
  /** Her visit team (a live visit's task names it; '' when it names none). */
  careTeam: string;
  carePlan: string;
}

/**
 * What the visit families do as a new patient: calls through the in-process gateway with her token, her
 * moves (her record's address), what her plan asks where she lives accepted, and a new Northwind patient
 * enrolled in the monitoring program and activated (registered through Northwind's app, homed in Fresno, CA).
 */
function visitorKit(ctx: AttackContext) {
  const call = async (person: Person, method: string, path: string, body?: unknown): Promise<Answer> =>
    answerOf(
      await ctx.gatewayFetch(`${PUBLIC_URL}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${person.token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
    );
  const said = (answer: Answer) =>
    answer.status < 300 ? gatewayDescribe(answer) : `${gatewayDescribe(answer)} ${JSON.stringify(errorOf(answer))}`;
  const FRESNO = { line: ['36 Licence Lane'], city: 'Fresno', state: 'CA', postalCode: '93701', country: 'US' };
  const ALBANY = { line: ['36 Licence Lane'], city: 'Albany', state: 'NY', postalCode: '12207', country: 'US' };

  /** She moves: her record's address, as her app writes it (`PUT /v1/fhir/Patient/{id}` through the gateway). */
  const moveTo = async (v: Pick<NewVisitor, 'person' | 'patient'>, address: typeof FRESNO): Promise<string> => {
    const path = `/v1/fhir/${v.patient}`;
    const read = await call(v.person, 'GET', path);
    if (read.status !== 200) {
      throw new Error(`her GET ${path}: ${said(read)}`);
    }
    const written = await call(v.person, 'PUT', path, { ...(read.body as Patient), address: [address] });
    if (written.status !== 200) {
      throw new Error(`her PUT ${path} (${address.state}): ${said(written)}`);
    }
    return `PUT ${path} (${address.city}, ${address.state}): 200`;
  };
  /** What her plan asks of her where she lives now (a state may ask an agreement of its own), accepted. */
  const acceptWhatIsAsked = async (v: NewVisitor): Promise<string> => {
    const asked = await call(v.person, 'GET', `/v1/agreements/requirements?carePlan=${encodeURIComponent(v.carePlan)}`);
    if (asked.status !== 200) {
      throw new Error(`GET /v1/agreements/requirements?carePlan=: ${said(asked)}`);
    }
    const unmet = (asked.body as { unmet?: { url: string; version: string }[] }).unmet ?? [];
    if (unmet.length === 0) {
      return 'her plan asks nothing more there';
    }
    const accepted = await call(v.person, 'POST', '/v1/agreements/acceptances', { agreements: unmet });
    if (accepted.status >= 300) {
      throw new Error(`POST /v1/agreements/acceptances: ${said(accepted)}`);
    }
    return `asked ${unmet.map((a) => `${a.url}|${a.version}`).join(', ')}: accepted (${accepted.status})`;
  };
  /**
   * A new Northwind patient in Fresno, CA, enrolled in the monitoring program and activated: her
   * schedule-visit task of `visitType` (a live one names her visit team).
   */
  const newVisitor = async (
    who: string,
    visitType: 'video-visit' | 'async-review' = 'video-visit',
  ): Promise<NewVisitor> => {
    const person = { ...(await register(ctx.baseUrl, ctx.projectId, ctx.appIdOf('northwind'))), who };
    const api = createPatientCareClient({ baseUrl: PUBLIC_URL, accessToken: person.token, fetch: ctx.gatewayFetch });
    const { patient } = await api.patient.home();
    await moveTo({ person, patient }, FRESNO);
    const { protocols } = await api.protocols.list();
    const program = protocols.find(
      (p) => p.type === 'program' && p.protocol.includes('programs/blood-pressure-monitoring'),
    );
    if (!program) {
      throw new Error('no blood-pressure monitoring program among her offerings');
    }
    const { unmet } = await api.agreements.requirements({ healthcareService: program.healthcareService });
    if (unmet.length > 0) {
      await api.agreements.accept(unmet);
    }
    const { carePlan } = await api.enrollments.create({ healthcareService: program.healthcareService });
    const active = await api.enrollments.activate(carePlan);
    const task = active.tasks?.find((t) => t.kind === 'schedule-visit' && t.visitType === visitType);
    if (!task || (visitType === 'video-visit' && !task.careTeam)) {
      throw new Error(
        `activation issued no ${visitType} schedule-visit task${visitType === 'video-visit' ? ' naming a visit team' : ''} (tasks: ${(active.tasks ?? []).map((t) => `${t.kind}${t.visitType ? ` ${t.visitType}` : ''}`).join(', ') || 'none'})`,
      );
    }
    return { person, patient, task: task.task, careTeam: task.careTeam ?? '', carePlan };
  };
  return { call, said, moveTo, acceptWhatIsAsked, newVisitor, FRESNO, ALBANY };
}

/**
 * Licensure at the time of care (docs/decisions.md "Licensure at the time of
 * care"): booking, rescheduling and starting a live visit's segment each check that the practitioner is
 * licensed where she lives at that moment (her record's address, `Patient.address[0]`). Through the
 * in-process gateway on this Medplum, with two new Northwind patients of the lane's own, each registered
 * through Northwind's app (`register`), homed, living in Fresno, CA, enrolled in the monitoring program
 * and activated (as `enrollmentRepeats` enrolls), so that she has a video-visit schedule-visit task:
 * - the first books a CA practitioner's slot, moves to NY (her address, `PUT /v1/fhir/Patient/{id}`) and
 *   accepts what her plan asks there; availability then lists no slot of a CA practitioner, only of
 *   practitioners licensed in NY (their roles' jurisdictions, as the admin reads them); a reschedule onto
 *   another slot of her CA practitioner is 409 `not_licensed` with nothing changed (the admin reads the
 *   Appointment, both Slots and the segments at the same versions); onto a NY practitioner's slot, 201;
 * - the second books a free Slot the admin writes on a CA practitioner's Schedule starting in 5 minutes
 *   (a visit opens 30 minutes before its start: the materialised slots are too far off to start); moved to
 *   NY, its start is 409 `not_licensed` through the gateway, and the appointments bot's own answer to the
 *   same call (`$execute` with her token) is the same refusal as data (200, `ok: false`), nothing changed
 *   each time; moved back to CA it starts (200) and the started Encounter records `US-CA` (extension
 *   `patient-jurisdiction`); moved to NY again, starting it again is 200 `resumed`.
 * The patients, their visits and the admin's Slot stay in the project.
 */
async function licensureAtCare(ctx: AttackContext): Promise<void> {
  const family = 'licensure at the time of care';
  const steps = {
    first: `${family}: precondition: a new Northwind patient, registered through Northwind's app, homed, living in Fresno, CA, enrolled in the monitoring program and activated: her video-visit schedule-visit task, and her visit team's slots offered in CA`,
    book: `${family}: she books a slot of a CA practitioner of her visit team (the first she is offered): 201`,
    move: `${family}: she moves to NY (her address through the gateway, PUT /v1/fhir/Patient/{id}: 200) and accepts what her plan asks there`,
    availability: `${family}: availability (her visit team, the next 7 days) lists no slot of a CA practitioner, only of practitioners licensed in NY (their roles' jurisdictions, read by the admin)`,
    refusedReschedule: `${family}: rescheduling onto another slot of her CA practitioner is 409 not_licensed {state: 'US-NY', practitioner: hers, use: 'GET /v1/availability'}, nothing changed (the admin reads the Appointment, both Slots and the segments at the same versions)`,
    reschedule: `${family}: rescheduling onto a NY practitioner's slot: 201`,
    second: `${family}: precondition: a second new Northwind patient the same way (Fresno, CA; enrolled, activated); the admin writes a free Slot on a CA practitioner's Schedule starting in 5 minutes (201); she books it (201)`,
    refusedStart: `${family}: moved to NY (what her plan asks there accepted), starting the visit through the gateway is 409 not_licensed {state: 'US-NY', practitioner: the slot's, use: 'POST /v1/appointments/{id}/reschedule'}, nothing changed (the Appointment, the Slot and the segments at the same versions)`,
    refusedByBot: `${family}: the same start directly on Medplum ($execute of the appointments bot with her token, {operation: 'encounter', appointment}): 200 {ok: false, error: {status: 409, code: 'not_licensed', the gateway's details but its requestId}}, nothing changed`,
    started: `${family}: moved back to CA, the start is 200 (in-progress, not resumed) and the started Encounter carries the patient-jurisdiction extension US-CA (read by the admin)`,
    resumed: `${family}: moved to NY again, starting it again is 200 resumed, the same segment (care begun lawfully is not cut off)`,
  };
  type Step = keyof typeof steps;
  const skip = (keys: Step[], why: string) => {
    for (const key of keys) {
      row(steps[key], 'not reached', why);
    }
  };
  const idOf = (reference: string) => reference.split('/')[1] ?? '';
  const { call, said, moveTo, acceptWhatIsAsked, newVisitor, FRESNO, ALBANY } = visitorKit(ctx);
  type Visitor = NewVisitor;
  type Offered = { slot: string; start: string; practitioner: string };
  /** Her visit team's free slots over the next 7 days (from 10 minutes on), every page. */
  const offered = async (v: Visitor): Promise<Offered[]> => {
    const now = Date.now();
    const window = {
      careTeam: v.careTeam,
      start: new Date(now + 10 * 60_000).toISOString(),
      end: new Date(now + 7 * DAY).toISOString(),
      count: '200',
    };
    const slots: Offered[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await call(
        v.person,
        'GET',
        `/v1/availability?${new URLSearchParams({ ...window, ...(cursor ? { cursor } : {}) })}`,
      );
      if (page.status !== 200) {
        throw new Error(`GET /v1/availability (page ${pages + 1}): ${said(page)}`);
      }
      const body = page.body as { slots?: Offered[]; next?: string };
      slots.push(...(body.slots ?? []));
      cursor = body.next;
      pages++;
    } while (cursor && pages < 20);
    return slots;
  };
  const practitionersOf = (slots: Offered[]) => [...new Set(slots.map((s) => s.practitioner))];
  /** A practitioner's name and the jurisdictions (`US-NY`) of her active roles, as the admin reads them. */
  const licencesOf = async (practitioner: string): Promise<{ name: string; jurisdictions: string[] }> => {
    const found = entriesOf(
      (
        await ctx.adminGet(
          `fhir/R4/PractitionerRole?practitioner=${practitioner}&_include=PractitionerRole:location&_include=PractitionerRole:practitioner`,
        )
      ).body,
    );
    const roles = found.filter((r) => r.resourceType === 'PractitionerRole') as PractitionerRole[];
    const addresses = new Map(
      (found.filter((r) => r.resourceType === 'Location') as Location[]).map((l) => [`Location/${l.id}`, l.address]),
    );
    const name = (found.find((r) => r.resourceType === 'Practitioner') as Practitioner | undefined)?.name?.[0];
    const jurisdictions = roles
      .filter((r) => r.active !== false)
      .flatMap((r) => r.location ?? [])
      .map((l) => addresses.get(l.reference ?? ''))
      .filter((a) => a?.state)
      .map((a) => `${a?.country}-${a?.state}`);
    return {
      name: name
        ? [...(name.prefix ?? []), ...(name.given ?? []), name.family].filter(Boolean).join(' ')
        : practitioner,
      jurisdictions: [...new Set(jurisdictions)].sort(),
    };
  };
  const licensed = async (practitioners: string[]) =>
    Promise.all(practitioners.map(async (p) => ({ practitioner: p, ...(await licencesOf(p)) })));
  const licenceList = (list: { practitioner: string; name: string; jurisdictions: string[] }[]) =>
    list.map((l) => `${l.practitioner} (${l.name}: ${l.jurisdictions.join(', ') || 'no licence'})`).join(', ');
  /** The versions (and statuses) of what a refusal must leave alone, as the admin reads them. */
  const versions = async (references: string[], appointment: string): Promise<string> => {
    const parts: string[] = [];
    for (const reference of references) {
      const read = await ctx.adminGet(`fhir/R4/${reference}`);
      const resource = read.body as (Resource & { status?: string }) | undefined;
      parts.push(
        read.status === 200
          ? `${reference}@${resource?.meta?.versionId} (${resource?.status})`
          : `${reference}: ${read.status}`,
      );
    }
    const segments = entriesOf(
      (await ctx.adminGet(`fhir/R4/Encounter?appointment=${appointment}&_count=50`)).body,
    ) as Encounter[];
    parts.push(...segments.map((e) => `Encounter/${e.id}@${e.meta?.versionId} (${e.status})`).sort());
    return parts.join(', ');
  };
  /** An error's details as the bot gave them: the gateway's envelope adds its `requestId` to every error. */
  const botDetails = (details: Record<string, unknown> | undefined) => {
    const { requestId: _requestId, ...rest } = details ?? {};
    return details === undefined ? undefined : rest;
  };
  const sameDetails = (details: Record<string, unknown> | undefined, expected: Record<string, string | undefined>) =>
    canonicalJson(botDetails(details) ?? null) === canonicalJson(expected);
  const unchanged = (before: string, after: string) =>
    before === after ? `nothing changed: ${after}` : `CHANGED: before ${before}; after ${after}`;

  /** 1. Booked in CA, moved to NY: what availability offers, a refused reschedule, a licensed one. */
  const rescheduling = async (): Promise<void> => {
    const rest: Step[] = ['book', 'move', 'availability', 'refusedReschedule', 'reschedule'];
    let v: Visitor;
    let inCa: Offered[];
    try {
      v = await newVisitor('a new Northwind patient of the licensure rows');
      inCa = await offered(v);
    } catch (err) {
      row(steps.first, 'FAILED', `the precondition threw: ${message(err)}`);
      skip(rest, 'no patient (the precondition above)');
      return;
    }
    const caLicences = await licensed(practitionersOf(inCa));
    const chosen = inCa[0];
    const other = chosen && inCa.find((s) => s.practitioner === chosen.practitioner && s.slot !== chosen.slot);
    row(
      steps.first,
      chosen && other ? 'ok' : 'FAILED',
      `${v.patient}, ${v.task} (visit team ${v.careTeam}), plan ${v.carePlan}; offered ${inCa.length} slot(s) in CA, of ${licenceList(caLicences) || 'nobody'}${chosen && !other ? `; NO second slot of ${chosen.practitioner}` : ''}`,
    );
    if (!chosen || !other) {
      skip(rest, 'no two slots of one CA practitioner (the precondition above)');
      return;
    }
    const practitioner = chosen.practitioner;
    let appointment: string;
    try {
      const booked = await call(v.person, 'POST', '/v1/appointments', { task: v.task, slot: chosen.slot });
      appointment = (booked.body as { appointment?: string } | undefined)?.appointment ?? '';
      const by = (booked.body as { practitioner?: string } | undefined)?.practitioner;
      row(
        steps.book,
        (booked.status === 201 || booked.status === 200) && appointment && by === practitioner ? 'ok' : 'FAILED',
        `${chosen.slot} (${chosen.start}, ${practitioner}): ${said(booked)}${appointment ? `, ${appointment} with ${by}` : ''}`,
      );
      if (!appointment) {
        skip(rest.slice(1), 'no booking (the row above)');
        return;
      }
    } catch (err) {
      row(steps.book, 'FAILED', `the call threw: ${message(err)}`);
      skip(rest.slice(1), 'no booking (the row above)');
      return;
    }
    try {
      const moved = await moveTo(v, ALBANY);
      row(steps.move, 'ok', `${moved}; ${await acceptWhatIsAsked(v)}`);
    } catch (err) {
      row(steps.move, 'FAILED', `the call threw: ${message(err)}`);
      skip(rest.slice(2), 'she did not move (the row above)');
      return;
    }
    let inNy: Offered[] = [];
    try {
      inNy = await offered(v);
      const nyLicences = await licensed(practitionersOf(inNy));
      const caPractitioners = new Set(
        caLicences.filter((l) => l.jurisdictions.includes('US-CA')).map((l) => l.practitioner),
      );
      const ofCa = inNy.filter((s) => caPractitioners.has(s.practitioner) || s.practitioner === practitioner);
      const unlicensed = nyLicences.filter((l) => !l.jurisdictions.includes('US-NY'));
      row(
        steps.availability,
        inNy.length > 0 && ofCa.length === 0 && unlicensed.length === 0 ? 'ok' : 'FAILED',
        `offered ${inNy.length} slot(s) in NY, of ${licenceList(nyLicences) || 'nobody'}; ${ofCa.length} of a CA practitioner (${[...caPractitioners].join(', ')})${
          ofCa.length
            ? `: ${ofCa
                .slice(0, 3)
                .map((s) => s.slot)
                .join(', ')}`
            : ''
        }${unlicensed.length ? `; NOT licensed in NY: ${unlicensed.map((l) => l.practitioner).join(', ')}` : ''}`,
      );
    } catch (err) {
      row(steps.availability, 'FAILED', `the call threw: ${message(err)}`);
    }
    try {
      const before = await versions([appointment, chosen.slot, other.slot], appointment);
      const refused = await call(v.person, 'POST', `/v1/appointments/${idOf(appointment)}/reschedule`, {
        slot: other.slot,
      });
      const after = await versions([appointment, chosen.slot, other.slot], appointment);
      const error = errorOf(refused);
      const expected = { state: 'US-NY', practitioner, use: 'GET /v1/availability' };
      const good =
        refused.status === 409 &&
        error.code === 'not_licensed' &&
        sameDetails(error.details, expected) &&
        before === after;
      row(
        steps.refusedReschedule,
        good ? 'held' : 'FAILED',
        `onto ${other.slot} (${other.start}, ${other.practitioner}): expected 409 not_licensed ${JSON.stringify(expected)}; got ${said(refused)}; ${unchanged(before, after)}`,
      );
    } catch (err) {
      row(steps.refusedReschedule, 'FAILED', `the call threw: ${message(err)}`);
    }
    const target = inNy[0];
    if (!target) {
      skip(['reschedule'], 'no NY slot offered (the availability row)');
      return;
    }
    try {
      const moved = await call(v.person, 'POST', `/v1/appointments/${idOf(appointment)}/reschedule`, {
        slot: target.slot,
      });
      const body = moved.body as { appointment?: string; replaces?: string; practitioner?: string } | undefined;
      row(
        steps.reschedule,
        moved.status === 201 && body?.replaces === appointment && body?.practitioner === target.practitioner
          ? 'ok'
          : 'FAILED',
        `onto ${target.slot} (${target.start}, ${target.practitioner}): ${said(moved)}${moved.status < 300 ? `, ${body?.appointment} replacing ${body?.replaces}, with ${body?.practitioner}` : ''}`,
      );
    } catch (err) {
      row(steps.reschedule, 'FAILED', `the call threw: ${message(err)}`);
    }
  };

  /** 2. A visit open now, booked in CA: its start in NY refused (gateway and bot), back in CA started, resumed in NY. */
  const starting = async (): Promise<void> => {
    const rest: Step[] = ['refusedStart', 'refusedByBot', 'started', 'resumed'];
    let v: Visitor;
    let appointment: string;
    let slot: string;
    let practitioner: string;
    const said2: string[] = [];
    try {
      v = await newVisitor('a second new Northwind patient of the licensure rows');
      said2.push(`${v.patient}, ${v.task}`);
      const [template] = await offered(v);
      if (!template) {
        throw new Error('no slot of her visit team offered in CA');
      }
      const model = (await ctx.adminGet(`fhir/R4/${template.slot}`)).body as Slot | undefined;
      if (!model?.schedule) {
        throw new Error(`the admin could not read ${template.slot}`);
      }
      const start = new Date(Date.now() + 5 * 60_000);
      start.setUTCMilliseconds(0);
      const written = await medplumCall(ctx.baseUrl, ctx.adminToken, 'POST', 'fhir/R4/Slot', {
        waitOutQuota: true,
        extended: true,
        body: {
          resourceType: 'Slot',
          ...(model.meta?.accounts?.length ? { meta: { accounts: model.meta.accounts } } : {}),
          schedule: model.schedule,
          serviceType: model.serviceType,
          status: 'free',
          start: start.toISOString(),
          end: new Date(start.getTime() + 30 * 60_000).toISOString(),
        },
      });
      const made = written.body as Slot | undefined;
      said2.push(
        `the admin's Slot on ${model.schedule.reference} (${template.practitioner}'s, as ${template.slot}), ${start.toISOString()}: ${describe(written)}${made?.meta?.accounts ? ` in ${made.meta.accounts.map((a) => a.reference).join(', ')}` : ''}`,
      );
      if (written.status !== 201 || !made?.id) {
        throw new Error(said2.join('; '));
      }
      slot = `Slot/${made.id}`;
      const booked = await call(v.person, 'POST', '/v1/appointments', { task: v.task, slot });
      const body = booked.body as { appointment?: string; practitioner?: string } | undefined;
      said2.push(
        `she books it: ${said(booked)}${body?.appointment ? `, ${body.appointment} with ${body.practitioner}` : ''}`,
      );
      if (booked.status !== 201 || !body?.appointment || !body.practitioner) {
        throw new Error(said2.join('; '));
      }
      appointment = body.appointment;
      practitioner = body.practitioner;
      row(steps.second, 'ok', said2.join('; '));
    } catch (err) {
      row(steps.second, 'FAILED', `the precondition threw: ${message(err)}`);
      skip(rest, 'no visit open now (the precondition above)');
      return;
    }
    const start = `/v1/appointments/${idOf(appointment)}/encounter`;
    const watched = [appointment, slot];
    let refusal: Record<string, unknown> | undefined;
    try {
      const moved = await moveTo(v, ALBANY);
      const accepted = await acceptWhatIsAsked(v);
      const before = await versions(watched, appointment);
      const refused = await call(v.person, 'POST', start, {});
      const after = await versions(watched, appointment);
      const error = errorOf(refused);
      refusal = botDetails(error.details);
      const expected = {
        state: 'US-NY',
        practitioner,
        use: `POST /v1/appointments/${idOf(appointment)}/reschedule`,
      };
      const good =
        refused.status === 409 &&
        error.code === 'not_licensed' &&
        sameDetails(error.details, expected) &&
        before === after;
      row(
        steps.refusedStart,
        good ? 'held' : 'FAILED',
        `${moved}; ${accepted}; POST ${start}: expected 409 not_licensed ${JSON.stringify(expected)}; got ${said(refused)}; ${unchanged(before, after)}`,
      );
    } catch (err) {
      row(steps.refusedStart, 'FAILED', `the call threw: ${message(err)}`);
    }
    try {
      const before = await versions(watched, appointment);
      const input = { operation: 'encounter', appointment: idOf(appointment) };
      const bot = await medplumCall(
        ctx.baseUrl,
        v.person.token,
        'POST',
        `fhir/R4/Bot/$execute?identifier=${encodeURIComponent(`${SYSTEMS.bots}|appointments`)}`,
        { body: input },
      );
      const after = await versions(watched, appointment);
      const answer = bot.body as
        | { ok?: boolean; error?: { status?: number; code?: string; details?: Record<string, unknown> } }
        | undefined;
      const same = refusal !== undefined && canonicalJson(answer?.error?.details ?? null) === canonicalJson(refusal);
      const good =
        bot.status === 200 &&
        answer?.ok === false &&
        answer.error?.status === 409 &&
        answer.error.code === 'not_licensed' &&
        same &&
        before === after;
      row(
        steps.refusedByBot,
        good ? 'held' : 'FAILED',
        `$execute ${JSON.stringify(input)}: ${bot.status}, ${bot.text.slice(0, 300)}; details ${same ? "the gateway's (its requestId aside)" : `NOT the gateway's (${JSON.stringify(refusal ?? null)})`}; ${unchanged(before, after)}`,
      );
    } catch (err) {
      row(steps.refusedByBot, 'FAILED', `the call threw: ${message(err)}`);
    }
    let segment: string | undefined;
    try {
      const moved = await moveTo(v, FRESNO);
      const started = await call(v.person, 'POST', start, {});
      const body = started.body as
        | { resumed?: boolean; segment?: { encounter?: string; position?: number; status?: string } }
        | undefined;
      segment = body?.segment?.encounter;
      const encounter = segment
        ? ((await ctx.adminGet(`fhir/R4/${segment}`)).body as Encounter | undefined)
        : undefined;
      const recorded = encounter?.extension?.filter((e) => e.url === EXTENSIONS.patientJurisdiction) ?? [];
      const codings = recorded.flatMap((e) => e.valueCodeableConcept?.coding ?? []);
      const good =
        started.status === 200 &&
        body?.resumed === false &&
        body.segment?.status === 'in-progress' &&
        encounter?.status === 'in-progress' &&
        recorded.length === 1 &&
        codings.length === 1 &&
        codings[0].system === SYSTEMS.jurisdiction &&
        codings[0].code === 'US-CA';
      row(
        steps.started,
        good ? 'ok' : 'FAILED',
        `${moved}; POST ${start}: ${said(started)}${started.status < 300 ? `, ${segment} (position ${body?.segment?.position}) ${body?.segment?.status}, resumed ${body?.resumed}` : ''}; the admin reads ${segment ?? 'no segment'}: ${encounter?.status ?? 'absent'}, patient-jurisdiction ${JSON.stringify(recorded.map((e) => e.valueCodeableConcept)) || 'none'}`,
      );
    } catch (err) {
      row(steps.started, 'FAILED', `the call threw: ${message(err)}`);
    }
    if (!segment) {
      skip(['resumed'], 'no segment started (the row above)');
      return;
    }
    try {
      const moved = await moveTo(v, ALBANY);
      const again = await call(v.person, 'POST', start, {});
      const body = again.body as { resumed?: boolean; segment?: { encounter?: string; status?: string } } | undefined;
      row(
        steps.resumed,
        again.status === 200 && body?.resumed === true && body.segment?.encounter === segment ? 'ok' : 'FAILED',
        `${moved}; POST ${start}: ${said(again)}${again.status < 300 ? `, ${body?.segment?.encounter} ${body?.segment?.status}, resumed ${body?.resumed}` : ''}`,
      );
    } catch (err) {
      row(steps.resumed, 'FAILED', `the call threw: ${message(err)}`);
    }
  };

  await rescheduling();
  await starting();
}

/**
 * An asynchronous visit reviewed (docs/decisions.md "An asynchronous visit is her
 * care team's work"), on a real Medplum: a new Northwind patient of the lane's own (as the licensure rows
 * make theirs: registered through Northwind's app, homed in Fresno, CA, enrolled in the monitoring program
 * and activated) books the async-review schedule-visit task her activation gave her (no slot). The booking
 * issues the care team's review: a ready Task `review-async-visit` in the Northwind intake queue, about the
 * visit (focus), due at its window's end (`restriction.period.end`), written by a Bot. Who may not move it:
 * the Southridge clinician (taking it), the Northwind clinician completing it without taking it. A review
 * the admin made (a copy of the real one, in progress, owned by the Northwind clinician) and completed by
 * her fulfils nothing (the visit-review bot runs on it and finds it not issued by the platform). The
 * Northwind clinician takes the real one and completes it as the Provider app does (PUT, no If-Match); the
 * Subscription `async-review-completed` wakes the visit-review bot: the Appointment fulfilled, its segment
 * finished, which the patient sees through the gateway. Her own `$execute` of that bot is refused.
 * The patient, her visit and both review Tasks stay in the project.
 */
async function asyncVisitReviewed(
  ctx: AttackContext,
  people: Map<string, Person>,
  queueRef: string | undefined,
): Promise<void> {
  const family = 'an asynchronous visit reviewed';
  const steps = {
    booked: `${family}: precondition: a new Northwind patient (registered through Northwind's app, homed in Fresno, CA, enrolled in the monitoring program and activated) has an async-review schedule-visit task and books it through the gateway (POST /v1/appointments {task}, no slot): 201, modality async`,
    issued: `${family}: (a) the care team's review exists (as the admin reads it): one Task code SYSTEMS.taskKind|review-async-visit ('Review an asynchronous visit') for her, ready, owner the Northwind intake queue, focus the Appointment, restriction.period.end = the Appointment's end, written by a Bot (meta.author: the appointments bot)`,
    southridge: `${family}: (b) attack: the Southridge clinician takes the review (PUT of the Task with owner herself, directly on Medplum, no If-Match): 403/404, nothing changed (the review Task, the Appointment and its segments at the same versions)`,
    untaken: `${family}: (b) attack: the Northwind clinician completes the review without taking it (PUT status completed, owner still the queue): 403, nothing changed`,
    forged: `${family}: (c) a review the platform did not issue: the admin copies the real one (status in-progress, owner the Northwind clinician: 201) and she completes it (PUT status completed: 200); once the visit-review bot has run on it (an AuditEvent naming it, polled up to 30 s) and a second more, the visit is still booked and its segment planned (the Appointment and segments at the same versions)`,
    taken: `${family}: (d) the Northwind demo clinician takes the real review (PUT owner = herself, no If-Match, as the Provider app does): 200, then completes it (PUT status completed): 200`,
    fulfilled: `${family}: (d) within 30 s the visit is fulfilled (as the admin reads it: the Appointment fulfilled, its segment finished) and she sees it through the gateway: GET /v1/appointments/{id}/segments shows the segment finished, GET /v1/fhir/Appointment/{id} 200 fulfilled`,
    execute: `${family}: (e) attack: the patient runs the visit-review bot with {resourceType: 'Task', id: the review} directly on Medplum ($execute by identifier SYSTEMS.bots|visit-review, and by id; her token): refused (403/404, or the bot's own 403), nothing changed`,
  };
  type Step = keyof typeof steps;
  const skip = (keys: Step[], why: string) => {
    for (const key of keys) {
      row(steps[key], 'not reached', why);
    }
  };
  const { call, said, newVisitor } = visitorKit(ctx);
  const her = people.get('northwind-clinician');
  const southridge = people.get('southridge-clinician');
  const idOf = (reference: string) => reference.split('/')[1] ?? '';
  const direct = (person: Person, method: string, path: string, body?: unknown) =>
    medplumCall(ctx.baseUrl, person.token, method, `fhir/R4/${path}`, { body });
  const botOf = async (key: string) =>
    entriesOf((await ctx.adminGet(`fhir/R4/Bot?identifier=${encodeURIComponent(`${SYSTEMS.bots}|${key}`)}`)).body)[0] as
      | Bot
      | undefined;
  const [appointmentsBot, visitReviewBot] = [await botOf('appointments'), await botOf('visit-review')];
  const reviewKind = encodeURIComponent(`${SYSTEMS.taskKind}|review-async-visit`);

  // The precondition: her async-review visit, booked.
  let v: NewVisitor;
  let appointment: string;
  try {
    v = await newVisitor('a new Northwind patient of the asynchronous-visit rows', 'async-review');
    const booked = await call(v.person, 'POST', '/v1/appointments', { task: v.task });
    const body = booked.body as { appointment?: string; modality?: string; end?: string } | undefined;
    const good = booked.status === 201 && body?.modality === 'async' && Boolean(body.appointment);
    row(
      steps.booked,
      good ? 'ok' : 'FAILED',
      `${v.patient}, ${v.task} (plan ${v.carePlan}); POST /v1/appointments {task}: ${said(booked)}${booked.status < 300 ? `, ${body?.appointment}, modality ${body?.modality}, end ${body?.end}` : ''}`,
    );
    if (!good || !body?.appointment) {
      skip(
        ['issued', 'southridge', 'untaken', 'forged', 'taken', 'fulfilled', 'execute'],
        'no booking (the row above)',
      );
      return;
    }
    appointment = body.appointment;
  } catch (err) {
    row(steps.booked, 'FAILED', `the precondition threw: ${message(err)}`);
    skip(['issued', 'southridge', 'untaken', 'forged', 'taken', 'fulfilled', 'execute'], 'no patient (the row above)');
    return;
  }

  /** The visit as the admin reads it: the Appointment and its segments at their versions. */
  const visitState = async (): Promise<{ text: string; status?: string; segments: Encounter[] }> => {
    const read = await ctx.adminGet(`fhir/R4/${appointment}`);
    const a = read.body as Appointment | undefined;
    const segments = entriesOf(
      (await ctx.adminGet(`fhir/R4/Encounter?appointment=${appointment}&_count=50`)).body,
    ) as Encounter[];
    const parts = [
      read.status === 200 ? `${appointment}@${a?.meta?.versionId} (${a?.status})` : `${appointment}: ${read.status}`,
      ...segments.map((e) => `Encounter/${e.id}@${e.meta?.versionId} (${e.status})`).sort(),
    ];
    return { text: parts.join(', '), status: a?.status, segments };
  };
  /** A Task at its version (status, owner), as the admin reads it. */
  const taskState = async (reference: string) => {
    const read = await ctx.adminGet(`fhir/R4/${reference}`);
    const t = read.body as Task | undefined;
    return read.status === 200
      ? `${reference}@${t?.meta?.versionId} (${t?.status}, owner ${t?.owner?.reference})`
      : `${reference}: ${read.status}`;
  };
  const unchanged = (before: string, after: string) =>
    before === after ? `nothing changed: ${after}` : `CHANGED: before ${before}; after ${after}`;

  // (a) The review, as the admin reads it (extended: who wrote it).
  let review: (Task & { id: string }) | undefined;
  try {
    const found = entriesOf(
      (await adminRead(ctx, `fhir/R4/Task?code=${reviewKind}&subject=${v.patient}&_count=50`)).body,
    ) as (Task & { id: string })[];
    review = found[0];
    const visit = (await ctx.adminGet(`fhir/R4/${appointment}`)).body as Appointment | undefined;
    const author = review?.meta?.author?.reference;
    const byAppointmentsBot = Boolean(appointmentsBot?.id) && author === `Bot/${appointmentsBot?.id}`;
    const good =
      found.length === 1 &&
      review?.status === 'ready' &&
      review.code?.text === 'Review an asynchronous visit' &&
      review.for?.reference === v.patient &&
      Boolean(queueRef) &&
      review.owner?.reference === queueRef &&
      review.focus?.reference === appointment &&
      Boolean(visit?.end) &&
      review.restriction?.period?.end === visit?.end &&
      byAppointmentsBot;
    row(
      steps.issued,
      good ? 'ok' : 'FAILED',
      found.length === 0
        ? `no review-async-visit Task for ${v.patient}`
        : `${found.length} Task(s): Task/${review?.id} ${review?.status}, code.text '${review?.code?.text}', for ${review?.for?.reference}, owner ${review?.owner?.reference}${review?.owner?.reference === queueRef ? ' (the Northwind intake queue)' : ` (NOT the Northwind intake queue ${queueRef})`}, focus ${review?.focus?.reference}, restriction.period.end ${review?.restriction?.period?.end} (the Appointment's end: ${visit?.end}), written by ${author ?? 'nobody'}${byAppointmentsBot ? ' (the appointments bot)' : ` (the appointments bot is Bot/${appointmentsBot?.id})`}`,
    );
  } catch (err) {
    row(steps.issued, 'FAILED', `the call threw: ${message(err)}`);
  }
  if (!review) {
    skip(['southridge', 'untaken', 'forged', 'taken', 'fulfilled', 'execute'], 'no review Task (the row above)');
    return;
  }
  const reviewRef = `Task/${review.id}`;
  /** The review as it stands, changed: what a clinician's app PUTs (no If-Match). */
  const changed = async (change: Partial<Task>) => ({
    ...((await ctx.adminGet(`fhir/R4/${reviewRef}`)).body as Task),
    ...change,
  });
  const everything = async () => `${await taskState(reviewRef)}; ${(await visitState()).text}`;
  const attackRow = async (
    step: string,
    attacker: Person | undefined,
    act: () => Promise<Answer[]>,
    refusal: (answer: Answer) => boolean,
  ) => {
    if (!attacker) {
      row(step, 'not reached', 'the attacker could not sign in');
      return;
    }
    try {
      const before = await everything();
      const answers = await act();
      const after = await everything();
      row(
        step,
        answers.every(refusal) && before === after ? 'held' : 'FAILED',
        `${answers.map((x) => `${describe(x)}${x.status === 200 ? ` ${x.text.slice(0, 200)}` : ''}`).join('; ')}; ${unchanged(before, after)}`,
      );
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
    }
  };

  // (b) Who may not move it.
  await attackRow(
    steps.southridge,
    southridge,
    async () => [
      await direct(
        southridge as Person,
        'PUT',
        reviewRef,
        await changed({ owner: { reference: southridge?.profile } }),
      ),
    ],
    (x) => REFUSED.includes(x.status),
  );
  await attackRow(
    steps.untaken,
    her,
    async () => [await direct(her as Person, 'PUT', reviewRef, await changed({ status: 'completed' }))],
    (x) => x.status === 403,
  );
  if (!her) {
    skip(['forged', 'taken', 'fulfilled'], 'the Northwind clinician could not sign in');
  } else {
    // (c) A review the platform did not issue.
    try {
      const said3: string[] = [];
      const before = (await visitState()).text;
      const { id: _id, meta, ...rest } = review;
      const made = await medplumCall(ctx.baseUrl, ctx.adminToken, 'POST', 'fhir/R4/Task', {
        waitOutQuota: true,
        extended: true,
        body: {
          ...rest,
          meta: { ...(meta?.accounts ? { accounts: meta.accounts } : {}), ...(meta?.tag ? { tag: meta.tag } : {}) },
          status: 'in-progress',
          owner: { reference: her.profile },
        },
      });
      const forged = made.body as (Task & { id: string }) | undefined;
      said3.push(`the admin's copy: ${describe(made)}`);
      if (made.status !== 201 || !forged?.id) {
        throw new Error(said3.join('; '));
      }
      const completed = await direct(her, 'PUT', `Task/${forged.id}`, { ...forged, status: 'completed' });
      said3.push(`her PUT status completed: ${describe(completed)}`);
      const botRef = visitReviewBot?.id ? `Bot/${visitReviewBot.id}` : undefined;
      const start = Date.now();
      let runs: AuditEvent[] = [];
      while (completed.status === 200 && botRef && Date.now() - start < SUBSCRIPTION_WAIT_MS) {
        runs = (
          entriesOf(
            (await adminRead(ctx, `fhir/R4/AuditEvent?entity=Task/${forged.id}&_count=50`)).body,
          ) as AuditEvent[]
        ).filter((e) => e.source?.observer?.reference === botRef);
        if (runs.length > 0) {
          break;
        }
        await pause(1000);
      }
      await pause(1000);
      const after = await visitState();
      said3.push(
        runs.length === 0
          ? `NO run of the visit-review bot naming Task/${forged.id} within ${SUBSCRIPTION_WAIT_MS / 1000} s`
          : `${runs.length} run(s) of the visit-review bot naming it after ${((Date.now() - start) / 1000).toFixed(1)} s (outcome ${runs.map((r) => `${r.outcome}${r.outcomeDesc ? ` "${lastLine(r.outcomeDesc)}"` : ''}`).join(', ')})`,
      );
      const stillBooked =
        after.status === 'booked' && after.segments.length > 0 && after.segments.every((e) => e.status === 'planned');
      row(
        steps.forged,
        completed.status === 200 && runs.length > 0 && stillBooked && before === after.text ? 'held' : 'FAILED',
        `${said3.join('; ')}; ${unchanged(before, after.text)}`,
      );
    } catch (err) {
      row(steps.forged, 'FAILED', `the call threw: ${message(err)}`);
    }

    // (d) Taken and completed: the visit fulfilled.
    let done = false;
    try {
      const taken = await direct(her, 'PUT', reviewRef, await changed({ owner: { reference: her.profile } }));
      const completed =
        taken.status === 200 ? await direct(her, 'PUT', reviewRef, await changed({ status: 'completed' })) : undefined;
      done = taken.status === 200 && completed?.status === 200;
      row(
        steps.taken,
        done ? 'ok' : 'FAILED',
        `owner ${her.profile}: ${describe(taken)}; status completed: ${completed ? describe(completed) : 'not tried'}; ${await taskState(reviewRef)}`,
      );
    } catch (err) {
      row(steps.taken, 'FAILED', `the call threw: ${message(err)}`);
    }
    if (!done) {
      skip(['fulfilled'], 'the review was not completed (the row above)');
    } else {
      try {
        const start = Date.now();
        let state = await visitState();
        const finished = (s: typeof state) =>
          s.status === 'fulfilled' && s.segments.length > 0 && s.segments.every((e) => e.status === 'finished');
        while (!finished(state) && Date.now() - start < SUBSCRIPTION_WAIT_MS) {
          await pause(1000);
          state = await visitState();
        }
        const seconds = ((Date.now() - start) / 1000).toFixed(1);
        const segments = await call(v.person, 'GET', `/v1/appointments/${idOf(appointment)}/segments`);
        const listed =
          (segments.body as { segments?: { position?: number; status?: string }[] } | undefined)?.segments ?? [];
        const seen = await call(v.person, 'GET', `/v1/fhir/${appointment}`);
        const seenStatus = (seen.body as Appointment | undefined)?.status;
        const good =
          finished(state) &&
          segments.status === 200 &&
          listed.length > 0 &&
          listed.every((s) => s.status === 'finished') &&
          seen.status === 200 &&
          seenStatus === 'fulfilled';
        row(
          steps.fulfilled,
          good ? 'ok' : 'FAILED',
          `the admin reads after ${seconds} s: ${state.text}; her GET /v1/appointments/${idOf(appointment)}/segments: ${said(segments)}${segments.status === 200 ? ` ${JSON.stringify(listed.map((s) => ({ position: s.position, status: s.status })))}` : ''}; her GET /v1/fhir/${appointment}: ${said(seen)}${seen.status === 200 ? `, status ${seenStatus}` : ''}`,
        );
      } catch (err) {
        row(steps.fulfilled, 'FAILED', `the call threw: ${message(err)}`);
      }
    }
  }

  // (e) Her own run of the bot that fulfils.
  const input = { resourceType: 'Task', id: review.id };
  await attackRow(
    steps.execute,
    v.person,
    async () => [
      await direct(
        v.person,
        'POST',
        `Bot/$execute?identifier=${encodeURIComponent(`${SYSTEMS.bots}|visit-review`)}`,
        input,
      ),
      ...(visitReviewBot?.id ? [await direct(v.person, 'POST', `Bot/${visitReviewBot.id}/$execute`, input)] : []),
    ],
    (x) =>
      REFUSED.includes(x.status) ||
      (x.status === 200 &&
        (x.body as { ok?: boolean } | undefined)?.ok === false &&
        (x.body as { error?: { status?: number } }).error?.status === 403),
  );
}

/**
 * A Condition revised after the offer, on a real Medplum: three new Northwind
 * patients, each driven to an offer as the journey does (the intake through the gateway; the Northwind
 * clinician's `assignCondition` and `select` through src/clinician; eligibility records the Condition keyed
 * by the review, compose-offer her offer pinned to its version). Then her clinician revises the Condition
 * (a Subscription on Condition updates wakes the eligibility bot): (a) a note only, which leaves the offer
 * answerable; (b) its code (R03.0), which withdraws the offer (the RequestGroup revoked, its items and the
 * offer task cancelled, saying why) and issues a new selection for the revised version, the withdrawn offer
 * 409 to her; (c) entered in error, which withdraws it and selects nothing. And who may not revise it: the
 * other tenant's clinician, the patient herself, the patient running the eligibility bot.
 */
async function conditionRevised(
  ctx: AttackContext,
  people: Map<string, Person>,
  queueRef: string | undefined,
): Promise<void> {
  const family = 'a Condition revised after the offer';
  const offeredStep = (label: string) =>
    `${family}: precondition (${label}): the Northwind clinician assigns I10 to the new patient's review and selects amlodipine through src/clinician (assignCondition, select), as the journey does: the Condition keyed by the review (SYSTEMS.eligibilityKey|Task/<review>), and her offer: a ready treatment-offer Task whose RequestGroup (an active proposal) pins that Condition's version (reasonReference Condition/<id>/_history/<vid>), its MedicationRequest items active proposals`;
  const steps = {
    offeredNote: offeredStep('the note case'),
    note: `${family}: (a) the Northwind clinician adds only a note to the Condition (PUT of the Condition as she reads it, with a note): 200, a new version`,
    noteStands: `${family}: (a) once the eligibility bot has run on the revision (an AuditEvent of it naming the Condition, polled up to 10 s) and a second more: her offer still stands (the offer Task ready, the RequestGroup active, its items active), no new select-treatment Task`,
    southridge: `${family}: attack: the Southridge clinician PUTs the Northwind patient's Condition (code R03.0): 403/404, nothing changed (the Condition, the offer Task, the RequestGroup and its items at the same versions, the same selections)`,
    patientPut: `${family}: attack: the patient PUTs her own Condition directly on Medplum (her token, code R03.0): 403/404, nothing changed`,
    patientExecute: `${family}: attack: the patient runs the eligibility bot with {resourceType: 'Condition', id: her Condition} directly on Medplum ($execute by id and by identifier, her token): refused (403/404: the Bot is not hers to read, or the bot's own refusal), nothing changed`,
    noteAccept: `${family}: (a) she accepts the offer through the gateway (POST /v1/tasks/{id}/complete {decision: 'accept'}): 200 with her CarePlan and Consent`,
    offeredRevision: offeredStep('the clinical revision case'),
    revise: `${family}: (b) the Northwind clinician revises the Condition's code to R03.0 (PUT of the Condition as she reads it): 200, a new version`,
    withdrawn: `${family}: (b) within 30 s her offer is withdrawn: the offer Task cancelled, businessStatus 'condition-revised', a statusReason; the RequestGroup revoked; its MedicationRequest items cancelled`,
    reselected: `${family}: (b) a new ready select-treatment Task for the revised version: reasonReference Condition/<id>/_history/<the revision's vid>, identifier SYSTEMS.eligibilityKey|Task/<review>;Condition/<id>/_history/<vid>, owned by the Northwind intake queue; the only ready one`,
    refusedAccept: `${family}: (b) her accept of the withdrawn offer through the gateway (POST /v1/tasks/{id}/complete {decision: 'accept'}): 409 invalid_state, nothing changed (the Condition, the offer Task, the RequestGroup and its items at the same versions, the same selections, her Consents and CarePlans as many as before)`,
    refusedDecline: `${family}: (b) her decline of the withdrawn offer through the gateway ({decision: 'decline'}): 409 invalid_state, nothing changed`,
    offeredError: offeredStep('the entered-in-error case'),
    enteredInError: `${family}: (c) the Northwind clinician marks the Condition entered-in-error (verificationStatus entered-in-error, clinicalStatus removed: FHIR con-5; PUT of the Condition as she reads it): 200, a new version`,
    errorWithdrawn: `${family}: (c) within 30 s her offer is withdrawn (the offer Task cancelled, businessStatus 'condition-revised'; the RequestGroup revoked; its items cancelled) and, once the eligibility bot has run on the revision and a second more, no ready select-treatment Task`,
  };
  type Step = keyof typeof steps;
  const skip = (keys: Step[], why: string) => {
    for (const key of keys) {
      row(steps[key], 'not reached', why);
    }
  };
  const her = people.get('northwind-clinician');
  const southridge = people.get('southridge-clinician');
  const eligibility = entriesOf(
    (await ctx.adminGet(`fhir/R4/Bot?identifier=${encodeURIComponent(`${SYSTEMS.bots}|eligibility`)}`)).body,
  )[0] as Bot | undefined;
  let signedIn: Clinician;
  try {
    signedIn = await signInClinician({
      baseUrl: ctx.baseUrl,
      email: demoEmail('clinician', 'northwind'),
      password: DEMO_PASSWORD,
      projectId: ctx.projectId,
    });
  } catch (err) {
    skip(
      Object.keys(steps) as Step[],
      `the Northwind clinician could not sign in through src/clinician: ${message(err)}`,
    );
    return;
  }
  if (!her || !eligibility?.id) {
    skip(Object.keys(steps) as Step[], !her ? 'the Northwind clinician could not sign in' : 'no eligibility Bot');
    return;
  }
  const clinician = signedIn;
  const botRef = `Bot/${eligibility.id}`;
  const direct = (person: Person, method: string, path: string, body?: unknown) =>
    medplumCall(ctx.baseUrl, person.token, method, `fhir/R4/${path}`, { body });
  const call = async (person: Person, method: string, path: string, body?: unknown): Promise<Answer> =>
    answerOf(
      await ctx.gatewayFetch(`${PUBLIC_URL}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${person.token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
    );
  const said = (answer: Answer) =>
    answer.status < 300 ? gatewayDescribe(answer) : `${gatewayDescribe(answer)} ${JSON.stringify(errorOf(answer))}`;
  const kind = (code: string) => encodeURIComponent(`${SYSTEMS.taskKind}|${code}`);
  /** Polls `probe` every second until it answers something, `ms` at most. */
  const poll = async <T>(probe: () => Promise<T | undefined>, ms = SUBSCRIPTION_WAIT_MS) => {
    const start = Date.now();
    for (;;) {
      const found = await probe();
      if (found !== undefined || Date.now() - start > ms) {
        return { found, seconds: (Date.now() - start) / 1000 };
      }
      await pause(1000);
    }
  };
  /** The eligibility bot's runs on a resource (its AuditEvents naming it), as the admin reads them. */
  const runsOn = async (reference: string) =>
    (entriesOf((await adminRead(ctx, `fhir/R4/AuditEvent?entity=${reference}&_count=50`)).body) as AuditEvent[]).filter(
      (e) => e.source?.observer?.reference === botRef,
    );
  const runsSaid = (runs: AuditEvent[]) =>
    runs.length === 0
      ? 'no run of the eligibility bot naming it'
      : `${runs.length} run(s) of the eligibility bot naming it (outcome ${runs
          .map((r) => `${r.outcome}${r.outcome !== '0' && r.outcomeDesc ? ` "${lastLine(r.outcomeDesc)}"` : ''}`)
          .join(', ')})`;

  interface Offered {
    patient: Person;
    review: string;
    condition: string;
    /** The version the offer pins (the RequestGroup's reasonReference). */
    pinned: string;
    offer: string;
    group: string;
    items: string[];
  }
  /** A resource at its version, with its status (a Condition: its code, clinical and verification status). */
  const versioned = (resource: Resource & { status?: string }) => {
    const codes = (concept: { coding?: Coding[] } | undefined) => concept?.coding?.map((c) => c.code).join(',') || '-';
    const what =
      resource.resourceType === 'Condition'
        ? `${codes(resource.code)}; ${codes(resource.clinicalStatus)}; ${codes(resource.verificationStatus)}`
        : (resource.status ?? 'no status');
    return `${resource.resourceType}/${resource.id}@${resource.meta?.versionId} (${what})`;
  };
  const selectionsOf = async (patient: string) =>
    entriesOf(
      (await adminRead(ctx, `fhir/R4/Task?patient=${patient}&code=${kind('select-treatment')}&_count=50`)).body,
    ) as Task[];
  /** What a refusal must leave alone, as the admin reads it, comparable before and after. */
  const stateOf = async (o: Offered) => {
    const [condition, offer, group, ...items] = await Promise.all(
      [o.condition, o.offer, o.group, ...o.items].map(
        async (reference) => (await ctx.adminGet(`fhir/R4/${reference}`)).body as Resource & { status?: string },
      ),
    );
    const selections = await selectionsOf(o.patient.profile);
    const [consents, plans] = await Promise.all(
      ['Consent', 'CarePlan'].map(async (type) =>
        entriesOf((await ctx.adminGet(`fhir/R4/${type}?patient=${o.patient.profile}&_count=50`)).body),
      ),
    );
    const text = [
      versioned(condition),
      versioned(offer),
      versioned(group),
      ...items.map(versioned),
      `select-treatment: ${selections.map(versioned).sort().join(', ') || 'none'}`,
      `Consents ${consents.length}, CarePlans ${plans.length}`,
    ].join('; ');
    return {
      text,
      condition: condition as Condition,
      offer: offer as Task,
      group: group as RequestGroup,
      items: items as (Resource & { status?: string })[],
      selections,
    };
  };
  const unchanged = (before: string, after: string) =>
    before === after ? `nothing changed: ${after}` : `CHANGED: before ${before}; after ${after}`;

  /** A new Northwind patient, her intake completed, driven to an offer by the clinician (the `label` case). */
  const toOffer = async (label: string, step: string): Promise<Offered | undefined> => {
    const intake = await intakeReview(ctx, `${family}, ${label}`, queueRef);
    if (!intake) {
      row(step, 'not reached', 'no intake review (the precondition row above)');
      return undefined;
    }
    const patient = intake.patient.profile;
    const review = `Task/${intake.review.id}`;
    const done: string[] = [];
    try {
      await clinician.assignCondition(intake.review.id, 'I10');
      done.push(`assignCondition(${review}, I10)`);
      const selection = await poll(
        async () =>
          (
            entriesOf(
              (
                await adminRead(
                  ctx,
                  `fhir/R4/Task?identifier=${encodeURIComponent(`${SYSTEMS.eligibilityKey}|${review}`)}&code=${kind('select-treatment')}&status=ready`,
                )
              ).body,
            ) as (Task & { id: string })[]
          )[0],
      );
      if (!selection.found) {
        row(
          step,
          'FAILED',
          `${patient}: ${done.join('; ')}; no ready select-treatment Task keyed by the review within ${SUBSCRIPTION_WAIT_MS / 1000} s`,
        );
        return undefined;
      }
      const amlodipine = selection.found.input?.find((i) => i.valueCanonical?.includes('amlodipine'))?.valueCanonical;
      if (!amlodipine) {
        row(step, 'FAILED', `${patient}: Task/${selection.found.id} offers no amlodipine option`);
        return undefined;
      }
      await clinician.select(selection.found.id, amlodipine);
      done.push(`Task/${selection.found.id} after ${selection.seconds.toFixed(1)} s, select(${amlodipine})`);
      const offer = await poll(
        async () =>
          (
            entriesOf(
              (await adminRead(ctx, `fhir/R4/Task?patient=${patient}&code=${kind('treatment-offer')}&status=ready`))
                .body,
            ) as (Task & { id: string })[]
          )[0],
      );
      if (!offer.found) {
        row(
          step,
          'FAILED',
          `${patient}: ${done.join('; ')}; no ready treatment-offer Task of hers within ${SUBSCRIPTION_WAIT_MS / 1000} s`,
        );
        return undefined;
      }
      const group = offer.found.focus?.reference ?? '';
      const groupRead = group.startsWith('RequestGroup/') ? await ctx.adminGet(`fhir/R4/${group}`) : undefined;
      const requestGroup = groupRead?.status === 200 ? (groupRead.body as RequestGroup) : undefined;
      const items = (requestGroup?.action ?? []).map((a) => a.resource?.reference ?? '').filter(Boolean);
      const itemsRead = await Promise.all(
        items.map(
          async (item) =>
            (await ctx.adminGet(`fhir/R4/${item}`)).body as Resource & { status?: string; intent?: string },
        ),
      );
      const conditions = entriesOf(
        (
          await adminRead(
            ctx,
            `fhir/R4/Condition?identifier=${encodeURIComponent(`${SYSTEMS.eligibilityKey}|${review}`)}`,
          )
        ).body,
      ) as Condition[];
      const condition = conditions[0];
      const pinned = requestGroup?.reasonReference?.[0]?.reference ?? '';
      const good =
        requestGroup?.status === 'active' &&
        requestGroup.intent === 'proposal' &&
        conditions.length === 1 &&
        condition?.code?.coding?.some((c) => c.code === 'I10') === true &&
        pinned === `Condition/${condition.id}/_history/${condition.meta?.versionId}` &&
        items.length > 0 &&
        itemsRead.every(
          (m) => m.resourceType === 'MedicationRequest' && m.status === 'active' && m.intent === 'proposal',
        );
      row(
        step,
        good ? 'ok' : 'FAILED',
        `${patient}, review ${review}: ${done.join('; ')}; her offer Task/${offer.found.id} ready after ${offer.seconds.toFixed(1)} s, focus ${group || 'none'} (${requestGroup ? `${requestGroup.status} ${requestGroup.intent}, reasonReference ${pinned || 'none'}` : groupRead ? describe(groupRead) : 'not a RequestGroup'}), items ${itemsRead.map(versioned).join(', ') || 'none'}; ${conditions.length} Condition(s) keyed by the review${condition ? `: Condition/${condition.id}@${condition.meta?.versionId} ${condition.code?.coding?.map((c) => c.code).join(', ')}` : ''}`,
      );
      return good && condition?.id
        ? {
            patient: intake.patient,
            review,
            condition: `Condition/${condition.id}`,
            pinned,
            offer: `Task/${offer.found.id}`,
            group,
            items,
          }
        : undefined;
    } catch (err) {
      row(
        step,
        'FAILED',
        `${patient}: ${done.join('; ')}${done.length ? '; then ' : ''}the call threw: ${message(err)}`,
      );
      return undefined;
    }
  };

  /** Her clinician's PUT of the Condition as she reads it, changed by `change`; the row, and the new version. */
  const revise = async (
    o: Offered,
    step: string,
    change: (condition: Condition) => Condition,
    what: string,
  ): Promise<Condition | undefined> => {
    try {
      const read = await direct(her, 'GET', o.condition);
      if (read.status !== 200) {
        row(step, 'FAILED', `her GET ${o.condition}: ${describe(read)}`);
        return undefined;
      }
      const before = read.body as Condition;
      const written = await direct(her, 'PUT', o.condition, change(before));
      const after = written.status === 200 ? (written.body as Condition) : undefined;
      const good = after !== undefined && after.meta?.versionId !== before.meta?.versionId;
      row(
        step,
        good ? 'ok' : 'FAILED',
        `${o.condition}@${before.meta?.versionId} -> PUT (${what}): ${describe(written)}${after ? `, version ${after.meta?.versionId}; code ${after.code?.coding?.map((c) => c.code).join(', ')}, clinicalStatus ${after.clinicalStatus?.coding?.map((c) => c.code).join(', ') ?? 'none'}, verificationStatus ${after.verificationStatus?.coding?.map((c) => c.code).join(', ') ?? 'none'}, note ${JSON.stringify(after.note?.map((n) => n.text) ?? [])}` : ` ${written.text.slice(0, 300)}`}`,
      );
      return good ? after : undefined;
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
      return undefined;
    }
  };
  /** The withdrawal of `o`'s offer, as the admin reads it. */
  const withdrawalOf = (state: Awaited<ReturnType<typeof stateOf>>) => {
    const offer = state.offer;
    const good =
      offer.status === 'cancelled' &&
      offer.businessStatus?.text === 'condition-revised' &&
      !!offer.statusReason?.text &&
      state.group.status === 'revoked' &&
      state.items.length > 0 &&
      state.items.every((m) => m.status === 'cancelled');
    const text = `the offer ${versioned(offer)}, businessStatus ${JSON.stringify(offer.businessStatus ?? null)}, statusReason ${JSON.stringify(offer.statusReason?.text ?? null)}; ${versioned(state.group)}; items ${state.items.map(versioned).join(', ')}`;
    return { good, text };
  };
  const R03 = {
    coding: [
      {
        system: ICD10CM,
        code: 'R03.0',
        display: 'Elevated blood-pressure reading, without diagnosis of hypertension',
      },
    ],
  };

  // (a) A note only, and the attacks on her Condition while her offer stands.
  const a = await toOffer('the note case', steps.offeredNote);
  if (!a) {
    skip(
      ['note', 'noteStands', 'southridge', 'patientPut', 'patientExecute', 'noteAccept'],
      'no offer (the precondition above)',
    );
  } else {
    const runsBefore = (await runsOn(a.condition)).length;
    const selectionsBefore = await selectionsOf(a.patient.profile);
    const noted = await revise(
      a,
      steps.note,
      (c) => ({ ...c, note: [...(c.note ?? []), { text: 'Rechecked at home: stage 2 (the lane)' }] }),
      'a note added',
    );
    if (!noted) {
      skip(['noteStands'], 'the note was not written (the row above)');
    } else {
      try {
        const seen = await poll(async () => {
          const runs = await runsOn(a.condition);
          return runs.length > runsBefore ? runs : undefined;
        }, 10_000);
        await pause(1000);
        const state = await stateOf(a);
        const runs = seen.found ?? (await runsOn(a.condition));
        const ready = state.selections.filter((t) => t.status === 'ready');
        const items = state.items.every((m) => m.status === 'active');
        const good =
          state.offer.status === 'ready' &&
          state.group.status === 'active' &&
          items &&
          ready.length === 0 &&
          state.selections.length === selectionsBefore.length;
        row(
          steps.noteStands,
          good ? 'ok' : 'FAILED',
          `${runsSaid(runs.slice(0, runs.length - runsBefore))}${seen.found ? ` after ${seen.seconds.toFixed(1)} s` : ' within 10 s'}; ${state.text}; select-treatment Tasks before ${selectionsBefore.length}, now ${state.selections.length}, ${ready.length} ready`,
        );
      } catch (err) {
        row(steps.noteStands, 'FAILED', `the call threw: ${message(err)}`);
      }
    }
    const attackRow = async (
      step: string,
      attacker: Person | undefined,
      act: () => Promise<Answer[]>,
      refusal: (answer: Answer) => boolean,
    ) => {
      if (!attacker) {
        row(step, 'not reached', 'the attacker could not sign in');
        return;
      }
      try {
        const before = await stateOf(a);
        const answers = await act();
        const after = await stateOf(a);
        const refused = answers.every(refusal);
        row(
          step,
          refused && before.text === after.text ? 'held' : 'FAILED',
          `${answers.map((x) => `${describe(x)}${x.status === 200 ? ` ${x.text.slice(0, 200)}` : ''}`).join('; ')}; ${unchanged(before.text, after.text)}`,
        );
      } catch (err) {
        row(step, 'FAILED', `the call threw: ${message(err)}`);
      }
    };
    const revisedCopy = async () => ({
      ...((await ctx.adminGet(`fhir/R4/${a.condition}`)).body as Condition),
      code: R03,
    });
    await attackRow(
      steps.southridge,
      southridge,
      async () => [await direct(southridge as Person, 'PUT', a.condition, await revisedCopy())],
      (x) => REFUSED.includes(x.status),
    );
    await attackRow(
      steps.patientPut,
      a.patient,
      async () => [await direct(a.patient, 'PUT', a.condition, await revisedCopy())],
      (x) => REFUSED.includes(x.status),
    );
    const input = { resourceType: 'Condition', id: a.condition.split('/')[1] };
    await attackRow(
      steps.patientExecute,
      a.patient,
      async () => [
        await direct(a.patient, 'POST', `${botRef}/$execute`, input),
        await direct(
          a.patient,
          'POST',
          `Bot/$execute?identifier=${encodeURIComponent(`${SYSTEMS.bots}|eligibility`)}`,
          input,
        ),
      ],
      (x) =>
        REFUSED.includes(x.status) ||
        (x.status === 200 &&
          (x.body as { ok?: boolean; error?: { status?: number } } | undefined)?.ok === false &&
          (x.body as { error?: { status?: number } }).error?.status === 403),
    );
    try {
      const accepted = await call(a.patient, 'POST', `/v1/tasks/${a.offer.split('/')[1]}/complete`, {
        decision: 'accept',
      });
      const body = accepted.body as { carePlan?: string; consent?: string } | undefined;
      row(
        steps.noteAccept,
        accepted.status === 200 && body?.carePlan && body.consent ? 'ok' : 'FAILED',
        `POST /v1/tasks/${a.offer.split('/')[1]}/complete: ${said(accepted)}${accepted.status === 200 ? `, ${body?.carePlan}, ${body?.consent}` : ''}`,
      );
    } catch (err) {
      row(steps.noteAccept, 'FAILED', `the call threw: ${message(err)}`);
    }
  }

  // (b) A clinical revision: the code.
  const b = await toOffer('the clinical revision case', steps.offeredRevision);
  if (!b) {
    skip(['revise', 'withdrawn', 'reselected', 'refusedAccept', 'refusedDecline'], 'no offer (the precondition above)');
  } else {
    const revised = await revise(b, steps.revise, (c) => ({ ...c, code: R03 }), 'code R03.0');
    if (!revised) {
      skip(
        ['withdrawn', 'reselected', 'refusedAccept', 'refusedDecline'],
        'the Condition was not revised (the row above)',
      );
    } else {
      const current = `${b.condition}/_history/${revised.meta?.versionId}`;
      const key = `${b.review};${current}`;
      try {
        const seen = await poll(async () => {
          const state = await stateOf(b);
          const fresh = state.selections.find((t) => t.reasonReference?.reference === current && t.status === 'ready');
          return withdrawalOf(state).good && fresh ? state : undefined;
        });
        const state = seen.found ?? (await stateOf(b));
        const runs = await runsOn(b.condition);
        const withdrawal = withdrawalOf(state);
        row(
          steps.withdrawn,
          withdrawal.good ? 'ok' : 'FAILED',
          `${seen.found ? `after ${seen.seconds.toFixed(1)} s` : `after ${SUBSCRIPTION_WAIT_MS / 1000} s`}: ${withdrawal.text}; ${runsSaid(runs)}`,
        );
        const ready = state.selections.filter((t) => t.status === 'ready');
        const fresh = ready.find((t) => t.reasonReference?.reference === current);
        const keyed = fresh?.identifier?.some((i) => i.system === SYSTEMS.eligibilityKey && i.value === key) ?? false;
        const good = !!fresh && keyed && fresh.owner?.reference === queueRef && ready.length === 1;
        row(
          steps.reselected,
          good ? 'ok' : 'FAILED',
          fresh
            ? `Task/${fresh.id} ${fresh.status}, reasonReference ${fresh.reasonReference?.reference}, identifier ${JSON.stringify(fresh.identifier?.map((i) => `${i.system === SYSTEMS.eligibilityKey ? 'eligibility-key' : i.system}|${i.value}`) ?? [])}${keyed ? '' : ` (NOT ${key})`}, owner ${fresh.owner?.reference}${fresh.owner?.reference === queueRef ? ' (the Northwind intake queue)' : ` (NOT the intake queue ${queueRef})`}; select-treatment Tasks of hers: ${state.selections.map(versioned).join(', ')}`
            : `no ready select-treatment Task with reasonReference ${current}; hers: ${state.selections.map((t) => `${versioned(t)} for ${t.reasonReference?.reference}`).join(', ') || 'none'}; ${runsSaid(runs)}`,
        );
      } catch (err) {
        row(steps.withdrawn, 'FAILED', `the call threw: ${message(err)}`);
        skip(['reselected'], 'the row above threw');
      }
      for (const [step, decision] of [
        [steps.refusedAccept, 'accept'],
        [steps.refusedDecline, 'decline'],
      ] as const) {
        try {
          const before = await stateOf(b);
          const answered = await call(b.patient, 'POST', `/v1/tasks/${b.offer.split('/')[1]}/complete`, { decision });
          const after = await stateOf(b);
          const good =
            answered.status === 409 && errorOf(answered).code === 'invalid_state' && before.text === after.text;
          row(
            step,
            good ? 'held' : 'FAILED',
            `{decision: '${decision}'}: ${said(answered)}; ${unchanged(before.text, after.text)}`,
          );
        } catch (err) {
          row(step, 'FAILED', `the call threw: ${message(err)}`);
        }
      }
    }
  }

  // (c) Entered in error: withdrawn, nothing selected.
  const c = await toOffer('the entered-in-error case', steps.offeredError);
  if (!c) {
    skip(['enteredInError', 'errorWithdrawn'], 'no offer (the precondition above)');
  } else {
    const runsBefore = (await runsOn(c.condition)).length;
    const marked = await revise(
      c,
      steps.enteredInError,
      ({ clinicalStatus: _clinical, ...rest }) => ({
        ...rest,
        verificationStatus: {
          coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-ver-status', code: 'entered-in-error' }],
        },
      }),
      'verificationStatus entered-in-error, no clinicalStatus',
    );
    if (!marked) {
      skip(['errorWithdrawn'], 'the Condition was not marked (the row above)');
    } else {
      try {
        const seen = await poll(async () => {
          const [state, runs] = await Promise.all([stateOf(c), runsOn(c.condition)]);
          return withdrawalOf(state).good && runs.length > runsBefore ? state : undefined;
        });
        await pause(1000);
        const state = await stateOf(c);
        const runs = await runsOn(c.condition);
        const withdrawal = withdrawalOf(state);
        const ready = state.selections.filter((t) => t.status === 'ready');
        row(
          steps.errorWithdrawn,
          withdrawal.good && ready.length === 0 ? 'ok' : 'FAILED',
          `${seen.found ? `after ${seen.seconds.toFixed(1)} s` : `after ${SUBSCRIPTION_WAIT_MS / 1000} s`}: ${withdrawal.text}; ${runsSaid(runs.slice(0, runs.length - runsBefore))}; a second later select-treatment Tasks of hers: ${state.selections.map(versioned).join(', ') || 'none'}, ${ready.length} ready`,
        );
      } catch (err) {
        row(steps.errorWithdrawn, 'FAILED', `the call threw: ${message(err)}`);
      }
    }
  }
}

/**
 * A visit ends with its segments (JOURNEY H, 11517dc; bots/visit-completion.ts), on a real Medplum. Two
 * new Northwind patients of the lane's own (as the licensure rows make theirs: registered through
 * Northwind's app, homed in Fresno, CA, enrolled in the monitoring program and activated) each book their
 * monthly video visit (two segments: 'Check-in with a nurse', 'Visit with your clinician') on a free Slot
 * the admin writes on a CA practitioner's Schedule of her visit team, starting in a few minutes, so that it
 * is open now. The visit's practitioner signs in with her own demo login (`<key>@northwind.example`,
 * signInClinician) and finishes the segments the patient starts with `finishEncounter`, which writes what
 * Medplum's Provider app writes (the Appointment as read, `fulfilled`; then the Encounter `finished`; no
 * If-Match). The Subscriptions `visit-marked-fulfilled` and `segment-finished` wake the visit-completion
 * bot, which decides from the segments:
 * (a) the first of two segments finished: the visit back to `arrived`; (b) the last: the visit fulfilled
 * (by the bot), its request completed, the plan's activity given the outcome, the next monthly visit to
 * book issued (`notBefore` about a month on). Who may not end a visit: (c) a colleague of the tenant and
 * the other tenant's clinician; (d) her own practitioner changing more than its status, or to another
 * status; (e) a segment finished out of order (refused; the visit put back); (f) the patient, by the bot
 * or by a write; (g) a finished segment reopened (refused), or noted (allowed, and nothing issued again).
 * The patients, their visits and the admin's Slots stay in the project.
 */
async function visitCompleted(ctx: AttackContext, people: Map<string, Person>): Promise<void> {
  const family = 'a visit ends with its segments (JOURNEY H)';
  const steps = {
    open: `${family}: precondition: a new Northwind patient (registered through Northwind's app, homed in Fresno, CA, enrolled in the monitoring program and activated) books her monthly video visit on a free Slot the admin writes on the Schedule of a CA practitioner of her visit team, starting in 5 minutes (201, 201): two segments ('Check-in with a nurse', 'Visit with your clinician'), planned; the visit's practitioner signs in with her own demo login (<key>@northwind.example, signInClinician) as the visit's practitioner`,
    first: `${family}: (a) she starts segment 1 through the gateway (POST /v1/appointments/{id}/encounter: 200, in-progress); the visit's practitioner finishes it with finishEncounter (PUT of the Appointment fulfilled, then of the Encounter finished: 200 each); within 30 s the visit is back to arrived through the gateway (GET /v1/appointments/{id}: arrived, segment 1 finished, 2 planned)`,
    last: `${family}: (b) she starts segment 2 (200), the practitioner finishes it (200, 200): within 30 s the visit is fulfilled (GET /v1/appointments/{id}: fulfilled, both segments finished), the Appointment's last version written by the visit-completion Bot or, when the bot's write changed nothing (Medplum keeps no version for it), by the practitioner, its request (Appointment.basedOn ServiceRequest) completed by the bot, her CarePlan's activity has outcomeReference the Appointment, and exactly one new schedule-visit Task of hers, ready, restriction.period.start about a month on (27 to 32 days), listed in GET /v1/tasks with notBefore that start`,
    second: `${family}: precondition: a second new Northwind patient the same way books a visit starting in 10 minutes on the same practitioner's Schedule and starts its segment 1 through the gateway (200, in-progress)`,
    colleague: `${family}: (c) attack: the Northwind demo clinician (clinician@northwind.example, not the visit's practitioner) PUTs the second visit's Appointment fulfilled and its started segment finished (directly on Medplum, as read, no If-Match): 403 each, nothing changed (the Appointment and its segments at the same versions)`,
    southridge: `${family}: (c) attack: the Southridge demo clinician PUTs the same Appointment fulfilled and the same segment finished: 403/404 each, nothing changed`,
    own: `${family}: (d) attack: the visit's practitioner PUTs her own Appointment (the second visit) with status fulfilled AND a changed start, with status checked-in, with status cancelled: 403 each, nothing changed`,
    outOfOrder: `${family}: (e) out of order: on the second visit (segment 1 in-progress) the practitioner finishes segment 2 with finishEncounter: the Appointment PUT 200, the Encounter PUT 403 (finishEncounter throws); within 30 s the visit-completion bot puts the Appointment back to arrived (GET /v1/appointments/{id}: arrived, segment 1 in-progress, 2 planned; the Appointment's last version written by the bot)`,
    execute: `${family}: (f) attack: the patient runs the visit-completion bot with {resourceType: 'Appointment', id: her visit} directly on Medplum ($execute by identifier SYSTEMS.bots|visit-completion, and by id; her token): refused (403/404), nothing changed`,
    patientPut: `${family}: (f) attack: the patient PUTs her own Appointment fulfilled directly on Medplum (her token, as read): 403, nothing changed`,
    reopen: `${family}: (g) after (b): the practitioner reopens the finished segment 2 (PUT status in-progress, as read): 403, nothing changed`,
    note: `${family}: (g) after (b): the practitioner adds a note to the finished segment 2 (reasonCode text, PUT as read): 200; once the visit-completion bot has run on it (an AuditEvent naming the segment, polled up to 30 s) and a second more, still exactly one new schedule-visit Task of hers and the visit fulfilled (GET /v1/appointments/{id})`,
  };
  type Step = keyof typeof steps;
  const reported = new Set<Step>();
  const skip = (keys: Step[], why: string) => {
    for (const key of keys.filter((k) => !reported.has(k))) {
      reported.add(key);
      row(steps[key], 'not reached', why);
    }
  };
  const { call, said, newVisitor } = visitorKit(ctx);
  const colleague = people.get('northwind-clinician');
  const southridge = people.get('southridge-clinician');
  const idOf = (reference: string) => reference.split('/')[1] ?? '';
  const direct = (person: Person, method: string, path: string, body?: unknown) =>
    medplumCall(ctx.baseUrl, person.token, method, `fhir/R4/${path}`, { body });
  const bot = entriesOf(
    (await ctx.adminGet(`fhir/R4/Bot?identifier=${encodeURIComponent(`${SYSTEMS.bots}|visit-completion`)}`)).body,
  )[0] as Bot | undefined;
  const botRef = bot?.id ? `Bot/${bot.id}` : undefined;
  const visitKind = encodeURIComponent(`${SYSTEMS.taskKind}|schedule-visit`);
  /** Polls `probe` every second until it answers something, `ms` at most. */
  const poll = async <T>(probe: () => Promise<T | undefined>, ms = SUBSCRIPTION_WAIT_MS) => {
    const start = Date.now();
    for (;;) {
      const found = await probe();
      if (found !== undefined || Date.now() - start > ms) {
        return { found, seconds: (Date.now() - start) / 1000 };
      }
      await pause(1000);
    }
  };
  /** The visit-completion bot's runs naming a resource (its AuditEvents), as the admin reads them. */
  const runsOn = async (reference: string) =>
    (
      entriesOf(
        (await adminRead(ctx, `fhir/R4/AuditEvent?entity=${reference}&_sort=-_lastUpdated&_count=50`)).body,
      ) as AuditEvent[]
    ).filter((e) => botRef !== undefined && e.source?.observer?.reference === botRef);
  const runsSaid = (runs: AuditEvent[], what: string) =>
    runs.length === 0
      ? `no run of the visit-completion bot naming ${what}`
      : `${runs.length} run(s) of the visit-completion bot naming ${what} (outcome ${runs
          .map((r) => `${r.outcome}${r.outcome !== '0' && r.outcomeDesc ? ` "${lastLine(r.outcomeDesc)}"` : ''}`)
          .join(', ')})`;

  type Segment = { encounter: string; position: number; purpose: string; status: string };
  type View = { appointment: string; status: string; segments: Segment[] };
  /** Her visit through the gateway (GET /v1/appointments/{id}, her token). */
  const viewOf = async (person: Person, appointment: string) => {
    const answer = await call(person, 'GET', `/v1/appointments/${idOf(appointment)}`);
    return { answer, view: answer.status === 200 ? (answer.body as View) : undefined };
  };
  const viewSaid = (seen: { answer: Answer; view?: View }) =>
    seen.view
      ? `${seen.view.status}; ${seen.view.segments.map((s) => `${s.position} '${s.purpose}' ${s.status}`).join(', ')}`
      : said(seen.answer);
  const shows = (view: View | undefined, status: string, segments: string[]) =>
    view?.status === status &&
    view.segments.length === segments.length &&
    view.segments.every((s, i) => s.position === i + 1 && s.status === segments[i]);
  /** The Appointment's versions, oldest first: status and writer (extended), as the admin reads them. */
  const historyOf = async (appointment: string) => {
    const versions = (
      entriesOf((await adminRead(ctx, `fhir/R4/${appointment}/_history?_count=50`)).body) as Appointment[]
    ).reverse();
    return versions
      .map(
        (a) => `${a.status} (${a.meta?.author?.reference === botRef ? 'the bot' : (a.meta?.author?.reference ?? '?')})`,
      )
      .join(' -> ');
  };
  /** The Appointment and its segments at their versions (statuses), as the admin reads them. */
  const stateOf = async (appointment: string) => {
    const read = await ctx.adminGet(`fhir/R4/${appointment}`);
    const a = read.body as Appointment | undefined;
    const segments = entriesOf(
      (await ctx.adminGet(`fhir/R4/Encounter?appointment=${appointment}&_count=50`)).body,
    ) as Encounter[];
    return [
      read.status === 200 ? `${appointment}@${a?.meta?.versionId} (${a?.status})` : `${appointment}: ${read.status}`,
      ...segments.map((e) => `Encounter/${e.id}@${e.meta?.versionId} (${e.status})`).sort(),
    ].join(', ');
  };
  const unchanged = (before: string, after: string) =>
    before === after ? `nothing changed: ${after}` : `CHANGED: before ${before}; after ${after}`;
  /** A resource as the admin reads it, changed: what a clinician's app PUTs (no If-Match). */
  const changed = async <T extends Resource>(reference: string, change: Partial<T>) => ({
    ...((await ctx.adminGet(`fhir/R4/${reference}`)).body as T),
    ...change,
  });
  /** Her schedule-visit Tasks, as the admin reads them. */
  const visitTasksOf = async (patient: string) =>
    entriesOf((await adminRead(ctx, `fhir/R4/Task?code=${visitKind}&patient=${patient}&_count=100`)).body) as (Task & {
      id: string;
    })[];
  /** An attack: each answer must be a refusal, and what it targets unchanged. */
  const attackRow = async (
    step: string,
    attacker: Person | undefined,
    appointment: string,
    act: () => Promise<[string, Answer][]>,
    refused: number[],
  ) => {
    if (!attacker) {
      row(step, 'not reached', 'the attacker could not sign in');
      return;
    }
    try {
      const before = await stateOf(appointment);
      const answers = await act();
      const after = await stateOf(appointment);
      row(
        step,
        answers.every(([, x]) => refused.includes(x.status)) && before === after ? 'held' : 'FAILED',
        `${answers.map(([what, x]) => `${what}: ${describe(x)}${x.status < 300 ? ` ${x.text.slice(0, 160)}` : ''}`).join('; ')}; ${unchanged(before, after)}`,
      );
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
    }
  };

  // The practitioner's own calls to Medplum, seen (what finishEncounter wrote and what Medplum answered).
  const practitionerCalls: string[] = [];
  const recording: typeof fetch = async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : input.toString());
    const method = init?.method ?? (input instanceof Request ? input.method : 'GET');
    const response = await fetch(input, init);
    if (method !== 'GET' && url.pathname.startsWith('/fhir/R4/')) {
      practitionerCalls.push(`${method} ${url.pathname.replace(/^\/fhir\/R4\//, '')} -> ${response.status}`);
    }
    return response;
  };
  /** finishEncounter as the Provider app does it: what it wrote (each PUT and its status), and whether it threw. */
  const finish = async (who: Clinician, segment: string) => {
    const from = practitionerCalls.length;
    try {
      const finished = await who.finishEncounter(idOf(segment));
      return {
        threw: undefined,
        calls: practitionerCalls.slice(from),
        text: `finishEncounter(${segment}): ${practitionerCalls.slice(from).join(', ')}; returned ${finished.resourceType}/${finished.id} ${finished.status}`,
      };
    } catch (err) {
      return {
        threw: message(err),
        calls: practitionerCalls.slice(from),
        text: `finishEncounter(${segment}): ${practitionerCalls.slice(from).join(', ')}; threw "${message(err).slice(0, 160)}"`,
      };
    }
  };
  const wrote = (calls: string[], reference: string, status: number) => calls.includes(`PUT ${reference} -> ${status}`);

  interface Opened {
    v: NewVisitor;
    appointment: string;
    practitioner: string;
    model: Slot;
    segments: Segment[];
    notes: string[];
  }
  /** A new patient's monthly video visit, booked on a Slot the admin writes `minutes` from now (open now). */
  const openVisit = async (who: string, minutes: number, model?: Slot): Promise<Opened> => {
    const notes: string[] = [];
    const v = await newVisitor(who);
    notes.push(`${v.patient}, ${v.task} (plan ${v.carePlan})`);
    let template = model;
    if (!template) {
      const now = Date.now();
      const page = await call(
        v.person,
        'GET',
        `/v1/availability?${new URLSearchParams({
          careTeam: v.careTeam,
          start: new Date(now + 10 * 60_000).toISOString(),
          end: new Date(now + 7 * DAY).toISOString(),
          count: '20',
        })}`,
      );
      const first = (page.body as { slots?: { slot: string; practitioner: string }[] } | undefined)?.slots?.[0];
      if (page.status !== 200 || !first) {
        throw new Error(`GET /v1/availability of her visit team ${v.careTeam}: ${said(page)}, no slot`);
      }
      template = (await ctx.adminGet(`fhir/R4/${first.slot}`)).body as Slot | undefined;
      if (!template?.schedule) {
        throw new Error(`the admin could not read ${first.slot}`);
      }
      notes.push(`her visit team's first slot ${first.slot} (${first.practitioner})`);
    }
    const start = new Date(Date.now() + minutes * 60_000);
    start.setUTCMilliseconds(0);
    const written = await medplumCall(ctx.baseUrl, ctx.adminToken, 'POST', 'fhir/R4/Slot', {
      waitOutQuota: true,
      extended: true,
      body: {
        resourceType: 'Slot',
        ...(template.meta?.accounts?.length ? { meta: { accounts: template.meta.accounts } } : {}),
        schedule: template.schedule,
        serviceType: template.serviceType,
        status: 'free',
        start: start.toISOString(),
        end: new Date(start.getTime() + 30 * 60_000).toISOString(),
      },
    });
    const made = written.body as Slot | undefined;
    notes.push(`the admin's Slot on ${template.schedule?.reference} at ${start.toISOString()}: ${describe(written)}`);
    if (written.status !== 201 || !made?.id) {
      throw new Error(notes.join('; '));
    }
    const booked = await call(v.person, 'POST', '/v1/appointments', { task: v.task, slot: `Slot/${made.id}` });
    const body = booked.body as { appointment?: string; practitioner?: string; segments?: Segment[] } | undefined;
    notes.push(
      `she books it: ${said(booked)}${body?.appointment ? `, ${body.appointment} with ${body.practitioner}` : ''}`,
    );
    if (booked.status !== 201 || !body?.appointment || !body.practitioner) {
      throw new Error(notes.join('; '));
    }
    return {
      v,
      appointment: body.appointment,
      practitioner: body.practitioner,
      model: template,
      segments: body.segments ?? [],
      notes,
    };
  };

  // The precondition: the first visit, open now, and its practitioner signed in as herself.
  let first: Opened;
  let practitioner: Clinician;
  let practitionerPerson: Person;
  let tasksBefore: string[];
  try {
    first = await openVisit('a new Northwind patient of the visit-completion rows', 5);
    const stored = (await ctx.adminGet(`fhir/R4/${first.practitioner}`)).body as Practitioner | undefined;
    const key = stored?.meta?.tag
      ?.find((t) => t.system === SYSTEMS.provisioning)
      ?.code?.replace('visit-practitioner-', '');
    if (!key) {
      throw new Error(`${first.practitioner} carries no visit-practitioner provisioning tag`);
    }
    const email = demoEmail(key, 'northwind');
    practitioner = await signInClinician({
      baseUrl: ctx.baseUrl,
      fetch: recording,
      email,
      password: DEMO_PASSWORD,
      projectId: ctx.projectId,
    });
    practitionerPerson = {
      who: `the visit's practitioner (${email})`,
      token: practitioner.medplum.getAccessToken() as string,
      profile: practitioner.profile.reference as string,
    };
    tasksBefore = (await visitTasksOf(first.v.patient)).map((t) => `Task/${t.id}`);
    const seen = await viewOf(first.v.person, first.appointment);
    first.segments = seen.view?.segments ?? first.segments;
    const purposes = first.segments.map((s) => s.purpose);
    const good =
      practitioner.profile.reference === first.practitioner &&
      shows(seen.view, 'booked', ['planned', 'planned']) &&
      purposes.join('|') === 'Check-in with a nurse|Visit with your clinician' &&
      Boolean(botRef);
    row(
      steps.open,
      good ? 'ok' : 'FAILED',
      `${first.notes.join('; ')}; GET /v1/appointments/{id}: ${viewSaid(seen)}; ${email} signed in as ${practitioner.profile.reference}${practitioner.profile.reference === first.practitioner ? " (the visit's practitioner)" : ` (NOT the visit's ${first.practitioner})`}; her schedule-visit Tasks now: ${tasksBefore.join(', ')}${botRef ? '' : '; NO visit-completion Bot'}`,
    );
    if (!good) {
      skip(['first', 'last', 'reopen', 'note'], 'the precondition was not as it must be (the row above)');
    }
  } catch (err) {
    row(steps.open, 'FAILED', `the precondition threw: ${message(err)}`);
    skip(
      [
        'first',
        'last',
        'second',
        'colleague',
        'southridge',
        'own',
        'outOfOrder',
        'execute',
        'patientPut',
        'reopen',
        'note',
      ],
      'no visit open now or no practitioner signed in (the row above)',
    );
    return;
  }
  const [segment1, segment2] = first.segments.map((s) => s.encounter);
  let fulfilled = false;
  if (!reported.has('first') && segment1 && segment2) {
    // (a) The first segment: the visit goes on.
    let restored = false;
    try {
      const started = await call(first.v.person, 'POST', `/v1/appointments/${idOf(first.appointment)}/encounter`, {});
      const body = started.body as { segment?: Segment; resumed?: boolean } | undefined;
      const finished = await finish(practitioner, segment1);
      const seen = await poll(async () => {
        const now = await viewOf(first.v.person, first.appointment);
        return shows(now.view, 'arrived', ['finished', 'planned']) ? now : undefined;
      });
      const last = seen.found ?? (await viewOf(first.v.person, first.appointment));
      restored = seen.found !== undefined;
      const runs = [...(await runsOn(first.appointment)), ...(await runsOn(segment1))];
      const good =
        started.status === 200 &&
        body?.segment?.position === 1 &&
        body.segment.status === 'in-progress' &&
        !finished.threw &&
        wrote(finished.calls, first.appointment, 200) &&
        wrote(finished.calls, segment1, 200) &&
        restored;
      row(
        steps.first,
        good ? 'ok' : 'FAILED',
        `her start: ${said(started)}${body?.segment ? `, ${body.segment.encounter} (position ${body.segment.position}) ${body.segment.status}` : ''}; ${finished.text}; ${restored ? `after ${seen.seconds.toFixed(1)} s` : `after ${SUBSCRIPTION_WAIT_MS / 1000} s`} GET /v1/appointments/{id}: ${viewSaid(last)}; the Appointment's versions: ${await historyOf(first.appointment)}; ${runsSaid(runs, 'the Appointment or segment 1')}`,
      );
    } catch (err) {
      row(steps.first, 'FAILED', `the call threw: ${message(err)}`);
    }

    // (b) The last segment: the visit fulfilled, and what follows.
    try {
      const started = await call(first.v.person, 'POST', `/v1/appointments/${idOf(first.appointment)}/encounter`, {});
      const body = started.body as { segment?: Segment; resumed?: boolean } | undefined;
      const finished = await finish(practitioner, segment2);
      // Done when the bot has decided: its one transaction completes the request beside the Appointment
      // fulfilled (the practitioner's own mark of the Appointment comes first, so its status alone says nothing).
      const readBoth = async () => {
        const a = (await adminRead(ctx, `fhir/R4/${first.appointment}`)).body as Appointment | undefined;
        const reference = a?.basedOn?.[0]?.reference;
        const r = reference
          ? ((await adminRead(ctx, `fhir/R4/${reference}`)).body as ServiceRequest | undefined)
          : undefined;
        return { appointment: a, requestRef: reference, request: r };
      };
      const seen = await poll(async () => {
        const both = await readBoth();
        return both.appointment?.status === 'fulfilled' && both.request?.status === 'completed' ? both : undefined;
      });
      const view = await viewOf(first.v.person, first.appointment);
      const { appointment, requestRef, request } = seen.found ?? (await readBoth());
      const author = appointment?.meta?.author?.reference;
      const planRef = request?.basedOn?.[0]?.reference;
      const plan = planRef ? ((await adminRead(ctx, `fhir/R4/${planRef}`)).body as CarePlan | undefined) : undefined;
      const outcomes = (plan?.activity ?? []).flatMap((a) => a.outcomeReference ?? []).map((r) => r.reference);
      const issued = (await visitTasksOf(first.v.patient)).filter((t) => !tasksBefore.includes(`Task/${t.id}`));
      const next = issued[0];
      const notBefore = next?.restriction?.period?.start;
      const days = notBefore ? (Date.parse(notBefore) - Date.now()) / DAY : Number.NaN;
      const listed = await call(first.v.person, 'GET', '/v1/tasks');
      const shown = ((listed.body as { tasks?: PatientTask[] } | undefined)?.tasks ?? []).find(
        (t) => t.task === `Task/${next?.id}`,
      );
      fulfilled = seen.found !== undefined && shows(view.view, 'fulfilled', ['finished', 'finished']);
      const good =
        started.status === 200 &&
        body?.segment?.position === 2 &&
        !finished.threw &&
        wrote(finished.calls, first.appointment, 200) &&
        wrote(finished.calls, segment2, 200) &&
        fulfilled &&
        // The app wrote `fulfilled` already: the bot's same write makes no version on Medplum (isNotModified),
        // so the practitioner stays the Appointment's last author; the request is the bot's.
        (author === botRef || author === first.practitioner) &&
        request?.status === 'completed' &&
        request.meta?.author?.reference === botRef &&
        outcomes.includes(first.appointment) &&
        issued.length === 1 &&
        next?.status === 'ready' &&
        days > 27 &&
        days < 32 &&
        shown?.kind === 'schedule-visit' &&
        shown.notBefore === notBefore;
      row(
        steps.last,
        good ? 'ok' : 'FAILED',
        `her start: ${said(started)}${body?.segment ? `, ${body.segment.encounter} (position ${body.segment.position}) ${body.segment.status}` : ''}; ${finished.text}; ${seen.found ? `after ${seen.seconds.toFixed(1)} s` : `after ${SUBSCRIPTION_WAIT_MS / 1000} s (the request NOT completed)`} GET /v1/appointments/{id}: ${viewSaid(view)}; the Appointment's last version written by ${author ?? 'nobody'}${author === botRef ? ' (the visit-completion bot)' : ` (NOT the visit-completion bot ${botRef})`}, its versions: ${await historyOf(first.appointment)}; ${requestRef ?? 'no request'} ${request?.status ?? ''}, written by ${request?.meta?.author?.reference ?? 'nobody'}; ${planRef ?? 'no plan'} (written by ${plan?.meta?.author?.reference ?? 'nobody'}) activity outcomeReference ${outcomes.join(', ') || 'none'}; new schedule-visit Task(s): ${issued.map((t) => `Task/${t.id} ${t.status} (by ${t.meta?.author?.reference ?? 'nobody'}), restriction.period.start ${t.restriction?.period?.start} (${((Date.parse(t.restriction?.period?.start ?? '') - Date.now()) / DAY).toFixed(1)} days on), focus ${t.focus?.reference}, basedOn ${t.basedOn?.map((b) => b.reference).join(', ')}`).join('; ') || 'none'}; GET /v1/tasks: ${describe(listed)}, ${shown ? `${shown.task} ${shown.kind}, notBefore ${shown.notBefore}` : 'NOT listing it'}; ${runsSaid([...(await runsOn(first.appointment)), ...(await runsOn(segment2))], 'the Appointment or segment 2')}`,
      );
    } catch (err) {
      row(steps.last, 'FAILED', `the call threw: ${message(err)}`);
    }
  } else {
    skip(
      ['first', 'last'],
      `the visit has not two segments: ${first.segments.map((s) => `${s.position} ${s.status}`).join(', ')}`,
    );
  }

  // The second visit, its segment 1 under way: who may not end it.
  let second: Opened | undefined;
  try {
    second = await openVisit('a second new Northwind patient of the visit-completion rows', 10, first.model);
    const started = await call(second.v.person, 'POST', `/v1/appointments/${idOf(second.appointment)}/encounter`, {});
    const body = started.body as { segment?: Segment } | undefined;
    const seen = await viewOf(second.v.person, second.appointment);
    second.segments = seen.view?.segments ?? second.segments;
    const good =
      started.status === 200 &&
      second.practitioner === first.practitioner &&
      shows(seen.view, 'arrived', ['in-progress', 'planned']);
    row(
      steps.second,
      good ? 'ok' : 'FAILED',
      `${second.notes.join('; ')}; her start: ${said(started)}${body?.segment ? `, ${body.segment.encounter} ${body.segment.status}` : ''}; GET /v1/appointments/{id}: ${viewSaid(seen)}`,
    );
    if (!good) {
      second = undefined;
    }
  } catch (err) {
    row(steps.second, 'FAILED', `the precondition threw: ${message(err)}`);
  }
  if (!second) {
    skip(
      ['colleague', 'southridge', 'own', 'outOfOrder', 'execute', 'patientPut'],
      'no second visit under way (the row above)',
    );
  } else {
    const visit = second;
    const [started1, planned2] = visit.segments.map((s) => s.encounter) as [string, string];
    // (c) A colleague of the tenant, and the other tenant's clinician.
    for (const [step, attacker, refused] of [
      [steps.colleague, colleague, [403]],
      [steps.southridge, southridge, REFUSED],
    ] as const) {
      await attackRow(
        step,
        attacker,
        visit.appointment,
        async () => [
          [
            'PUT Appointment fulfilled',
            await direct(
              attacker as Person,
              'PUT',
              visit.appointment,
              await changed<Appointment>(visit.appointment, { status: 'fulfilled' }),
            ),
          ],
          [
            'PUT segment 1 finished',
            await direct(
              attacker as Person,
              'PUT',
              started1,
              await changed<Encounter>(started1, { status: 'finished' }),
            ),
          ],
        ],
        [...refused],
      );
    }
    // (d) Her own visit: more than its status, or another status.
    await attackRow(
      steps.own,
      practitionerPerson,
      visit.appointment,
      async () => [
        [
          'fulfilled with start moved an hour',
          await direct(
            practitionerPerson,
            'PUT',
            visit.appointment,
            await (async () => {
              const read = await changed<Appointment>(visit.appointment, { status: 'fulfilled' });
              return { ...read, start: new Date(Date.parse(read.start ?? '') + 3_600_000).toISOString() };
            })(),
          ),
        ],
        [
          'checked-in',
          await direct(
            practitionerPerson,
            'PUT',
            visit.appointment,
            await changed<Appointment>(visit.appointment, { status: 'checked-in' }),
          ),
        ],
        [
          'cancelled',
          await direct(
            practitionerPerson,
            'PUT',
            visit.appointment,
            await changed<Appointment>(visit.appointment, { status: 'cancelled' }),
          ),
        ],
      ],
      [403],
    );
    // (e) Segment 2 finished before segment 1.
    try {
      const finished = await finish(practitioner, planned2);
      const seen = await poll(async () => {
        const now = await viewOf(visit.v.person, visit.appointment);
        return shows(now.view, 'arrived', ['in-progress', 'planned']) ? now : undefined;
      });
      const last = seen.found ?? (await viewOf(visit.v.person, visit.appointment));
      const stored = (await adminRead(ctx, `fhir/R4/${visit.appointment}`)).body as Appointment | undefined;
      const good =
        finished.threw !== undefined &&
        wrote(finished.calls, visit.appointment, 200) &&
        wrote(finished.calls, planned2, 403) &&
        seen.found !== undefined &&
        stored?.meta?.author?.reference === botRef;
      row(
        steps.outOfOrder,
        good ? 'ok' : 'FAILED',
        `${finished.text}; ${seen.found ? `after ${seen.seconds.toFixed(1)} s` : `after ${SUBSCRIPTION_WAIT_MS / 1000} s`} GET /v1/appointments/{id}: ${viewSaid(last)}; the Appointment's versions: ${await historyOf(visit.appointment)}; ${runsSaid(await runsOn(visit.appointment), 'the Appointment')}`,
      );
    } catch (err) {
      row(steps.outOfOrder, 'FAILED', `the call threw: ${message(err)}`);
    }
    // (f) The patient: the bot that decides, and a write of her own.
    const input = { resourceType: 'Appointment', id: idOf(visit.appointment) };
    await attackRow(
      steps.execute,
      visit.v.person,
      visit.appointment,
      async () => [
        [
          '$execute by identifier',
          await direct(
            visit.v.person,
            'POST',
            `Bot/$execute?identifier=${encodeURIComponent(`${SYSTEMS.bots}|visit-completion`)}`,
            input,
          ),
        ],
        ...(bot?.id
          ? ([['$execute by id', await direct(visit.v.person, 'POST', `Bot/${bot.id}/$execute`, input)]] as [
              string,
              Answer,
            ][])
          : []),
      ],
      REFUSED,
    );
    await attackRow(
      steps.patientPut,
      visit.v.person,
      visit.appointment,
      async () => [
        [
          'PUT Appointment fulfilled',
          await direct(
            visit.v.person,
            'PUT',
            visit.appointment,
            await changed<Appointment>(visit.appointment, { status: 'fulfilled' }),
          ),
        ],
      ],
      [403],
    );
  }

  // (g) The first visit, fulfilled: its finished segment reopened, or noted.
  if (!fulfilled || !segment2) {
    skip(['reopen', 'note'], 'the first visit was not fulfilled (row (b))');
    return;
  }
  await attackRow(
    steps.reopen,
    practitionerPerson,
    first.appointment,
    async () => [
      [
        'PUT segment 2 in-progress',
        await direct(
          practitionerPerson,
          'PUT',
          segment2,
          await changed<Encounter>(segment2, { status: 'in-progress' }),
        ),
      ],
    ],
    [403],
  );
  try {
    const runsBefore = (await runsOn(segment2)).length;
    const noted = await direct(
      practitionerPerson,
      'PUT',
      segment2,
      await changed<Encounter>(segment2, { reasonCode: [{ text: 'follow-up of blood pressure' }] }),
    );
    const seen = await poll(async () => {
      const runs = await runsOn(segment2);
      return runs.length > runsBefore ? runs : undefined;
    });
    await pause(1000);
    const issued = (await visitTasksOf(first.v.patient)).filter((t) => !tasksBefore.includes(`Task/${t.id}`));
    const view = await viewOf(first.v.person, first.appointment);
    const good = noted.status === 200 && issued.length === 1 && shows(view.view, 'fulfilled', ['finished', 'finished']);
    row(
      steps.note,
      good ? 'ok' : 'FAILED',
      `PUT ${segment2} with reasonCode: ${describe(noted)}; ${seen.found ? `after ${seen.seconds.toFixed(1)} s ${runsSaid(seen.found.slice(0, seen.found.length - runsBefore), 'it')} since the note` : `no new run of the visit-completion bot naming it within ${SUBSCRIPTION_WAIT_MS / 1000} s`}; new schedule-visit Task(s) of hers: ${issued.map((t) => `Task/${t.id} ${t.status}`).join(', ') || 'none'}; GET /v1/appointments/{id}: ${viewSaid(view)}; the Appointment's versions: ${await historyOf(first.appointment)}`,
    );
  } catch (err) {
    row(steps.note, 'FAILED', `the call threw: ${message(err)}`);
  }
}

/**
 * `Idempotency-Key` on every POST of /v1 (docs/decisions.md "Idempotency-Key on every POST";
 * src/edge/idempotency.ts), on a real Medplum, across the lane's two gateway instances (each called
 * directly, its own `Bot/$execute` calls counted). Two new Northwind patients of the lane's own (registered
 * through Northwind's app, homed, living in Fresno, CA) accept their unmet agreements
 * (`POST /v1/agreements/acceptances`, what `GET /v1/agreements/requirements` lists):
 * (a) the first with key K through instance A, then the same call with K through instance B: the first
 * answer again (`Idempotent-Replayed: true`), nothing done by B; (b) K with another body: 422
 * `idempotency_key_reused`, nothing written; (c) the second, 10 calls at once with a new key K2, alternately
 * through A and B: one does the work, the others 409 `request_in_progress` or the first answer again, one
 * Consent per agreement; (d) her key's record on Medplum (a Basic of hers, identifier the key's sha-256):
 * hers to read, and neither bob nor the Northwind clinician may read or copy it, nor may she file one
 * about bob or of another code; (e) a key of 256 characters: 400 naming the header. The patients, their
 * Consents and their key records stay in the project (the reconciler deletes the records after 25 hours).
 */
async function idempotencyKeys(ctx: AttackContext, people: Map<string, Person>): Promise<void> {
  const family = 'Idempotency-Key';
  const code = `${SYSTEMS.idempotency}|request`;
  const steps = {
    replay: `${family}: (a) a new Northwind patient (registered through Northwind's app, homed, living in Fresno, CA) accepts her unmet agreements (GET /v1/agreements/requirements) with key K through instance A (POST /v1/agreements/acceptances): 200, not replayed, one Consent per agreement; the same call with K through instance B: 200, the same body, Idempotent-Replayed: true, no new Consent (her Consents as the admin reads them, at the same versions) and no Bot/$execute by B`,
    reused: `${family}: (b) K again with another body (one agreement only), through instance A: 422 idempotency_key_reused naming the header, nothing written (her Consents and her key's record at the same versions, no Bot/$execute by A)`,
    together: `${family}: (c) 10 concurrent calls with a new key K2 (a second new Northwind patient, her unmet agreements), alternately through instances A and B: exactly one answered 200 without Idempotent-Replayed, each other either 409 request_in_progress with Retry-After or 200 with the same body and Idempotent-Replayed: true; exactly one Consent of hers per agreement (as the admin reads them)`,
    record: `${family}: (d) her key's record on Medplum: as the admin, Basic?subject=Patient/<her id> holds one Basic with code ${code} and identifier ${SYSTEMS.idempotency}|<the sha-256 of K> (its stored answer 200); she reads it directly on Medplum with her token: 200`,
    bob: `${family}: (d) attack: bob (Northwind demo patient) reads her key's record directly on Medplum (403/404) and creates a copy of it (POST Basic, the record as the admin read it without id and meta: 403), nothing written`,
    clinician: `${family}: (d) attack: the Northwind demo clinician reads her key's record directly on Medplum (403/404) and creates a copy of it (POST Basic: 403), nothing written`,
    aboutBob: `${family}: (d) attack: she creates a Basic about bob directly on Medplum (her record's copy with subject bob's Patient, her token): 403, nothing written`,
    otherCode: `${family}: (d) attack: she creates a Basic of another code about herself directly on Medplum (code https://example.org/lane|note, her token): 403, nothing written`,
    invalid: `${family}: (e) her call with an invalid key (256 visible characters) through instance B: 400 invalid_request with details.header Idempotency-Key, nothing written (her Consents and key records as before, no Bot/$execute by B)`,
  };
  type Step = keyof typeof steps;
  const reported = new Set<Step>();
  const report = (key: Step, result: Result, detail: string) => {
    reported.add(key);
    row(steps[key], result, detail);
  };
  const skip = (keys: Step[], why: string) => {
    for (const key of keys.filter((k) => !reported.has(k))) {
      report(key, 'not reached', why);
    }
  };
  const { call, said, moveTo, FRESNO } = visitorKit(ctx);
  const instanceA = ctx.instances.find((i) => i.name === 'A');
  const instanceB = ctx.instances.find((i) => i.name === 'B');
  if (!instanceA || !instanceB) {
    skip(
      Object.keys(steps) as Step[],
      `the lane has no instances A and B (${ctx.instances.map((i) => i.name).join(', ')})`,
    );
    return;
  }
  const direct = (person: Person, method: string, path: string, body?: unknown) =>
    medplumCall(ctx.baseUrl, person.token, method, `fhir/R4/${path}`, { body });
  const sha256 = (value: string) => createHash('sha256').update(value, 'utf8').digest('hex');
  type Unmet = { url: string; version: string };

  /** A new Northwind patient living in Fresno, CA, and what she has not accepted yet. */
  const newcomer = async (who: string) => {
    const registered = { ...(await register(ctx.baseUrl, ctx.projectId, ctx.appIdOf('northwind'))), who };
    const api = createPatientCareClient({
      baseUrl: PUBLIC_URL,
      accessToken: registered.token,
      fetch: ctx.gatewayFetch,
    });
    const { patient } = await api.patient.home();
    const person = { ...registered, profile: patient };
    await moveTo({ person, patient }, FRESNO);
    const asked = await call(person, 'GET', '/v1/agreements/requirements');
    const unmet = (asked.body as { unmet?: Unmet[] } | undefined)?.unmet ?? [];
    if (asked.status !== 200 || unmet.length === 0) {
      throw new Error(`${patient}: GET /v1/agreements/requirements: ${said(asked)}, ${unmet.length} unmet`);
    }
    return { person, patient, unmet };
  };
  interface Sent {
    instance: string;
    answer: Answer;
    replayed: string | null;
    retryAfter: string | null;
    /** The instance's `Bot/$execute` calls while this one ran (exact only when nothing else ran on it). */
    runs: number;
  }
  /** Her acceptance through one instance, with an Idempotency-Key. */
  const accept = async (instance: GatewayInstance, person: Person, body: unknown, key: string): Promise<Sent> => {
    const before = instance.executes.count;
    const response = await instance.fetch(
      new Request(`${PUBLIC_URL}/v1/agreements/acceptances`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${person.token}`,
          'content-type': 'application/json',
          'idempotency-key': key,
        },
        body: JSON.stringify(body),
      }),
    );
    const replayed = response.headers.get('idempotent-replayed');
    const retryAfter = response.headers.get('retry-after');
    const answer = await answerOf(response);
    return { instance: instance.name, answer, replayed, retryAfter, runs: instance.executes.count - before };
  };
  const sentSaid = (s: Sent, runs = true) =>
    `${s.instance}: ${said(s.answer)}, Idempotent-Replayed ${s.replayed ?? 'absent'}${s.retryAfter ? `, Retry-After ${s.retryAfter}` : ''}${runs ? `, ${s.runs} Bot/$execute` : ''}`;
  /** Her Consents, as the admin reads them: id@version, status, policy. */
  const consentsOf = async (patient: string) =>
    (entriesOf((await ctx.adminGet(`fhir/R4/Consent?patient=${patient}&_count=100`)).body) as Consent[]).sort((x, y) =>
      (x.id ?? '').localeCompare(y.id ?? ''),
    );
  const consentsSaid = (consents: Consent[]) =>
    consents.map((c) => `Consent/${c.id}@${c.meta?.versionId} ${c.status} ${c.policy?.[0]?.uri}`).join(', ') || 'none';
  /** The Basic records about a patient, as the admin reads them. */
  const basicsOf = async (patient: string) =>
    (entriesOf((await ctx.adminGet(`fhir/R4/Basic?subject=${patient}&_count=100`)).body) as Basic[]).sort((x, y) =>
      (x.id ?? '').localeCompare(y.id ?? ''),
    );
  const basicsSaid = (basics: Basic[]) => basics.map((b) => `Basic/${b.id}@${b.meta?.versionId}`).join(', ') || 'none';
  const keyRecordOf = (basics: Basic[], key: string) =>
    basics.find((b) => (b.identifier ?? []).some((i) => i.system === SYSTEMS.idempotency && i.value === sha256(key)));
  const unchanged = (before: string, after: string) =>
    before === after ? `nothing changed: ${after}` : `CHANGED: before ${before}; after ${after}`;
  const sameText = (x: Sent, y: Sent) => x.answer.text === y.answer.text;

  // (a) The first patient: key K through A, then through B.
  const K = `lane-${randomBytes(12).toString('hex')}`;
  let first: Awaited<ReturnType<typeof newcomer>> | undefined;
  let record: Basic | undefined;
  try {
    first = await newcomer('the Idempotency-Key patient');
    const body = { agreements: first.unmet };
    const consents0 = await consentsOf(first.patient);
    const viaA = await accept(instanceA, first.person, body, K);
    const consentsA = await consentsOf(first.patient);
    const viaB = await accept(instanceB, first.person, body, K);
    const consentsB = await consentsOf(first.patient);
    const perAgreement = first.unmet.every(
      (u) =>
        consentsA.filter((c) => c.status === 'active' && c.policy?.[0]?.uri === `${u.url}|${u.version}`).length === 1,
    );
    const good =
      viaA.answer.status === 200 &&
      viaA.replayed === null &&
      consentsA.length === consents0.length + first.unmet.length &&
      perAgreement &&
      viaB.answer.status === 200 &&
      sameText(viaA, viaB) &&
      viaB.replayed === 'true' &&
      consentsSaid(consentsB) === consentsSaid(consentsA) &&
      viaB.runs === 0;
    report(
      'replay',
      good ? 'ok' : 'FAILED',
      `${first.patient}, unmet ${first.unmet.map((u) => `${u.url}|${u.version}`).join(', ')}; K ${K}; her Consents before: ${consents0.length}; ${sentSaid(viaA)}; her Consents after A: ${consentsSaid(consentsA)}; ${sentSaid(viaB)}; ${sameText(viaA, viaB) ? `the same body (${viaB.answer.text.length} characters: ${viaB.answer.text.slice(0, 200)})` : `bodies differ: A ${viaA.answer.text.slice(0, 200)} vs B ${viaB.answer.text.slice(0, 200)}`}; her Consents after B: ${unchanged(consentsSaid(consentsA), consentsSaid(consentsB))}`,
    );
  } catch (err) {
    report('replay', 'FAILED', `the call threw: ${message(err)}`);
  }

  // (b) K with another body.
  if (!first) {
    skip(['reused'], 'no first patient (the row above)');
  } else {
    try {
      const other =
        first.unmet.length > 1
          ? { agreements: first.unmet.slice(0, 1) }
          : { agreements: first.unmet.map((u) => `${u.url}|${u.version}`) };
      const before = `${consentsSaid(await consentsOf(first.patient))}; ${basicsSaid(await basicsOf(first.patient))}`;
      const sent = await accept(instanceA, first.person, other, K);
      const after = `${consentsSaid(await consentsOf(first.patient))}; ${basicsSaid(await basicsOf(first.patient))}`;
      const error = errorOf(sent.answer);
      const good =
        sent.answer.status === 422 &&
        error.code === 'idempotency_key_reused' &&
        error.details?.header === 'Idempotency-Key' &&
        sent.replayed === null &&
        sent.runs === 0 &&
        before === after;
      report(
        'reused',
        good ? 'ok' : 'FAILED',
        `body ${JSON.stringify(other).slice(0, 200)}; ${sentSaid(sent)}; ${unchanged(before, after)}`,
      );
    } catch (err) {
      report('reused', 'FAILED', `the call threw: ${message(err)}`);
    }
  }

  // (c) Ten at once with K2, a second patient.
  try {
    const second = await newcomer('the second Idempotency-Key patient');
    const K2 = `lane-${randomBytes(12).toString('hex')}`;
    const body = { agreements: second.unmet };
    const runsBefore = { A: instanceA.executes.count, B: instanceB.executes.count };
    const sent = await Promise.all(
      Array.from({ length: 10 }, (_, i) => accept(i % 2 === 0 ? instanceA : instanceB, second.person, body, K2)),
    );
    const runs = { A: instanceA.executes.count - runsBefore.A, B: instanceB.executes.count - runsBefore.B };
    const fresh = sent.filter((s) => s.answer.status === 200 && s.replayed === null);
    const winner = fresh.length === 1 ? fresh[0] : undefined;
    const othersGood = sent
      .filter((s) => s !== winner)
      .every(
        (s) =>
          (s.answer.status === 409 &&
            errorOf(s.answer).code === 'request_in_progress' &&
            s.retryAfter !== null &&
            s.replayed === null) ||
          (s.answer.status === 200 && s.replayed === 'true' && winner !== undefined && sameText(s, winner)),
      );
    const consents = await consentsOf(second.patient);
    const perAgreement = second.unmet.map(
      (u) =>
        [
          `${u.url}|${u.version}`,
          consents.filter((c) => c.status === 'active' && c.policy?.[0]?.uri === `${u.url}|${u.version}`).length,
        ] as const,
    );
    const good = winner !== undefined && othersGood && perAgreement.every(([, n]) => n === 1);
    const tally = new Map<string, number>();
    for (const s of sent) {
      const kind =
        s.answer.status === 200
          ? s.replayed === 'true'
            ? '200 replayed'
            : '200 fresh'
          : `${s.answer.status} ${errorOf(s.answer).code ?? ''}`;
      tally.set(kind, (tally.get(kind) ?? 0) + 1);
    }
    report(
      'together',
      good ? 'ok' : 'FAILED',
      `${second.patient}, unmet ${second.unmet.length}; ${[...tally.entries()].map(([k, n]) => `${k} x${n}`).join(', ')}; Bot/$execute during the burst: A ${runs.A}, B ${runs.B}; the calls in order: ${sent.map((s, i) => `${i + 1}. ${sentSaid(s, false)}${s.answer.status !== 200 || s.replayed === 'true' ? '' : ` ${s.answer.text.slice(0, 120)}`}`).join('; ')}; her Consents per agreement: ${perAgreement.map(([a, n]) => `${a} x${n}`).join(', ')} (${consentsSaid(consents)})`,
    );
  } catch (err) {
    report('together', 'FAILED', `the call threw: ${message(err)}`);
  }

  // (d) Her key's record on Medplum.
  if (!first) {
    skip(['record', 'bob', 'clinician', 'aboutBob', 'otherCode'], 'no first patient (row (a))');
  } else {
    try {
      const basics = await basicsOf(first.patient);
      record = keyRecordOf(basics, K);
      const answer = record?.extension?.find((e) => e.url === EXTENSIONS.idempotencyAnswer)?.valueString;
      const stored = answer ? (JSON.parse(answer) as { status?: number }) : undefined;
      const coded = record?.code?.coding?.some((c) => `${c.system}|${c.code}` === code) === true;
      const read = record?.id ? await direct(first.person, 'GET', `Basic/${record.id}`) : undefined;
      const good =
        record !== undefined &&
        coded &&
        record.subject?.reference === first.patient &&
        stored?.status === 200 &&
        read?.status === 200 &&
        (read.body as Basic | undefined)?.id === record.id;
      report(
        'record',
        good ? 'ok' : 'FAILED',
        `${basics.length} Basic about ${first.patient} (${basicsSaid(basics)}; the SDK's own POSTs carry keys too); sha-256 of K ${sha256(K)}: ${record ? `Basic/${record.id}@${record.meta?.versionId}, code ${record.code?.coding?.map((c) => `${c.system}|${c.code}`).join(', ')}, subject ${record.subject?.reference}, stored answer ${stored ? `status ${stored.status}` : 'none'}` : 'NO record with that identifier'}; her GET Basic/{id} directly: ${read ? describe(read) : 'not made'}`,
      );
    } catch (err) {
      report('record', 'FAILED', `the call threw: ${message(err)}`);
    }
    const bob = people.get('bob');
    if (!record?.id) {
      skip(['bob', 'clinician', 'aboutBob', 'otherCode'], 'no key record of hers (the row above)');
    } else {
      const target = record;
      const copy = { ...target, id: undefined, meta: undefined };
      const state = async () =>
        `hers ${basicsSaid(await basicsOf(first.patient))}${bob ? `; bob's ${basicsSaid(await basicsOf(bob.profile))}` : ''}`;
      for (const [key, attacker] of [
        ['bob', bob],
        ['clinician', people.get('northwind-clinician')],
      ] as const) {
        if (!attacker) {
          report(key, 'not reached', 'the attacker could not sign in');
          continue;
        }
        try {
          const before = await state();
          const read = await direct(attacker, 'GET', `Basic/${target.id}`);
          const forged = await direct(attacker, 'POST', 'Basic', copy);
          const after = await state();
          const held = REFUSED.includes(read.status) && forged.status === 403 && before === after;
          report(
            key,
            held ? 'held' : 'FAILED',
            `GET Basic/${target.id}: ${describe(read)}${read.status < 300 ? ` ${read.text.slice(0, 160)}` : ''}; POST Basic (the copy): ${describe(forged)}; ${unchanged(before, after)}`,
          );
        } catch (err) {
          report(key, 'FAILED', `the call threw: ${message(err)}`);
        }
      }
      if (!bob) {
        skip(['aboutBob'], 'bob could not sign in');
      } else {
        try {
          const before = await state();
          const forged = await direct(first.person, 'POST', 'Basic', { ...copy, subject: { reference: bob.profile } });
          const after = await state();
          report(
            'aboutBob',
            forged.status === 403 && before === after ? 'held' : 'FAILED',
            `POST Basic about ${bob.profile}: ${describe(forged)}; ${unchanged(before, after)}`,
          );
        } catch (err) {
          report('aboutBob', 'FAILED', `the call threw: ${message(err)}`);
        }
      }
      try {
        const before = await state();
        const forged = await direct(first.person, 'POST', 'Basic', {
          resourceType: 'Basic',
          code: { coding: [{ system: 'https://example.org/lane', code: 'note' }] },
          subject: { reference: first.patient },
        });
        const after = await state();
        report(
          'otherCode',
          forged.status === 403 && before === after ? 'held' : 'FAILED',
          `POST Basic (https://example.org/lane|note, about ${first.patient}): ${describe(forged)}; ${unchanged(before, after)}`,
        );
      } catch (err) {
        report('otherCode', 'FAILED', `the call threw: ${message(err)}`);
      }
    }
  }

  // (e) A key that is not a key.
  if (!first) {
    skip(['invalid'], 'no first patient (row (a))');
  } else {
    try {
      const before = `${consentsSaid(await consentsOf(first.patient))}; ${basicsSaid(await basicsOf(first.patient))}`;
      const sent = await accept(instanceB, first.person, { agreements: first.unmet }, 'k'.repeat(256));
      const after = `${consentsSaid(await consentsOf(first.patient))}; ${basicsSaid(await basicsOf(first.patient))}`;
      const error = errorOf(sent.answer);
      const good =
        sent.answer.status === 400 &&
        error.code === 'invalid_request' &&
        error.details?.header === 'Idempotency-Key' &&
        sent.runs === 0 &&
        before === after;
      report(
        'invalid',
        good ? 'ok' : 'FAILED',
        `${sentSaid(sent)} ${JSON.stringify(error).slice(0, 200)}; ${unchanged(before, after)}`,
      );
    } catch (err) {
      report('invalid', 'FAILED', `the call threw: ${message(err)}`);
    }
  }
}

/** Every Schedule of the demo tenants has free Slots in the coming week (materialize-slots ran at provisioning). */
async function calendars(adminGet: (path: string) => Promise<Answer>): Promise<void> {
  const tenants = new Map<string, string>();
  for (const tenant of DEMO_TENANTS) {
    const org = entriesOf(
      (await adminGet(`fhir/R4/Organization?_tag=${encodeURIComponent(`${SYSTEMS.provisioning}|org-${tenant.key}`)}`))
        .body,
    )[0];
    if (org?.id) {
      tenants.set(`Organization/${org.id}`, tenant.name);
    }
  }
  // What the bot said of its runs (provisioning runs it once at its end).
  const bot = entriesOf(
    (await adminGet(`fhir/R4/Bot?identifier=${encodeURIComponent(`${SYSTEMS.bots}|materialize-slots`)}`)).body,
  )[0];
  const runs = bot?.id
    ? (entriesOf(
        (await adminGet(`fhir/R4/AuditEvent?entity=Bot/${bot.id}&_sort=_lastUpdated&_count=20`)).body,
      ) as AuditEvent[])
    : [];
  const failedRuns = runs.filter((r) => r.outcome !== '0');
  row(
    'calendars: the materialize-slots runs (AuditEvents)',
    runs.length > 0 && failedRuns.length === 0 ? 'ok' : 'FAILED',
    runs.length === 0
      ? 'no run recorded'
      : `${runs.length} run(s), outcomes ${runs.map((r) => r.outcome).join(', ')}${failedRuns.length ? `; ${lastLine(failedRuns[0].outcomeDesc)}` : ''}`,
  );
  const schedules = entriesOf((await adminGet('fhir/R4/Schedule?active=true&_count=100')).body) as Schedule[];
  const ours = schedules.filter((s) => s.meta?.accounts?.some((a) => tenants.has(a.reference ?? '')));
  if (ours.length === 0) {
    row('calendars: every demo Schedule has free Slots this week', 'FAILED', 'no Schedule of the demo tenants');
    return;
  }
  const now = new Date();
  const end = new Date(now.getTime() + 7 * DAY);
  for (const schedule of ours) {
    const tenant = tenants.get(schedule.meta?.accounts?.find((a) => tenants.has(a.reference ?? ''))?.reference ?? '');
    const counted = await adminGet(
      `fhir/R4/Slot?schedule=Schedule/${schedule.id}&status=free&start=ge${now.toISOString()}&start=lt${end.toISOString()}&_summary=count`,
    );
    const total = (counted.body as Bundle | undefined)?.total ?? 0;
    row(
      `calendars: ${schedule.comment ?? `Schedule/${schedule.id}`} (${tenant})`,
      counted.status === 200 && total > 0 ? 'ok' : 'FAILED',
      counted.status === 200 ? `${total} free Slots in the coming week` : describe(counted),
    );
  }
}

/** The last line of a bot's output (an AuditEvent's outcomeDesc), where its error is. */
const lastLine = (text: string | undefined): string => (text ?? '').trim().split('\n').at(-1)?.slice(0, 200) ?? '';

/** Whether the reconcile cron bot has run: an AuditEvent of a run Medplum started without a requester. */
async function cron(adminGet: (path: string) => Promise<Answer>, waitMinutes: number): Promise<void> {
  const found = await adminGet(`fhir/R4/Bot?identifier=${encodeURIComponent(`${SYSTEMS.bots}|reconcile`)}`);
  const bot = entriesOf(found.body)[0] as Bot | undefined;
  if (!bot?.id) {
    row('cron: the reconcile bot has run', 'FAILED', 'no reconcile bot');
    return;
  }
  const deadline = Date.now() + waitMinutes * 60_000;
  for (;;) {
    const events = entriesOf(
      (await adminGet(`fhir/R4/AuditEvent?entity=Bot/${bot.id}&_sort=-_lastUpdated&_count=20`)).body,
    ) as AuditEvent[];
    // A cron run has no requester (packages/server/src/workers/cron.ts executeBot without one).
    const runs = events.filter((e) => !e.agent?.some((a) => a.requestor && a.who?.reference));
    if (runs.length > 0) {
      const last = runs[0];
      row(
        `cron: the reconcile bot has run (${bot.cronString})`,
        last.outcome === '0' ? 'ok' : 'FAILED',
        `${runs.length} run(s), last at ${last.recorded} with outcome ${last.outcome}${last.outcome === '0' ? '' : `: ${lastLine(last.outcomeDesc)}`}`,
      );
      return;
    }
    if (Date.now() >= deadline) {
      const waited = waitMinutes > 0 ? ` within ${waitMinutes} min` : ' yet';
      row(
        `cron: the reconcile bot has run (${bot.cronString})`,
        waitMinutes > 0 ? 'FAILED' : 'pending',
        `no run${waited}${waitMinutes > 0 ? '' : ' (--wait-cron-minutes N to wait for one)'}; ${events.length} AuditEvent(s) of it in all`,
      );
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 15_000));
  }
}

main().catch((err: unknown) => {
  console.error(`The lane stopped: ${message(err)}`);
  process.exitCode = 1;
});
