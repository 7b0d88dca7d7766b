import { accessLog } from './access-log';
import { asyncVisitReviewed } from './async-review';
import { attackKit, signInDemoPeople } from './attack-kit';
import { botsAndBotOnlyWrites } from './bots';
import type { AttackContext } from './common';
import { conditionRevised } from './condition-revised';
import { edgeKeyCheck } from './edge-key';
import { eventFeed } from './events';
import { evidence } from './evidence';
import { mitigationOnly } from './findings';
import { idempotencyKeys } from './idempotency';
import { licensureAtCare } from './licensure';
import { messagesBothWays } from './messages';
import { orderTasks } from './orders';
import { tenantOrganizations } from './organizations';
import { addressNeeded, patientBounds } from './patient-bounds';
import { queueWork } from './queues';
import { recordReads } from './record-reads';
import { terminology } from './terminology';
import { visitCompleted } from './visit-completed';
import { whomSheBooksWith } from './visit-team';
import { webhookDeliveries } from './webhooks';
import { workForms } from './work-forms';

/** Every family of checks after the journey, in order, with the demo people signed in once. */
export async function attacks(ctx: AttackContext): Promise<void> {
  const people = await signInDemoPeople(ctx);
  const kit = attackKit(ctx, people);
  await recordReads(ctx, kit);
  await mitigationOnly(ctx, kit);
  const { queueRef, northwindRef } = await queueWork(ctx, kit);

  // Clinician work as forms: who answers an intake review's form decides what eligibility does.
  await workForms(ctx, people, queueRef);

  await terminology(ctx, kit);
  await tenantOrganizations(ctx, kit, northwindRef);
  await botsAndBotOnlyWrites(ctx, kit);

  await patientBounds(ctx, people);

  await whomSheBooksWith(ctx, kit, queueRef);

  await addressNeeded(ctx);
  await orderTasks(ctx, people);
  await evidence(ctx, people);
  await licensureAtCare(ctx);
  await conditionRevised(ctx, people, queueRef);
  await asyncVisitReviewed(ctx, people, queueRef);
  await visitCompleted(ctx, people);
  await idempotencyKeys(ctx, people);
  await eventFeed(ctx, people);
  await messagesBothWays(ctx, kit);
  await webhookDeliveries(ctx);
  await accessLog(ctx, people);
  await edgeKeyCheck(ctx, people);
}
