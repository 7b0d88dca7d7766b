import { randomUUID } from 'node:crypto';
import type { MedplumClient } from '@medplum/core';
import type {
  BundleEntry,
  CarePlan,
  Condition,
  Consent,
  MedicationRequest,
  Patient,
  PlanDefinition,
  Reference,
  RequestGroup,
  Task,
  TaskOutput,
} from '@medplum/fhirtypes';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import { formReference } from '../../contracts/work-forms';
import { absent } from './absent';
import { requireAgreements } from './agreements';
import { clinicalFacts, pinnedVersion, stillToTreat } from './conditions';
import { allowedMethods } from './fulfilment';
import { publishedDefinition, taskInputType } from './journey';
import { issueEntries, monitoringActions, tasksOf } from './plans';
import { clinicianTask, issuedVersion, REVIEW_RESPONSE, tenantQueue, versioned } from './queues';
import { ahead } from './reads';
import { fail } from './result';
import { clickwrapProof, type SessionProof } from './trust';

/**
 * A patient's answer to a treatment offer (JOURNEY D.4), for `POST /v1/tasks/{id}/complete`. The offer
 * task's focus is the proposal RequestGroup the selection composed (bots/compose-offer.ts). Everything
 * is read and checked first; the caller then writes the returned entries in ONE transaction whose first
 * entry completes the offer task under If-Match (the anchor: of 20 concurrent accepts one wins).
 */

export type OfferAnswer =
  | { decision: 'accept' }
  | { decision: 'decline'; reason?: string }
  | { decision: 'counter'; proposal: { medication: string }; reason?: string };

export interface OfferContext {
  task: Task;
  patient: Patient & { id: string };
  answer: OfferAnswer;
  session: SessionProof;
}

export type OfferWork = { ok: true; output: TaskOutput[]; entries: BundleEntry[] } | ReturnType<typeof fail>;

const RXNORM = 'http://www.nlm.nih.gov/research/umls/rxnorm';

export async function offerWork(medplum: MedplumClient, context: OfferContext): Promise<OfferWork> {
  const { task, patient, answer } = context;
  const offer = await currentOffer(medplum, task, patient, answer.decision === 'accept');
  if (!offer.ok) {
    return offer;
  }
  if (answer.decision === 'accept') {
    const gate = await requireAgreements(medplum, patient.id, {
      task: `Task/${task.id}`,
      protocol: offer.protocolCanonical,
    });
    if (gate) {
      return gate;
    }
    return acceptance(medplum, context, offer);
  }
  return returnToReview(medplum, context, offer);
}

interface Offer {
  ok: true;
  group: RequestGroup & { id: string };
  items: (MedicationRequest & { id: string })[];
  condition: Condition;
  protocolCanonical: string;
}

/**
 * The offer as it stands, when it can still be answered: the patient's own proposal, still active, its
 * items still proposals, and, to be accepted, the Condition it was composed against clinically as it was
 * (a clinical revision or a withdrawn diagnosis supersedes it: bots/lib/conditions.ts). Otherwise 409
 * `superseded`, nothing written.
 */
