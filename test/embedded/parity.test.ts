import { randomUUID } from 'node:crypto';
import { isOperationOutcome } from '@medplum/core';
import type {
  AccessPolicy,
  Bundle,
  Observation,
  OperationOutcome,
  Patient,
  ProjectMembership,
  QuestionnaireResponse,
} from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * Issue 11, "Strictness" (writes and searches): the embedded Medplum answers as real Medplum does, or
 * refuses where real Medplum would accept (DESIGN.md section 7). Each test names the Medplum source it
 * pins; paths are in github.com/medplum/medplum.
 */

let backend: TestBackend;
beforeAll(async () => {
  backend = await startTestBackend();
});
afterAll(() => backend?.close());

interface Answer {
  status: number;
  body: unknown;
}

async function call(path: string, init: RequestInit & { token?: string } = {}): Promise<Answer> {
  const headers = new Headers(init.headers);
  headers.set('authorization', `Bearer ${init.token ?? backend.patients.alice.token}`);
  if (init.body && !headers.has('content-type')) {
    headers.set('content-type', 'application/fhir+json');
  }
  const response = await backend.fetch(new URL(`fhir/R4/${path}`, backend.baseUrl), { ...init, headers });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

/** A 400 OperationOutcome whose text says `why`. */
function expectBadRequest(answer: Answer, why: RegExp): void {
  expect(answer.status, JSON.stringify(answer.body).slice(0, 300)).toBe(400);
  expect(isOperationOutcome(answer.body)).toBe(true);
  const texts = ((answer.body as OperationOutcome).issue ?? []).map((i) => i.details?.text ?? '').join('\n');
  expect(texts).toMatch(why);
}

const adminToken = (): string => backend.admin.getAccessToken() as string;

async function currentAlice(): Promise<Patient> {
  return backend.systemRepo.readResource<Patient>('Patient', backend.patients.alice.patient.id);
}

async function aliceResponses(): Promise<number> {
  const found = await backend.systemRepo.searchResources<QuestionnaireResponse>({
    resourceType: 'QuestionnaireResponse',
    filters: [{ code: 'subject', operator: 'eq', value: `Patient/${backend.patients.alice.patient.id}` }],
  });
  return found.length;
}

const aliceResponse = (fields: Partial<QuestionnaireResponse> = {}): QuestionnaireResponse => ({
  resourceType: 'QuestionnaireResponse',
  status: 'completed',
  subject: { reference: `Patient/${backend.patients.alice.patient.id}` },
  ...fields,
});

describe('parity with real Medplum: writes and searches of the embedded store', () => {
  // packages/server/src/fhir/repo.ts, Repository.checkExistingResource: an update whose id is not found
  // throws not-found unless canSetId(), which is isSuperAdmin(). Project admins and patients get 404.
  it('PUT to an unknown id is 404 (nothing is created) unless the caller is the system', async () => {
    const responseId = randomUUID();
    const asPatient = await call(`QuestionnaireResponse/${responseId}`, {
      method: 'PUT',
      body: JSON.stringify(aliceResponse({ id: responseId })),
    });
    expect(asPatient.status).toBe(404);
    const patientId = randomUUID();
    const asAdmin = await call(`Patient/${patientId}`, {
      method: 'PUT',
      token: adminToken(),
      body: JSON.stringify({ resourceType: 'Patient', id: patientId }),
    });
    expect(asAdmin.status).toBe(404);
    await expect(backend.systemRepo.readResource('QuestionnaireResponse', responseId)).rejects.toThrow();
    await expect(backend.systemRepo.readResource('Patient', patientId)).rejects.toThrow();

    // The super admin (the embedded server's system) may still create by id, as on Medplum.
    const systemId = randomUUID();
    const created = await backend.systemRepo.updateResource<Patient>({ resourceType: 'Patient', id: systemId });
    expect(created.id).toBe(systemId);
  });

  // packages/server/src/fhir/repo.ts, Repository.updateResourceImpl -> validateResource ->
  // validateResourceStrictly: @medplum/core validateResource (strict mode, the default) on every write.
  it('a Patient with birthDate "1984-13-45" is refused 400 and the stored Patient is unchanged', async () => {
    const before = await currentAlice();
    const answer = await call(`Patient/${before.id}`, {
      method: 'PUT',
      body: JSON.stringify({ ...before, birthDate: '1984-13-45' }),
    });
    expectBadRequest(answer, /Invalid date/);
    expect((await currentAlice()).meta?.versionId).toBe(before.meta?.versionId);
  });

  // Same function as above (Repository.updateResourceImpl -> validateResource), reached from
  // createResource: a create is validated like an update.
  it('a QuestionnaireResponse with authored "not-a-date" is refused 400 and nothing is stored', async () => {
    const stored = await aliceResponses();
    const answer = await call('QuestionnaireResponse', {
      method: 'POST',
      body: JSON.stringify(aliceResponse({ authored: 'not-a-date' })),
    });
    expectBadRequest(answer, /Invalid dateTime/);
    expect(await aliceResponses()).toBe(stored);
  });

  // Same function (Repository.updateResourceImpl -> validateResource); in a transaction the failed entry
  // fails the whole Bundle (packages/fhir-router/src/batch.ts, BatchProcessor: a non-OK entry throws).
  it('an Observation with valueString: 1 is refused 400, alone or inside a transaction', async () => {
    const invalid = {
      resourceType: 'Observation',
      status: 'final',
      code: { text: 'parity' },
      valueString: 1,
    } as unknown as Observation;
    expectBadRequest(
      await call('Observation', { method: 'POST', token: adminToken(), body: JSON.stringify(invalid) }),
      /expected string/,
    );
    const family = `Parity-${randomUUID()}`;
    const transaction: Bundle = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        { request: { method: 'POST', url: 'Patient' }, resource: { resourceType: 'Patient', name: [{ family }] } },
        { request: { method: 'POST', url: 'Observation' }, resource: invalid },
      ],
    };
    const answer = await call('', { method: 'POST', token: adminToken(), body: JSON.stringify(transaction) });
    expectBadRequest(answer, /expected string/);
    const written = await backend.systemRepo.searchResources<Patient>({
      resourceType: 'Patient',
      filters: [{ code: 'family', operator: 'eq', value: family }],
    });
    expect(written).toHaveLength(0);
  });

  // packages/fhir-router/src/fhirrouter.ts, parseIfMatchHeader: real Medplum reads the version between
  // quotes and silently IGNORES a header without them, so `If-Match: garbage` writes unconditionally
  // there. The embedded Medplum is stricter (DESIGN.md section 7): a precondition it cannot read is 400,
  // as a header (any method) and as a transaction entry's request.ifMatch.
  it('If-Match: garbage is refused 400 and writes nothing', async () => {
    const before = await currentAlice();
    const answer = await call(`Patient/${before.id}`, {
      method: 'PUT',
      headers: { 'if-match': 'garbage' },
      body: JSON.stringify({ ...before, gender: before.gender === 'other' ? 'unknown' : 'other' }),
    });
    expectBadRequest(answer, /If-Match/);
    const transaction: Bundle = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        {
          request: { method: 'PUT', url: `Patient/${before.id}`, ifMatch: 'garbage' },
          resource: { ...before, gender: before.gender === 'other' ? 'unknown' : 'other' },
        },
      ],
    };
    expectBadRequest(await call('', { method: 'POST', body: JSON.stringify(transaction) }), /If-Match/);
    expect((await currentAlice()).meta?.versionId).toBe(before.meta?.versionId);
    // A quoted version that is not the current one stays a 412, as on Medplum (Repository.updateResourceImpl).
    const stale = await call(`Patient/${before.id}`, {
      method: 'PUT',
      headers: { 'if-match': 'W/"not-the-version"' },
      body: JSON.stringify(before),
    });
    expect(stale.status).toBe(412);
  });

  // packages/server/src/fhir/search.ts, buildSearchFilterExpression: `Unknown search parameter: <code>`
  // (badRequest); addOrderByClause: the same for an unknown `_sort` code.
  it('an unknown search parameter or sort code is 400, not an empty or unsorted result', async () => {
    expectBadRequest(await call('Observation?foo=bar'), /Unknown search parameter: foo/);
    expectBadRequest(await call('Observation?_sort=foo'), /Unknown search parameter: foo/);
    expectBadRequest(await call('QuestionnaireResponse?subject=x&_bogus=1'), /Unknown search parameter: _bogus/);
    // Known parameters, modifiers and result parameters still search.
    const known = await call(
      `QuestionnaireResponse?subject=Patient/${backend.patients.alice.patient.id}&_sort=-_lastUpdated&_count=5&status:not=entered-in-error`,
    );
    expect(known.status).toBe(200);
  });

  // packages/fhir-router/src/fhirrouter.ts, FhirRouter.handleRequest: real Medplum's validator
  // (@medplum/core validateResource) recurses once per level and overflows on such a body; the router
  // turns the RangeError into a 400 through normalizeOperationOutcome. The embedded Medplum refuses a body
  // nested deeper than any FHIR resource needs before it reaches the store.
  it('a body nested 2,500 levels deep is 400 and stores nothing', async () => {
    const stored = await aliceResponses();
    // 1,250 objects each holding an array: 2,500 levels of JSON.
    const nested = `${'{"a":['.repeat(1250)}{"leaf":true}${']}'.repeat(1250)}`;
    const body = JSON.stringify(aliceResponse()).replace(/}$/, `,"item":[${nested}]}`);
    expectBadRequest(await call('QuestionnaireResponse', { method: 'POST', body }), /nested/);
    expect(await aliceResponses()).toBe(stored);
  });

  // packages/server/src/fhir/repo.ts, isResourceWriteable: every writeConstraint is evaluated, on create
  // too, with `%before` bound to an empty value; a constraint comparing with %before then fails.
  it('a writeConstraint that reads %before is evaluated on create, with %before empty', async () => {
    const policy = await backend.admin.createResource<AccessPolicy>({
      resourceType: 'AccessPolicy',
      name: 'status may not change',
      resource: [
        {
          resourceType: 'Observation',
          writeConstraint: [{ language: 'text/fhirpath', expression: '%before.status = %after.status' }],
        },
      ],
    });
    const membership = (await backend.admin.post(`admin/projects/${backend.project.id}/invite`, {
      resourceType: 'Practitioner',
      firstName: 'Constrained',
      lastName: 'Writer',
      externalId: `constrained-${randomUUID()}`,
      sendEmail: false,
      membership: { accessPolicy: { reference: `AccessPolicy/${policy.id}` } },
    })) as ProjectMembership;
    const writer = (await backend.login(membership)).medplum;
    const observation: Observation = { resourceType: 'Observation', status: 'final', code: { text: 'constrained' } };
    await expect(writer.createResource(observation)).rejects.toThrow(/forbidden/i);
    const existing = await backend.admin.createResource(observation);
    await expect(writer.updateResource({ ...existing, code: { text: 'same status' } })).resolves.toMatchObject({
      status: 'final',
    });
    await expect(writer.updateResource({ ...existing, status: 'amended' })).rejects.toThrow(/forbidden/i);
  });
});
