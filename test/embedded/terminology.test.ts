import type { OperationOutcome, ValueSet } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CATALOG } from '../../contracts/systems';
import { direct, fhirPath } from '../support/attack';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * `ValueSet/$expand` on the embedded Medplum (src/embedded/terminology.ts, issue 26), as Medplum's app
 * calls it for a coded field's choices (packages/server/src/fhir/operations/expand.ts): the ValueSet is
 * found with the caller's own access policy, so a clinician expands FHIR's own value sets and her
 * tenant's catalog, and nothing of another tenant's; a patient, her tenant's published catalog only.
 */
let backend: TestBackend;
beforeAll(async () => {
  backend = await startTestBackend();
});
afterAll(() => backend?.close());

const expand = (token: string, query: Record<string, string>) =>
  direct(backend, token, 'GET', fhirPath(`ValueSet/$expand?${new URLSearchParams(query)}`));
const codes = (body: unknown) => ((body as ValueSet).expansion?.contains ?? []).map((c) => c.code);
const NORTHWIND_CONDITIONS = 'https://patient-care.example/northwind/valuesets/conditions';
const SOUTHRIDGE_CONDITIONS = 'https://patient-care.example/southridge/valuesets/conditions';

describe('a clinician', () => {
  const token = () => backend.clinicians.northwind.token;

  it('expands a FHIR value set from its whole code system (Task.status), filtered by what she types, paged', async () => {
    const all = await expand(token(), { url: 'http://hl7.org/fhir/ValueSet/task-status', count: '100' });
    expect(all.status).toBe(200);
    expect(codes(all.body)).toEqual(expect.arrayContaining(['ready', 'in-progress', 'completed', 'cancelled']));
    expect((all.body as ValueSet).expansion?.total).toBe(12);
    const typed = await expand(token(), { url: 'http://hl7.org/fhir/ValueSet/task-status|4.0.1', filter: 'PROG' });
    expect(codes(typed.body)).toEqual(['in-progress']);
    // No count: the whole expansion without a filter (a status picker's options, `completed` included), ten
    // with one (packages/server/src/fhir/operations/expand.ts: the default page is for typeaheads).
    const whole = await expand(token(), { url: 'http://hl7.org/fhir/ValueSet/task-status' });
    expect(codes(whole.body)).toHaveLength(12);
    expect(codes(whole.body)).toContain('completed');
    const typeahead = await expand(token(), { url: 'http://hl7.org/fhir/ValueSet/resource-types', filter: 'e' });
    expect(codes(typeahead.body)).toHaveLength(10);
    const page = await expand(token(), { url: 'http://hl7.org/fhir/ValueSet/task-status', count: '5', offset: '10' });
    expect((page.body as ValueSet).expansion).toMatchObject({ total: 12, offset: 10 });
    expect(codes(page.body)).toHaveLength(2);
  });

  it("expands Medplum's own resource types (every Reference-to-any-type field of Medplum's app: its type picker), which share FHIR's ids for other urls, as Medplum seeds both by url (packages/server/src/seeds/valuesets.ts)", async () => {
    const types = await expand(token(), { url: 'https://medplum.com/fhir/ValueSet/resource-types', filter: 'Patient' });
    expect(types.status, types.text).toBe(200);
    expect(codes(types.body)).toContain('Patient');
    // FHIR's own, under the same id, still answers as before.
    const fhir = await expand(token(), { url: 'http://hl7.org/fhir/ValueSet/resource-types', filter: 'Patient' });
    expect(fhir.status, fhir.text).toBe(200);
    expect(codes(fhir.body)).toContain('Patient');
  });

  it("expands her tenant's condition catalog against the catalogs' ICD-10-CM code system, and finds nothing of another tenant's", async () => {
    const own = await expand(token(), { url: NORTHWIND_CONDITIONS, filter: 'essential' });
    expect(own.status).toBe(200);
    expect((own.body as ValueSet).expansion?.contains).toEqual([
      { system: 'http://hl7.org/fhir/sid/icd-10-cm', code: 'I10', display: 'Essential (primary) hypertension' },
    ]);
    const foreign = await expand(token(), { url: SOUTHRIDGE_CONDITIONS });
    expect(foreign.status).toBe(400);
    expect((foreign.body as OperationOutcome).issue?.[0]?.details?.text).toBe(
      `ValueSet ${SOUTHRIDGE_CONDITIONS} not found`,
    );
  });

  it('as on Medplum (operations/expand.ts): listed codes need their code system (400 naming it), and only its codes are listed', async () => {
    // A ValueSet of her tenant's catalog kind, written by the platform, listing codes of a system nobody loaded
    // and one code the catalogs' ICD-10-CM code system does not hold.
    const northwind = backend.patients.alice.patient.managingOrganization as { reference: string };
    const base = {
      resourceType: 'ValueSet' as const,
      status: 'active' as const,
      meta: {
        project: backend.project.id,
        accounts: [northwind],
        tag: [{ system: CATALOG.system, code: CATALOG.tenant }],
      },
    };
    await backend.systemRepo.createResource<ValueSet>({
      ...base,
      url: 'https://patient-care.example/northwind/valuesets/unloaded',
      compose: { include: [{ system: 'http://example.org/not-loaded', concept: [{ code: 'x' }] }] },
    });
    await backend.systemRepo.createResource<ValueSet>({
      ...base,
      url: 'https://patient-care.example/northwind/valuesets/partly',
      compose: {
        include: [{ system: 'http://hl7.org/fhir/sid/icd-10-cm', concept: [{ code: 'I10' }, { code: 'Z99.9' }] }],
      },
    });
    const unloaded = await expand(token(), { url: 'https://patient-care.example/northwind/valuesets/unloaded' });
    expect(unloaded.status).toBe(400);
    expect((unloaded.body as OperationOutcome).issue?.[0]?.details?.text).toBe(
      'CodeSystem http://example.org/not-loaded not found',
    );
    const partly = await expand(token(), { url: 'https://patient-care.example/northwind/valuesets/partly' });
    expect(codes(partly.body)).toEqual(['I10']);
  });

  it('a code system whose codes are not loaded (SNOMED) expands to nothing, never to a guess; no url is 400', async () => {
    const snomed = await expand(token(), { url: 'http://hl7.org/fhir/ValueSet/condition-code', filter: 'hyp' });
    expect(snomed.status).toBe(200);
    expect((snomed.body as ValueSet).expansion).toMatchObject({ total: 0, contains: [] });
    expect((await expand(token(), {})).status).toBe(400);
  });
});

describe('a patient', () => {
  it("expands nothing: FHIR's own are not found for her, her catalog's code system is not hers to read", async () => {
    const { token } = backend.patients.alice;
    expect((await expand(token, { url: 'http://hl7.org/fhir/ValueSet/task-status' })).status).toBe(400);
    // Her catalog's ValueSet is hers to read, its code system not (403, as her policy has no CodeSystem).
    expect((await expand(token, { url: NORTHWIND_CONDITIONS })).status).toBe(403);
    const foreign = await expand(token, { url: SOUTHRIDGE_CONDITIONS });
    expect((foreign.body as OperationOutcome).issue?.[0]?.details?.text).toBe(
      `ValueSet ${SOUTHRIDGE_CONDITIONS} not found`,
    );
  });
});