async function currentOffer(
  medplum: MedplumClient,
  task: Task,
  patient: Patient & { id: string },
  /**
   * An acceptance needs the diagnosis as it was offered for; a decline or a counter does not (she may
   * always say no, even to an offer whose diagnosis was revised and not yet withdrawn).
   */
  accepting: boolean,
): Promise<Offer | ReturnType<typeof fail>> {
  const patientId = patient.id;
  const organization = patient.managingOrganization?.reference;
  const superseded = () =>
    fail(409, 'invalid_state', 'This offer was superseded; your care team will send you another', {
      state: 'superseded',
    });
  const own = `Patient/${patientId}`;
  const [type, id] = (task.focus?.reference ?? '').split('/');
  // The offer's reads go out together (fewer round trips), each believed in its turn below.
  const reading =
    type === 'RequestGroup' && id
      ? ahead(
          medplum.readResource('RequestGroup', id).catch(absent) as Promise<
            (RequestGroup & { id: string }) | undefined
          >,
        )
      : undefined;
  if (organization) {
    ahead(medplum.readReference({ reference: organization }));
  }
  // The task as the platform issued it: an offer of this very RequestGroup (a task is data; its first
  // Bot-written version is the platform's word).
  const issued = await issuedVersion(medplum, task);
  const issuedKind = issued?.code?.coding?.find((c) => c.system === SYSTEMS.taskKind)?.code;
  if (issuedKind !== 'treatment-offer' || issued?.focus?.reference !== task.focus?.reference) {
    return superseded();
  }
  const group = reading ? await reading : undefined;
  if (!group || group.subject?.reference !== own || group.status !== 'active' || group.intent !== 'proposal') {
    return superseded();
  }
  // What the rest of the check and an acceptance read, at once: the items, the Condition, an earlier
  // consent, the protocol with the definitions its monitoring issues.
  const [conditionRef, conditionKey] = (group.reasonReference?.[0]?.reference ?? '').split('/');
  const pinning = ahead(pinnedVersion(medplum, group.reasonReference?.[0]?.reference));
  if (conditionRef === 'Condition' && conditionKey) {
    ahead(medplum.readResource('Condition', conditionKey));
  }
  const consenting = ahead(alreadyConsented(medplum, group, patientId));
  const canonical = group.instantiatesCanonical?.[0];
  if (canonical) {
    ahead(
      publishedDefinition<PlanDefinition>(medplum, 'PlanDefinition', canonical, organization).then((protocol) =>
        protocol ? tasksOf(medplum, monitoringActions(protocol.action), organization) : undefined,
      ),
    );
  }
  const read = await Promise.all(
    (group.action ?? []).map(async (action) => {
      const [itemType, itemId] = (action.resource?.reference ?? '').split('/');
      return itemType === 'MedicationRequest' && itemId
        ? ((await medplum.readResource('MedicationRequest', itemId).catch(absent)) as
            | (MedicationRequest & { id: string })
            | undefined)
        : undefined;
    }),
  );
  const items: (MedicationRequest & { id: string })[] = [];
  for (const item of read) {
    // As composed: the bot's own version, not changed since the offer was (only bots change an offered
    // item, by policy; checked here too: it was written with the group, before it, never after).
    if (
      !item ||
      item.subject?.reference !== own ||
      item.status !== 'active' ||
      item.intent !== 'proposal' ||
      !item.meta?.author?.reference?.startsWith('Bot/') ||
      (item.meta?.lastUpdated ?? '') > (group.meta?.lastUpdated ?? '')
    ) {
      return superseded();
    }
    items.push(item);
  }
  const [conditionType, conditionId] = (group.reasonReference?.[0]?.reference ?? '').split('/');
  const condition =
    conditionType === 'Condition' && conditionId
      ? ((await medplum.readResource('Condition', conditionId).catch(absent)) as Condition | undefined)
      : undefined;
  // The Condition as it is now says what the offer was made for: a revision that is not clinical (a note)
  // leaves the offer standing; a clinical one (code, status) supersedes it (bots/lib/conditions.ts).
  const pinned = await pinning;
  const revised =
    !pinned || clinicalFacts(pinned) !== clinicalFacts(condition ?? pinned) || !stillToTreat(condition ?? pinned);
  if (!condition || items.length === 0 || (accepting && revised)) {
    return superseded();
  }
  const protocolCanonical = group.instantiatesCanonical?.[0];
  if (!protocolCanonical || (await consenting)) {
    return superseded();
  }
  return { ok: true, group, items, condition, protocolCanonical };
}

/** She already consented to this offer (through another task): an offer is accepted once. */
async function alreadyConsented(medplum: MedplumClient, group: RequestGroup, patientId: string): Promise<boolean> {
  const consents = await medplum.searchResources(
    'Consent',
    { patient: `Patient/${patientId}`, identifier: `${SYSTEMS.offer}|RequestGroup/${group.id}` },
    { cache: 'no-cache' },
  );
  return consents.length > 0;
}

/**
 * Acceptance: the treatment Consent (the exact versions offered, the clickwrap proof), the active
 * CarePlan instantiating exactly the pinned canonicals, its first monitoring tasks and the
 * order-decisions task. The offer itself stays a proposal: placing its items is the order decisions'.
 */
