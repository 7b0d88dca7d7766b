import type { BotEvent, MedplumClient } from '@medplum/core';
import type {
  Bundle,
  BundleEntry,
  Consent,
  MedicationRequest,
  Patient,
  RequestGroup,
  ServiceRequest,
  Task,
} from '@medplum/fhirtypes';
import { EXTENSIONS, type FulfilmentMethod, SYSTEMS } from '../contracts/systems';
import { absent } from './lib/absent';
import { activeAcceptances, contextNotFound, freshCatalog, requireAgreements } from './lib/agreements';
import { payloadDigest } from './lib/digest';
import { completionDigest, orderDecisionsTask, type PlacedItem, type PlacedOrder, placedOrder } from './lib/finished';
import { allowedMethods } from './lib/fulfilment';
import { versioned } from './lib/queues';
import { lostRace } from './lib/races';
import { ahead, readingOnce } from './lib/reads';
import { type BotResult, fail } from './lib/result';
import { patientWorkflow } from './lib/trust';

type Item = (MedicationRequest | ServiceRequest) & { id: string };
type Decision =
  | { item: string; decision: 'accept'; fulfilment: FulfilmentMethod }
  | { item: string; decision: 'decline' };

export type DecideOrderResult = BotResult<PlacedOrder>;

/**
 * POST /v1/orders/{id}/decisions (JOURNEY G): the patient places the order of a treatment she accepted.
 * Checks first, in this order: the order is hers (else 404); her order-decisions task for it exists and
 * her active treatment Consent pins this very version of it (else 409, `use` the offer task); a
 * completed task replays or conflicts; the gate; every item exactly once, required items accepted (400);
 * each fulfilment method allowed by her tenant's policy for her country and the item's kind (422).
 * Then ONE transaction, every write under If-Match: the task completed (the anchor), each accepted item
 * proposal -> order in place with its method, each declined one cancelled, the order proposal -> order.
 */
export async function handler(bare: MedplumClient, event: BotEvent): Promise<DecideOrderResult> {
  const medplum = readingOnce(bare);
  const start = await patientWorkflow(medplum, event, 'decide-order');
  if (!start.ok) {
    return start;
  }
  const { patientId } = start.caller;
  const { order: orderId, items: decisions } = start.input;
  const own = `Patient/${patientId}`;
  const digest = payloadDigest({ items: decisions });
  for (let attempt = 0; ; attempt++) {
    const tasking = askWhatAnOrderReads(medplum, patientId, orderId);
    const group = (await medplum.readResource('RequestGroup', orderId).catch(absent)) as
      | (RequestGroup & { id: string })
      | undefined;
    if (!group || group.subject?.reference !== own) {
      return contextNotFound();
    }
    const [task, consent] = await Promise.all([tasking, treatmentConsent(medplum, group, patientId)]);
    if (task?.status === 'completed') {
      return completionDigest(task) === digest
        ? placedOrder(task)
        : fail(409, 'invalid_state', 'This order is already placed, with other decisions', { state: 'completed' });
    }
    if (task?.status !== 'ready' || !consent || group.intent !== 'proposal' || group.status !== 'active') {
      const meanwhile = task?.status === 'ready' ? await placedMeanwhile(medplum, task, digest) : undefined;
      if (meanwhile) {
        return meanwhile;
      }
      const offer = await offerTask(medplum, group, own);
      return fail(409, 'invalid_state', 'This order can be placed once its offer is accepted', {
        state: group.status ?? 'unknown',
        ...(offer ? { use: `POST /v1/tasks/${offer.id}/complete` } : {}),
      });
    }
    const itemsReading = ahead(itemsOf(medplum, group, own, consent));
    const gate = await requireAgreements(medplum, patientId, { task: `Task/${task.id}` });
    if (gate) {
      return gate;
    }
    const items = await itemsReading;
    if (!items) {
      const meanwhile = await placedMeanwhile(medplum, task, digest);
      if (meanwhile) {
        return meanwhile;
      }
      return fail(409, 'invalid_state', 'An item of this order changed since it was offered', { state: 'changed' });
    }
    const problem = coverage(group, items, decisions);
    if (problem) {
      return problem;
    }
    const patient = (await medplum.readResource('Patient', patientId)) as Patient;
    const allowed = await allowedMethods(medplum, patient, items);
    const refused = decisions.flatMap((d) =>
      d.decision === 'accept' && !(allowed[d.item] ?? []).includes(d.fulfilment)
        ? [{ item: d.item, fulfilment: d.fulfilment, allowed: allowed[d.item] ?? [] }]
        : [],
    );
    if (refused.length > 0) {
      return fail(422, 'invalid_fulfilment', 'These fulfilment methods are not available to you for these items', {
        allowed,
        issues: refused,
      });
    }
    try {
      const response = await medplum.executeBatch(placement({ group, items, task, decisions, digest }));
      return placedOrder(response.entry?.[0]?.resource as Task);
    } catch (err) {
      // A concurrent call placed it (the same decisions: its answer is ours) or changed it: decide again, once.
      if (!lostRace(err)) {
        throw err;
      }
      if (attempt > 0) {
        return fail(409, 'invalid_state', 'This order changed while it was being placed; try again', {
          state: 'conflict',
        });
      }
    }
  }
}

