import assert from 'node:assert/strict';
import type { WithId } from '@medplum/core';
import type {
  Attachment,
  Condition,
  MedicationRequest,
  Observation,
  Patient,
  Questionnaire,
  Reference,
  RequestGroup,
  Task,
} from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import { formReference } from '../../contracts/work-forms';
import type { Clinician } from '../../src/clinician';
import { direct } from './attack';
import type { DemoActor } from './backend';
import type { TestGateway } from './gateway';
import { completeTasks, startAssessment, storeSnapshot } from './journey';
import { freshPatient } from './patients';

/**
 * The clinical spine up to each step (JOURNEY D), for one new northwind patient in California: the
 * patient's side through the gateway, the clinician's through the clinician helper (src/clinician/),
 * subscriptions drained after each clinician write as Medplum would deliver them.
 */

export const RXNORM = 'http://www.nlm.nih.gov/research/umls/rxnorm';
export const PROTOCOL = 'https://patient-care.example/northwind/protocols/hypertension-treatment|2';
export const LISINOPRIL = 'https://patient-care.example/northwind/treatment-options/lisinopril-10|2';
export const AMLODIPINE = 'https://patient-care.example/northwind/treatment-options/amlodipine-5|2';

/** A northwind patient who did the blood-pressure check; the review it issued, as her clinician sees it. */
export async function reviewedIntake(
  gw: TestGateway,
  clinician: Clinician,
  /** A PNG she uploads as the photo of her reading (`POST /v1/documents`), when given. */
  photo?: Uint8Array<ArrayBuffer>,
  /** Whether her record has what the lisinopril option's rules need (else it is "not determined"). */
  { baseline = true }: { baseline?: boolean } = {},
): Promise<{ patient: DemoActor; review: WithId<Task> }> {
  const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
  if (baseline) {
    await baselineOnRecord(gw, patient);
  }
  const attached = photo ? [{ linkId: 'reading-photo', valueAttachment: await uploaded(gw, patient, photo) }] : [];
  const { tasks } = await startAssessment(gw, patient, 'northwind/assessments/blood-pressure-check');
  await completeTasks(gw, patient, tasks, { 'http://loinc.org|8480-6': 150, 'http://loinc.org|8462-4': 95 }, [
    { linkId: 'diagnosed', valueBoolean: true },
    { linkId: 'medication', valueBoolean: false },
    ...attached,
  ]);
  const review = (await clinician.queue()).find((t) => t.for?.reference === `Patient/${patient.patient.id}`);
  assert.ok(review, 'the review is in her queue');
  return { patient, review: review as WithId<Task> };
}

/** Her upload of a PNG through the gateway: the attachment her answers name. */
async function uploaded(gw: TestGateway, patient: DemoActor, png: Uint8Array<ArrayBuffer>): Promise<Attachment> {
  const response = await gw.app.request('http://gateway.test/v1/documents?filename=reading.png', {
    method: 'POST',
    headers: { authorization: `Bearer ${patient.token}`, 'content-type': 'image/png' },
    body: png,
  });
  assert.equal(response.status, 201, await response.clone().text());
  return (await response.json()) as Attachment;
}

/**
 * What the lisinopril option's rules need to be decided, on her record as an import would bring it: her
 * sex and date of birth, a negative pregnancy status, serum potassium and an eGFR, all unremarkable.
 */
export async function baselineOnRecord(gw: TestGateway, patient: DemoActor): Promise<void> {
  const repo = gw.backend.systemRepo;
  const her = await repo.readResource<Patient>('Patient', patient.patient.id as string);
  await repo.updateResource<Patient>({ ...her, gender: 'female', birthDate: '1980-04-02' });
  const result = (code: string, value: Observation['valueQuantity'] | Observation['valueCodeableConcept']) =>
    repo.createResource<Observation>({
      resourceType: 'Observation',
      meta: { project: gw.backend.project.id },
      status: 'final',
      category: [{ coding: [{ system: OBSERVATION_CATEGORY, code: 'laboratory' }] }],
      code: { coding: [{ system: 'http://loinc.org', code }] },
      subject: { reference: `Patient/${patient.patient.id}` },
      effectiveDateTime: new Date().toISOString(),
      ...(value && 'coding' in value ? { valueCodeableConcept: value } : { valueQuantity: value }),
    });
  await result('82810-3', { coding: [{ system: 'http://loinc.org', code: 'LA26683-5', display: 'Not pregnant' }] });
  await result('2823-3', { value: 4.2, unit: 'mmol/L', system: UCUM, code: 'mmol/L' });
  await result('62238-1', { value: 88, unit: 'mL/min/{1.73_m2}', system: UCUM, code: 'mL/min/{1.73_m2}' });
}

const OBSERVATION_CATEGORY = 'http://terminology.hl7.org/CodeSystem/observation-category';
const UCUM = 'http://unitsofmeasure.org';

/**
 * A prior order on record for her (as an import would bring it): spironolactone, which the lisinopril
 * option's interaction rule finds (a finding to mitigate).
 */
export const spironolactoneOrder = (gw: TestGateway, patient: DemoActor) =>
  gw.backend.systemRepo.createResource<MedicationRequest>({
    resourceType: 'MedicationRequest',
    meta: { project: gw.backend.project.id },
    status: 'active',
    intent: 'order',
    subject: { reference: `Patient/${patient.patient.id}` },
    medicationCodeableConcept: { coding: [{ system: RXNORM, code: '9997', display: 'spironolactone' }] },
  });

