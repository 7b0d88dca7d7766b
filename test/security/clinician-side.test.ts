import type { WithId } from '@medplum/core';
import type {
  ActivityDefinition,
  Condition,
  DetectedIssue,
  MedicationRequest,
  Observation,
  Task,
  ValueSet,
} from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queueType } from '../../bots/lib/queues';
import { SYSTEMS } from '../../contracts/systems';
import { conditionForm, formInput } from '../../contracts/work-forms';
import type { Clinician } from '../../src/clinician';
import { direct, fhirPath } from '../support/attack';
import type { DemoActor } from '../support/backend';
import { demoClinician, freshClinician, intakeQueue, reviewTask } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { storeSnapshot } from '../support/journey';
import { freshPatient } from '../support/patients';
import { assigned, forgedWork, LISINOPRIL, openOffers, RXNORM, selectionsOf, workAbout } from '../support/spine';

/**
 * Issue 25, the clinician's side of the spine: each break an attacker's run found, as an attack that
 * now fails directly on Medplum with the attacker's own token, with the store read back unchanged; and
 * the bots' own checks behind the policies, shown with the same work written around the policy (by a
 * project admin), which the bots must still refuse.
 */
let gw: TestGateway;
let clinician: Clinician;
let colleague: Clinician;
beforeAll(async () => {
  gw = await startTestGateway();
  clinician = await demoClinician(gw.backend, 'northwind');
  // A clinician of the same tenant, in no queue.
  colleague = await freshClinician(gw.backend, 'northwind', { member: false });
});
afterAll(() => gw?.close());

const repo = () => gw.backend.systemRepo;
const tokenOf = (c: Clinician) => c.medplum.getAccessToken() as string;
const ICD10CM = 'http://hl7.org/fhir/sid/icd-10-cm';

/** On spironolactone (lisinopril interacts with it), and, with `pregnant`, pregnant (a contraindication). */
const history =
  (pregnant = false) =>
  async (patient: DemoActor) => {
    const project = gw.backend.project.id;
    await repo().createResource<MedicationRequest>({
      resourceType: 'MedicationRequest',
      meta: { project },
      status: 'active',
      intent: 'order',
      subject: { reference: `Patient/${patient.patient.id}` },
      medicationCodeableConcept: { coding: [{ system: RXNORM, code: '9997' }] },
    });
    if (pregnant) {
      await repo().createResource<Condition>({
        resourceType: 'Condition',
        meta: { project },
        clinicalStatus: { coding: [{ code: 'active' }] },
        code: { coding: [{ system: ICD10CM, code: 'Z33.1' }] },
        subject: { reference: `Patient/${patient.patient.id}` },
      });
    }
  };

/** The engine's findings against one option (`url|version`): those implicating its pinned ActivityDefinition. */
async function findingsAgainst(patient: DemoActor, option: string): Promise<DetectedIssue[]> {
  const [url, version] = option.split('|');
  const [definition] = await repo().searchResources<ActivityDefinition>({
    resourceType: 'ActivityDefinition',
    filters: [
      { code: 'url', operator: 'eq', value: url },
      { code: 'version', operator: 'eq', value: version },
    ],
  });
  const issues = await repo().searchResources<DetectedIssue>({
    resourceType: 'DetectedIssue',
    filters: [{ code: 'patient', operator: 'eq', value: `Patient/${patient.patient.id}` }],
  });
  return issues.filter((i) =>
    i.implicated?.some((r) => r.reference?.startsWith(`ActivityDefinition/${definition.id}/`)),
  );
}

const mitigation = (author: string, text: string) => ({
  action: { text },
  date: new Date().toISOString(),
  author: { reference: author },
});

/** Her selection of lisinopril, and the state the compose-offer bot leaves it in. */
async function selectLisinopril(selection: Task): Promise<string | undefined> {
  await clinician.select(selection.id as string, LISINOPRIL);
  await gw.backend.subscriptions.idle();
  return (await repo().readResource<Task>('Task', selection.id as string)).businessStatus?.text;
}

/** Completed selection touched again (a note), as the eligibility test's second selection: compose-offer runs again. */
async function reselect(selection: Task): Promise<void> {
  const current = await clinician.medplum.readResource('Task', selection.id as string);
  await clinician.medplum.updateResource<Task>({ ...current, note: [{ text: `again ${Date.now()}` }] });
  await gw.backend.subscriptions.idle();
}

