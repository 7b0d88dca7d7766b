import type { DocumentReference, Organization, Patient, Reference, Task } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { payloadDigest } from '../../bots/lib/digest';
import { PATIENT_TASK_TAG } from '../../bots/lib/journey';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import type { Clinician } from '../../src/clinician';
import { fingerprint } from '../../src/medplum/finished-work';
import { agreementDocument } from '../../src/provision/agreements';
import { direct } from '../support/attack';
import type { DemoActor } from '../support/backend';
import { demoClinician } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { startAssessment, storeSnapshot, withdrawAnAgreement } from '../support/journey';
import { freshPatient } from '../support/patients';
import { answer, offered } from '../support/spine';
import { freeSlots, visitStartingIn, withVisitToBook } from '../support/visits';

/**
 * Issue 27, item 1: a repeat of finished work (the same completion of a task, the same decisions on a
 * placed order) is answered by the gateway from the patient's own reads, with no bot run; everything
 * else still goes to the workflow bot, which stays the authority. Bot runs are counted as the gateway's
 * `Bot/$execute` calls to Medplum.
 */
let gw: TestGateway;
let clinician: Clinician;
let executes = 0;
let visitTeam: string;
beforeAll(async () => {
  gw = await startTestGateway(
    (backend) => ({
      medplum: {
        baseUrl: backend.baseUrl,
        fetch: ((input: RequestInfo | URL, init?: RequestInit) => {
          const url = input instanceof Request ? input.url : input.toString();
          if (url.includes('/Bot/$execute')) {
            executes++;
          }
          return backend.fetch(input, init);
        }) as typeof fetch,
      },
    }),
    { allSlots: true },
  );
  clinician = await demoClinician(gw.backend, 'northwind');
  const team = await gw.backend.admin.searchOne('CareTeam', { _tag: `${SYSTEMS.provisioning}|visit-team-northwind` });
  visitTeam = `CareTeam/${team?.id}`;
});
afterAll(() => gw?.close());

/** The offering of her catalog (`GET /v1/protocols`) fronting the plan whose canonical or path `fronts` names. */
async function offeringOf(on: TestGateway, patient: DemoActor, fronts: (plan: string) => boolean): Promise<string> {
  const { protocols } = (await on.call('GET', '/v1/protocols', { token: patient.token })).body as {
    protocols: { healthcareService: string; assessment?: string; protocol?: string }[];
  };
  const offering = protocols.find((p) => fronts(p.assessment ?? p.protocol ?? ''));
  expect(offering, 'an offering in her catalog').toBeDefined();
  return offering?.healthcareService as string;
}

/** The canonical her CarePlan instantiates. */
const planOf = async (patient: DemoActor, carePlan: string) =>
  (
    (await gw.call('GET', `/v1/fhir/CarePlan/${carePlan.replace('CarePlan/', '')}`, { token: patient.token })).body as {
      instantiatesCanonical?: string[];
    }
  ).instantiatesCanonical?.[0];

/** The bot runs `act` makes, and its answer. */
async function runs<T>(act: () => Promise<T>): Promise<{ runs: number; answer: T }> {
  const before = executes;
  const answer = await act();
  return { runs: executes - before, answer };
}

const complete = (patient: DemoActor, task: string, body: unknown) =>
  gw.call('POST', `/v1/${task.replace('Task/', 'tasks/')}/complete`, { token: patient.token, body });

const decide = (patient: DemoActor, order: string, items: unknown) =>
  gw.call('POST', `/v1/orders/${order}/decisions`, { token: patient.token, body: { items } });

const WEIGHT = 'http://loinc.org|29463-7';

/**
 * A completed Task for her of `kind`, finished with `payload` (its digest), written by a project admin (as
 * a mistaken import or a console edit would write it), not by a platform bot; she can read it.
 */
const finishedTaskByAdmin = (patient: DemoActor, kind: string, payload: unknown, rest: Partial<Task>) =>
  gw.backend.admin.createResource<Task>({
    resourceType: 'Task',
    status: 'completed',
    intent: 'order',
    for: { reference: `Patient/${patient.patient.id}` },
    owner: { reference: `Patient/${patient.patient.id}` },
    code: { coding: [{ system: SYSTEMS.taskKind, code: kind }] },
    extension: [{ url: EXTENSIONS.completionDigest, valueString: payloadDigest(payload) }],
    ...rest,
  });

