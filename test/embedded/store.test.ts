import { makeSimpleRequest } from '@medplum/fhir-router';
import type { Bundle, Observation, OperationOutcome, Patient } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import { createTestStore } from '../support/store';

const patientBody = (family: string): Patient => ({ resourceType: 'Patient', name: [{ family }] });

describe('SQLite FHIR repository through Medplum FhirRouter', () => {
  it('rolls back every entry of a transaction whose second entry fails', async () => {
    const { repo, router, commits } = createTestStore();
    const bundle: Bundle = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        { request: { method: 'POST', url: 'Patient' }, resource: patientBody('Rollback') },
        // Second entry fails: updating a resource that does not exist with If-Match.
        {
          request: { method: 'PUT', url: 'Observation/does-not-exist', ifMatch: 'W/"1"' },
          resource: { resourceType: 'Observation', id: 'does-not-exist', status: 'final', code: { text: 'x' } },
        },
      ],
    };
    const request = { ...makeSimpleRequest('POST', '', bundle), config: { transactions: true } };
    const [outcome] = await router.handleRequest(request, repo);
    expect(outcome.issue?.[0]?.severity).toBe('error');
    const found = await repo.searchResources({
      resourceType: 'Patient',
      filters: [{ code: 'family', operator: 'eq', value: 'Rollback' }],
    });
    expect(found).toHaveLength(0);
    expect(commits).toHaveLength(0);
  });

  it('commits every entry of a successful transaction together, resolving urn:uuid references', async () => {
    const { repo, router, commits } = createTestStore();
    const bundle: Bundle = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        {
          fullUrl: 'urn:uuid:11111111-1111-4111-8111-111111111111',
          request: { method: 'POST', url: 'Patient' },
          resource: patientBody('Tx'),
        },
        {
          request: { method: 'POST', url: 'Observation' },
          resource: {
            resourceType: 'Observation',
            status: 'final',
            code: { text: 'w' },
            subject: { reference: 'urn:uuid:11111111-1111-4111-8111-111111111111' },
          },
        },
      ],
    };
    const [outcome, result] = await router.handleRequest(
      { ...makeSimpleRequest('POST', '', bundle), config: { transactions: true } },
      repo,
    );
    expect(outcome.id).toBe('ok');
    const entries = (result as Bundle).entry ?? [];
    const patientId = (entries[0].resource as Patient).id;
    const observation = entries[1].resource as Observation;
    expect(observation.subject?.reference).toBe(`Patient/${patientId}`);
    expect(observation.meta?.compartment).toContainEqual({ reference: `Patient/${patientId}` });
    expect(commits).toHaveLength(1);
    expect(commits[0].map((c) => c.resource.resourceType).sort()).toEqual(['Observation', 'Patient']);
  });

  it('refuses an update whose If-Match is not the current version, and keeps the stored version', async () => {
    const { repo, router } = createTestStore();
    const created = await repo.createResource(patientBody('Match'));
    const updated = await repo.updateResource({ ...created, gender: 'female' }, { ifMatch: created.meta?.versionId });
    expect(updated.meta?.versionId).not.toBe(created.meta?.versionId);

    const request = makeSimpleRequest('PUT', `Patient/${created.id}`, { ...created, gender: 'male' });
    request.headers = { 'if-match': `W/"${created.meta?.versionId}"` };
    const [outcome] = await router.handleRequest(request, repo);
    expect((outcome as OperationOutcome).issue?.[0]?.code).toBe('processing');
    expect(outcome.id).toBe('precondition-failed');
    const current = await repo.readResource<Patient>('Patient', created.id);
    expect(current.gender).toBe('female');
    const history = await repo.readHistory('Patient', created.id);
    expect(history.entry).toHaveLength(2);
    const first = await repo.readVersion<Patient>('Patient', created.id, created.meta?.versionId as string);
    expect(first.gender).toBeUndefined();
  });

  it('pages with _count/_offset and next links, and reports _total', async () => {
    const { repo, router } = createTestStore();
    for (let i = 0; i < 5; i++) {
      await repo.createResource(patientBody(`Page${i}`));
    }
    const [, first] = await router.handleRequest(
      makeSimpleRequest('GET', 'Patient?_count=2&_total=accurate&_sort=family'),
      repo,
    );
    const page1 = first as Bundle<Patient>;
    expect(page1.total).toBe(5);
    expect(page1.entry?.map((e) => e.resource?.name?.[0].family)).toEqual(['Page0', 'Page1']);
    const next = page1.link?.find((l) => l.relation === 'next')?.url as string;
    expect(next).toContain('_offset=2');
    const nextPath = next.replace('http://embedded.test/fhir/R4/', '');
    const [, second] = await router.handleRequest(makeSimpleRequest('GET', nextPath), repo);
    expect((second as Bundle<Patient>).entry?.map((e) => e.resource?.name?.[0].family)).toEqual(['Page2', 'Page3']);
    const [, last] = await router.handleRequest(
      makeSimpleRequest('GET', 'Patient?_count=2&_offset=4&_sort=family'),
      repo,
    );
    expect((last as Bundle).link?.some((l) => l.relation === 'next')).toBe(false);
  });

  it('adds _include targets and _revinclude sources to search results', async () => {
    const { repo, router } = createTestStore();
    const patient = await repo.createResource(patientBody('Include'));
    await repo.createResource<Observation>({
      resourceType: 'Observation',
      status: 'final',
      code: { text: 'a' },
      subject: { reference: `Patient/${patient.id}` },
    });
    const [, included] = await router.handleRequest(
      makeSimpleRequest('GET', `Observation?subject=Patient/${patient.id}&_include=Observation:subject`),
      repo,
    );
    const types = (included as Bundle).entry?.map((e) => `${e.resource?.resourceType}:${e.search?.mode}`);
    expect(types).toEqual(['Observation:match', 'Patient:include']);
    const [, rev] = await router.handleRequest(
      makeSimpleRequest('GET', `Patient?_id=${patient.id}&_revinclude=Observation:subject`),
      repo,
    );
    expect((rev as Bundle).entry?.map((e) => e.resource?.resourceType)).toEqual(['Patient', 'Observation']);
  });

  it('creates conditionally with If-None-Exist, and deletes with history kept', async () => {
    const { repo, router } = createTestStore();
    const body: Patient = { ...patientBody('Cond'), identifier: [{ system: 'urn:test', value: 'p1' }] };
    const request = () => {
      const r = makeSimpleRequest('POST', 'Patient', body);
      r.headers = { 'if-none-exist': 'identifier=urn:test|p1' };
      return r;
    };
    const [o1, r1] = await router.handleRequest(request(), repo);
    const [o2, r2] = await router.handleRequest(request(), repo);
    expect(o1.id).toBe('created');
    expect(o2.id).toBe('ok');
    expect((r2 as Patient).id).toBe((r1 as Patient).id);
    const id = (r1 as Patient).id as string;
    await repo.deleteResource('Patient', id);
    await expect(repo.readResource('Patient', id)).rejects.toThrow(/deleted|gone/i);
    const [, history] = await router.handleRequest(makeSimpleRequest('GET', `Patient/${id}/_history`), repo);
    const versions = (history as Bundle).entry ?? [];
    expect(versions).toHaveLength(2);
    expect(versions[0].response?.status).toBe('410');
    expect((versions[1].resource as Patient).name?.[0].family).toBe('Cond');
  });
});
