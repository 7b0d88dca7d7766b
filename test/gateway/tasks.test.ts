import type { CareTeam, Observation, Patient, QuestionnaireResponse, Task } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queueOfTask } from '../../bots/lib/queues';
import { MAX_ATTACHMENTS_PER_ANSWER } from '../../contracts/attachments';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import type { DemoActor } from '../support/backend';
import { botMembership } from '../support/bots';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { type StartedAssessment, startAssessment, storeSnapshot } from '../support/journey';
import { freshPatient } from '../support/patients';

/** POST /v1/tasks/{id}/complete (bots/complete-task.ts) on the intake tasks of a started assessment. */
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw?.close());

const WEIGHT = 'http://loinc.org|29463-7';
const SYSTOLIC = 'http://loinc.org|8480-6';
const DIASTOLIC = 'http://loinc.org|8462-4';

/** A fresh patient who has accepted what she must and started an assessment (by its catalog path). */
async function startedAssessment(path: string, tenant: 'northwind' | 'southridge' = 'northwind') {
  const patient = await freshPatient(gw.backend, { tenant, state: tenant === 'northwind' ? 'CA' : 'NY' });
  const assessment = await startAssessment(gw, patient, path);
  const task = (kind: string) => assessment.tasks.find((t) => t.kind === kind) as StartedAssessment['tasks'][number];
  return { patient, assessment, questionnaireTask: task('questionnaire'), measurementTask: task('measurement') };
}

const complete = (patient: DemoActor, task: string, body: unknown) =>
  gw.call('POST', `/v1/${task.replace('Task/', 'tasks/')}/complete`, { token: patient.token, body });

const store = () => storeSnapshot(gw.backend);

async function answers(patient: DemoActor, questionnaire: string, status: QuestionnaireResponse['status']) {
  const created = await gw.call('POST', '/v1/fhir/QuestionnaireResponse', {
    token: patient.token,
    body: {
      resourceType: 'QuestionnaireResponse',
      status,
      questionnaire,
      author: { reference: `Patient/${patient.patient.id}` },
      source: { reference: `Patient/${patient.patient.id}` },
      item: [{ linkId: 'previous-programs', answer: [{ valueBoolean: false }] }],
    },
  });
  expect(created.status).toBe(201);
  return created.body as QuestionnaireResponse;
}

const reviewTasks = (episode: string, code: string) =>
  gw.backend.systemRepo.searchResources<Task>({
    resourceType: 'Task',
    filters: [
      { code: '_tag', operator: 'eq', value: `${SYSTEMS.episode}|${episode}` },
      { code: 'code', operator: 'eq', value: `${SYSTEMS.taskKind}|${code}` },
    ],
  });

