import { randomUUID } from 'node:crypto';
import type { BotEvent, MedplumClient } from '@medplum/core';
import type { Bundle, BundleEntry, Patient, Task } from '@medplum/fhirtypes';
import { SYSTEMS } from '../contracts/systems';
import { clinicianTask, tenantQueue } from './lib/queues';
import { lostRace } from './lib/races';
import { readingOnce } from './lib/reads';
import { openRequest, type Proposal, proposalFor } from './lib/requests';
import { type BotResult, fail } from './lib/result';
import { searchAll } from './lib/search';
import { patientWorkflow } from './lib/trust';

export type RequestReviewResult = BotResult<{ created: boolean; request: string; task: string }>;

const REVIEW_REQUEST = 'review-request';

/**
 * POST /v1/requests (JOURNEY F): a patient proposes a medication, a treatment option or a protocol for
 * review. One transaction of two conditional creates on the same key (patient, item): the proposal
 * (`intent` proposal, requester the patient) and the review task in the tenant's queue; an open
 * request for the same item is answered as it is. It changes nothing of her care: the clinician's
 * review decides, and treatment still starts only through the spine.
 */
export async function handler(bare: MedplumClient, event: BotEvent): Promise<RequestReviewResult> {
  const medplum = readingOnce(bare);
  const start = await patientWorkflow(medplum, event, 'request-review');
  if (!start.ok) {
    return start;
  }
  const { patientId } = start.caller;
  const input = start.input;
  const patient = (await medplum.readResource('Patient', patientId)) as Patient & { id: string };
  const resolved = await proposalFor(medplum, patient, input);
  if (!resolved.ok) {
    return resolved;
  }
  const { proposal, key } = resolved;
  const identifier = { system: SYSTEMS.patientRequest, value: key };
  const open = await openRequest(medplum, proposal.resourceType, key, patientId);
  if (open) {
    return { ok: true, created: false, ...open };
  }
  const wait = await overDailyCap(medplum, patientId);
  if (wait !== undefined) {
    return fail(429, 'rate_limited', `At most ${REQUESTS_PER_DAY} requests can be opened in a day; try again later`, {
      retryAfter: wait,
      limit: REQUESTS_PER_DAY,
    });
  }
  const queue = await tenantQueue(medplum, patient, REVIEW_REQUEST);
  const proposalUrl = `urn:uuid:${randomUUID()}`;
  const review = clinicianTask({
    code: REVIEW_REQUEST,
    description: 'Review a patient’s request',
    patient,
    queue,
    focus: { reference: proposalUrl },
  });
  const onlyWhileOpen = `identifier=${encodeURIComponent(`${identifier.system}|${key}`)}&status=active`;
  const note = 'note' in input && input.note ? [{ text: input.note }] : undefined;
  const bundle: Bundle = {
    resourceType: 'Bundle',
    type: 'transaction',
    entry: [
      {
        fullUrl: proposalUrl,
        resource: {
          ...proposal,
          identifier: [identifier],
          ...(note ? { note } : {}),
          status: 'active',
          intent: 'proposal',
          subject: { reference: `Patient/${patientId}` },
          requester: { reference: `Patient/${patientId}` },
          authoredOn: new Date().toISOString(),
        } as Proposal,
        request: { method: 'POST', url: proposal.resourceType, ifNoneExist: onlyWhileOpen },
      },
      {
        ...review,
        resource: { ...(review.resource as Task), identifier: [identifier] },
        request: {
          method: 'POST',
          url: 'Task',
          ifNoneExist: `identifier=${encodeURIComponent(`${identifier.system}|${key}`)}&status=ready,in-progress`,
        },
      } as BundleEntry,
    ],
  };
  try {
    const response = await medplum.executeBatch(bundle);
    const [made, task] = response.entry ?? [];
    return {
      ok: true,
      created: (made?.response?.status ?? '').startsWith('201'),
      request: `${proposal.resourceType}/${made?.resource?.id}`,
      task: `Task/${task?.resource?.id}`,
    };
  } catch (err) {
    if (!lostRace(err)) {
      throw err;
    }
    // The same request, at the same moment: its answer is ours.
    const winner = await openRequest(medplum, proposal.resourceType, key, patientId);
    return winner
      ? { ok: true, created: false, ...winner }
      : fail(409, 'invalid_state', 'This request changed while it was being made; try again', { state: 'conflict' });
  }
}

/**
 * Requests a patient may open in 24 hours. An open request for the same item is answered as it
 * is (one per item), so this bounds only how many distinct items one patient can put in her tenant's
 * review queue. Concurrent requests at the edge may pass it by a few: it limits a flood, not a count.
 */
export const REQUESTS_PER_DAY = 10;
const DAY_MS = 24 * 60 * 60_000;

/** Seconds until she may open another request, or undefined while she is under the cap. */
async function overDailyCap(medplum: MedplumClient, patientId: string): Promise<number | undefined> {
  const now = Date.now();
  const since = `ge${new Date(now - DAY_MS).toISOString()}`;
  const params = { subject: `Patient/${patientId}`, intent: 'proposal' };
  // R4 names the same date `authoredon` on MedicationRequest and `authored` on ServiceRequest.
  const mine = (
    await Promise.all([
      searchAll(medplum, 'MedicationRequest', { ...params, authoredon: since }),
      searchAll(medplum, 'ServiceRequest', { ...params, authored: since }),
    ])
  )
    .flat()
    .filter(
      (r) =>
        r.requester?.reference === `Patient/${patientId}` &&
        r.identifier?.some((i) => i.system === SYSTEMS.patientRequest),
    );
  if (mine.length < REQUESTS_PER_DAY) {
    return undefined;
  }
  const oldest = Math.min(...mine.map((r) => Date.parse(r.authoredOn ?? '') || now));
  return Math.max(1, Math.ceil((oldest + DAY_MS - now) / 1000));
}