/**
 * What placing an order reads, asked with the order (fewer round trips), each believed in its turn: her
 * Patient and her tenant's policy, the gate's reads, her task and consent for it. Her task, in hand.
 */
function askWhatAnOrderReads(medplum: MedplumClient, patientId: string, orderId: string): Promise<Task | undefined> {
  const own = `Patient/${patientId}`;
  ahead(
    medplum
      .readResource('Patient', patientId)
      .then((p) => p.managingOrganization && medplum.readReference(p.managingOrganization)),
  );
  ahead(activeAcceptances(medplum, patientId));
  ahead(freshCatalog(medplum).published());
  const named = { resourceType: 'RequestGroup', id: orderId } as RequestGroup;
  const tasking = ahead(orderTask(medplum, named, own));
  ahead(consentsFor(medplum, named, patientId));
  return tasking;
}

/**
 * The order placed by a concurrent identical call while this one read it (its reads can straddle that
 * call's transaction: the task still ready, the order or an item already changed): that call's answer,
 * as a replay. Read fresh, past this run's reads.
 */
async function placedMeanwhile(
  medplum: MedplumClient,
  task: Task,
  digest: string,
): Promise<DecideOrderResult | undefined> {
  const now = (await medplum.readResource('Task', task.id as string, { cache: 'no-cache' }).catch(absent)) as
    | Task
    | undefined;
  return now?.status === 'completed' && completionDigest(now) === digest ? placedOrder(now) : undefined;
}

/** Her order-decisions task for this order (bots/lib/finished.ts), and what the gate reads of it asked ahead. */
function orderTask(medplum: MedplumClient, group: RequestGroup, own: string): Promise<Task | undefined> {
  return orderDecisionsTask(medplum, group.id as string, own, {
    onMine: (task) => {
      // What the gate reads of it (the task by id, its plan) goes out with the check of its history.
      ahead(medplum.readResource('Task', task.id as string));
      const plan = task.basedOn?.find((b) => b.reference?.startsWith('CarePlan/'));
      if (plan) {
        ahead(medplum.readReference(plan));
      }
    },
  });
}

async function offerTask(medplum: MedplumClient, group: RequestGroup, own: string): Promise<Task | undefined> {
  const tasks = await medplum.searchResources(
    'Task',
    { code: `${SYSTEMS.taskKind}|treatment-offer`, focus: `RequestGroup/${group.id}`, subject: own },
    { cache: 'no-cache' },
  );
  return tasks.find((t) => t.for?.reference === own);
}

/** Her active treatment Consent to exactly this version of the order (what she accepted). */
async function treatmentConsent(
  medplum: MedplumClient,
  group: RequestGroup,
  patientId: string,
): Promise<Consent | undefined> {
  const consents = await consentsFor(medplum, group, patientId);
  const pinned = versioned(group).reference;
  return consents.find(
    (c) =>
      c.patient?.reference === `Patient/${patientId}` &&
      c.scope?.coding?.some((s) => s.code === 'treatment') &&
      c.provision?.data?.some((d) => d.reference.reference === pinned),
  );
}

/** Her active consents naming this order (fresh: a run's reads are forgotten at each of its writes). */
const consentsFor = (medplum: MedplumClient, group: RequestGroup, patientId: string) =>
  medplum.searchResources('Consent', {
    patient: `Patient/${patientId}`,
    identifier: `${SYSTEMS.offer}|RequestGroup/${group.id}`,
    status: 'active',
  });

/**
 * The order's items as they stand: each hers, still a proposal, and exactly the version her treatment
 * Consent pins (what she accepted is what is placed); else undefined.
 */