describe('questionnaire tasks', () => {
  it('complete with her own completed answers to exactly the pinned version; anything else is 400 and writes nothing', async () => {
    const { patient, questionnaireTask } = await startedAssessment('assessments/weight-intake');
    const pinned = questionnaireTask.questionnaire as string;
    const draft = await answers(patient, pinned, 'in-progress');
    const otherVersion = await answers(patient, pinned.replace(/\|1$/, '|2'), 'completed');
    const someoneElses = await answers(gw.backend.patients.alice, pinned, 'completed');
    const before = store();
    for (const [body, why] of [
      [{ questionnaireResponse: `QuestionnaireResponse/${draft.id}` }, 'in-progress'],
      [{ questionnaireResponse: `QuestionnaireResponse/${otherVersion.id}` }, 'another version'],
      [{ questionnaireResponse: `QuestionnaireResponse/${someoneElses.id}` }, 'another patient’s'],
      [{ measurements: [{ code: WEIGHT, value: 80, unit: 'kg' }] }, 'the other kind'],
    ] as const) {
      const refused = await complete(patient, questionnaireTask.task, body);
      expect(refused.status, why).toBe(400);
      expect(refused.body).toMatchObject({ error: { code: 'invalid_request' } });
    }
    expect(store()).toEqual(before);

    const submitted = await answers(patient, pinned, 'completed');
    const done = await complete(patient, questionnaireTask.task, {
      questionnaireResponse: `QuestionnaireResponse/${submitted.id}`,
    });
    expect(done.status).toBe(200);
    // Pinned as clinicians read it (issue 48): the next version of her answers, the same answers with
    // the question's text from the pinned Questionnaire, which her app did not send.
    const pinnedAnswers = (done.body as { questionnaireResponse: string }).questionnaireResponse;
    expect(done.body).toEqual({
      task: questionnaireTask.task,
      status: 'completed',
      questionnaireResponse: expect.stringMatching(new RegExp(`^QuestionnaireResponse/${submitted.id}/_history/`)),
    });
    expect(pinnedAnswers).not.toBe(`QuestionnaireResponse/${submitted.id}/_history/${submitted.meta?.versionId}`);
    const readable = await gw.backend.systemRepo.readVersion<QuestionnaireResponse>(
      'QuestionnaireResponse',
      pinnedAnswers.split('/')[1],
      pinnedAnswers.split('/')[3],
    );
    expect(readable.item).toEqual([
      {
        linkId: 'previous-programs',
        text: 'Have you taken part in a weight-management program before?',
        answer: [{ valueBoolean: false }],
      },
    ]);
    expect([readable.status, readable.author, readable.source, readable.authored, readable.subject]).toEqual([
      submitted.status,
      submitted.author,
      submitted.source,
      submitted.authored,
      submitted.subject,
    ]);
    // The same again replays; other answers after completion are a conflict.
    expect(
      (
        await complete(patient, questionnaireTask.task, {
          questionnaireResponse: `QuestionnaireResponse/${submitted.id}`,
        })
      ).body,
    ).toEqual(done.body);
    const again = await complete(patient, questionnaireTask.task, {
      questionnaireResponse: `QuestionnaireResponse/${draft.id}`,
    });
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ error: { code: 'invalid_state', details: { state: 'completed' } } });
    // Submitted answers are frozen (the patient policy), so the task points at what was answered.
    const edit = await gw.call('PUT', `/v1/fhir/QuestionnaireResponse/${submitted.id}`, {
      token: patient.token,
      body: { ...submitted, item: [{ linkId: 'previous-programs', answer: [{ valueBoolean: true }] }] },
    });
    expect(edit.status).toBe(403);
    const draftEdit = await gw.call('PUT', `/v1/fhir/QuestionnaireResponse/${draft.id}`, {
      token: patient.token,
      body: { ...draft, status: 'completed' },
    });
    expect(draftEdit.status).toBe(200);
  });
});

