import type { AuditEvent, Bot, Coding, Condition, RequestGroup, Resource, Task } from '@medplum/fhirtypes';
import { queueOfTask } from '../../bots/lib/queues';
import { SYSTEMS } from '../../contracts/systems';
import { type Clinician, signInClinician } from '../../src/clinician';
import { DEMO_PASSWORD, demoEmail } from '../../src/provision/demo';
import {
  type Answer,
  type AttackContext,
  adminRead,
  answerOf,
  describe,
  entriesOf,
  errorOf,
  gatewayDescribe,
  ICD10CM,
  lastLine,
  medplumCall,
  message,
  type Person,
  PUBLIC_URL,
  pause,
  REFUSED,
  row,
  SUBSCRIPTION_WAIT_MS,
} from './common';
import { intakeReview } from './intake-review';

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
export async function conditionRevised(
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
    reselected: `${family}: (b) a new ready select-treatment Task for the revised version: reasonReference Condition/<id>/_history/<the revision's vid>, identifier SYSTEMS.eligibilityKey|Task/<review>;Condition/<id>/_history/<vid>, waiting unowned in the Northwind intake queue (performerType SYSTEMS.queue CareTeam/<id>, no owner); the only ready one`,
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
        const queued = !!fresh && Boolean(queueRef) && queueOfTask(fresh) === queueRef && !fresh.owner;
        const good = !!fresh && keyed && queued && ready.length === 1;
        row(
          steps.reselected,
          good ? 'ok' : 'FAILED',
          fresh
            ? `Task/${fresh.id} ${fresh.status}, reasonReference ${fresh.reasonReference?.reference}, identifier ${JSON.stringify(fresh.identifier?.map((i) => `${i.system === SYSTEMS.eligibilityKey ? 'eligibility-key' : i.system}|${i.value}`) ?? [])}${keyed ? '' : ` (NOT ${key})`}, queue ${queueOfTask(fresh) ?? 'none'}${queueOfTask(fresh) === queueRef ? ' (the Northwind intake queue)' : ` (NOT the intake queue ${queueRef})`}, owner ${fresh.owner?.reference ?? 'none'}; select-treatment Tasks of hers: ${state.selections.map(versioned).join(', ')}`
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
