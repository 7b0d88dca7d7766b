import { AccessPolicyInteraction, satisfiedAccessPolicy } from '@medplum/core';
import type { AccessPolicy, Binary, Bot, ProjectMembership } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { direct, fhirPath } from '../support/attack';
import { startTestBackend, type TestBackend } from '../support/backend';

/** The Medplum behaviours POST /v1/documents relies on for "readable by her tenant's clinicians only" (and by her through the gateway). */
let backend: TestBackend;
beforeAll(async () => {
  backend = await startTestBackend();
});
afterAll(() => backend?.close());

const upload = (token: string, headers: Record<string, string> = {}) =>
  direct(backend, token, 'POST', fhirPath('Binary'), {
    rawBody: '%PDF-1.7 test',
    headers: { 'content-type': 'application/pdf', accept: 'application/fhir+json', ...headers },
  });

describe('Binary access, as on Medplum', () => {
  it('policy criteria do not apply to a Binary (@medplum/core satisfiedAccessPolicy, packages/core/src/access.ts)', () => {
    const policy: AccessPolicy = {
      resourceType: 'AccessPolicy',
      resource: [{ resourceType: 'Binary', criteria: 'Binary?_id=none', interaction: ['read'] }],
    };
    const binary: Binary = { resourceType: 'Binary', id: 'other', contentType: 'application/pdf' };
    // So the platform's policies write no criteria on Binary: its security context is what binds it.
    expect(satisfiedAccessPolicy(binary, AccessPolicyInteraction.READ, policy)).toBeDefined();
  });

  it('a raw upload takes X-Security-Context as its securityContext (packages/server/src/fhir/binary.ts, uploadBinaryData)', async () => {
    const alice = backend.patients.alice;
    const res = await upload(alice.token, { 'x-security-context': `Patient/${alice.patient.id}` });
    expect(res.status, res.text).toBe(201);
    const stored = await backend.systemRepo.readResource<Binary>('Binary', (res.body as Binary).id as string);
    expect(stored.securityContext?.reference).toBe(`Patient/${alice.patient.id}`);
  });

  it('a patient may upload only with herself as the context (the patient policy writeConstraint)', async () => {
    const { alice, bob } = backend.patients;
    expect((await upload(alice.token)).status).toBe(403);
    expect((await upload(alice.token, { 'x-security-context': `Patient/${bob.patient.id}` })).status).toBe(403);
    expect((await upload(alice.token, { 'x-security-context': `Patient/${alice.patient.id}` })).status).toBe(201);
  });

  it("no patient reads a Binary by id, her own upload included; her tenant's clinicians read hers by id and by version, the other tenant's do not, and no clinician lists a Binary's history or searches Binaries", async () => {
    const { alice, bob } = backend.patients;
    const res = await upload(alice.token, { 'x-security-context': `Patient/${alice.patient.id}` });
    const stored = res.body as Binary;
    const path = fhirPath(`Binary/${stored.id}`);
    for (const token of [alice.token, bob.token]) {
      expect((await direct(backend, token, 'GET', path)).status).toBe(403);
    }
    const northwind = backend.clinicians.northwind.token;
    const mine = await direct(backend, northwind, 'GET', path);
    expect(mine.status).toBe(200);
    expect(mine.text).toBe('%PDF-1.7 test');
    expect((await direct(backend, northwind, 'GET', `${path}/_history/${stored.meta?.versionId}`)).status).toBe(200);
    const southridge = backend.clinicians.southridge.token;
    expect((await direct(backend, southridge, 'GET', path)).status).toBe(404);
    expect((await direct(backend, southridge, 'GET', `${path}/_history/${stored.meta?.versionId}`)).status).toBe(404);
    for (const token of [northwind, southridge]) {
      expect((await direct(backend, token, 'GET', `${path}/_history`)).status).toBe(403);
      expect([400, 403]).toContain((await direct(backend, token, 'GET', fhirPath('Binary'))).status);
    }
  });

  it('a securityContext that names another Binary is read by nobody (packages/server/src/fhir/repo.ts authorizeBinarySecurityContext, 5.1.18)', async () => {
    const alice = backend.patients.alice;
    const first = (await upload(alice.token, { 'x-security-context': `Patient/${alice.patient.id}` })).body as Binary;
    const chained = await backend.systemRepo.createResource<Binary>({
      resourceType: 'Binary',
      meta: { project: backend.project.id },
      contentType: 'application/pdf',
      securityContext: { reference: `Binary/${first.id}` },
    });
    // Her clinician reads the first; the one whose context is that Binary is not found, for her too.
    expect(
      (await direct(backend, backend.clinicians.northwind.token, 'GET', fhirPath(`Binary/${first.id}`))).status,
    ).toBe(200);
    expect(
      (await direct(backend, backend.clinicians.northwind.token, 'GET', fhirPath(`Binary/${chained.id}`))).status,
    ).toBe(404);
  });

  it('for a caller whose policy does read Binaries, a Binary is read only by whoever may read its securityContext (Medplum >= 5.1.18: packages/server/src/fhir/repo.ts authorizeBinarySecurityContext)', async () => {
    const { alice, bob } = backend.patients;
    const res = await upload(alice.token, { 'x-security-context': `Patient/${alice.patient.id}` });
    const path = fhirPath(`Binary/${(res.body as Binary).id}`);
    const readerOf = async (patientId: string) => {
      const policy = await backend.systemRepo.createResource<AccessPolicy>({
        resourceType: 'AccessPolicy',
        meta: { project: backend.project.id },
        resource: [
          { resourceType: 'Binary', interaction: ['read'] },
          { resourceType: 'Patient', criteria: `Patient?_id=${patientId}`, interaction: ['read'] },
        ],
      });
      const membership = await backend.systemRepo.createResource<ProjectMembership>({
        resourceType: 'ProjectMembership',
        meta: { project: backend.project.id },
        project: { reference: `Project/${backend.project.id}` },
        user: { reference: 'ClientApplication/binary-reader' },
        profile: { reference: 'ClientApplication/binary-reader' },
        accessPolicy: { reference: `AccessPolicy/${policy.id}` },
      });
      return (await backend.login(membership)).token;
    };
    expect((await direct(backend, await readerOf(alice.patient.id), 'GET', path)).status).toBe(200);
    expect((await direct(backend, await readerOf(bob.patient.id), 'GET', path)).status).toBe(404);
  });

  it("so every bot's code, deployed and source (Medplum 5.1's bot creation makes a template source Binary with no context: packages/server/src/fhir/operations/botinit.ts), is sealed with the Project as its context, which no patient or clinician reads", async () => {
    const bots = await backend.systemRepo.searchResources<Bot>({ resourceType: 'Bot' });
    expect(bots.length).toBeGreaterThan(10);
    for (const bot of bots) {
      for (const code of [bot.executableCode?.url, bot.sourceCode?.url] as string[]) {
        expect(code, bot.name).toMatch(/^Binary\//);
        const binary = await backend.systemRepo.readResource<Binary>('Binary', code.split('/')[1]);
        expect(binary.securityContext?.reference, `${bot.name} ${code}`).toBe(`Project/${backend.project.id}`);
      }
    }
    const [bot] = bots;
    for (const code of [bot.executableCode?.url, bot.sourceCode?.url] as string[]) {
      for (const token of [
        backend.patients.alice.token,
        backend.clinicians.northwind.token,
        backend.clinicians.southridge.token,
      ]) {
        expect((await direct(backend, token, 'GET', fhirPath(code))).status).toBeGreaterThanOrEqual(400);
      }
    }
  });
});