describe('a mitigation is its writer’s own', () => {
  it('a colleague cannot record one in the selecting clinician’s name (403 on Medplum, the finding unchanged)', async () => {
    const { patient } = await assigned(gw, clinician, 'I10', history());
    const [finding] = await findingsAgainst(patient, LISINOPRIL);
    const before = storeSnapshot(gw.backend);
    const forged = await direct(gw.backend, tokenOf(colleague), 'PUT', fhirPath(`DetectedIssue/${finding.id}`), {
      body: { ...finding, mitigation: [mitigation(clinician.profile.reference as string, 'reviewed, proceed')] },
    });
    expect(forged.status).toBe(403);
    expect(storeSnapshot(gw.backend)).toEqual(before);

    // Her own is hers to record; then nobody may rewrite or remove it, she included.
    const own = await colleague.medplum.updateResource<DetectedIssue>({
      ...finding,
      mitigation: [mitigation(colleague.profile.reference as string, 'my own view')],
    });
    const afterOwn = storeSnapshot(gw.backend);
    for (const [who, mitigations] of [
      [clinician, [mitigation(clinician.profile.reference as string, 'rewritten')]],
      [clinician, []],
      [colleague, [{ ...own.mitigation?.[0], author: clinician.profile }]],
    ] as const) {
      const res = await direct(gw.backend, tokenOf(who), 'PUT', fhirPath(`DetectedIssue/${finding.id}`), {
        body: { ...own, mitigation: mitigations },
      });
      expect(res.status).toBe(403);
    }
    expect(storeSnapshot(gw.backend)).toEqual(afterOwn);
  });

  it('one in her name that she did not write (a project admin’s edit) does not let the ineligible option through; her own does', async () => {
    const { patient, selection } = await assigned(gw, clinician, 'I10', history());
    const [finding] = await findingsAgainst(patient, LISINOPRIL);
    await gw.backend.admin.updateResource<DetectedIssue>({
      ...finding,
      mitigation: [mitigation(clinician.profile.reference as string, 'reviewed, proceed')],
    });
    expect(await selectLisinopril(selection)).toBe('override-required');
    expect(await openOffers(gw, patient)).toEqual([]);

    const current = await clinician.medplum.readResource('DetectedIssue', finding.id as string);
    await clinician.medplum.updateResource<DetectedIssue>({
      ...current,
      mitigation: [
        ...(current.mitigation ?? []),
        mitigation(clinician.profile.reference as string, 'Potassium monitored'),
      ],
    });
    await reselect(selection);
    expect(await openOffers(gw, patient)).toHaveLength(1);
  });

  it('every finding needs her own: with two against the option, one mitigated offers nothing; both, the offer', async () => {
    const { patient, selection } = await assigned(gw, clinician, 'I10', history(true));
    const findings = await findingsAgainst(patient, LISINOPRIL);
    expect(findings).toHaveLength(2);
    const record = async (finding: DetectedIssue) => {
      const current = await clinician.medplum.readResource('DetectedIssue', finding.id as string);
      await clinician.medplum.updateResource<DetectedIssue>({
        ...current,
        mitigation: [mitigation(clinician.profile.reference as string, `Reviewed ${finding.code?.text ?? ''}`)],
      });
    };
    await record(findings[0]);
    expect(await selectLisinopril(selection)).toBe('override-required');
    expect(await openOffers(gw, patient)).toEqual([]);
    await record(findings[1]);
    await reselect(selection);
    expect(await openOffers(gw, patient)).toHaveLength(1);
  });
});

describe('a review the platform did not issue starts nothing', () => {
  it('a clinician cannot create one (403, nothing written); one made around her policy and completed by her gets no selection', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const queue = await intakeQueue(gw.backend, 'northwind');
    const her = { reference: `Patient/${patient.patient.id}` };
    // The form a real review carries, built from her tenant's condition catalog: answerable as a real one.
    const catalog = (await gw.backend.admin.searchOne('ValueSet', {
      identifier: `${SYSTEMS.conditionCatalog}|conditions`,
      url: 'https://patient-care.example/northwind/valuesets/conditions',
    })) as ValueSet;
    const form = await gw.backend.admin.createResource({
      ...conditionForm([catalog]),
      version: 'forged',
      meta: { accounts: [patient.patient.managingOrganization as { reference: string }] },
    });
    const base: Task = {
      resourceType: 'Task',
      intent: 'order',
      status: 'ready',
      code: { coding: [{ system: SYSTEMS.taskKind, code: 'review-intake' }] },
      focus: { reference: `Questionnaire/${form.id}` },
      input: [formInput(`Questionnaire/${form.id}`, form.title)],
      for: her,
      performerType: queueType(queue),
      meta: { accounts: [patient.patient.managingOrganization as { reference: string }] },
    };
    // Already done, in her own name: refused too.
    const before = storeSnapshot(gw.backend);
    const done = await direct(gw.backend, tokenOf(clinician), 'POST', fhirPath('Task'), {
      body: { ...base, status: 'completed', owner: clinician.profile },
    });
    expect(done.status).toBe(403);
    expect(storeSnapshot(gw.backend)).toEqual(before);

    const forged: WithId<Task> = await forgedWork(gw, clinician, base);
    await clinician.assignCondition(forged.id, 'I10');
    await gw.backend.subscriptions.idle();
    expect(await workAbout(gw, patient, 'select-treatment')).toEqual([]);
    expect(await selectionsOf(gw, forged)).toEqual([]);
  });
});