async function itemsOf(
  medplum: MedplumClient,
  group: RequestGroup,
  own: string,
  consent: Consent,
): Promise<Item[] | undefined> {
  const pinned = new Set((consent.provision?.data ?? []).map((d) => d.reference.reference));
  const items: Item[] = [];
  const read = await Promise.all(
    (group.action ?? []).map((action) => {
      const [type, id] = (action.resource?.reference ?? '').split('/');
      return (type === 'MedicationRequest' || type === 'ServiceRequest') && id
        ? (medplum.readResource(type, id).catch(absent) as Promise<Item | undefined>)
        : undefined;
    }),
  );
  for (const item of read) {
    if (
      !item ||
      item.subject?.reference !== own ||
      item.intent !== 'proposal' ||
      item.status !== 'active' ||
      !pinned.has(versioned(item).reference)
    ) {
      return undefined;
    }
    items.push(item);
  }
  return items;
}

/** Every item decided exactly once, nothing else, and what the treatment requires accepted. */
function coverage(group: RequestGroup, items: Item[], decisions: Decision[]): ReturnType<typeof fail> | undefined {
  const required = new Set(
    (group.action ?? []).filter((a) => a.requiredBehavior === 'must').map((a) => a.resource?.reference),
  );
  const known = new Set(items.map((i) => `${i.resourceType}/${i.id}`));
  const issues: { path: string; message: string }[] = [];
  const seen = new Set<string>();
  decisions.forEach((d, i) => {
    if (!known.has(d.item)) {
      issues.push({ path: `items.${i}.item`, message: `${d.item} is not an item of this order` });
    } else if (seen.has(d.item)) {
      issues.push({ path: `items.${i}.item`, message: `${d.item} is decided twice` });
    } else if (d.decision === 'decline' && required.has(d.item)) {
      issues.push({
        path: `items.${i}.decision`,
        message: `${d.item} is required by the treatment and cannot be declined`,
      });
    }
    seen.add(d.item);
  });
  for (const item of known) {
    if (!seen.has(item)) {
      issues.push({ path: 'items', message: `${item} is not decided` });
    }
  }
  return issues.length > 0
    ? fail(400, 'invalid_request', 'Decide every item of this order once', { issues })
    : undefined;
}

function placement({
  group,
  items,
  task,
  decisions,
  digest,
}: {
  group: RequestGroup & { id: string };
  items: Item[];
  task: Task;
  decisions: Decision[];
  digest: string;
}): Bundle {
  const now = new Date().toISOString();
  const byItem = new Map(decisions.map((d) => [d.item, d]));
  const results: PlacedItem[] = items.map((item) => {
    const d = byItem.get(`${item.resourceType}/${item.id}`) as Decision;
    return d.decision === 'accept'
      ? { item: d.item, decision: 'accept', intent: 'order', status: 'active', fulfilment: d.fulfilment }
      : { item: d.item, decision: 'decline', intent: 'proposal', status: 'cancelled' };
  });
  const anyAccepted = results.some((r) => r.decision === 'accept');
  const entries: BundleEntry[] = [
    {
      resource: {
        ...task,
        status: 'completed',
        lastModified: now,
        executionPeriod: { ...task.executionPeriod, end: now },
        // One output per item: the decision as its type, the item, the method chosen.
        output: results.map((r) => ({
          type: { text: r.decision },
          valueReference: { reference: r.item },
          ...(r.fulfilment ? { extension: [{ url: EXTENSIONS.fulfilmentMethod, valueCode: r.fulfilment }] } : {}),
        })),
        extension: [
          ...(task.extension ?? []).filter((e) => e.url !== EXTENSIONS.completionDigest),
          { url: EXTENSIONS.completionDigest, valueString: digest },
        ],
      },
      request: { method: 'PUT', url: `Task/${task.id}`, ifMatch: `W/"${task.meta?.versionId}"` },
    },
    {
      resource: { ...group, intent: 'order', status: anyAccepted ? 'completed' : 'revoked' },
      request: { method: 'PUT', url: `RequestGroup/${group.id}`, ifMatch: `W/"${group.meta?.versionId}"` },
    },
    ...items.map((item, i): BundleEntry => {
      const result = results[i];
      const placedItem = {
        ...item,
        intent: 'order',
        extension: [
          ...(item.extension ?? []).filter((e) => e.url !== EXTENSIONS.fulfilmentMethod),
          { url: EXTENSIONS.fulfilmentMethod, valueCode: result.fulfilment },
        ],
        ...(item.resourceType === 'MedicationRequest'
          ? { dispenseRequest: { ...item.dispenseRequest, validityPeriod: { start: now } } }
          : {}),
      } as Item;
      const changed = result.decision === 'accept' ? placedItem : ({ ...item, status: 'cancelled' } as Item);
      return {
        resource: changed,
        request: { method: 'PUT', url: `${item.resourceType}/${item.id}`, ifMatch: `W/"${item.meta?.versionId}"` },
      };
    }),
  ];
  return { resourceType: 'Bundle', type: 'transaction', entry: entries };
}
