import type { Appointment, AuditEvent, Bot, Encounter, Task } from '@medplum/fhirtypes';
import { queueOfTask } from '../../bots/lib/queues';
import { SYSTEMS } from '../../contracts/systems';
import {
  type Answer,
  type AttackContext,
  adminRead,
  describe,
  entriesOf,
  lastLine,
  medplumCall,
  message,
  type Person,
  pause,
  REFUSED,
  row,
  SUBSCRIPTION_WAIT_MS,
} from './common';
import { type NewVisitor, visitorKit } from './visitor';

/**
 * An asynchronous visit reviewed (docs/decisions.md "An asynchronous visit is her
 * care team's work"), on a real Medplum: a new Northwind patient of the lane's own (as the licensure rows
 * make theirs: registered through Northwind's app, homed in Fresno, CA, enrolled in the monitoring program
 * and activated) books the async-review schedule-visit task her activation gave her (no slot). The booking
 * issues the care team's review: a ready Task `review-async-visit` waiting unowned in the Northwind intake queue, about the
 * visit (focus), due at its window's end (`restriction.period.end`), written by a Bot. Who may not move it:
 * the Southridge clinician (taking it), the Northwind clinician completing it without taking it. A review
 * the admin made (a copy of the real one, in progress, owned by the Northwind clinician) and completed by
 * her fulfils nothing (the visit-review bot runs on it and finds it not issued by the platform). The
 * Northwind clinician takes the real one and completes it as the Provider app does (PUT, no If-Match); the
 * Subscription `async-review-completed` wakes the visit-review bot: the Appointment fulfilled, its segment
 * finished, which the patient sees through the gateway. Her own `$execute` of that bot is refused.
 * The patient, her visit and both review Tasks stay in the project.
 */
export async function asyncVisitReviewed(
  ctx: AttackContext,
  people: Map<string, Person>,
  queueRef: string | undefined,
): Promise<void> {
  const family = 'an asynchronous visit reviewed';
  const steps = {
    booked: `${family}: precondition: a new Northwind patient (registered through Northwind's app, homed in Fresno, CA, enrolled in the monitoring program and activated) has an async-review schedule-visit task and books it through the gateway (POST /v1/appointments {task}, no slot): 201, modality async`,
    issued: `${family}: (a) the care team's review exists (as the admin reads it): one Task code SYSTEMS.taskKind|review-async-visit ('Review an asynchronous visit') for her, ready, waiting in the Northwind intake queue (performerType SYSTEMS.queue CareTeam/<id>) with no owner, focus the Appointment, restriction.period.end = the Appointment's end, written by a Bot (meta.author: the appointments bot)`,
    southridge: `${family}: (b) attack: the Southridge clinician takes the review (PUT of the Task with owner herself, directly on Medplum, no If-Match): 403/404, nothing changed (the review Task, the Appointment and its segments at the same versions)`,
    untaken: `${family}: (b) attack: the Northwind clinician completes the review without taking it (PUT status completed, still no owner): 403, nothing changed`,
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
      ? `${reference}@${t?.meta?.versionId} (${t?.status}, owner ${t?.owner?.reference ?? 'none'})`
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
      queueOfTask(review) === queueRef &&
      !review.owner &&
      review.focus?.reference === appointment &&
      Boolean(visit?.end) &&
      review.restriction?.period?.end === visit?.end &&
      byAppointmentsBot;
    row(
      steps.issued,
      good ? 'ok' : 'FAILED',
      found.length === 0
        ? `no review-async-visit Task for ${v.patient}`
        : `${found.length} Task(s): Task/${review?.id} ${review?.status}, code.text '${review?.code?.text}', for ${review?.for?.reference}, queue ${review ? (queueOfTask(review) ?? 'none') : '?'}${review && queueOfTask(review) === queueRef ? ' (the Northwind intake queue)' : ` (NOT the Northwind intake queue ${queueRef})`}, owner ${review?.owner?.reference ?? 'none'}, focus ${review?.focus?.reference}, restriction.period.end ${review?.restriction?.period?.end} (the Appointment's end: ${visit?.end}), written by ${author ?? 'nobody'}${byAppointmentsBot ? ' (the appointments bot)' : ` (the appointments bot is Bot/${appointmentsBot?.id})`}`,
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
