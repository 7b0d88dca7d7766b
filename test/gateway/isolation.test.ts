import type {
  Appointment,
  Bundle,
  CarePlan,
  Communication,
  Observation,
  QuestionnaireResponse,
  RequestGroup,
  Resource,
  Task,
} from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { bodyFor, operationsOf } from '../support/operations';

let gw: TestGateway;
/** Alice's own resources, by type: what the other patients try to reach. */
let aliceResources: { type: string; id: string }[];

beforeAll(async () => {
  gw = await startTestGateway();
  const alice = gw.backend.patients.alice;
  const [observation] = await gw.backend.systemRepo.searchResources<Observation>({
    resourceType: 'Observation',
    filters: [{ code: 'subject', operator: 'eq', value: `Patient/${alice.patient.id}` }],
  });
  const answers = await alice.medplum.createResource<QuestionnaireResponse>({
    resourceType: 'QuestionnaireResponse',
    status: 'completed',
    subject: { reference: `Patient/${alice.patient.id}` },
  });
  // A task of hers to do, as the assessment bot issues them.
  const task = await gw.backend.systemRepo.createResource<Task>({
    resourceType: 'Task',
    meta: { tag: [{ system: SYSTEMS.taskAudience, code: 'patient' }] },
    status: 'ready',
    intent: 'order',
    code: { coding: [{ system: SYSTEMS.taskKind, code: 'measurement' }] },
    for: { reference: `Patient/${alice.patient.id}` },
    owner: { reference: `Patient/${alice.patient.id}` },
  });
  // An order offered to her (a proposal RequestGroup, as compose-offer writes it).
  const order = await gw.backend.systemRepo.createResource<RequestGroup>({
    resourceType: 'RequestGroup',
    status: 'active',
    intent: 'proposal',
    subject: { reference: `Patient/${alice.patient.id}` },
  });
  // A plan of hers (a draft enrollment, as the enrollment bot writes it).
  const plan = await gw.backend.systemRepo.createResource<CarePlan>({
    resourceType: 'CarePlan',
    status: 'draft',
    intent: 'plan',
    subject: { reference: `Patient/${alice.patient.id}` },
  });
  // A visit of hers (as the appointments bot books them).
  const visit = await gw.backend.systemRepo.createResource<Appointment>({
    resourceType: 'Appointment',
    status: 'booked',
    start: '2030-01-07T17:00:00Z',
    end: '2030-01-07T17:30:00Z',
    participant: [{ actor: { reference: `Patient/${alice.patient.id}` }, status: 'accepted' }],
  });
  // A thread with her care team (as Medplum's Provider app opens one) and a message in it.
  const thread = await gw.backend.systemRepo.createResource<Communication>({
    resourceType: 'Communication',
    status: 'in-progress',
    subject: { reference: `Patient/${alice.patient.id}` },
    recipient: [{ reference: `Patient/${alice.patient.id}` }],
  });
  const message = await gw.backend.systemRepo.createResource<Communication>({
    resourceType: 'Communication',
    status: 'in-progress',
    partOf: [{ reference: `Communication/${thread.id}` }],
    subject: { reference: `Patient/${alice.patient.id}` },
    recipient: [{ reference: `Patient/${alice.patient.id}` }],
    sent: new Date().toISOString(),
    payload: [{ contentString: 'For alice only' }],
  });
  aliceResources = [
    { type: 'Patient', id: alice.patient.id },
    { type: 'Observation', id: observation.id as string },
    { type: 'QuestionnaireResponse', id: answers.id as string },
    { type: 'Task', id: task.id as string },
    { type: 'RequestGroup', id: order.id as string },
    { type: 'CarePlan', id: plan.id as string },
    { type: 'Appointment', id: visit.id as string },
    { type: 'Communication', id: thread.id as string },
    { type: 'Communication', id: message.id as string },
  ];
});
afterAll(() => gw?.close());

/** Every stored version of a resource: `type/id` -> versionIds, oldest first. A write of any kind adds one. */
const versionsOf = (targets: { type: string; id: string }[]) =>
  Object.fromEntries(
    targets.map(({ type, id }) => [
      `${type}/${id}`,
      (
        gw.backend.db.reader
          .prepare('SELECT version_id FROM history WHERE type = ? AND id = ? ORDER BY seq')
          .all(type, id) as { version_id: string }[]
      ).map((row) => row.version_id),
    ]),
  );

