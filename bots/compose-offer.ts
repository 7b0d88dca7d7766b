import { randomUUID } from 'node:crypto';
import type { BotEvent, MedplumClient } from '@medplum/core';
import type {
  ActivityDefinition,
  Bundle,
  Condition,
  DetectedIssue,
  MedicationRequest,
  Parameters,
  Patient,
  PlanDefinition,
  Provenance,
  Questionnaire,
  QuestionnaireResponse,
  Reference,
  RequestGroup,
  Task,
} from '@medplum/fhirtypes';
import { EXTENSIONS, SYSTEMS } from '../contracts/systems';
import { answersTo, chosenOption, mitigationsAsked, OPTION_ITEM, WORK_FORMS } from '../contracts/work-forms';
import { absent } from './lib/absent';
import { PATIENT_TASK_TAG } from './lib/journey';
import {
  authorAgent,
  completedByOwner,
  issuedVersion,
  markUnanswered,
  ownMitigations,
  REVIEW_RESPONSE,
  versioned,
} from './lib/queues';
import { lostRace } from './lib/races';
import { ahead, readingOnce } from './lib/reads';
import { formOfTask, herAnswers, issuedForm } from './lib/work-forms';

const OFFER_COMPOSED = 'offer-composed';
/**
 * Work a clinician completes with a selection: the first one after eligibility, and the review of an
 * offer the patient declined or countered (it carries the same options and findings, bots/lib/offers.ts).
 */
const SELECTIONS = ['select-treatment', REVIEW_RESPONSE] as const;
const OVERRIDE_REQUIRED = 'override-required';

/**
 * Subscription bot (JOURNEY D.3): the clinician's selection (a `select-treatment` task completed by the
 * clinician who owns it, with her answers to its form choosing one of its options: bots/lib/work-forms.ts)
 * is composed into the consent
 * bundle offered to the patient: a proposal RequestGroup pinned to the versions of the protocol, the
 * option and the condition, with the treatment (a MedicationRequest proposal by the selecting clinician)
 * and the protocol's monitoring commitment as descriptions, and a `treatment-offer` task for the patient.
 * An option the engine found ineligible is composed only when every finding against it is mitigated by
 * the selecting clinician (her answer to the finding's item of the form, or a mitigation she recorded on
 * the DetectedIssue herself: an authored override); otherwise the selection is
 * marked `override-required` and nothing is offered. One transaction, anchored on the selection task's
 * `businessStatus` under If-Match, so a duplicate delivery composes nothing twice.
 */