describe('the fingerprint', () => {
  it("is the bots' payload digest, taken with WebCrypto (key order, nesting, unicode, numbers)", async () => {
    for (const payload of [
      { measurements: [{ code: WEIGHT, value: 80.5, unit: 'kg' }] },
      { unit: 'kg', code: WEIGHT, value: 80.5 },
      { decision: 'accept', note: 'Grüße, 東京 ✓', nested: { b: [1, { z: null, a: true }], a: '' } },
      { items: [{ item: 'MedicationRequest/x', decision: 'decline' }] },
      [],
    ]) {
      expect(await fingerprint(payload)).toBe(payloadDigest(payload));
    }
    expect(await fingerprint({ a: 1, b: 2 })).toBe(await fingerprint({ b: 2, a: 1 }));
    expect(await fingerprint({ a: 1 })).not.toBe(await fingerprint({ a: 2 }));
  });
});

describe('a task completed again', () => {
  it('with the payload that completed it: the bot’s own answer, from her read, no bot run and nothing written', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const assessment = await startAssessment(gw, patient, 'assessments/weight-intake');
    const task = assessment.tasks.find((t) => t.kind === 'measurement')?.task as string;
    const body = { measurements: [{ code: WEIGHT, value: 81, unit: 'kg' }] };

    const first = await runs(() => complete(patient, task, body));
    expect(first.answer.status, first.answer.text).toBe(200);
    expect(first.runs).toBe(1);

    const stranger = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const before = storeSnapshot(gw.backend);
    // Keys in another order are the same payload.
    const again = await runs(() =>
      complete(patient, task, { measurements: [{ unit: 'kg', value: 81, code: WEIGHT }] }),
    );
    expect(again.answer.status).toBe(200);
    expect(again.answer.body).toEqual(first.answer.body);
    expect(again.runs).toBe(0);
    expect(storeSnapshot(gw.backend)).toEqual(before);

    // Another payload is the bot's to refuse (409), as is another patient's call (404: not hers).
    const other = await runs(() =>
      complete(patient, task, { measurements: [{ code: WEIGHT, value: 90, unit: 'kg' }] }),
    );
    expect(other.answer.status).toBe(409);
    expect(other.answer.body).toMatchObject({ error: { code: 'invalid_state', details: { state: 'completed' } } });
    expect(other.runs).toBe(1);
    const foreign = await runs(() => complete(stranger, task, body));
    expect(foreign.answer.status).toBe(404);
    expect(foreign.runs).toBe(1);
    expect(storeSnapshot(gw.backend)).toEqual(before);
  });

  it('a completed Task for her that the platform did not issue (no patient-task tag) is not answered from: the bot decides', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const body = { measurements: [{ code: WEIGHT, value: 70, unit: 'kg' }] };
    const forged = await finishedTaskByAdmin(patient, 'measurement', body, {
      output: [{ type: { text: 'observation' }, valueReference: { reference: 'Observation/made-up' } }],
    });
    // She can read it (the gateway's read sees it); it is not taken for her finished work.
    expect((await gw.call('GET', `/v1/fhir/Task/${forged.id}`, { token: patient.token })).status).toBe(200);
    const refused = await runs(() => complete(patient, `Task/${forged.id}`, body));
    expect(refused.answer.status).toBe(404);
    expect(refused.runs).toBe(1);
    // With the tag (what only the platform's bots write on her tasks), it is finished work of hers.
    const tagged = await gw.backend.admin.updateResource<Task>({
      ...forged,
      meta: { ...forged.meta, tag: [PATIENT_TASK_TAG] },
    });
    const answered = await runs(() => complete(patient, `Task/${tagged.id}`, body));
    expect(answered.answer.status).toBe(200);
    expect(answered.answer.body).toEqual({
      task: `Task/${tagged.id}`,
      status: 'completed',
      observations: ['Observation/made-up'],
    });
    expect(answered.runs).toBe(0);
  });
});

