import { randomBytes } from 'node:crypto';
import { MedplumClient } from '@medplum/core';
import type { Appointment, AuditEvent, Bot, Encounter, Resource, ServiceRequest, Task } from '@medplum/fhirtypes';
import { SYSTEMS } from '../contracts/systems';
import type { PatientTask } from '../contracts/tasks';
import { DEFAULT_LIMITS } from '../src/app';
import { CREDENTIAL_HELP, CREDENTIAL_OPTIONS, credentialsFrom, parseCommand } from '../src/cli/options';
import { createEdgeSigner } from '../src/edge/statement';
import { loadFhirSchema } from '../src/embedded/schema';
import { applyDefinition, type ProvisionReport } from '../src/provision/apply';
import { readBotBundles } from '../src/provision/bundles';
import { demoDefinition } from '../src/provision/demo';
import { waitingOnSignInLimit } from '../src/sdk';
import { type JourneyBackend, type JourneyProgress, journey, provisionedAppIds } from './demo';
import { attacks } from './lane/attacks';
import { calendars, cron } from './lane/calendars';
import {
  type Answer,
  answerOf,
  DAY,
  describe,
  entriesOf,
  medplumCall,
  message,
  PUBLIC_URL,
  RXNORM,
  row,
  rows,
} from './lane/common';
import {
  acrossInstances,
  GATEWAY_NAMES,
  gatewayInstance,
  type MadeCall,
  N_GATEWAYS,
  N_GATEWAYS_REPEATS_STEP,
  nGatewaysJourney,
  nGatewaysRepeats,
  repeatableOf,
  repeats,
  type ServedCall,
} from './lane/gateways';
import { type OrderProbe, probeOrder } from './lane/orders';
import { botRunsOf, roundTripsByBot, roundTripTable, servedLines, topLevelServerMs } from './round-trips';

/**
 * `npm run verify:medplum -- [--project-id ID] [--wait-cron-minutes N] [--verbose]`, Medplum's credentials
 * from the environment (`--help`): the real-Medplum lane (DESIGN section 6). Against a real Medplum
 * project, as its project admin: provisions the demo definition twice (the second run must write
 * nothing), runs `npm run demo`'s whole journey through an in-process gateway pointed at it, makes the
 * attacks that need only HTTP calls (directly on Medplum with real tokens, and through the gateway),
 * checks the demo calendars and the cron bot, and prints one markdown table. Exit code 1 when any row
 * FAILED. Not part of `npm test`: it needs a real Medplum. docs/real-medplum.md. Each family of checks is a
 * module of `scripts/lane/` (attacks, work forms, patient bounds, orders, evidence, the visits' families,
 * keys, calendars and cron; what they share in `common.ts`); this file provisions, runs the journey and prints.
 */

// MedplumClient warns, with a stack, that it falls back to the plain PKCE method outside a browser.
const warn = console.warn.bind(console);
console.warn = (...args: unknown[]) => {
  if (!String(args[0]).startsWith('Failed to hash code verifier')) {
    warn(...args);
  }
};

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
  // Medplum >= 5.1 takes 5 sign-ins and registrations a minute from one address; the lane makes more from
  // this one machine, so each waits as Medplum's 429 says (and each person signs in once: common.ts signIn).
  globalThis.fetch = waitingOnSignInLimit(globalThis.fetch, {
    onWait: (ms) =>
      console.error(`            (Medplum's sign-in limit: waiting ${Math.ceil(ms / 1000)} s, as it says)`),
  });
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
  const adminGet = (path: string) =>
    medplumCall(baseUrl, adminToken, 'GET', path, { waitOutQuota: true, extended: true });

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
  const appIdOf = await provisionedAppIds(admin);
  const progress: JourneyProgress = { steps: [] };
  let interactionOrder: Promise<void> | undefined;
  const backend: JourneyBackend = {
    baseUrl,
    fetch: globalThis.fetch,
    projectId,
    appIdOf,
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
        `fhir/R4/AuditEvent?type=execute&date=ge${new Date(from.getTime() - 2_000).toISOString()}&_count=1000&_sort=-_lastUpdated`,
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

main().catch((err: unknown) => {
  console.error(`The lane stopped: ${message(err)}`);
  process.exitCode = 1;
});