export async function handler(bare: MedplumClient, event: BotEvent): Promise<unknown> {
  const medplum = readingOnce(bare);
  // Its stored form is asked as soon as the task is read (the issued version points at the same one).
  const woken = await completedByOwner(medplum, event, 'compose-offer', SELECTIONS, (task) => {
    ahead(formOfTask(medplum, task));
  });
  if (!woken.ok) {
    return woken;
  }
  const { task: selection, clinician } = woken;
  if (selection.businessStatus?.text === OFFER_COMPOSED || (await composedBefore(medplum, selection))) {
    return { ok: true, offered: true, replay: true };
  }
  // The options, the engine's results and the condition as the platform issued them, never as edited since.
  const issued = await issuedVersion(medplum, selection);
  if (!issued) {
    return markUnanswered(medplum, selection, 'not-issued', 'The selection was not issued by the platform');
  }
  const form = await issuedForm(medplum, issued, WORK_FORMS.selectTreatment);
  if (!form) {
    return markUnanswered(medplum, selection, 'no-answers', 'The selection carries no form the platform issued');
  }
  const answers = await herAnswers(medplum, selection, form, clinician);
  if (!answers.ok) {
    // Answers still being completed wake us again when they are (the Provider app's order): nothing to say yet.
    return answers.pending
      ? { ok: true, offered: false, reason: answers.reason }
      : markUnanswered(medplum, selection, 'no-answers', answers.reason);
  }
  const chosen = chosenOption(form, answers.response, OPTION_ITEM);
  const selected = chosen?.system === SYSTEMS.treatmentOption ? chosen.code : undefined;
  const offered = issued.input?.find((i) => i.valueCanonical !== undefined && i.valueCanonical === selected);
  const results = issued.contained?.find((r) => r.resourceType === 'Parameters') as Parameters | undefined;
  const result = results?.parameter?.find((p) =>
    p.part?.some((q) => q.name === 'option' && q.valueCanonical === selected),
  );
  const protocolCanonical = result?.part?.find((q) => q.name === 'protocol')?.valueCanonical;
  const conditionRef = issued.reasonReference?.reference ?? '';
  if (!selected || !offered || !protocolCanonical || !conditionRef.startsWith('Condition/')) {
    return markUnanswered(medplum, selection, 'not-an-option', 'The selection is not one of the options offered');
  }
  const [protocol, option, condition] = await Promise.all([
    pinned<PlanDefinition>(medplum, 'PlanDefinition', protocolCanonical),
    pinned<ActivityDefinition>(medplum, 'ActivityDefinition', selected),
    readVersion<Condition>(medplum, conditionRef),
  ]);
  if (!protocol || !option || !condition || condition.subject?.reference !== selection.for?.reference) {
    return markUnanswered(medplum, selection, 'unavailable', 'The pinned definitions of this selection cannot be read');
  }
  const eligible = offered.extension?.find((e) => e.url === EXTENSIONS.eligible)?.valueBoolean === true;
  if (
    !eligible &&
    !mitigatedInForm(form, answers.response, selected) &&
    !(await overridden(medplum, selection, option, clinician))
  ) {
    return markUnanswered(
      medplum,
      selection,
      OVERRIDE_REQUIRED,
      'The option chosen is not eligible: every finding against it needs her mitigation (the form asks one per finding)',
    );
  }
  const bundle = offerBundle({ selection, clinician, protocol, option, condition, response: answers.response });
  try {
    await medplum.executeBatch(bundle);
  } catch (err) {
    if (lostRace(err)) {
      return { ok: true, offered: true, replay: true };
    }
    throw err;
  }
  return { ok: true, offered: true };
}

/** An offer was composed from this selection already (its key), whatever the task now says of itself. */
async function composedBefore(medplum: MedplumClient, selection: Task): Promise<boolean> {
  const groups = await medplum.searchResources(
    'RequestGroup',
    { 'group-identifier': `${SYSTEMS.offer}|Task/${selection.id}` },
    { cache: 'no-cache' },
  );
  return groups.length > 0;
}

/**
 * Her answers mitigate every finding against the chosen option: each item the form asks when that option
 * is chosen (one per finding) has a non-blank answer. An option with no such item is not mitigated here.
 */
function mitigatedInForm(form: Questionnaire, response: QuestionnaireResponse, selected: string): boolean {
  const asked = mitigationsAsked(form, selected);
  return (
    asked.length > 0 &&
    asked.every((item) => answersTo(response, item.linkId).some((a) => (a.valueString ?? '').trim().length > 0))
  );
}

/**
 * Every finding against the option has a mitigation the selecting clinician recorded herself (its
 * history says who wrote it: bots/lib/queues.ts ownMitigations).
 */
async function overridden(
  medplum: MedplumClient,
  selection: Task,
  option: ActivityDefinition,
  clinician: string,
): Promise<boolean> {
  const issues = (await medplum.searchResources('DetectedIssue', {
    patient: selection.for?.reference ?? '',
  })) as DetectedIssue[];
  const against = issues.filter((issue) =>
    (issue.implicated ?? []).some((r) => r.reference?.startsWith(`ActivityDefinition/${option.id}/`)),
  );
  if (against.length === 0) {
    return false;
  }
  // Each finding on its own; one without her own recorded mitigation is enough to refuse.
  for (const issue of against) {
    if ((await ownMitigations(medplum, issue, clinician)).length === 0) {
      return false;
    }
  }
  return true;
}

async function pinned<T extends PlanDefinition | ActivityDefinition>(
  medplum: MedplumClient,
  resourceType: T['resourceType'],
  canonical: string,
): Promise<T | undefined> {
  const [url, version] = canonical.split('|');
  const [found] = (await medplum.searchResources(resourceType, { url, version })) as T[];
  return found;
}

async function readVersion<T extends Condition>(medplum: MedplumClient, reference: string): Promise<T | undefined> {
  const [type, id, , versionId] = reference.split('/');
  if (type !== 'Condition' || !id || !versionId) {
    return undefined;
  }
  return (await medplum.readVersion('Condition', id, versionId).catch(absent)) as T | undefined;
}