describe('an order placed again', () => {
  it('with the same decisions: the bot’s own answer, no bot run; other decisions, another patient, or a Task the platform did not issue go to the bot', async () => {
    const spine = await offered(gw, clinician);
    const accepted = await answer(gw, spine.patient, spine.offer, { decision: 'accept' });
    expect(accepted.status, accepted.text).toBe(200);
    const { patient, group, items } = spine;
    const item = `MedicationRequest/${items[0].id}`;
    const decisions = [{ item, decision: 'accept', fulfilment: 'delivery' }];

    // Before it is placed, a completed order-decisions Task for her written by someone other than the
    // platform's bot (its first version is not a Bot's) claims the order was declined: not believed.
    const forged = await finishedTaskByAdmin(
      patient,
      'order-decisions',
      { items: decisions },
      {
        focus: { reference: `RequestGroup/${group.id}` },
        output: [{ type: { text: 'decline' }, valueReference: { reference: item } }],
      },
    );
    expect((await gw.call('GET', `/v1/fhir/Task/${forged.id}`, { token: patient.token })).status).toBe(200);
    const first = await runs(() => decide(patient, group.id, decisions));
    expect(first.answer.status, first.answer.text).toBe(200);
    expect(first.answer.body).toEqual({
      order: `RequestGroup/${group.id}`,
      status: 'completed',
      items: [{ item, decision: 'accept', intent: 'order', status: 'active', fulfilment: 'delivery' }],
    });
    expect(first.runs).toBe(1);
    await gw.backend.admin.deleteResource('Task', forged.id);

    const stranger = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const before = storeSnapshot(gw.backend);
    const again = await runs(() => decide(patient, group.id, decisions));
    expect(again.answer.status).toBe(200);
    expect(again.answer.body).toEqual(first.answer.body);
    expect(again.runs).toBe(0);

    const other = await runs(() => decide(patient, group.id, [{ item, decision: 'decline' }]));
    expect(other.answer.status).toBe(409);
    expect(other.runs).toBe(1);
    const foreign = await runs(() => decide(stranger, group.id, decisions));
    expect(foreign.answer.status).toBe(404);
    expect(foreign.runs).toBe(1);
    expect(storeSnapshot(gw.backend)).toEqual(before);
  });
});

describe('visit work again', () => {
  const idOf = (reference: string) => reference.split('/')[1];
  const book = (patient: DemoActor, task: string, slot: string) =>
    gw.call('POST', '/v1/appointments', { token: patient.token, body: { task, slot } });
  const reschedule = (patient: DemoActor, appointment: string, slot: string) =>
    gw.call('POST', `/v1/appointments/${idOf(appointment)}/reschedule`, { token: patient.token, body: { slot } });
  const cancel = (patient: DemoActor, appointment: string) =>
    gw.call('POST', `/v1/appointments/${idOf(appointment)}/cancel`, { token: patient.token });
  const start = (patient: DemoActor, appointment: string) =>
    gw.call('POST', `/v1/appointments/${idOf(appointment)}/encounter`, { token: patient.token, body: {} });

  it('the same booking, reschedule and cancellation again: the bot’s answers, 200, no bot run; anything else goes to the bot', async () => {
    const { patient, task } = await withVisitToBook(gw);
    const [slot, later, other] = await freeSlots(gw, visitTeam, patient);
    const stranger = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });

    const booked = await runs(() => book(patient, task, slot));
    expect(booked.answer.status, booked.answer.text).toBe(201);
    expect(booked.runs).toBe(1);
    const before = storeSnapshot(gw.backend);
    const rebooked = await runs(() => book(patient, task, slot));
    expect(rebooked).toEqual({ runs: 0, answer: expect.objectContaining({ status: 200, body: booked.answer.body }) });
    expect(storeSnapshot(gw.backend)).toEqual(before);
    // Another slot for the same task, or her task in another patient's call: the bot's 409 and 404.
    expect(await runs(async () => (await book(patient, task, other)).status)).toEqual({ runs: 1, answer: 409 });
    expect(await runs(async () => (await book(stranger, task, slot)).status)).toEqual({ runs: 1, answer: 404 });

    const { appointment } = booked.answer.body as { appointment: string };
    const moved = await runs(() => reschedule(patient, appointment, later));
    expect(moved.answer.status, moved.answer.text).toBe(201);
    expect(moved.runs).toBe(1);
    const movedAgain = await runs(() => reschedule(patient, appointment, later));
    expect(movedAgain).toEqual({ runs: 0, answer: expect.objectContaining({ status: 200, body: moved.answer.body }) });
    expect(await runs(async () => (await reschedule(patient, appointment, other)).status)).toEqual({
      runs: 1,
      answer: 409,
    });

    const replacement = (moved.answer.body as { appointment: string }).appointment;
    const cancelled = await runs(() => cancel(patient, replacement));
    expect(cancelled.answer.status, cancelled.answer.text).toBe(200);
    expect(cancelled.runs).toBe(1);
    const cancelledAgain = await runs(() => cancel(patient, replacement));
    expect(cancelledAgain).toEqual({
      runs: 0,
      answer: expect.objectContaining({ status: 200, body: cancelled.answer.body }),
    });
    expect(await runs(async () => (await cancel(stranger, replacement)).status)).toEqual({ runs: 1, answer: 404 });
  });

  it('a segment already started, started again: resumed, no bot run', async () => {
    const { patient, appointment } = await visitStartingIn(gw, visitTeam, 5);
    const first = await runs(() => start(patient, appointment));
    expect(first.answer.body).toMatchObject({ resumed: false, segment: { position: 1, status: 'in-progress' } });
    expect(first.runs).toBe(1);
    const again = await runs(() => start(patient, appointment));
    expect(again.runs).toBe(0);
    expect(again.answer).toMatchObject({
      status: 200,
      body: { ...(first.answer.body as object), resumed: true },
    });
  });
});

