import type { AuditEvent } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clinician } from '../../src/clinician';
import { demoClinician } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { reviewedIntake } from '../support/spine';

/**
 * A bot run's AuditEvent names what Medplum's names (packages/server/src/util/auditevent.ts
 * createAuditEventEntities(bot, input, subscription)): the Bot, the resource delivered to it, and the
 * Subscription that delivered it, so `AuditEvent?entity=<resource>` finds the runs a write woke.
 */
let gw: TestGateway;
let clinician: Clinician;
beforeAll(async () => {
  gw = await startTestGateway();
  clinician = await demoClinician(gw.backend, 'northwind');
});
afterAll(() => gw?.close());

describe('a bot run’s audit', () => {
  it('names the Bot, the delivered resource and the Subscription, with Medplum’s roles', async () => {
    const { review } = await reviewedIntake(gw, clinician);
    await clinician.assignCondition(review.id, 'I10');
    await gw.backend.subscriptions.idle();
    const runs = await gw.backend.systemRepo.searchResources<AuditEvent>({
      resourceType: 'AuditEvent',
      filters: [{ code: 'entity', operator: 'eq', value: `Task/${review.id}` }],
    });
    expect(runs.length).toBeGreaterThan(0);
    const [run] = runs;
    expect(run.entity?.map((e) => [e.what?.reference?.split('/')[0], e.role?.code])).toEqual([
      ['Bot', '4'],
      ['Task', '4'],
      ['Subscription', '9'],
    ]);
  });
});
