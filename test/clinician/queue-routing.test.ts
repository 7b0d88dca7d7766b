import type { WithId } from '@medplum/core';
import type { CareTeam, Organization } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queueOfTask } from '../../bots/lib/queues';
import { SYSTEMS } from '../../contracts/systems';
import type { Clinician } from '../../src/clinician';
import { demoClinician } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { assigned } from '../support/spine';

/**
 * Work routed by its kind (a clinic file's queues, docs/clinic.md): with a queue of its tenant that
 * receives `select-treatment`, the selection the eligibility bot issues waits there, while the intake
 * review stays in the default queue. Found on a real Medplum: the bot's prefetch asked for the default
 * queue, and the selection landed in intake.
 */
let gw: TestGateway;
let clinician: Clinician;
let treatment: WithId<CareTeam>;

beforeAll(async () => {
  gw = await startTestGateway();
  clinician = await demoClinician(gw.backend, 'northwind');
  const org = (await gw.backend.admin.searchOne('Organization', {
    identifier: `${SYSTEMS.tenant}|northwind`,
  })) as WithId<Organization>;
  treatment = await gw.backend.admin.createResource<CareTeam>(
    {
      resourceType: 'CareTeam',
      meta: { accounts: [{ reference: `Organization/${org.id}` }] },
      status: 'active',
      name: 'Northwind treatment',
      category: [
        { coding: [{ system: SYSTEMS.careQueue, code: 'treatment' }] },
        { coding: [{ system: SYSTEMS.queueWork, code: 'select-treatment' }] },
      ],
      managingOrganization: [{ reference: `Organization/${org.id}` }],
    },
    { headers: { 'X-Medplum': 'extended' } },
  );
});

afterAll(() => gw?.close());

describe('work routed by its kind', () => {
  it('the selection waits in the queue that receives select-treatment; the review stayed in the default queue', async () => {
    const { review, selection } = await assigned(gw, clinician);
    expect(queueOfTask(selection)).toBe(`CareTeam/${treatment.id}`);
    expect(queueOfTask(review)).not.toBe(`CareTeam/${treatment.id}`);
    expect(queueOfTask(review)).toMatch(/^CareTeam\//);
  });
});
