import type { CareTeam, Patient } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { freshPatient } from '../support/patients';

/**
 * Issue 28 item 1: what the service needs of her (an address with a country and a state) is asked for,
 * and an answer that depends on it says what is missing and how to give it, instead of answering less.
 */
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw?.close());

describe('an answer that depends on her address says when it is missing', () => {
  it('the catalog names what is missing and how many offerings wait for it; availability is 409 with the same; once given, both answer in full', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const me = `/v1/fhir/Patient/${patient.patient.id}`;
    const read = async () => (await gw.call('GET', me, { token: patient.token })).body as Patient;
    // As registration leaves her (Medplum's auth/newpatient writes a name only): no address.
    const { address, ...withoutAddress } = await read();
    await gw.backend.systemRepo.updateResource({ ...withoutAddress, meta: { ...withoutAddress.meta } } as Patient);

    const team = (await gw.backend.admin.searchOne('CareTeam', {
      _tag: `${SYSTEMS.provisioning}|visit-team-northwind`,
    })) as CareTeam;
    const window = `start=${new Date(Date.now() + 86_400_000).toISOString().slice(0, 10)}&end=${new Date(Date.now() + 8 * 86_400_000).toISOString().slice(0, 10)}`;
    const availability = () =>
      gw.call('GET', `/v1/availability?careTeam=CareTeam/${team.id}&${window}`, { token: patient.token });

    const partial = await gw.call('GET', '/v1/protocols', { token: patient.token });
    expect(partial.status).toBe(200);
    const { protocols, incomplete } = partial.body as { protocols: unknown[]; incomplete?: Record<string, unknown> };
    expect(incomplete).toEqual({
      missing: ['Patient.address[0].country', 'Patient.address[0].state'],
      withheld: expect.any(Number),
      fix: `PUT ${me}`,
    });
    expect(incomplete?.withheld).toBeGreaterThan(0);
    const refused = await availability();
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({
      error: {
        code: 'invalid_state',
        details: { missing: ['Patient.address[0].country', 'Patient.address[0].state'], fix: `PUT ${me}` },
      },
    });

    expect((await gw.call('PUT', me, { token: patient.token, body: { ...(await read()), address } })).status).toBe(200);
    const full = (await gw.call('GET', '/v1/protocols', { token: patient.token })).body as {
      protocols: unknown[];
      incomplete?: unknown;
    };
    expect(full.incomplete).toBeUndefined();
    expect(full.protocols.length).toBe(protocols.length + (incomplete?.withheld as number));
    const served = await availability();
    expect(served.status).toBe(200);
    // (This backend materialises no Slots: the answer, not its content, is what changed.)
    expect(served.body).toMatchObject({ view: 'slots', slots: [] });
  });
});