describe('an assessment resumed', () => {
  it('one she started: the bot’s own answer from her reads, no bot run; with an agreement withdrawn, the bot’s gate refuses', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const started = await startAssessment(gw, patient, 'assessments/weight-intake');
    const healthcareService = await offeringOf(gw, patient, (plan) => plan.includes('assessments/weight-intake'));
    const resume = () => gw.call('POST', '/v1/assessments', { token: patient.token, body: { healthcareService } });

    const before = storeSnapshot(gw.backend);
    const resumed = await runs(resume);
    expect(resumed).toEqual({ runs: 0, answer: expect.objectContaining({ status: 200, body: started }) });
    expect(storeSnapshot(gw.backend)).toEqual(before);

    await withdrawAnAgreement(gw, patient);
    const refused = await runs(resume);
    expect(refused.runs).toBe(1);
    expect(refused.answer).toMatchObject({ status: 409, body: { error: { code: 'consent_required' } } });
  });

  it('a program she is enrolled in, asked for as an assessment: the bot’s 409, not a resume', async () => {
    const { patient, carePlan } = await withVisitToBook(gw);
    const canonical = await planOf(patient, carePlan);
    const program = await offeringOf(gw, patient, (plan) => plan === canonical);
    const asAssessment = await runs(() =>
      gw.call('POST', '/v1/assessments', { token: patient.token, body: { healthcareService: program } }),
    );
    expect(asAssessment.runs).toBe(1);
    expect(asAssessment.answer).toMatchObject({ status: 409, body: { error: { code: 'invalid_state' } } });
  });
});

/** The enrollment bot's own answer to her call now (run directly on Medplum with her token), `ok` and `created` aside. */
async function enrollmentBot(patient: DemoActor, input: object): Promise<unknown> {
  const ran = await direct(
    gw.backend,
    patient.token,
    'POST',
    `fhir/R4/Bot/$execute?identifier=${encodeURIComponent(`${SYSTEMS.bots}|enrollment`)}`,
    { body: input, headers: { 'content-type': 'application/json' } },
  );
  const { ok: _ok, created: _created, ...answer } = ran.body as Record<string, unknown>;
  return answer;
}