async function acceptance(medplum: MedplumClient, context: OfferContext, offer: Offer): Promise<OfferWork> {
  const { task, patient, session } = context;
  const { group, items } = offer;
  const organization = patient.managingOrganization?.reference;
  const protocol = await publishedDefinition<PlanDefinition>(
    medplum,
    'PlanDefinition',
    offer.protocolCanonical,
    organization,
  );
  const monitoring = protocol ? await tasksOf(medplum, monitoringActions(protocol.action), organization) : undefined;
  if (!monitoring) {
    return fail(409, 'invalid_state', 'This offer cannot be accepted: its protocol is not published to you', {
      state: 'unavailable',
    });
  }
  const now = new Date().toISOString();
  const her: Reference<Patient> = { reference: `Patient/${patient.id}` };
  const episodeTags = (task.meta?.tag ?? []).filter((t) => t.system === SYSTEMS.episode);
  const [consentUrl, planUrl] = [`urn:uuid:${randomUUID()}`, `urn:uuid:${randomUUID()}`];
  const offered = [versioned(group), ...items.map(versioned)];
  const consent: Consent = {
    resourceType: 'Consent',
    meta: { tag: episodeTags },
    status: 'active',
    scope: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/consentscope', code: 'treatment' }] },
    category: [{ coding: [{ system: 'http://loinc.org', code: '59284-0', display: 'Consent Document' }] }],
    patient: her,
    dateTime: now,
    performer: [her],
    ...(organization ? { organization: [{ reference: organization }] } : {}),
    identifier: [{ system: SYSTEMS.offer, value: `RequestGroup/${group.id}` }],
    policyRule: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'OPTIN' }] },
    provision: {
      type: 'permit',
      period: { start: now },
      data: offered.map((reference) => ({ meaning: 'instance' as const, reference })),
    },
    extension: [clickwrapProof(patient.id, now, session)],
  };
  // Each item with the fulfilment methods her tenant allows for it where she lives (readable before
  // she decides, not learned from a refusal); the order-decisions bot checks them again when she decides.
  const allowed = await allowedMethods(medplum, patient, items);
  const orderDecisions: Task = {
    resourceType: 'Task',
    status: 'ready',
    intent: 'order',
    code: {
      coding: [{ system: SYSTEMS.taskKind, code: 'order-decisions' }],
      text: 'Choose how to receive your treatment',
    },
    description: 'Choose how to receive your treatment',
    focus: { reference: `RequestGroup/${group.id}` },
    input: items.map((item) => ({
      type: taskInputType('order-item'),
      valueReference: { reference: `MedicationRequest/${item.id}` },
      extension: (allowed[`MedicationRequest/${item.id}`] ?? []).map((method) => ({
        url: EXTENSIONS.fulfilmentMethod,
        valueCode: method,
      })),
    })),
  };
  const issued = issueEntries([...monitoring, orderDecisions], {
    patient: `Patient/${patient.id}`,
    carePlan: planUrl,
    tags: episodeTags,
    now,
  });
  const taskUrls = issued.filter((e) => e.resource?.resourceType === 'Task').map((e) => e.fullUrl as string);
  const plan: CarePlan = {
    resourceType: 'CarePlan',
    meta: { tag: episodeTags },
    identifier: [{ system: SYSTEMS.offer, value: `RequestGroup/${group.id}` }],
    status: 'active',
    intent: 'plan',
    title: protocol?.title,
    subject: her,
    instantiatesCanonical: group.instantiatesCanonical,
    addresses: group.reasonReference as Reference<Condition>[],
    author: group.author,
    created: now,
    period: { start: now },
    supportingInfo: [versioned(group), { reference: consentUrl }],
    activity: [
      ...items.map((item) => ({ reference: { reference: `MedicationRequest/${item.id}` } })),
      ...taskUrls.map((reference) => ({ reference: { reference } })),
    ],
  };
  return {
    ok: true,
    output: [
      { type: { text: 'decision' }, valueCode: 'accept' },
      { type: { text: 'consent' }, valueReference: { reference: consentUrl } },
      { type: { text: 'care-plan' }, valueReference: { reference: planUrl } },
      ...taskUrls.map((reference) => ({ type: { text: 'task' }, valueReference: { reference } })),
    ],
    entries: [
      { fullUrl: consentUrl, resource: consent, request: { method: 'POST', url: 'Consent' } },
      { fullUrl: planUrl, resource: plan, request: { method: 'POST', url: 'CarePlan' } },
      ...issued,
    ],
  };
}

