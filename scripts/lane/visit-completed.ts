import type {
  Appointment,
  AuditEvent,
  Bot,
  CarePlan,
  ClinicalImpression,
  Encounter,
  Patient,
  Practitioner,
  Resource,
  ServiceRequest,
  Slot,
  Task,
} from '@medplum/fhirtypes';
import { eventOf } from '../../bots/lib/events';
import { SYSTEMS } from '../../contracts/systems';
import type { PatientTask } from '../../contracts/tasks';
import { type Clinician, encounterSignature, signInClinician } from '../../src/clinician';
import { DEMO_PASSWORD, demoEmail } from '../../src/provision/demo';
import {
  type Answer,
  type AttackContext,
  adminRead,
  DAY,
  describe,
  entriesOf,
  lastLine,
  medplumCall,
  message,
  type Person,
  pause,
  REFUSED,
  REJECTED,
  row,
  SUBSCRIPTION_WAIT_MS,
} from './common';
import { type NewVisitor, visitorKit } from './visitor';

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
export async function visitCompleted(ctx: AttackContext, people: Map<string, Person>): Promise<void> {
  const family = 'a visit ends with its segments (JOURNEY H)';
  const steps = {
    open: `${family}: precondition: a new Northwind patient (registered through Northwind's app, homed in Fresno, CA, enrolled in the monitoring program and activated) books her monthly video visit on a free Slot the admin writes on the Schedule of a CA practitioner of her visit team, starting in 5 minutes (201, 201): two segments ('Check-in with a nurse', 'Visit with your clinician'), planned; the visit's practitioner signs in with her own demo login (<key>@northwind.example, signInClinician) as the visit's practitioner`,
    first: `${family}: (a) she starts segment 1 through the gateway (POST /v1/appointments/{id}/encounter: 200, in-progress); the visit's practitioner finishes it with finishEncounter (PUT of the Appointment fulfilled, then of the Encounter finished: 200 each); within 30 s the visit is back to arrived through the gateway (GET /v1/appointments/{id}: arrived, segment 1 finished, 2 planned)`,
    last: `${family}: (b) she starts segment 2 (200), the practitioner finishes it (200, 200): within 30 s the visit is fulfilled (GET /v1/appointments/{id}: fulfilled, both segments finished), the Appointment's last version written by the visit-completion Bot (its decision, marked as such), its request (Appointment.basedOn ServiceRequest) completed by the bot, her CarePlan's activity has outcomeReference the Appointment, and exactly one new schedule-visit Task of hers, ready, restriction.period.start about a month on (27 to 32 days), listed in GET /v1/tasks with notBefore that start`,
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
        // The app wrote `fulfilled` already; the platform's decision is a version of the bot's own (marked
        // EXTENSIONS.visitFulfilled), the one events and webhooks tell; the request is the bot's too.
        author === botRef &&
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
    // What her feed and the tenant's webhooks tell of each version (bots/lib/events.ts, which both read):
    // the practitioners' marks of `fulfilled` nothing, the bot's decision visit.fulfilled, once.
    try {
      const versions = (
        entriesOf((await adminRead(ctx, `fhir/R4/${first.appointment}/_history?_count=50`)).body) as Appointment[]
      ).reverse();
      const patientId =
        versions[0]?.participant
          ?.find((p) => p.actor?.reference?.startsWith('Patient/'))
          ?.actor?.reference?.slice('Patient/'.length) ?? '';
      const told = versions.map((v) => ({
        status: v.status,
        by: v.meta?.author?.reference === botRef ? 'the bot' : (v.meta?.author?.reference ?? '?'),
        event: eventOf(v, patientId)?.type,
      }));
      const marks = told.filter((t) => t.status === 'fulfilled' && t.by.startsWith('Practitioner/'));
      const fulfilledEvents = told.filter((t) => t.event === 'visit.fulfilled');
      row(
        `${family}: (b2) events: of the first visit's Appointment versions, a practitioner's mark of fulfilled tells nothing; the visit-completion bot's decision tells visit.fulfilled, once (issue 50: a webhook never announces a visit that is not fulfilled)`,
        marks.length > 0 &&
          marks.every((t) => t.event === undefined) &&
          fulfilledEvents.length === 1 &&
          fulfilledEvents[0]?.by === 'the bot'
          ? 'held'
          : 'FAILED',
        told.map((t) => `${t.status} (${t.by}) -> ${t.event ?? 'nothing'}`).join('; '),
      );
    } catch (err) {
      row(`${family}: (b2) events of the first visit's versions`, 'FAILED', `the call threw: ${message(err)}`);
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

  // (h) Her visit note (issue 48 item 4), on the first visit's segment 1: the note the platform drafted
  // for the practitioner, written, signed (her Provenance) and locked as the Provider app does; nobody
  // else writes it, the patient reads it only once locked.
  const noteStep = (what: string) => `${family}: (h) visit note: ${what}`;
  if (!segment1 || !practitionerPerson) {
    row(noteStep('the rows of the visit note'), 'not reached', 'no first visit with its practitioner (the rows above)');
    return;
  }
  try {
    const notes = entriesOf(
      (await direct(practitionerPerson, 'GET', `ClinicalImpression?encounter=${segment1}`)).body,
    ) as ClinicalImpression[];
    const note = notes[0];
    const stored = note?.id
      ? ((await ctx.adminGet(`fhir/R4/ClinicalImpression/${note.id}`)).body as ClinicalImpression)
      : undefined;
    const patientRecord = (await ctx.adminGet(`fhir/R4/${first.v.patient}`)).body as Patient;
    const good =
      notes.length === 1 &&
      note?.status === 'in-progress' &&
      note.assessor?.reference === practitionerPerson.profile &&
      note.subject?.reference === first.v.patient &&
      JSON.stringify(stored?.meta?.accounts ?? []) === JSON.stringify([patientRecord.managingOrganization]);
    row(
      noteStep(
        `the practitioner finds segment 1's note as the app asks (ClinicalImpression?encounter=, her token): one, in-progress, about the patient, its assessor her, filed under Northwind (meta.accounts)`,
      ),
      good ? 'ok' : 'FAILED',
      `${notes.length} note(s): ${note ? `ClinicalImpression/${note.id} ${note.status}, assessor ${note.assessor?.reference}, accounts ${JSON.stringify(stored?.meta?.accounts)}` : 'none'}`,
    );
    if (!note?.id) {
      return;
    }
    const ref = `ClinicalImpression/${note.id}`;
    const text = 'BP 148/94 on her cuff this morning; start lisinopril (lane).';
    const written = await direct(practitionerPerson, 'PUT', ref, { ...note, note: [{ text }] });
    row(
      noteStep('she writes it (the note box: PUT of the whole note, as read, with its text): 200'),
      written.status === 200 ? 'ok' : 'FAILED',
      describe(written),
    );
    const current = (await ctx.adminGet(`fhir/R4/${ref}`)).body as ClinicalImpression;
    for (const [who, attacker, refused] of [
      ['the Northwind demo clinician (not the visit’s practitioner) overwrites it', colleague, REJECTED],
      ['the Southridge demo clinician overwrites it', southridge, [...REFUSED, 400]],
    ] as const) {
      if (!attacker) {
        row(noteStep(`attack: ${who}`), 'not reached', 'the attacker could not sign in');
        continue;
      }
      const tried = await direct(attacker, 'PUT', ref, { ...current, note: [{ text: 'Overwritten' }] });
      const after = (await ctx.adminGet(`fhir/R4/${ref}`)).body as ClinicalImpression;
      row(
        noteStep(`attack: ${who} (PUT as read, another text)`),
        (refused as readonly number[]).includes(tried.status) && after.note?.[0]?.text === text ? 'held' : 'FAILED',
        `${describe(tried)}; its text now ${JSON.stringify(after.note?.[0]?.text)}`,
      );
    }
    const draftById = await direct(first.v.person, 'GET', ref);
    const draftThrough = await call(first.v.person, 'GET', `/v1/fhir/ClinicalImpression?encounter=${segment1}`);
    const draftEntries = entriesOf(draftThrough.body);
    row(
      noteStep(
        'attack: the patient reads the unsigned note (by id directly on Medplum; through the gateway, ClinicalImpression?encounter=)',
      ),
      REFUSED.includes(draftById.status) && draftThrough.status === 200 && draftEntries.length === 0
        ? 'held'
        : 'FAILED',
      `by id ${describe(draftById)}; through the gateway ${said(draftThrough)}, ${draftEntries.length} entries`,
    );
    const signature = encounterSignature;
    const inAnothersName = await direct(
      practitionerPerson,
      'POST',
      'Provenance',
      signature(colleague?.profile ?? 'Practitioner/other', segment1),
    );
    const ofThePatient = await direct(
      practitionerPerson,
      'POST',
      'Provenance',
      signature(practitionerPerson.profile, first.v.patient),
    );
    row(
      noteStep(
        'attack: she signs in a colleague’s name (Provenance agent and signer the Northwind clinician), and signs the patient instead of an encounter: 403/400 each',
      ),
      REJECTED.includes(inAnothersName.status) && REJECTED.includes(ofThePatient.status) ? 'held' : 'FAILED',
      `in another's name ${describe(inAnothersName)}; of the Patient ${describe(ofThePatient)}`,
    );
    // The app's Sign & Lock from the copy it loaded with the page (before she typed): refused, her text kept.
    const stale = await direct(practitionerPerson, 'PUT', ref, { ...note, status: 'completed' });
    const kept = (await ctx.adminGet(`fhir/R4/${ref}`)).body as ClinicalImpression;
    row(
      noteStep(
        'Sign & Lock from the page’s copy of the note (as loaded before she typed, completed, no If-Match, as the app 5.1.29 sends it): 403/400, her text kept, still in progress',
      ),
      REJECTED.includes(stale.status) && kept.note?.[0]?.text === text && kept.status === 'in-progress'
        ? 'held'
        : 'FAILED',
      `${describe(stale)}; now ${kept.status}, text ${JSON.stringify(kept.note?.[0]?.text)}`,
    );
    const signed = await direct(
      practitionerPerson,
      'POST',
      'Provenance',
      signature(practitionerPerson.profile, segment1),
    );
    const before = (await ctx.adminGet(`fhir/R4/${ref}`)).body as ClinicalImpression;
    const locked = await direct(practitionerPerson, 'PUT', ref, { ...before, status: 'completed' });
    const lockedNow = (await ctx.adminGet(`fhir/R4/${ref}`)).body as ClinicalImpression;
    const afterLock = await direct(practitionerPerson, 'PUT', ref, {
      ...lockedNow,
      note: [{ text: 'Changed after signing' }],
    });
    row(
      noteStep(
        'she signs (the app’s Sign: a Provenance of the encounter, agent and signer herself): 201; Sign & Lock (the note completed): 200; a change after: 403/400',
      ),
      signed.status === 201 && locked.status === 200 && REJECTED.includes(afterLock.status) ? 'ok' : 'FAILED',
      `sign ${describe(signed)}; lock ${describe(locked)}; change after ${describe(afterLock)}`,
    );
    const hers = await call(first.v.person, 'GET', `/v1/fhir/ClinicalImpression?encounter=${segment1}`);
    const read = entriesOf(hers.body)[0] as ClinicalImpression | undefined;
    row(
      noteStep(
        'the patient reads the signed and locked note through the gateway (GET /v1/fhir/ClinicalImpression?encounter=): its text',
      ),
      hers.status === 200 && read?.note?.[0]?.text === text ? 'ok' : 'FAILED',
      `${said(hers)}; ${read ? `text ${JSON.stringify(read.note?.[0]?.text)}` : 'no note'}`,
    );
    // Her signed note's drafts stay the clinic's: no history, no earlier version.
    const history = await direct(first.v.person, 'GET', `${ref}/_history`);
    const draftVersion = await direct(first.v.person, 'GET', `${ref}/_history/${note.meta?.versionId}`);
    row(
      noteStep(
        'attack: the patient reads the drafts of her signed note directly on Medplum (its _history; the draft version by id)',
      ),
      REFUSED.includes(history.status) && REFUSED.includes(draftVersion.status) ? 'held' : 'FAILED',
      `_history ${describe(history)}; version ${note.meta?.versionId} ${describe(draftVersion)}`,
    );
    // A colleague's internal comment about her, shared with her by someone else (the visit's practitioner).
    if (colleague) {
      const comment = await direct(colleague, 'POST', 'Communication', {
        resourceType: 'Communication',
        status: 'completed',
        subject: { reference: first.v.patient },
        sender: { reference: colleague.profile },
        sent: new Date().toISOString(),
        payload: [{ contentString: 'INTERNAL (lane): discuss adherence at the team meeting.' }],
      });
      const made = comment.body as { id?: string; resourceType?: string } | undefined;
      const shared =
        comment.status === 201 && made?.id
          ? await direct(practitionerPerson, 'PUT', `Communication/${made.id}`, {
              ...made,
              status: 'in-progress',
              recipient: [{ reference: first.v.patient }],
            })
          : undefined;
      const readByHer = made?.id ? await direct(first.v.person, 'GET', `Communication/${made.id}`) : undefined;
      row(
        noteStep(
          'attack: the visit’s practitioner shares the Northwind clinician’s internal comment about the patient with her (PUT adding her as recipient): 403/400, and she cannot read it',
        ),
        comment.status === 201 &&
          shared &&
          REJECTED.includes(shared.status) &&
          readByHer &&
          REFUSED.includes(readByHer.status)
          ? 'held'
          : 'FAILED',
        `comment ${describe(comment)}; shared ${shared ? describe(shared) : 'not tried'}; her read ${readByHer ? describe(readByHer) : 'not tried'}`,
      );
    }
    const bob = people.get('bob');
    if (bob) {
      const byBob = await direct(bob, 'GET', ref);
      const bobSearch = await direct(bob, 'GET', `ClinicalImpression?encounter=${segment1}`);
      row(
        noteStep(
          'attack: bob (another Northwind patient) reads her signed note directly on Medplum (by id; ClinicalImpression?encounter=)',
        ),
        REFUSED.includes(byBob.status) && !entriesOf(bobSearch.body).some((r) => r.id === note.id) ? 'held' : 'FAILED',
        `by id ${describe(byBob)}; search ${describe(bobSearch)}`,
      );
    }
  } catch (err) {
    row(noteStep('the rows of the visit note'), 'FAILED', `the call threw: ${message(err)}`);
  }
}