const secretsOfAlice = () => [gw.backend.patients.alice.patient.id, 'Nguyen', ...aliceResources.map((r) => r.id)];

describe('isolation matrix: another patient never gets a byte of alice', () => {
  it('every operation that takes an id or reads patient data', async () => {
    // Refusals (405) never read data; everything else is exercised with each of alice's resources.
    // Operations that name a resource (an id) or search the record; the rest act on the caller only.
    const operations = operationsOf(gw).filter(
      (o) =>
        o.secured &&
        !o.operationId.startsWith('fhir.refuse') &&
        (o.template.includes('{id}') || o.operationId === 'fhir.search'),
    );
    expect(operations.map((o) => o.operationId).sort()).toEqual(
      [
        'appointments.cancel',
        'appointments.encounter',
        'appointments.get',
        'appointments.reschedule',
        'appointments.segments',
        'documents.read',
        'enrollments.activate',
        'enrollments.delete',
        'fhir.read',
        'fhir.readPatient',
        'fhir.readQuestionnaireResponse',
        'fhir.search',
        'fhir.updatePatient',
        'fhir.updateQuestionnaireResponse',
        'messages.read',
        'messages.send',
        'orders.decide',
        'tasks.complete',
      ].sort(),
    );
    const intruders = ['bob', 'carol'];
    const watched = [
      ...aliceResources,
      ...intruders.map((key) => ({ type: 'Patient', id: gw.backend.patients[key].patient.id })),
    ];
    const before = versionsOf(watched);
    for (const target of watched) {
      expect(before[`${target.type}/${target.id}`], `${target.type}/${target.id}`).not.toEqual([]);
    }
    for (const intruder of intruders) {
      const { token } = gw.backend.patients[intruder];
      for (const op of operations) {
        for (const target of aliceResources) {
          // An action-plane path names its type in the plural: /v1/tasks/{id} is a Task; an order is a RequestGroup.
          const namesType =
            op.template.includes(`/${target.type}/`) ||
            op.template.includes(`/${target.type.toLowerCase()}s/`) ||
            (op.template.includes('/orders/') && target.type === 'RequestGroup') ||
            (op.template.includes('/messages/') && target.type === 'Communication') ||
            (op.template.includes('/enrollments/') && target.type === 'CarePlan');
          if (!op.template.includes('{type}') && op.template.includes('{id}') && !namesType) {
            continue;
          }
          const path = op.template.includes('{id}')
            ? op.template.replace('{type}', target.type).replace('{id}', target.id)
            : op.template === '/v1/fhir/{type}'
              ? `/v1/fhir/${target.type}?_id=${target.id}`
              : op.template;
          const body = bodyFor(op, target.id);
          const res = await gw.call(op.method, path, { token, body });
          const label = `${intruder}: ${op.operationId} ${path}`;
          if (op.operationId === 'fhir.search') {
            expect(res.status, label).toBe(200);
            expect((res.body as Bundle).entry ?? [], label).toEqual([]);
          } else {
            expect(res.status, label).toBe(404);
          }
          // A search's links echo the intruder's own query; everything else must be free of alice.
          const exposed =
            op.operationId === 'fhir.search' ? JSON.stringify((res.body as Bundle).entry ?? []) : res.text;
          for (const secret of secretsOfAlice()) {
            expect(exposed, label).not.toContain(secret);
          }
          // Refused writes changed nothing: not alice's resource, and not the intruder's own Patient either.
          expect(versionsOf(watched), label).toEqual(before);
        }
      }
    }
    // Nothing of alice's changed: the same versions, and the same content.
    const answers = await gw.backend.systemRepo.readResource<QuestionnaireResponse>(
      'QuestionnaireResponse',
      aliceResources[2].id,
    );
    expect(answers.meta?.versionId).toBe(before[`QuestionnaireResponse/${aliceResources[2].id}`].at(-1));
    expect(answers.status).toBe('completed');
    const patient = await gw.backend.systemRepo.readResource<Resource>('Patient', aliceResources[0].id);
    expect(patient.meta?.versionId).toBe(before[`Patient/${aliceResources[0].id}`].at(-1));
  });
});