function offerBundle({
  selection,
  clinician,
  protocol,
  option,
  condition,
  response,
}: {
  selection: Task;
  clinician: string;
  protocol: PlanDefinition;
  option: ActivityDefinition;
  condition: Condition;
  /** Her answers: what she chose, and how she mitigated what the engine found. */
  response: QuestionnaireResponse;
}): Bundle {
  const now = new Date().toISOString();
  const patient = selection.for as Reference<Patient>;
  const episodeTags = (selection.meta?.tag ?? []).filter((t) => t.system === SYSTEMS.episode);
  const offerKey = { system: SYSTEMS.offer, value: `Task/${selection.id}` };
  const [groupUrl, medicationUrl] = [`urn:uuid:${randomUUID()}`, `urn:uuid:${randomUUID()}`];
  const medication: MedicationRequest = {
    resourceType: 'MedicationRequest',
    meta: { tag: episodeTags },
    status: 'active',
    intent: 'proposal',
    subject: patient,
    requester: { reference: clinician },
    authoredOn: now,
    groupIdentifier: offerKey,
    instantiatesCanonical: [`${option.url}|${option.version}`],
    medicationCodeableConcept: option.productCodeableConcept,
    dosageInstruction: option.dosage,
    reasonReference: [versioned(condition) as Reference<Condition>],
  };
  // The monitoring commitment the patient also consents to, as descriptions (R4 rqg-1: an action of a
  // RequestGroup needs a resource; these are issued as tasks when the plan starts, not offered as orders).
  const monitoring = (protocol.action ?? [])
    .filter((a) => a.selectionBehavior !== 'exactly-one')
    .map((a) => ({ text: `Monitoring commitment: ${a.title ?? a.description}` }));
  const group: RequestGroup = {
    resourceType: 'RequestGroup',
    meta: { tag: episodeTags },
    status: 'active',
    intent: 'proposal',
    subject: patient,
    author: { reference: clinician },
    authoredOn: now,
    groupIdentifier: offerKey,
    instantiatesCanonical: [`${protocol.url}|${protocol.version}`, `${option.url}|${option.version}`],
    reasonReference: [versioned(condition) as Reference<Condition>],
    action: [{ title: option.title, resource: { reference: medicationUrl }, requiredBehavior: 'must' }],
    note: monitoring,
  };
  const offerTask: Task = {
    resourceType: 'Task',
    meta: { tag: [PATIENT_TASK_TAG, ...episodeTags] },
    status: 'ready',
    intent: 'order',
    code: {
      coding: [{ system: SYSTEMS.taskKind, code: 'treatment-offer' }],
      text: `Your care team offers: ${option.title}`,
    },
    description: `Your care team offers: ${option.title}`,
    for: patient,
    owner: patient,
    focus: { reference: groupUrl },
    authoredOn: now,
  };
  const provenance: Provenance = {
    resourceType: 'Provenance',
    target: [patient, { reference: groupUrl }],
    recorded: now,
    activity: { text: 'treatment offer' },
    agent: [authorAgent({ reference: clinician })],
    entity: [
      { role: 'source', what: versioned(condition) },
      { role: 'source', what: versioned(protocol) },
      { role: 'source', what: versioned(option) },
      { role: 'source', what: versioned(selection) },
      { role: 'source', what: versioned(response) },
    ],
  };
  return {
    resourceType: 'Bundle',
    type: 'transaction',
    entry: [
      {
        resource: {
          ...selection,
          businessStatus: { coding: [{ system: SYSTEMS.taskKind, code: OFFER_COMPOSED }], text: OFFER_COMPOSED },
        },
        request: { method: 'PUT', url: `Task/${selection.id}`, ifMatch: `W/"${selection.meta?.versionId}"` },
      },
      { fullUrl: medicationUrl, resource: medication, request: { method: 'POST', url: 'MedicationRequest' } },
      { fullUrl: groupUrl, resource: group, request: { method: 'POST', url: 'RequestGroup' } },
      { resource: offerTask, request: { method: 'POST', url: 'Task' } },
      { resource: provenance, request: { method: 'POST', url: 'Provenance' } },
    ],
  };
}
