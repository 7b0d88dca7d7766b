import type { Consent, DocumentReference, Observation, Patient } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CATALOG, SYSTEMS } from '../../contracts/systems';
import { startTestBackend, type TestBackend } from '../support/backend';
import { signInAsBot } from '../support/bots';

/**
 * What only provisioning writes (catalog tags, provisioning keys) and what only one tenant owns,
 * attacked directly on Medplum by a clinician and a patient (src/provision/definition.ts:
 * SERVER_OWNED_TAGS, ONLY_OWN_TENANT). Each refusal leaves the store as it was; the same writes
 * without the forbidden part still succeed, so the refusals are the constraints', not something else.
 */
let backend: TestBackend;
beforeAll(async () => {
  backend = await startTestBackend();
});
afterAll(() => backend?.close());

const clinician = () => backend.clinicians.northwind.medplum;
const alice = () => backend.patients.alice; // northwind
const carol = () => backend.patients.carol; // southridge

async function refused(write: Promise<unknown>): Promise<number> {
  try {
    await write;
  } catch (err) {
    return (err as { outcome?: unknown; status?: number }).status ?? 400;
  }
  return 200;
}

const observation = (extra: Partial<Observation>): Observation => ({
  resourceType: 'Observation',
  status: 'final',
  code: { text: 'attack' },
  subject: { reference: `Patient/${alice().patient.id}` },
  ...extra,
});

const observationsAbout = async (patientId: string) =>
  backend.systemRepo.searchResources<Observation>({
    resourceType: 'Observation',
    filters: [{ code: 'subject', operator: 'eq', value: `Patient/${patientId}` }],
  });

describe('a clinician writes in their own tenant only', () => {
  it('a resource naming a patient of theirs and a patient of another tenant is refused', async () => {
    const before = (await observationsAbout(carol().patient.id)).length;
    const mixed = observation({
      subject: { reference: `Patient/${carol().patient.id}` },
      performer: [{ reference: `Patient/${alice().patient.id}` }],
    });
    expect(await refused(clinician().createResource(mixed))).not.toBe(200);
    expect((await observationsAbout(carol().patient.id)).length).toBe(before);
  });

  it('the same resource about their own patient alone is written', async () => {
    const own = await clinician().createResource(
      observation({ performer: [{ reference: `Patient/${alice().patient.id}` }] }),
    );
    expect(own.meta?.accounts?.map((a) => a.reference)).toEqual([alice().patient.managingOrganization?.reference]);
  });
});

describe('catalog and provisioning tags are provisioning’s', () => {
  const tenantAgreement = async () =>
    (
      await backend.systemRepo.searchResources<DocumentReference>({
        resourceType: 'DocumentReference',
        filters: [{ code: '_tag', operator: 'eq', value: `${CATALOG.system}|${CATALOG.tenant}` }],
      })
    ).find((d) => d.custodian?.reference === alice().patient.managingOrganization?.reference) as DocumentReference;

  it('a clinician cannot unpublish or rewrite a published agreement of their tenant', async () => {
    const doc = await tenantAgreement();
    expect(doc).toBeDefined();
    const untagged = { ...doc, meta: { ...doc.meta, tag: [] } };
    expect(await refused(clinician().updateResource(untagged))).not.toBe(200);
    const rewritten = { ...doc, description: 'Changed terms' };
    expect(await refused(clinician().updateResource(rewritten))).not.toBe(200);
    const now = await backend.systemRepo.readResource<DocumentReference>('DocumentReference', doc.id as string);
    expect(now.meta?.versionId).toBe(doc.meta?.versionId);
  });

  it('a clinician cannot publish: a document with a catalog tag is refused', async () => {
    const doc: DocumentReference = {
      resourceType: 'DocumentReference',
      status: 'current',
      subject: { reference: `Patient/${alice().patient.id}` },
      meta: { tag: [{ system: CATALOG.system, code: CATALOG.platform }] },
      content: [{ attachment: { url: 'https://example.test/fake-terms.html' } }],
    };
    expect(await refused(clinician().createResource(doc))).not.toBe(200);
    expect(await refused(clinician().createResource({ ...doc, meta: undefined }))).toBe(200);
  });

  it('neither a clinician nor a patient can add a provisioning key (which provisioning would adopt)', async () => {
    const key = { system: SYSTEMS.provisioning, code: 'demo-patient-alice' };
    expect(await refused(clinician().createResource(observation({ meta: { tag: [key] } })))).not.toBe(200);
    const own = await alice().medplum.readResource('Patient', alice().patient.id);
    const otherKey = { system: SYSTEMS.provisioning, code: 'tenant-northwind' };
    const tagged: Patient = { ...own, meta: { ...own.meta, tag: [...(own.meta?.tag ?? []), otherKey] } };
    expect(await refused(alice().medplum.updateResource(tagged))).not.toBe(200);
    const after = await backend.systemRepo.readResource<Patient>('Patient', alice().patient.id);
    expect(after.meta?.tag?.some((t) => t.code === otherKey.code)).toBe(false);
    // Her ordinary update, keys kept as they are, still works.
    const renamed: Patient = { ...own, name: [{ given: ['Alice'], family: 'Renamed' }] };
    expect(await refused(alice().medplum.updateResource(renamed))).toBe(200);
  });
});

describe('an acceptance, once given, changes only its status', () => {
  it('the withdraw bot may make it inactive, but not rewrite its scope, provision or source with it', async () => {
    const { medplum } = await signInAsBot(backend, 'withdraw-agreement');
    const given = async () =>
      backend.systemRepo.createResource<Consent>({
        resourceType: 'Consent',
        meta: { project: backend.project.id },
        status: 'active',
        scope: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/consentscope', code: 'patient-privacy' }] },
        category: [{ text: 'Agreement' }],
        patient: { reference: `Patient/${alice().patient.id}` },
        dateTime: '2026-01-01T00:00:00.000Z',
        policy: [{ uri: 'https://example.test/terms|1' }],
        // What every acceptance carries (its key and its proof), which the constraint compares as it is.
        identifier: [{ system: 'https://example.test/acceptance', value: `accepted-${Date.now()}` }],
        extension: [{ url: 'https://example.test/proof', valueString: 'clickwrap' }],
      });
    const consent = await given();
    for (const change of [
      { scope: { coding: [{ code: 'research' }] } },
      { provision: { type: 'deny' as const } },
      { sourceReference: { reference: 'DocumentReference/forged' } },
    ]) {
      expect(await refused(medplum.updateResource({ ...consent, status: 'inactive', ...change }))).not.toBe(200);
    }
    const unchanged = await backend.systemRepo.readResource<Consent>('Consent', consent.id as string);
    expect(unchanged.meta?.versionId).toBe(consent.meta?.versionId);
    expect(await refused(medplum.updateResource({ ...consent, status: 'inactive' }))).toBe(200);
  });
});