describe('enrollment work again', () => {
  it('enrolled, active, revoked: each answered as it is from her reads, the bot’s own answer, no bot run; what is not settled goes to the bot', async () => {
    const { patient, carePlan } = await withVisitToBook(gw);
    const id = carePlan.split('/')[1];
    const canonical = await planOf(patient, carePlan);
    const healthcareService = await offeringOf(gw, patient, (plan) => plan === canonical);
    const stranger = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });

    const enrolled = await runs(() =>
      gw.call('POST', '/v1/enrollments', { token: patient.token, body: { healthcareService } }),
    );
    expect(enrolled.runs).toBe(0);
    expect(enrolled.answer.status).toBe(200);
    expect(enrolled.answer.body).toEqual(await enrollmentBot(patient, { operation: 'enroll', healthcareService }));
    expect(enrolled.answer.body).toMatchObject({ carePlan, status: 'active' });

    const active = await runs(() => gw.call('POST', `/v1/enrollments/${id}/activate`, { token: patient.token }));
    expect(active.runs).toBe(0);
    expect(active.answer.body).toEqual(await enrollmentBot(patient, { operation: 'activate', carePlan: id }));
    expect(
      await runs(
        async () => (await gw.call('POST', `/v1/enrollments/${id}/activate`, { token: stranger.token })).status,
      ),
    ).toEqual({ runs: 1, answer: 404 });

    const revoked = await runs(() => gw.call('DELETE', `/v1/enrollments/${id}`, { token: patient.token }));
    expect(revoked.runs).toBe(1);
    expect(revoked.answer.body).toMatchObject({ status: 'revoked' });
    const before = storeSnapshot(gw.backend);
    const again = await runs(() => gw.call('DELETE', `/v1/enrollments/${id}`, { token: patient.token }));
    expect(again.runs).toBe(0);
    expect(again.answer.status).toBe(200);
    expect(again.answer.body).toEqual(await enrollmentBot(patient, { operation: 'unenroll', carePlan: id }));
    expect(storeSnapshot(gw.backend)).toEqual(before);
    // Revoked is not active: activating it is the bot's to refuse.
    expect(
      await runs(
        async () => (await gw.call('POST', `/v1/enrollments/${id}/activate`, { token: patient.token })).status,
      ),
    ).toEqual({ runs: 1, answer: 409 });
  });

  it('an assessment whose journey has an active treatment plan, asked for as a program: the bot’s 409, not that plan', async () => {
    const spine = await offered(gw, clinician);
    expect((await answer(gw, spine.patient, spine.offer, { decision: 'accept' })).status).toBe(200);
    const assessment = await offeringOf(gw, spine.patient, (plan) => plan.includes('blood-pressure-check'));
    const asProgram = await runs(() =>
      gw.call('POST', '/v1/enrollments', { token: spine.patient.token, body: { healthcareService: assessment } }),
    );
    expect(asProgram.runs).toBe(1);
    expect(asProgram.answer).toMatchObject({ status: 409, body: { error: { code: 'invalid_state' } } });
  });
});

describe('a request for review again', () => {
  const RXNORM = 'http://www.nlm.nih.gov/research/umls/rxnorm';
  const request = (patient: DemoActor, body: unknown) =>
    gw.call('POST', '/v1/requests', { token: patient.token, body });

  it('for an item she has an open request for: that request and its review task, from her reads, no bot run', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const other = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const item = { medication: `${RXNORM}|197361` };
    const made = await runs(() => request(patient, { ...item, note: 'My sister takes this' }));
    expect(made.answer.status, made.answer.text).toBe(201);
    expect(made.runs).toBe(1);
    const before = storeSnapshot(gw.backend);
    const again = await runs(() => request(patient, item));
    expect(again).toEqual({ runs: 0, answer: expect.objectContaining({ status: 200, body: made.answer.body }) });
    expect(storeSnapshot(gw.backend)).toEqual(before);
    // Another item, or another patient's request for the same one, is new: the bot's.
    const another = await runs(() => request(patient, { medication: `${RXNORM}|314076` }));
    expect(another).toMatchObject({ runs: 1, answer: { status: 201 } });
    const hers = await runs(() => request(other, item));
    expect(hers).toMatchObject({ runs: 1, answer: { status: 201 } });
    expect(hers.answer.body).not.toEqual(made.answer.body);
    // An item her catalog does not offer (another tenant's option) is the bot's to refuse.
    const foreign = await runs(() =>
      request(patient, {
        treatmentOption: 'https://patient-care.example/southridge/treatment-options/lisinopril-10|2',
      }),
    );
    expect(foreign).toMatchObject({ runs: 1, answer: { status: 400, body: { error: { code: 'invalid_request' } } } });
  });
});

