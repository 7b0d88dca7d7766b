import type { Bundle, Consent } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../support/gateway';

/**
 * With the store in its 409-on-conflict mode (`overlapConflictMs`: a conditional create that finds what
 * another transaction created moments ago is answered 409, as Postgres-backed Medplum can answer a
 * SERIALIZABLE transaction that overlapped with its creator, packages/server/src/fhir/repo.ts), concurrent
 * identical workflow calls still converge: the bots re-read and replay (bots/lib/races.ts).
 */
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({}, { overlapConflictMs: 60_000 });
});
afterAll(() => gw?.close());

const marker = (value: string): Bundle => ({
  resourceType: 'Bundle',
  type: 'transaction',
  entry: [
    {
      resource: {
        resourceType: 'Observation',
        status: 'final',
        code: { text: 'race marker' },
        identifier: [{ system: 'urn:test:race', value }],
        subject: { reference: `Patient/${gw.backend.patients.dave.patient.id}` },
      },
      request: { method: 'POST', url: 'Observation', ifNoneExist: `identifier=urn:test:race|${value}` },
    },
  ],
});

describe('concurrency in the 409-on-conflict mode', () => {
  it('a conditional transaction that finds what another just created is answered 409', async () => {
    await expect(gw.backend.admin.executeBatch(marker('a'))).resolves.toMatchObject({ type: 'transaction-response' });
    await expect(gw.backend.admin.executeBatch(marker('a'))).rejects.toThrow(/conflict/i);
  });

  it('20 concurrent identical acceptances: every call 200 with the same acceptance, one Consent per agreement', async () => {
    const carol = gw.backend.patients.carol;
    const requirements = await gw.call('GET', '/v1/agreements/requirements', { token: carol.token });
    const unmet = (requirements.body as { unmet: { url: string; version: string }[] }).unmet;
    expect(unmet.length).toBeGreaterThan(0);
    const agreements = unmet.map((a) => `${a.url}|${a.version}`);
    const calls = await Promise.all(
      Array.from({ length: 20 }, () =>
        gw.call('POST', '/v1/agreements/acceptances', {
          token: carol.token,
          body: { agreements },
          headers: { 'content-type': 'application/json' },
        }),
      ),
    );
    expect(calls.map((c) => c.status)).toEqual(Array(20).fill(200));
    const consents = await gw.backend.systemRepo.searchResources<Consent>({
      resourceType: 'Consent',
      filters: [{ code: 'patient', operator: 'eq', value: `Patient/${carol.patient.id}` }],
    });
    expect(consents).toHaveLength(unmet.length);
    const answered = new Set(
      calls.flatMap((c) => (c.body as { acceptances: { consent: string }[] }).acceptances.map((a) => a.consent)),
    );
    expect([...answered].sort()).toEqual(consents.map((c) => `Consent/${c.id}`).sort());
  });
});
