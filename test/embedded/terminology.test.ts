import type { OperationOutcome, ValueSet } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
    const page = await expand(token(), { url: 'http://hl7.org/fhir/ValueSet/task-status', count: '5', offset: '10' });
    expect((page.body as ValueSet).expansion).toMatchObject({ total: 12, offset: 10 });
    expect(codes(page.body)).toHaveLength(2);
  });

  it("her tenant's condition catalog needs the ICD-10-CM code system, as on Medplum 5.0.10 (400 naming it); another tenant's is not found", async () => {
    // Medplum checks a ValueSet's listed codes against their code system (operations/expand.ts); neither
    // Medplum nor this server holds ICD-10-CM (the real-Medplum lane answers the same 400).
    const own = await expand(token(), { url: NORTHWIND_CONDITIONS, filter: 'essential' });
    expect(own.status).toBe(400);
    expect((own.body as OperationOutcome).issue?.[0]?.details?.text).toBe(
      'CodeSystem http://hl7.org/fhir/sid/icd-10-cm not found',
    );
    const foreign = await expand(token(), { url: SOUTHRIDGE_CONDITIONS });
    expect(foreign.status).toBe(400);
    expect((foreign.body as OperationOutcome).issue?.[0]?.details?.text).toBe(
      `ValueSet ${SOUTHRIDGE_CONDITIONS} not found`,
    );
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