describe('a resume’s gate and the tenant’s catalog copy', () => {
  it('a required agreement published after she started: within the copy’s life the resume answers as the requirements check does; past it, the bot’s 409 names it', async () => {
    // Publishing changes every patient's requirements: a backend of its own, and a clock.
    let later = 0;
    const own = await startTestGateway({ clock: () => new Date(Date.now() + later) });
    try {
      // A demo patient: she accepts the catalog's versions as they are (a fresh patient's acceptances are
      // made for whatever is published, test/support/patients.ts).
      const patient = own.backend.patients.alice;
      const started = await startAssessment(own, patient, 'assessments/weight-intake');
      const healthcareService = await offeringOf(own, patient, (plan) => plan.includes('assessments/weight-intake'));
      const resume = () => own.call('POST', '/v1/assessments', { token: patient.token, body: { healthcareService } });
      const requirements = async () =>
        (
          await own.call(
            'GET',
            `/v1/agreements/requirements?healthcareService=${encodeURIComponent(healthcareService)}`,
            {
              token: patient.token,
            },
          )
        ).body as { satisfied: boolean };
      expect(await requirements()).toMatchObject({ satisfied: true });
      // A new version of her tenant's own terms (which stand in for the platform's there).
      const terms = 'https://patient-care.example/agreements/northwind/terms';
      const tenant = (await own.backend.systemRepo.readResource<Patient>('Patient', patient.patient.id))
        .managingOrganization as Reference<Organization>;
      const published = agreementDocument({
        key: 'northwind-terms-v4',
        url: terms,
        version: '4',
        category: 'terms',
        title: 'Northwind Health terms',
        tenant: 'northwind',
        required: true,
        published: '2026-06-01',
      }).resource as DocumentReference;
      await own.backend.admin.createResource<DocumentReference>({
        ...published,
        meta: { ...published.meta, accounts: [tenant] },
        custodian: tenant,
      });
      expect(await requirements()).toMatchObject({ satisfied: true });
      expect(await resume()).toMatchObject({ status: 200, body: started });
      later += 10_001;
      expect(await requirements()).toMatchObject({ satisfied: false });
      expect(await resume()).toMatchObject({
        status: 409,
        body: { error: { code: 'consent_required', details: { agreements: [{ url: terms, version: '4' }] } } },
      });
    } finally {
      own.close();
    }
  });
});

describe('what the repeat paths rely on of Medplum', () => {
  it('her own reads in extended mode show who wrote each version: meta.author of her task and of its history (packages/server/src/fhir/repo.ts removeHiddenFields)', async () => {
    // Medplum clears meta.author (and project, account, compartment) from a read unless the request asks for
    // extended mode (`X-Medplum: extended`); MedplumClient, the gateway's client, always asks. The checks of
    // work the platform issued (a Bot-written order task, a Bot-written Appointment) read it with her token.
    // The embedded Medplum does not clear them without the header: nothing relies on that, and anyone may
    // ask for extended mode.
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const assessment = await startAssessment(gw, patient, 'assessments/weight-intake');
    const id = assessment.tasks[0].task.split('/')[1];
    const extended = { headers: { 'x-medplum': 'extended' } };
    const read = await direct(gw.backend, patient.token, 'GET', `fhir/R4/Task/${id}`, extended);
    expect(read.status).toBe(200);
    expect((read.body as Task).meta?.author?.reference).toMatch(/^Bot\//);
    const history = await direct(gw.backend, patient.token, 'GET', `fhir/R4/Task/${id}/_history`, extended);
    expect(history.status).toBe(200);
    const versions = ((history.body as { entry?: { resource?: Task }[] }).entry ?? []).map((e) => e.resource);
    expect(versions.length).toBeGreaterThan(0);
    expect(versions.every((v) => v?.meta?.author?.reference?.startsWith('Bot/'))).toBe(true);
  });
});
