import type { Basic, Consent } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import { direct, fhirPath } from '../support/attack';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { freshPatient } from '../support/patients';

/**
 * `Idempotency-Key` on every POST (src/edge/idempotency.ts): the first answer again for the same request,
 * 422 for another, 409 while the first runs; her keys alone, kept in Medplum (every instance honours them).
 */
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw?.close());

const consentsOf = (patientId: string) =>
  gw.backend.systemRepo.searchResources<Consent>({
    resourceType: 'Consent',
    filters: [{ code: 'patient', operator: 'eq', value: `Patient/${patientId}` }],
  });

async function unmetOf(token: string): Promise<string[]> {
  const requirements = await gw.call('GET', '/v1/agreements/requirements', { token });
  return (requirements.body as { unmet: { url: string; version: string }[] }).unmet.map((u) => `${u.url}|${u.version}`);
}

describe('Idempotency-Key', () => {
  it('the same key and request answer the first answer again (status and body, nothing done twice); another request with it is 422; another patient’s same key is hers alone', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const agreements = await unmetOf(patient.token);
    const accept = (key: string, body: unknown = { agreements }, token = patient.token) =>
      gw.call('POST', '/v1/agreements/acceptances', { token, body, headers: { 'idempotency-key': key } });
    const first = await accept('key-1');
    expect(first.status, first.text).toBe(200);
    const consents = await consentsOf(patient.patient.id);
    const again = await accept('key-1');
    expect(again.status).toBe(first.status);
    expect(again.body).toEqual(first.body);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await consentsOf(patient.patient.id)).toEqual(consents);
    // The key with another request: refused, nothing done.
    const other = await accept('key-1', { agreements: agreements.slice(0, 1) });
    expect(other).toMatchObject({ status: 422, body: { error: { code: 'idempotency_key_reused' } } });
    // Without a key the gateway is as before (a repeat is answered by the workflow: 200, already accepted).
    const plain = await gw.call('POST', '/v1/agreements/acceptances', { token: patient.token, body: { agreements } });
    expect(plain.headers.get('idempotent-replayed')).toBeNull();
    // Another patient's same key is hers: her own first answer.
    const someoneElse = await freshPatient(gw.backend, { tenant: 'southridge', state: 'TX' });
    const hers = await accept('key-1', { agreements: await unmetOf(someoneElse.token) }, someoneElse.token);
    expect([200, 201]).toContain(hers.status);
    expect(hers.headers.get('idempotent-replayed')).toBeNull();
    // A key that is not a key: 400 naming the header.
    const bad = await gw.call('POST', '/v1/agreements/acceptances', {
      token: patient.token,
      body: { agreements },
      headers: { 'idempotency-key': 'x'.repeat(256) },
    });
    expect(bad).toMatchObject({
      status: 400,
      body: { error: { code: 'invalid_request', details: { header: 'Idempotency-Key' } } },
    });
  });

  it('ten concurrent calls with one key: one does the work, the rest are 409 request_in_progress or the first answer; one effect', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const agreements = await unmetOf(patient.token);
    const answers = await Promise.all(
      Array.from({ length: 10 }, () =>
        gw.call('POST', '/v1/agreements/acceptances', {
          token: patient.token,
          body: { agreements },
          headers: { 'idempotency-key': 'together' },
        }),
      ),
    );
    const fresh = answers.filter((a) => a.status === 200 && a.headers.get('idempotent-replayed') === null);
    expect(fresh).toHaveLength(1);
    for (const a of answers.filter((x) => x !== fresh[0])) {
      if (a.status === 409) {
        expect(a.body).toMatchObject({ error: { code: 'request_in_progress' } });
        expect(a.headers.get('retry-after')).toBe('1');
      } else {
        expect(a.headers.get('idempotent-replayed')).toBe('true');
        expect(a.body).toEqual(fresh[0]?.body);
      }
    }
    expect(await consentsOf(patient.patient.id)).toHaveLength(agreements.length);
  });

  it('a call that fails with a server error keeps no answer: the same key runs again', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const agreements = await unmetOf(patient.token);
    gw.backend.db.writer.exec(
      "CREATE TEMP TRIGGER injected_fault BEFORE INSERT ON history WHEN NEW.type = 'Consent' BEGIN SELECT RAISE(ABORT, 'injected storage fault'); END",
    );
    let failed: Awaited<ReturnType<TestGateway['call']>>;
    try {
      failed = await gw.call('POST', '/v1/agreements/acceptances', {
        token: patient.token,
        body: { agreements },
        headers: { 'idempotency-key': 'after-a-fault' },
      });
    } finally {
      gw.backend.db.writer.exec('DROP TRIGGER IF EXISTS injected_fault');
    }
    expect(failed.status).toBeGreaterThanOrEqual(500);
    const retried = await gw.call('POST', '/v1/agreements/acceptances', {
      token: patient.token,
      body: { agreements },
      headers: { 'idempotency-key': 'after-a-fault' },
    });
    expect(retried.status, retried.text).toBe(200);
    expect(retried.headers.get('idempotent-replayed')).toBeNull();
  });

  it('her records are hers on Medplum: another patient and a clinician cannot read or write them', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    await gw.call('POST', '/v1/agreements/acceptances', {
      token: patient.token,
      body: { agreements: await unmetOf(patient.token) },
      headers: { 'idempotency-key': 'mine' },
    });
    const [record] = await gw.backend.systemRepo.searchResources<Basic>({
      resourceType: 'Basic',
      filters: [{ code: 'subject', operator: 'eq', value: `Patient/${patient.patient.id}` }],
    });
    expect(record?.code?.coding?.[0]).toMatchObject({ system: SYSTEMS.idempotency, code: 'request' });
    expect((await direct(gw.backend, patient.token, 'GET', fhirPath(`Basic/${record?.id}`))).status).toBe(200);
    for (const token of [gw.backend.patients.bob.token, gw.backend.clinicians.northwind.token]) {
      expect([403, 404]).toContain((await direct(gw.backend, token, 'GET', fhirPath(`Basic/${record?.id}`))).status);
      const forged = await direct(gw.backend, token, 'POST', fhirPath('Basic'), {
        body: { ...record, id: undefined, meta: undefined },
      });
      expect([403, 404]).toContain(forged.status);
    }
    // Nor may she file one about someone else, or another kind of Basic.
    const aboutBob = await direct(gw.backend, patient.token, 'POST', fhirPath('Basic'), {
      body: {
        ...record,
        id: undefined,
        meta: undefined,
        subject: { reference: `Patient/${gw.backend.patients.bob.patient.id}` },
      },
    });
    expect(aboutBob.status).toBe(403);
    const otherKind = await direct(gw.backend, patient.token, 'POST', fhirPath('Basic'), {
      body: {
        resourceType: 'Basic',
        code: { text: 'anything' },
        subject: { reference: `Patient/${patient.patient.id}` },
      },
    });
    expect(otherKind.status).toBe(403);
  });

  it('past 24 hours a key answers nothing again: the reconciler deletes its record, and the key is new', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const agreements = await unmetOf(patient.token);
    const send = () =>
      gw.call('POST', '/v1/agreements/acceptances', {
        token: patient.token,
        body: { agreements },
        headers: { 'idempotency-key': 'yesterday' },
      });
    expect((await send()).status).toBe(200);
    const records = () =>
      gw.backend.systemRepo.searchResources<Basic>({
        resourceType: 'Basic',
        filters: [{ code: 'subject', operator: 'eq', value: `Patient/${patient.patient.id}` }],
      });
    const [record] = await records();
    // Two days pass for it (its stored time moved back).
    const old = new Date(Date.now() - 48 * 3600_000).toISOString();
    const content = JSON.parse(
      (
        gw.backend.db.reader
          .prepare("SELECT content FROM resource WHERE type = 'Basic' AND id = ?")
          .get(record?.id) as {
          content: string;
        }
      ).content,
    ) as Basic;
    gw.backend.db.writer
      .prepare("UPDATE resource SET last_updated = ?, content = ? WHERE type = 'Basic' AND id = ?")
      .run(old, JSON.stringify({ ...content, meta: { ...content.meta, lastUpdated: old } }), record?.id as string);
    // Expired: the same key is a new call (the workflow answers its own repeat, not a replay).
    const later = await send();
    expect(later.headers.get('idempotent-replayed')).toBeNull();
    // And the reconciler deletes what has expired.
    const [taken] = await records();
    gw.backend.db.writer
      .prepare("UPDATE resource SET last_updated = ?, content = ? WHERE type = 'Basic' AND id = ?")
      .run(old, JSON.stringify({ ...taken, meta: { ...taken?.meta, lastUpdated: old } }), taken?.id as string);
    await gw.backend.cron.tick(new Date(Date.UTC(2026, 10, 25, 12, 10)));
    expect(await records()).toEqual([]);
  });
});
