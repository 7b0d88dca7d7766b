import type { WithId } from '@medplum/core';
import type { CareTeam, PractitionerRole } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { freshPatient } from '../support/patients';

/**
 * The gateway keeps a tenant's visit directory (a team's roles, their licences, their Schedules) a few
 * seconds, as it keeps the published catalog: then an availability call reads her Patient and the Slots
 * only. What decides the answer per patient (her tenant, where she lives) is never taken from the copy.
 */
let gw: TestGateway;
let team: WithId<CareTeam>;
let offsetMs = 0;
const reads: string[] = [];
beforeAll(async () => {
  gw = await startTestGateway(
    (backend) => ({
      clock: () => new Date(Date.now() + offsetMs),
      medplum: {
        baseUrl: backend.baseUrl,
        fetch: (async (input: RequestInfo | URL, init?: RequestInit) => {
          const url = new URL(input instanceof Request ? input.url : String(input));
          // The resource type each call asks for: `Patient` for a read of one, `Slot?` for a search.
          const [, type, id] = /\/fhir\/R4\/([A-Za-z]+)(?:\/([^/?]+))?/.exec(url.pathname) ?? [];
          if (type) {
            reads.push(id ? type : `${type}?`);
          }
          return backend.fetch(input, init);
        }) as typeof fetch,
      },
    }),
    { allSlots: true },
  );
  team = (await gw.backend.admin.searchOne('CareTeam', {
    _tag: `${SYSTEMS.provisioning}|visit-team-northwind`,
  })) as WithId<CareTeam>;
});
afterAll(() => gw?.close());

const window = () => {
  const start = new Date(Date.now() + offsetMs + 86_400_000);
  return { start: start.toISOString(), end: new Date(start.getTime() + 7 * 86_400_000).toISOString() };
};
const practitionersListed = async (token: string) => {
  const answer = await gw.call(
    'GET',
    `/v1/availability?${new URLSearchParams({ careTeam: `CareTeam/${team.id}`, count: '200', ...window() })}`,
    { token },
  );
  expect(answer.status, answer.text).toBe(200);
  return new Set((answer.body as { slots: { practitioner: string }[] }).slots.map((s) => s.practitioner));
};

describe("availability from the tenant's visit directory", () => {
  it('a second call within seconds reads only her Patient and the Slots; a patient elsewhere still gets her own licences', async () => {
    const ca = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const ny = await freshPatient(gw.backend, { tenant: 'northwind', state: 'NY' });
    offsetMs += 60_000;
    reads.length = 0;
    const forCa = await practitionersListed(ca.token);
    expect(reads).toEqual(expect.arrayContaining(['CareTeam', 'PractitionerRole?', 'Schedule?', 'Slot?']));
    reads.length = 0;
    const forNy = await practitionersListed(ny.token);
    expect(reads).toEqual(['Patient', 'Slot?']);
    expect(forCa.size).toBeGreaterThan(0);
    expect(forNy.size).toBeGreaterThan(0);
    expect([...forNy].some((p) => forCa.has(p))).toBe(false);
  });

  it("the other tenant's patient asking for this team is 404 whether or not it is kept", async () => {
    const ca = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const other = await freshPatient(gw.backend, { tenant: 'southridge', state: 'CA' });
    await practitionersListed(ca.token);
    const answer = await gw.call(
      'GET',
      `/v1/availability?${new URLSearchParams({ careTeam: `CareTeam/${team.id}`, ...window() })}`,
      { token: other.token },
    );
    expect(answer.status, answer.text).toBe(404);
  });

  it('a role made inactive is still listed for at most the copy’s 10 s, then no longer', async () => {
    const ca = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    offsetMs += 60_000;
    const before = await practitionersListed(ca.token);
    const [gone] = [...before];
    const role = (await gw.backend.admin.searchOne('PractitionerRole', {
      practitioner: gone,
      active: 'true',
    })) as WithId<PractitionerRole>;
    await gw.backend.admin.updateResource({ ...role, active: false });
    try {
      expect((await practitionersListed(ca.token)).has(gone)).toBe(true);
      offsetMs += 10_001;
      expect((await practitionersListed(ca.token)).has(gone)).toBe(false);
    } finally {
      await gw.backend.admin.updateResource({ ...role, active: true });
    }
  });
});
