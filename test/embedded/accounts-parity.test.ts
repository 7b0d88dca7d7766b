import { MedplumClient } from '@medplum/core';
import type { Bundle, Meta, Observation, QuestionnaireResponse } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WORK_FORMS } from '../../contracts/work-forms';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * packages/server/src/fhir/repo.ts (getAccounts): Medplum honours `meta.accounts` on a write only in
 * extended mode (`X-Medplum: extended`) by a project admin; otherwise it silently recomputes them (the
 * policy's compartment, the accounts of the patients the resource names). MedplumClient asks for extended
 * mode on every request unless built with `extendedMode: false`.
 */
let backend: TestBackend;
let northwind: string;
let southridge: string;

beforeAll(async () => {
  backend = await startTestBackend();
  northwind = backend.patients.alice.patient.managingOrganization?.reference as string;
  southridge = backend.patients.carol.patient.managingOrganization?.reference as string;
});
afterAll(() => backend?.close());

const adminClient = (extended: boolean) => {
  const client = new MedplumClient({
    baseUrl: backend.baseUrl,
    fetch: backend.fetch,
    cacheTime: 0,
    // MedplumClient sends `X-Medplum: extended` unless told not to.
    extendedMode: extended,
  });
  client.setAccessToken(backend.admin.getAccessToken() as string);
  return client;
};

/** An Observation of alice's (northwind) that claims to be southridge's too. */
const claiming = (): Observation => ({
  resourceType: 'Observation',
  status: 'final',
  code: { text: 'accounts parity' },
  subject: { reference: `Patient/${backend.patients.alice.patient.id}` },
  meta: { accounts: [{ reference: southridge }] },
});

const accountsOf = (o: Observation) => (o.meta?.accounts ?? []).map((a) => a.reference).sort();

describe('meta.accounts only in extended mode, only for an admin', () => {
  it('a project admin without extended mode: the accounts sent are ignored (the patient’s tenant is inherited)', async () => {
    const created = await adminClient(false).createResource(claiming());
    // Shown without them (no extended mode): read back in extended mode.
    expect(created.meta?.accounts).toBeUndefined();
    const stored = await adminClient(true).readResource('Observation', created.id as string);
    expect(accountsOf(stored), JSON.stringify(stored.meta)).toEqual([northwind]);
  });

  it('a project admin in extended mode: the accounts sent are kept', async () => {
    const created = await adminClient(true).createResource(claiming());
    expect(accountsOf(created)).toContain(southridge);
  });

  it('a patient in extended mode: ignored, a patient is no admin', async () => {
    const patient = new MedplumClient({ baseUrl: backend.baseUrl, fetch: backend.fetch, cacheTime: 0 });
    patient.setAccessToken(backend.patients.alice.token);
    const answer = await patient
      .createResource({
        resourceType: 'QuestionnaireResponse',
        status: 'completed',
        subject: { reference: `Patient/${backend.patients.alice.patient.id}` },
        meta: { accounts: [{ reference: southridge }] },
      })
      .catch(() => undefined);
    if (answer) {
      expect(accountsOf(answer as unknown as Observation)).toEqual([northwind]);
    }
  });
});

/**
 * packages/server/src/fhir/repo.ts (removeHiddenFields, getAccounts), seen on Medplum 5.1.29: a request
 * without `X-Medplum: extended` is shown no author, project, accounts or compartments; what such a client
 * writes back then carries no accounts, and a resource naming no patient keeps none on an update (the
 * writer's compartment is applied on create only): out of her tenant, so her policy refuses it.
 */
describe('server meta only in extended mode', () => {
  type Answer = Partial<QuestionnaireResponse> & Pick<Bundle, 'entry'> & { meta?: Meta };
  const raw = async (token: string, method: string, path: string, body?: unknown, extended = false) => {
    const res = await backend.fetch(`${backend.baseUrl}fhir/R4/${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/fhir+json',
        ...(extended ? { 'x-medplum': 'extended' } : {}),
      },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: res.status, body: (await res.json()) as Answer };
  };

  it('shows no server meta without it, in a read and a search; all of it with it', async () => {
    const { token } = backend.patients.alice;
    const id = backend.patients.alice.patient.id as string;
    const read = await raw(token, 'GET', `Patient/${id}`);
    expect(read.status).toBe(200);
    const serverMeta = (meta: object | undefined) =>
      Object.keys(meta ?? {}).filter((k) => ['author', 'project', 'account', 'accounts', 'compartment'].includes(k));
    expect(read.body.meta?.versionId).toBeDefined();
    expect(serverMeta(read.body.meta)).toEqual([]);
    const found = await raw(token, 'GET', `Patient?_id=${id}`);
    expect(found.body.entry).toHaveLength(1);
    expect(serverMeta(found.body.entry?.[0]?.resource?.meta)).toEqual([]);
    const extended = await raw(token, 'GET', `Patient/${id}`, undefined, true);
    expect(extended.body.meta?.accounts?.map((a) => a.reference)).toEqual([northwind]);
    expect(extended.body.meta?.author).toBeDefined();
  });

  it('a clinician’s own draft about nobody, read and written back without it, is refused; with it, kept', async () => {
    const { token, practitioner } = backend.clinicians.northwind;
    const draft = {
      resourceType: 'QuestionnaireResponse',
      questionnaire: WORK_FORMS.assignCondition,
      status: 'in-progress',
      source: { reference: `Practitioner/${practitioner.id}` },
    };
    const created = await raw(token, 'POST', 'QuestionnaireResponse', draft);
    expect(created.status).toBe(201);
    expect(created.body.meta?.accounts).toBeUndefined();
    const id = created.body.id as string;
    const plain = await raw(token, 'GET', `QuestionnaireResponse/${id}`);
    const answered = { ...plain.body, item: [{ linkId: 'note', answer: [{ valueString: 'x' }] }] };
    expect((await raw(token, 'PUT', `QuestionnaireResponse/${id}`, answered)).status).toBe(403);
    const full = await raw(token, 'GET', `QuestionnaireResponse/${id}`, undefined, true);
    const kept = await raw(token, 'PUT', `QuestionnaireResponse/${id}`, { ...full.body, item: answered.item }, true);
    expect(kept.status).toBe(200);
    expect(kept.body.meta?.accounts?.map((a) => a.reference)).toEqual([northwind]);
  });
});