describe('answers checked against the questionnaire (issue 28)', () => {
  it('a required item left out, an unknown linkId, a wrong value type, two answers to one, a group answered: 400 naming each, nothing written', async () => {
    const { patient, questionnaireTask } = await startedAssessment('assessments/weight-intake');
    const pinned = questionnaireTask.questionnaire as string;
    const respond = async (item: unknown[]) => {
      const created = await gw.call('POST', '/v1/fhir/QuestionnaireResponse', {
        token: patient.token,
        body: { resourceType: 'QuestionnaireResponse', status: 'completed', questionnaire: pinned, item },
      });
      expect(created.status, created.text).toBe(201);
      return `QuestionnaireResponse/${(created.body as QuestionnaireResponse).id}`;
    };
    const cases: [unknown[], { path: string; message: string }[]][] = [
      [
        [{ linkId: 'goal', answer: [{ valueDecimal: 70 }] }],
        [{ path: 'questionnaireResponse.item[linkId=previous-programs]', message: 'required, not answered' }],
      ],
      [
        [{ linkId: 'no-such-item', answer: [{ valueBoolean: true }] }],
        [
          { path: 'questionnaireResponse.item[linkId=no-such-item]', message: 'not an item of this questionnaire' },
          { path: 'questionnaireResponse.item[linkId=previous-programs]', message: 'required, not answered' },
        ],
      ],
      [
        [{ linkId: 'previous-programs', answer: [{ valueString: 'yes' }] }],
        [
          {
            path: 'questionnaireResponse.item[linkId=previous-programs]',
            message: 'a boolean item takes valueBoolean',
          },
        ],
      ],
      [
        [{ linkId: 'previous-programs', answer: [{ valueBoolean: true }, { valueBoolean: false }] }],
        [{ path: 'questionnaireResponse.item[linkId=previous-programs]', message: 'takes one answer' }],
      ],
    ];
    const before = store();
    for (const [item, issues] of cases) {
      const refused = await complete(patient, questionnaireTask.task, { questionnaireResponse: await respond(item) });
      expect(refused.status, JSON.stringify(item)).toBe(400);
      expect(refused.body).toMatchObject({ error: { code: 'invalid_request', details: { issues } } });
    }
    // Nothing but the answers she wrote: the task is still hers to complete.
    expect(store().counts).toEqual(
      (before.counts as { type: string; n: number }[]).map((row) =>
        row.type === 'QuestionnaireResponse' ? { ...row, n: row.n + cases.length } : row,
      ),
    );
    const done = await complete(patient, questionnaireTask.task, {
      questionnaireResponse: await respond([
        { linkId: 'goal', answer: [{ valueDecimal: 70 }] },
        { linkId: 'previous-programs', answer: [{ valueBoolean: true }] },
      ]),
    });
    expect(done.status, done.text).toBe(200);
  });
});

describe('answers with attachments', () => {
  const PNG = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 73, 72, 68, 82]);
  const upload = async (patient: DemoActor) => {
    const response = await gw.app.request('http://gateway.test/v1/documents?filename=labs.png', {
      method: 'POST',
      headers: { authorization: `Bearer ${patient.token}`, 'content-type': 'image/png' },
      body: PNG,
    });
    expect(response.status).toBe(201);
    return (await response.json()) as { url: string; contentType: string; size: number; hash: string };
  };
  const withFile = async (patient: DemoActor, questionnaire: string, attachment: unknown) => {
    const created = await gw.call('POST', '/v1/fhir/QuestionnaireResponse', {
      token: patient.token,
      body: {
        resourceType: 'QuestionnaireResponse',
        status: 'completed',
        questionnaire,
        item: [
          { linkId: 'previous-programs', answer: [{ valueBoolean: true }] },
          { linkId: 'lab-results', answer: [{ valueAttachment: attachment }] },
        ],
      },
    });
    expect(created.status).toBe(201);
    return `QuestionnaireResponse/${(created.body as QuestionnaireResponse).id}`;
  };

  it('complete only with her own uploads as they were answered; another’s file or a changed claim is 422 invalid_attachment', async () => {
    const { patient, questionnaireTask } = await startedAssessment('assessments/weight-intake');
    const pinned = questionnaireTask.questionnaire as string;
    const own = await upload(patient);
    const theirs = await upload(gw.backend.patients.bob);
    const before = store();
    for (const [attachment, problems] of [
      // Another's file: that alone, nothing of its type, size or hash (facts about someone else's document).
      [theirs, ['not_own_document']],
      [{ ...theirs, contentType: 'application/pdf', size: 1, hash: 'AAAA' }, ['not_own_document']],
      [{ ...own, hash: theirs.hash === own.hash ? 'AAAA' : theirs.hash }, ['hash_mismatch']],
      [{ ...own, contentType: 'application/pdf' }, ['content_type_mismatch']],
      [{ ...own, url: 'https://elsewhere.example/labs.png' }, ['not_own_document']],
    ] as const) {
      const answersRef = await withFile(patient, pinned, attachment);
      const mark = store();
      const refused = await complete(patient, questionnaireTask.task, { questionnaireResponse: answersRef });
      expect(refused.status, problems.join()).toBe(422);
      expect(refused.body).toMatchObject({
        error: { code: 'invalid_attachment', details: { issues: [{ linkId: 'lab-results', problems }] } },
      });
      expect(store()).toEqual(mark);
    }
    expect(store()).not.toEqual(before);
    // More files than one set of answers may attach: refused before any is read.
    const many = await gw.call('POST', '/v1/fhir/QuestionnaireResponse', {
      token: patient.token,
      body: {
        resourceType: 'QuestionnaireResponse',
        status: 'completed',
        questionnaire: pinned,
        item: [
          { linkId: 'previous-programs', answer: [{ valueBoolean: true }] },
          {
            linkId: 'lab-results',
            answer: Array.from({ length: MAX_ATTACHMENTS_PER_ANSWER + 1 }, () => ({ valueAttachment: own })),
          },
        ],
      },
    });
    expect(many.status).toBe(201);
    const membership = await botMembership(gw.backend, 'complete-task');
    const spent = () => gw.backend.quota.spending().get(membership.id) ?? 0;
    const beforeMany = spent();
    const tooMany = await complete(patient, questionnaireTask.task, {
      questionnaireResponse: `QuestionnaireResponse/${(many.body as QuestionnaireResponse).id}`,
    });
    expect(tooMany.status).toBe(422);
    expect(tooMany.body).toMatchObject({ error: { code: 'invalid_attachment' } });
    // No file was read: what the bot spent is its own checks (the caller, the task, the answers).
    expect(spent() - beforeMany).toBeLessThan(200);
    const done = await complete(patient, questionnaireTask.task, {
      questionnaireResponse: await withFile(patient, pinned, own),
    });
    expect(done.status).toBe(200);
  });
});