describe('queues are enforced on Medplum, not only displayed', () => {
  it('a clinician outside the queue cannot claim its work, edit it or put work in it (403, nothing written); a member can', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const review = await reviewTask(gw.backend, patient);
    const queue = review.performerType;
    const before = storeSnapshot(gw.backend);
    const attempts: [string, string, unknown][] = [
      ['PUT', `Task/${review.id}`, { ...review, owner: colleague.profile, status: 'in-progress' }],
      ['PUT', `Task/${review.id}`, { ...review, note: [{ text: 'looked at it' }] }],
      [
        'POST',
        'Task',
        { resourceType: 'Task', status: 'ready', intent: 'order', performerType: queue, for: review.for },
      ],
    ];
    for (const [method, path, body] of attempts) {
      const res = await direct(gw.backend, tokenOf(colleague), method, fhirPath(path), { body });
      expect(res.status, `${method} ${path}`).toBe(403);
    }
    expect(storeSnapshot(gw.backend)).toEqual(before);

    // A member of the queue claims it; she cannot then move it to a queue she does not work.
    const member = await freshClinician(gw.backend, 'northwind');
    const claimed = await member.claim(review.id);
    expect(claimed).toMatchObject({ status: 'in-progress', owner: member.profile });
    const other = await gw.backend.admin.createResource({
      resourceType: 'CareTeam',
      meta: { accounts: [patient.patient.managingOrganization as { reference: string }] },
      status: 'active',
      name: 'Another queue',
      category: [{ coding: [{ system: SYSTEMS.careQueue, code: 'intake-review' }] }],
      managingOrganization: [patient.patient.managingOrganization as { reference: string }],
    });
    const afterClaim = storeSnapshot(gw.backend);
    const moved = await direct(gw.backend, tokenOf(member), 'PUT', fhirPath(`Task/${review.id}`), {
      body: { ...claimed, owner: undefined, performerType: queueType(other), status: 'ready' },
    });
    expect(moved.status).toBe(403);
    expect(storeSnapshot(gw.backend)).toEqual(afterClaim);
    const released = await member.unclaim(review.id);
    expect([released.owner, released.performerType]).toEqual([undefined, queue]);
  });
});

describe('her tenant, as Medplum’s app shows it', () => {
  it('she reads her own tenant’s Organization (read-only), and nothing of the other tenant’s', async () => {
    const mine = clinician.medplum;
    const own = gw.backend.patients.alice.patient.managingOrganization as { reference: string };
    const other = gw.backend.patients.carol.patient.managingOrganization as { reference: string };
    const read = await direct(gw.backend, tokenOf(clinician), 'GET', fhirPath(own.reference));
    expect(read.status).toBe(200);
    expect((await direct(gw.backend, tokenOf(clinician), 'GET', fhirPath(other.reference))).status).toBe(404);
    const before = storeSnapshot(gw.backend);
    const renamed = await direct(gw.backend, tokenOf(clinician), 'PUT', fhirPath(own.reference), {
      body: { ...(read.body as object), name: 'Renamed' },
    });
    expect(renamed.status).toBe(403);
    expect(storeSnapshot(gw.backend)).toEqual(before);
    expect(await mine.searchResources('Organization', { _count: '100' })).toHaveLength(1);
  });
});

describe('her vital signs are hers as she reported them (issue 48)', () => {
  it('a patient cannot write a reading, least of all as a clinician’s, straight to Medplum or through the gateway; her readings say she reported them', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const before = storeSnapshot(gw.backend);
    const asClinicians: Observation = {
      resourceType: 'Observation',
      status: 'final',
      category: [
        { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] },
      ],
      code: { coding: [{ system: 'http://loinc.org', code: '85354-9' }] },
      subject: { reference: `Patient/${patient.patient.id}` },
      performer: [clinician.profile],
      effectiveDateTime: new Date().toISOString(),
      component: [
        {
          code: { coding: [{ system: 'http://loinc.org', code: '8480-6' }] },
          valueQuantity: { value: 118, unit: 'mm[Hg]', system: 'http://unitsofmeasure.org', code: 'mm[Hg]' },
        },
      ],
    };
    const straight = await direct(gw.backend, patient.token, 'POST', fhirPath('Observation'), { body: asClinicians });
    expect(straight.status).toBe(403);
    const gateway = await gw.call('POST', '/v1/fhir/Observation', { token: patient.token, body: asClinicians });
    expect([403, 405]).toContain(gateway.status);
    expect(storeSnapshot(gw.backend)).toEqual(before);
  });
});