/** The stored form a task points at (contracts/work-forms.ts), as stored; undefined when it points at none. */
export async function formOf(gw: TestGateway, task: Task): Promise<WithId<Questionnaire> | undefined> {
  const reference = formReference(task);
  return reference ? gw.backend.systemRepo.readReference<Questionnaire>({ reference }) : undefined;
}

/** The clinician assigns the condition; the eligibility bot answers with the selection task. */
export async function assigned(
  gw: TestGateway,
  clinician: Clinician,
  code = 'I10',
  /** What is on her record before the review (e.g. a prior order eligibility will find). */
  history?: (patient: DemoActor) => Promise<unknown>,
): Promise<{ patient: DemoActor; review: WithId<Task>; condition: WithId<Condition>; selection: WithId<Task> }> {
  const { patient, review } = await reviewedIntake(gw, clinician);
  await history?.(patient);
  await clinician.assignCondition(review.id, code);
  await gw.backend.subscriptions.idle();
  const condition = await assignedCondition(gw, review);
  assert.ok(condition, 'eligibility recorded the condition she assigned');
  const [selection] = await selectionsOf(gw, review);
  assert.ok(selection, 'eligibility issued the selection');
  return { patient, review, condition, selection };
}

export interface Offered {
  patient: DemoActor;
  condition: WithId<Condition>;
  selection: WithId<Task>;
  /** The patient's treatment-offer task. */
  offer: WithId<Task>;
  group: WithId<RequestGroup>;
  items: WithId<MedicationRequest>[];
}

/** The selection work eligibility issued from a review (keyed by it: at most one). */
export const selectionsOf = (gw: TestGateway, review: Pick<Task, 'id'>) =>
  gw.backend.systemRepo.searchResources<Task>({
    resourceType: 'Task',
    filters: [{ code: 'identifier', operator: 'eq', value: `${SYSTEMS.eligibilityKey}|Task/${review.id}` }],
  });

/** The Condition the eligibility bot recorded from her answers to a review (keyed by the review). */
export async function assignedCondition(gw: TestGateway, review: Task): Promise<WithId<Condition> | undefined> {
  const [condition] = await gw.backend.systemRepo.searchResources<Condition>({
    resourceType: 'Condition',
    filters: [{ code: 'identifier', operator: 'eq', value: `${SYSTEMS.eligibilityKey}|Task/${review.id}` }],
  });
  return condition;
}

/** Up to the offer: the clinician selects `option` and the consent bundle is composed. */
export async function offered(gw: TestGateway, clinician: Clinician, option = AMLODIPINE): Promise<Offered> {
  const { patient, condition, selection } = await assigned(gw, clinician);
  await clinician.select(selection.id, option);
  await gw.backend.subscriptions.idle();
  const offer = (await openOffers(gw, patient))[0];
  assert.ok(offer, 'the offer was composed');
  const { group, items } = await offerOf(gw, offer);
  return { patient, condition, selection, offer, group, items };
}

/** Her treatment-offer tasks still to answer. */
export const openOffers = (gw: TestGateway, patient: DemoActor) =>
  gw.backend.systemRepo.searchResources<Task>({
    resourceType: 'Task',
    filters: [
      { code: 'code', operator: 'eq', value: `${SYSTEMS.taskKind}|treatment-offer` },
      { code: 'subject', operator: 'eq', value: `Patient/${patient.patient.id}` },
      { code: 'status', operator: 'eq', value: 'ready' },
    ],
  });

export async function offerOf(
  gw: TestGateway,
  offer: Task,
): Promise<{ group: WithId<RequestGroup>; items: WithId<MedicationRequest>[] }> {
  const group = await gw.backend.systemRepo.readReference<RequestGroup>(offer.focus as Reference<RequestGroup>);
  const items = await Promise.all(
    (group.action ?? []).map((a) =>
      gw.backend.systemRepo.readReference<MedicationRequest>(a.resource as Reference<MedicationRequest>),
    ),
  );
  return { group, items };
}

/** `POST /v1/tasks/{id}/complete` on an offer, as her app answers it. */
export const answer = (gw: TestGateway, patient: DemoActor, offer: Task, body: unknown) =>
  gw.call('POST', `/v1/tasks/${offer.id}/complete`, { token: patient.token, body });

/** Clinician work about her of one kind (review-response, review-intake...). */
export const workAbout = (gw: TestGateway, patient: DemoActor, kind: string) =>
  gw.backend.systemRepo.searchResources<Task>({
    resourceType: 'Task',
    filters: [
      { code: 'code', operator: 'eq', value: `${SYSTEMS.taskKind}|${kind}` },
      { code: 'subject', operator: 'eq', value: `Patient/${patient.patient.id}` },
    ],
  });

/**
 * Platform work (a task of one of `SYSTEMS.taskKind`'s kinds) that no bot issued. The clinician's own
 * create is refused on Medplum (the clinician policy's QUEUE_CREATES) and changes nothing; the same task
 * made by a project admin (as a mistaken import or a console edit would) is returned, for the bots' own
 * check that they act only on work a bot issued.
 */
export async function forgedWork(gw: TestGateway, clinician: Clinician, task: Task): Promise<WithId<Task>> {
  const before = storeSnapshot(gw.backend);
  const refused = await direct(gw.backend, clinician.medplum.getAccessToken() as string, 'POST', 'fhir/R4/Task', {
    body: task,
  });
  assert.equal(refused.status, 403, `a clinician cannot create platform work: ${refused.text}`);
  assert.deepEqual(storeSnapshot(gw.backend), before);
  return gw.backend.admin.createResource<Task>(task) as Promise<WithId<Task>>;
}