describe('measurement tasks', () => {
  it('refuse invalid readings with 422 and every problem, writing nothing', async () => {
    const { patient, measurementTask } = await startedAssessment('assessments/weight-intake');
    const before = store();
    const refused = await complete(patient, measurementTask.task, {
      measurements: [
        { code: WEIGHT, value: 80, unit: 'g' },
        { code: SYSTOLIC, value: 120, unit: 'mm[Hg]' },
      ],
    });
    expect(refused.status).toBe(422);
    expect(refused.body).toMatchObject({
      error: {
        code: 'invalid_measurement',
        details: {
          issues: [
            { index: 0, code: WEIGHT, reason: 'unit_not_allowed', allowedUnits: ['kg', '[lb_av]'] },
            { index: 1, code: SYSTOLIC, reason: 'not_requested' },
          ],
        },
      },
    });
    const range = await complete(patient, measurementTask.task, {
      measurements: [{ code: WEIGHT, value: 2000, unit: 'kg' }],
    });
    expect(range.status).toBe(422);
    expect(range.body).toMatchObject({ error: { details: { issues: [{ reason: 'out_of_range' }] } } });
    const future = await complete(patient, measurementTask.task, {
      measurements: [{ code: WEIGHT, value: 80, unit: 'kg', effective: '2199-01-01T00:00:00Z' }],
    });
    expect(future.body).toMatchObject({ error: { details: { issues: [{ reason: 'in_future' }] } } });
    // A year outside the span the API takes (1900 to 2199) is a bad request naming the field.
    for (const effective of ['1899-12-31T23:59:00Z', '2200-01-01T00:00:00Z', '0100-01-01T00:00:00Z']) {
      const outside = await complete(patient, measurementTask.task, {
        measurements: [{ code: WEIGHT, value: 80, unit: 'kg', effective }],
      });
      expect(outside.status, effective).toBe(400);
      expect(outside.text, effective).toContain('effective');
    }
    expect(store()).toEqual(before);
  });

  it('write one final Observation per reading (a customary unit converted), and the last intake task issues the review', async () => {
    const { patient, assessment, questionnaireTask, measurementTask } =
      await startedAssessment('assessments/weight-intake');
    const submitted = await answers(patient, questionnaireTask.questionnaire as string, 'completed');
    expect(
      (
        await complete(patient, questionnaireTask.task, {
          questionnaireResponse: `QuestionnaireResponse/${submitted.id}`,
        })
      ).status,
    ).toBe(200);
    expect(await reviewTasks(assessment.episodeOfCare, 'review-intake')).toHaveLength(0);

    const done = await complete(patient, measurementTask.task, {
      measurements: [{ code: WEIGHT, value: 180, unit: '[lb_av]', effective: '2026-11-20T08:00:00Z' }],
    });
    expect(done.status).toBe(200);
    const { observations } = done.body as { observations: string[] };
    expect(observations).toHaveLength(1);
    const observation = (await gw.call('GET', `/v1/fhir/${observations[0]}`, { token: patient.token }))
      .body as Observation;
    expect(observation).toMatchObject({
      status: 'final',
      subject: { reference: `Patient/${patient.patient.id}` },
      performer: [{ reference: `Patient/${patient.patient.id}` }],
      valueQuantity: { value: 81.6, code: 'kg' },
      effectiveDateTime: '2026-11-20T08:00:00.000Z',
      extension: [{ url: EXTENSIONS.enteredQuantity, valueQuantity: { value: 180, code: '[lb_av]' } }],
    });
    // Body weight has no reference range, so no interpretation (blood pressure below has one).
    expect(observation.interpretation).toBeUndefined();
    expect(observation.meta?.tag).toEqual(
      expect.arrayContaining([{ system: SYSTEMS.episode, code: assessment.episodeOfCare }]),
    );
    // The clinician's review task: in the tenant's intake queue, for her, about the episode.
    const [review] = await reviewTasks(assessment.episodeOfCare, 'review-intake');
    const queue = (await gw.backend.systemRepo.readReference({ reference: queueOfTask(review) } as never)) as CareTeam;
    expect(queue.category?.[0]?.coding?.[0]).toEqual({ system: SYSTEMS.careQueue, code: 'intake-review' });
    expect(queue.managingOrganization).toEqual([patient.patient.managingOrganization]);
    expect(review).toMatchObject({
      status: 'ready',
      for: { reference: `Patient/${patient.patient.id}` },
      // Its focus is its form (contracts/work-forms.ts); what it is about, the episode.
      reasonReference: { reference: assessment.episodeOfCare },
    });
    expect(review.focus?.reference).toMatch(/^Questionnaire\//);
    expect(review.meta?.tag?.some((t) => t.system === SYSTEMS.taskAudience)).toBe(false);
    // Not hers to do: the patient's own view of tasks does not list it as a patient task.
    expect(review.meta?.accounts).toEqual([patient.patient.managingOrganization]);
  });

  it('a critical reading also issues an urgent review; 20 concurrent completions write one set of Observations', async () => {
    const { patient, assessment, measurementTask } = await startedAssessment(
      'southridge/assessments/blood-pressure-check',
      'southridge',
    );
    const body = {
      measurements: [
        { code: SYSTOLIC, value: 190, unit: 'mm[Hg]' },
        { code: DIASTOLIC, value: 95, unit: 'mm[Hg]' },
      ],
    };
    const answersOf20 = await Promise.all(
      Array.from({ length: 20 }, () => complete(patient, measurementTask.task, body)),
    );
    expect(answersOf20.map((a) => a.status)).toEqual(Array(20).fill(200));
    expect(new Set(answersOf20.map((a) => JSON.stringify(a.body))).size).toBe(1);
    const stored = await gw.backend.systemRepo.searchResources<Observation>({
      resourceType: 'Observation',
      filters: [{ code: 'subject', operator: 'eq', value: `Patient/${patient.patient.id}` }],
    });
    // One blood pressure panel (issue 48), its components interpreted: systolic critical, diastolic high.
    expect(stored).toHaveLength(1);
    expect(stored[0].code?.coding?.[0]?.code).toBe('85354-9');
    expect(
      stored[0].component?.map((c) => [c.code.coding?.[0]?.code, c.interpretation?.[0]?.coding?.[0]?.code]),
    ).toEqual([
      ['8480-6', 'HH'],
      ['8462-4', 'H'],
    ]);
    const urgent = await reviewTasks(assessment.episodeOfCare, 'review-reading');
    expect(urgent).toHaveLength(1);
    expect(urgent[0].priority).toBe('urgent');
  });

  it('interpret a reading against the reference range of the patient’s country', async () => {
    const interpretations = async (country: string) => {
      const patient = await freshPatient(gw.backend, { tenant: 'southridge', state: 'NY' });
      if (country !== 'US') {
        const stored = await gw.backend.systemRepo.readReference<Patient>({
          reference: `Patient/${patient.patient.id}`,
        });
        await gw.backend.systemRepo.updateResource<Patient>({
          ...stored,
          address: [{ line: ['1 Test Street'], city: 'Toronto', state: 'ON', postalCode: 'M5V', country }],
        });
      }
      const started = await startAssessment(gw, patient, 'southridge/assessments/blood-pressure-check');
      const task = started.tasks.find((t) => t.kind === 'measurement') as StartedAssessment['tasks'][number];
      const done = await complete(patient, task.task, {
        measurements: [
          { code: SYSTOLIC, value: 130, unit: 'mm[Hg]' },
          { code: DIASTOLIC, value: 85, unit: 'mm[Hg]' },
        ],
      });
      expect(done.status).toBe(200);
      const observations = await gw.backend.systemRepo.searchResources<Observation>({
        resourceType: 'Observation',
        filters: [{ code: 'subject', operator: 'eq', value: `Patient/${patient.patient.id}` }],
      });
      return observations.flatMap((o) => (o.component ?? []).map((c) => c.interpretation?.[0]?.coding?.[0]?.code));
    };
    // ACC/AHA (US): 130/85 is high; elsewhere (under 140/90) it is normal.
    expect(await interpretations('US')).toEqual(['H', 'H']);
    expect(await interpretations('CA')).toEqual(['N', 'N']);
  });

  it('another patient’s task is 404; a cancelled task is 409; unmet agreements are 409 consent_required', async () => {
    const { patient, measurementTask } = await startedAssessment('assessments/weight-intake');
    const reading = { measurements: [{ code: WEIGHT, value: 80, unit: 'kg' }] };
    const stranger = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    expect((await complete(stranger, measurementTask.task, reading)).status).toBe(404);
    expect((await complete(patient, 'Task/00000000-0000-4000-8000-000000000000', reading)).status).toBe(404);

    // She withdraws a required agreement: the gate stops the completion, and nothing is written.
    const consents = (
      (await gw.call('GET', '/v1/fhir/Consent?status=active', { token: patient.token })).body as {
        entry: { resource: { policy: { uri: string }[] } }[];
      }
    ).entry;
    const [url] = consents[0].resource.policy[0].uri.split('|');
    const withdrawn = await gw.call('POST', '/v1/agreements/withdrawals', {
      token: patient.token,
      body: { agreementUrl: url, acknowledgeConsequence: true },
    });
    expect(withdrawn.status).toBe(200);
    const before = store();
    const gated = await complete(patient, measurementTask.task, reading);
    expect(gated.status).toBe(409);
    expect(gated.body).toMatchObject({ error: { code: 'consent_required' } });
    expect(store()).toEqual(before);

    const task = await gw.backend.systemRepo.readReference<Task>({ reference: measurementTask.task });
    await gw.backend.systemRepo.updateResource<Task>({ ...task, status: 'cancelled' });
    const cancelled = await complete(patient, measurementTask.task, reading);
    expect(cancelled.status).toBe(409);
    expect(cancelled.body).toMatchObject({ error: { code: 'invalid_state', details: { state: 'cancelled' } } });
  });
});

describe('GET /v1/tasks: her open work, as what it is (issue 28 item 3)', () => {
  it('lists her open tasks in the workflows’ own view, each with the call that completes it; done ones leave; nobody else’s appear', async () => {
    const { patient, assessment, measurementTask } = await startedAssessment(
      'northwind/assessments/blood-pressure-check',
    );
    const list = async (who: DemoActor) =>
      ((await gw.call('GET', '/v1/tasks', { token: who.token })).body as { tasks: Record<string, unknown>[] }).tasks;
    const open = await list(patient);
    expect(open.map((t) => t.task).sort()).toEqual(assessment.tasks.map((t) => t.task).sort());
    for (const view of open) {
      const started = assessment.tasks.find((t) => t.task === view.task);
      expect(view).toMatchObject({ ...started, complete: expect.any(String) });
    }
    const id = measurementTask.task.split('/')[1];
    expect(open.find((t) => t.task === measurementTask.task)?.complete).toBe(
      `POST /v1/tasks/${id}/complete {measurements}`,
    );
    const questionnaire = open.find((t) => t.kind === 'questionnaire');
    expect(questionnaire?.complete).toBe(
      `POST /v1/tasks/${String(questionnaire?.task).split('/')[1]}/complete {questionnaireResponse}`,
    );
    const done = await complete(patient, measurementTask.task, {
      measurements: [
        { code: SYSTOLIC, value: 120, unit: 'mm[Hg]' },
        { code: DIASTOLIC, value: 80, unit: 'mm[Hg]' },
      ],
    });
    expect(done.status, done.text).toBe(200);
    expect((await list(patient)).map((t) => t.task)).not.toContain(measurementTask.task);
    // Another patient, of her tenant or another, never sees them.
    for (const other of [gw.backend.patients.bob, gw.backend.patients.carol]) {
      expect((await list(other)).map((t) => t.task)).not.toContain(questionnaire?.task);
    }
  });
});

describe('GET /v1/tasks, read again', () => {
  let counted: TestGateway;
  const definitionReads: string[] = [];
  beforeAll(async () => {
    counted = await startTestGateway((backend) => ({
      medplum: {
        baseUrl: backend.baseUrl,
        fetch: (input, init) => {
          const url = String(input instanceof Request ? input.url : input);
          if (url.includes('/ObservationDefinition/')) {
            definitionReads.push(url);
          }
          return backend.fetch(input, init);
        },
      },
    }));
  });
  afterAll(() => counted?.close());

  it('reads a measurement task’s definitions once for her (versions never change), never for anyone else', async () => {
    const patient = await freshPatient(counted.backend, { tenant: 'northwind', state: 'CA' });
    const assessment = await startAssessment(counted, patient, 'northwind/assessments/blood-pressure-check');
    const measurement = assessment.tasks.find((t) => t.kind === 'measurement');
    const list = async (who: DemoActor) =>
      ((await counted.call('GET', '/v1/tasks', { token: who.token })).body as { tasks: StartedAssessment['tasks'] })
        .tasks;
    definitionReads.length = 0;
    const first = await list(patient);
    const reads = definitionReads.length;
    expect(reads).toBe(measurement?.measurements?.length);
    const again = await list(patient);
    expect(again).toEqual(first);
    expect(again.find((t) => t.kind === 'measurement')?.measurements).toEqual(measurement?.measurements);
    expect(definitionReads.length).toBe(reads);
    // Another patient of her tenant reads with her own token: nothing of the first's copy is hers.
    const other = await freshPatient(counted.backend, { tenant: 'northwind', state: 'CA' });
    await startAssessment(counted, other, 'northwind/assessments/blood-pressure-check');
    definitionReads.length = 0;
    await list(other);
    expect(definitionReads.length).toBe(reads);
  });
});