/**
 * Decline or counter: the offer is revoked and its items cancelled (under If-Match: what she answered
 * is what is revoked), a counter records her medication proposal, and the clinician gets a
 * `review-response` task carrying the selection's options and findings (completing it with another
 * selection composes a new offer, bots/compose-offer.ts). Nothing active is created.
 */
async function returnToReview(medplum: MedplumClient, context: OfferContext, offer: Offer): Promise<OfferWork> {
  const { task, patient } = context;
  const answer = context.answer as Exclude<OfferAnswer, { decision: 'accept' }>;
  const { group, items } = offer;
  const now = new Date().toISOString();
  const her: Reference<Patient> = { reference: `Patient/${patient.id}` };
  const episodeTags = (task.meta?.tag ?? []).filter((t) => t.system === SYSTEMS.episode);
  const entries: BundleEntry[] = [
    {
      resource: { ...group, status: 'revoked' },
      request: { method: 'PUT', url: `RequestGroup/${group.id}`, ifMatch: `W/"${group.meta?.versionId}"` },
    },
    ...items.map(
      (item): BundleEntry => ({
        resource: { ...item, status: 'cancelled' },
        request: { method: 'PUT', url: `MedicationRequest/${item.id}`, ifMatch: `W/"${item.meta?.versionId}"` },
      }),
    ),
  ];
  const output: TaskOutput[] = [{ type: { text: 'decision' }, valueCode: answer.decision }];
  const proposalUrl = `urn:uuid:${randomUUID()}`;
  if (answer.decision === 'counter') {
    const proposal: MedicationRequest = {
      resourceType: 'MedicationRequest',
      meta: { tag: episodeTags },
      status: 'active',
      intent: 'proposal',
      subject: her,
      requester: her,
      authoredOn: now,
      medicationCodeableConcept: { coding: [{ system: RXNORM, code: answer.proposal.medication.split('|')[1] }] },
      basedOn: items.map((item) => versioned(item) as Reference<MedicationRequest>),
      reasonReference: offer.group.reasonReference as Reference<Condition>[],
      ...(answer.reason ? { note: [{ text: answer.reason }] } : {}),
    };
    entries.push({ fullUrl: proposalUrl, resource: proposal, request: { method: 'POST', url: 'MedicationRequest' } });
    output.push({ type: { text: 'proposal' }, valueReference: { reference: proposalUrl } });
  }
  const selection = await selectionOf(medplum, group);
  const formOfSelection = selection && formReference(selection);
  const queue = await tenantQueue(medplum, patient, REVIEW_RESPONSE);
  const review = clinicianTask({
    code: REVIEW_RESPONSE,
    description:
      answer.decision === 'counter'
        ? 'The patient proposed another medication instead of the offer'
        : 'The patient declined the offer',
    patient,
    queue,
    focus: selection?.reasonReference ?? versioned(group),
    tags: episodeTags,
    // The same form as the selection (its options and findings): she selects again, or confirms.
    ...(formOfSelection ? { form: { reference: formOfSelection } } : {}),
  });
  const reviewTask = review.resource as Task;
  reviewTask.input = [
    ...(selection?.input ?? []),
    { type: { text: 'declined-offer' }, valueReference: versioned(group) },
    { type: { text: 'decision' }, valueCode: answer.decision },
    ...(answer.reason ? [{ type: { text: 'reason' }, valueString: answer.reason }] : []),
    ...(answer.decision === 'counter'
      ? [{ type: { text: 'counter-proposal' }, valueReference: { reference: proposalUrl } }]
      : []),
  ];
  if (selection?.contained) {
    reviewTask.contained = selection.contained;
  }
  if (selection?.note) {
    reviewTask.note = selection.note;
  }
  entries.push(review);
  return { ok: true, output, entries };
}

/** The clinician's selection this offer was composed from (its `groupIdentifier`), for re-selection. */
async function selectionOf(medplum: MedplumClient, group: RequestGroup): Promise<Task | undefined> {
  const key = group.groupIdentifier;
  const [type, id] = (key?.system === SYSTEMS.offer ? (key.value ?? '') : '').split('/');
  const current =
    type === 'Task' && id ? ((await medplum.readResource('Task', id).catch(absent)) as Task | undefined) : undefined;
  // Its options and findings as the platform issued them (a clinician's later edits are not carried on).
  const selection = current ? await issuedVersion(medplum, current) : undefined;
  return selection?.for?.reference === group.subject?.reference ? selection : undefined;
}
