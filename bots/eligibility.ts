import { randomUUID } from 'node:crypto';
import type { BotEvent, MedplumClient } from '@medplum/core';
import { evalFhirPath } from '@medplum/core';
import type {
  ActivityDefinition,
  Bundle,
  BundleEntry,
  CareTeam,
  Coding,
  Condition,
  DetectedIssue,
  Device,
  Extension,
  GuidanceResponse,
  Parameters,
  ParametersParameter,
  Patient,
  PlanDefinition,
  Provenance,
  QuestionnaireResponse,
  Reference,
  Resource,
  Task,
  TaskInput,
} from '@medplum/fhirtypes';
import { CATALOG, EXTENSIONS, SYSTEMS } from '../contracts/systems';
import {
  CONDITION_ITEM,
  chosenOption,
  formInput,
  formInstructions,
  selectionForm,
  WORK_FORMS,
} from '../contracts/work-forms';
import { absent } from './lib/absent';
import { isPublishedTo } from './lib/agreements';
import { conditionCatalogs, planTypeOf } from './lib/catalog';
import { clinicalFacts, pinnedVersion, stillToTreat, withdrawnByRevision } from './lib/conditions';
import { readInput } from './lib/input';
import {
  authorAgent,
  clinicianTask,
  completedByOwner,
  issuedVersion,
  markUnanswered,
  tenantQueue,
  versioned,
} from './lib/queues';
import { lostRace } from './lib/races';
import { ahead, readingOnce } from './lib/reads';
import { fail } from './lib/result';
import { searchAll } from './lib/search';
import { formOfTask, handedIn, herAnswers, issuedForm, storedForm } from './lib/work-forms';

const ICD10CM = 'http://hl7.org/fhir/sid/icd-10-cm';
const SELECT_TREATMENT = 'select-treatment';

/** The catalog's reads depend on no input (her tenant filters them afterwards): asked with the task. */
function askTheCatalog(medplum: MedplumClient): void {
  ahead(conditionCatalogs(medplum, undefined));
  ahead(activePlans(medplum));
}

/**
 * What the review's checks read, asked as soon as the review is known (read only; believed below): her
 * answers, its stored form (as the task points at it now; the issued version points at the same:
 * WORK_AS_ISSUED), her Patient, and an earlier delivery's selection keyed by the review (read fresh: once).
 */
function askWhatTheReviewReads(medplum: MedplumClient, task: Task): Promise<Task | undefined> {
  ahead(handedIn(medplum, task) ?? Promise.resolve(undefined));
  ahead(formOfTask(medplum, task));
  if (task.for?.reference) {
    ahead(medplum.readReference(task.for));
  }
  return ahead(selectionOf(medplum, `Task/${task.id}`));
}

/**
 * What the rest of a run reads, at once (fewer round trips), each believed in its turn: her answers, her
 * Patient with her tenant's queue, the selection of an earlier delivery, the engine.
 */
function askWhatTheRunReads(
  medplum: MedplumClient,
  review: Task,
  selectingEarly: Promise<Task | undefined> | undefined,
) {
  ahead(handedIn(medplum, review) ?? Promise.resolve(undefined));
  const tenantReads = ahead(
    medplum
      .readReference({ reference: review.for?.reference ?? '' } as Reference<Patient>)
      .then((p) => ({ queue: ahead(tenantQueue(medplum, p, 'select-treatment')) })),
  );
  const selecting = selectingEarly ?? ahead(selectionOf(medplum, `Task/${review.id}`));
  const engine = ahead(medplum.searchOne('Device', { identifier: `${SYSTEMS.device}|eligibility-engine` }));
  return { tenantReads, selecting, engine };
}

/**
 * Subscription bot (JOURNEY D.2): an intake review completed by the clinician who owned it, with her
 * answers to its form (the condition, from her tenant's condition catalog: bots/lib/work-forms.ts), is
 * answered with the Condition she assigned (recorded here, her as its asserter, her answers as its
 * evidence) and the eligibility of each treatment option of every protocol of her tenant that treats
 * it, for her queue to select from (task `select-treatment`, whose form offers the options). Each option's rules (contraindications, interactions, prerequisites:
 * FHIRPath over the patient's own record) are evaluated; every rule that fires is a DetectedIssue. The
 * results are advisory and carry machine provenance: the engine (a provisioned Device and its version),
 * what was read (the Condition's, protocol's and options' pinned versions), in a contained
 * GuidanceResponse and a Provenance. The guideline's preferred option is a label on its input, never a
 * selection. Nothing is written about a condition that is not in the tenant's condition catalog.
 *
 * Believes only its own reads: the task is re-read by id; the requester (the author of the completing
 * write, set by Medplum) must be the Practitioner who owns it. Idempotent (duplicate deliveries): the
 * selection task is claimed first by a conditional create on the review it answers (`draft`), and the
 * findings are written with it made `ready` under If-Match, in one transaction; whoever loses writes nothing.
 */
export async function handler(bare: MedplumClient, event: BotEvent): Promise<unknown> {
  const medplum = readingOnce(bare);
  if ((event.input as { resourceType?: string } | undefined)?.resourceType === 'Condition') {
    return revised(medplum, event);
  }
  // 1. Who completed which review; what the run reads is asked with the review (each believed below).
  askTheCatalog(medplum);
  let selectingEarly: Promise<Task | undefined> | undefined;
  const woken = await completedByOwner(medplum, event, 'eligibility', ['review-intake'], (task) => {
    selectingEarly = askWhatTheReviewReads(medplum, task);
  });
  if (!woken.ok) {
    return woken;
  }
  const review = woken.task;
  const key = `Task/${review.id}`;
  const patientRef = review.for?.reference ?? '';
  const { tenantReads, selecting, engine } = askWhatTheRunReads(medplum, review, selectingEarly);
  // 2. The checks: the platform's own review, its form, her answers, a condition of the tenant's catalog.
  // Only a review the platform issued (a Bot-written `ready` version in its history): a task a
  // clinician created herself, already done, starts nothing, whoever delivers it (the reconciler too).
  const issued = await issuedVersion(medplum, review);
  if (!issued || issued.for?.reference !== review.for?.reference) {
    return { ok: true, offered: false, reason: 'the review was not issued by the platform' };
  }
  const form = await issuedForm(medplum, issued, WORK_FORMS.assignCondition);
  if (!form) {
    return markUnanswered(medplum, review, 'no-answers', 'the review carries no form the platform issued');
  }
  const answers = await herAnswers(medplum, review, form, woken.clinician);
  if (!answers.ok) {
    // Answers still being completed wake us again when they are (the Provider app's order): nothing to say yet.
    return answers.pending
      ? { ok: true, offered: false, reason: answers.reason }
      : markUnanswered(medplum, review, 'no-answers', answers.reason);
  }
  const patient = (await medplum.readReference({ reference: patientRef } as Reference<Patient>)) as Patient & {
    id: string;
  };
  const organization = patient.managingOrganization?.reference;
  // The form's own choice (its system and display), whatever of it her answer spelled out.
  const coding = chosenOption(form, answers.response, CONDITION_ITEM);
  const code = coding?.system === ICD10CM ? coding.code : undefined;
  // The options are catalog reads, whatever is written next: asked as soon as the code is known, kept in hand.
  const offering = code
    ? ahead(
        treatingProtocols(medplum, code, organization).then((protocols) => optionsOf(medplum, protocols, organization)),
      )
    : undefined;
  if (!code || !offering || !(await inConditionCatalog(medplum, code, organization))) {
    return markUnanswered(medplum, review, 'no-answers', 'the condition is not in the tenant’s condition catalog');
  }
  // 3. The writes: the Condition she assigned, the selection claimed, the findings with it.
  const existing = await selecting;
  if (existing && existing.status !== 'draft') {
    return { ok: true, offered: true, task: `Task/${existing.id}`, replay: true };
  }
  const condition = await recordCondition(medplum, {
    review,
    key,
    coding: { system: ICD10CM, code, display: coding?.display },
    clinician: woken.clinician,
    response: answers.response,
  });
  // Her record as it is now that the Condition is recorded: asked at once, beside the options still coming.
  const recording = ahead(patientRecord(medplum, patient));
  const [device, options] = await Promise.all([engine, offering]);
  if (!device) {
    throw new Error('the eligibility engine Device is not provisioned');
  }
  if (options.length === 0) {
    return { ok: true, offered: false, reason: 'no protocol of the tenant treats this condition' };
  }
  // Her record, read beside the claim (which writes nothing it reads).
  const { queue } = await tenantReads;
  const [record, claimed] = await Promise.all([
    recording,
    existing ?? claimSelection(medplum, review, patient, key, await queue),
  ]);
  if (claimed?.status !== 'draft') {
    return { ok: true, offered: true, replay: true };
  }
  const findings = assess(options, record);
  const bundle = findingsBundle({ claimed, patient, condition, device, options, findings });
  try {
    await medplum.executeBatch(bundle);
  } catch (err) {
    if (lostRace(err)) {
      return { ok: true, offered: true, replay: true };
    }
    throw err;
  }
  return { ok: true, offered: true, task: `Task/${claimed.id}` };
}

/**
 * A Condition the platform recorded, revised since (JOURNEY D.1; a Subscription on Condition updates): when
 * the revision is clinical (its code, clinical or verification status: bots/lib/conditions.ts) and no
 * selection was made for the version it now is, what was offered or asked for an older version is
 * withdrawn (her open offers revoked and their tasks cancelled, saying why; open selections cancelled) and,
 * while the Condition is still one to treat, eligibility runs again for it: a new selection for her care
 * team, keyed by the review and the version, in the same transaction as the withdrawals. A change that is
 * not clinical (a note) changes nothing: her offer stays answerable. Believes only its own reads; a
 * patient cannot run it (the Bot is not hers to read) and is refused if she is named the requester.
 */
async function revised(medplum: MedplumClient, event: BotEvent): Promise<unknown> {
  const input = readInput('eligibility', event.input);
  if (!input.ok) {
    return input;
  }
  if ((event.requester?.reference ?? '').startsWith('Patient/')) {
    return fail(403, 'forbidden', 'A patient does not revise a diagnosis');
  }
  const engine = ahead(medplum.searchOne('Device', { identifier: `${SYSTEMS.device}|eligibility-engine` }));
  const condition = (await medplum.readResource('Condition', input.value.id).catch(absent)) as
    | (Condition & { id: string })
    | undefined;
  // Only the platform's own (the key is the journey's: JOURNEY_KEYS keeps it the bots').
  const key = condition?.identifier?.find((i) => i.system === SYSTEMS.eligibilityKey)?.value ?? '';
  const [reviewType, reviewId] = key.split('/');
  if (!condition || reviewType !== 'Task' || !reviewId || key.includes(';')) {
    return { ok: true, offered: false, reason: 'not a Condition the platform recorded' };
  }
  const subject = condition.subject?.reference ?? '';
  const [review, patient, selections] = await Promise.all([
    medplum.readResource('Task', reviewId).catch(absent) as Promise<Task | undefined>,
    medplum.readReference({ reference: subject } as Reference<Patient>).catch(absent) as Promise<
      (Patient & { id: string }) | undefined
    >,
    searchAll(medplum, 'Task', { subject, code: `${SYSTEMS.taskKind}|${SELECT_TREATMENT}` }),
  ]);
  if (!review || !patient || review.for?.reference !== subject) {
    return { ok: true, offered: false, reason: 'not a Condition the platform recorded' };
  }
  const current = `Condition/${condition.id}/_history/${condition.meta?.versionId}`;
  const made = selections
    .filter((t) =>
      t.identifier?.some(
        (i) => i.system === SYSTEMS.eligibilityKey && (i.value === key || i.value?.startsWith(`${key};`)),
      ),
    )
    .filter((t) => t.status !== 'draft');
  if (made.some((t) => t.reasonReference?.reference === current)) {
    return { ok: true, offered: true, replay: true };
  }
  const latest = made.sort((a, b) => (b.meta?.lastUpdated ?? '').localeCompare(a.meta?.lastUpdated ?? ''))[0];
  if (!latest) {
    // Nothing was selected yet: the review's own run selects for the Condition as it then is.
    return { ok: true, offered: false, reason: 'no selection was made for this condition yet' };
  }
  const before = await pinnedVersion(medplum, latest.reasonReference?.reference);
  if (before && clinicalFacts(before) === clinicalFacts(condition)) {
    return { ok: true, offered: false, reason: 'the revision is not clinical: what was offered stands' };
  }
  const withdrawing = await withdrawnByRevision(medplum, condition);
  const organization = patient.managingOrganization?.reference;
  const code = condition.code?.coding?.find((c) => c.system === ICD10CM)?.code;
  const treatable = stillToTreat(condition) && !!code && (await inConditionCatalog(medplum, code, organization));
  if (!treatable) {
    if (withdrawing.length > 0) {
      await medplum.executeBatch(transaction(withdrawing)).catch((err: unknown) => {
        if (!lostRace(err)) {
          throw err;
        }
      });
    }
    return {
      ok: true,
      offered: false,
      reason: 'the condition is no longer one to treat here',
      withdrawn: withdrawing.length,
    };
  }
  const offering = ahead(
    treatingProtocols(medplum, code as string, organization).then((protocols) =>
      optionsOf(medplum, protocols, organization),
    ),
  );
  const recording = ahead(patientRecord(medplum, patient));
  const [device, options, queue] = await Promise.all([
    engine,
    offering,
    tenantQueue(medplum, patient, 'select-treatment'),
  ]);
  if (!device) {
    throw new Error('the eligibility engine Device is not provisioned');
  }
  const claimed = await claimSelection(medplum, review, patient, `${key};${current}`, queue);
  if (claimed?.status !== 'draft') {
    return { ok: true, offered: true, replay: true };
  }
  const findings = assess(options, await recording);
  const bundle = findingsBundle({ claimed, patient, condition, device, options, findings });
  bundle.entry = [...(bundle.entry ?? []), ...withdrawing];
  try {
    await medplum.executeBatch(bundle);
  } catch (err) {
    if (lostRace(err)) {
      return { ok: true, offered: true, replay: true };
    }
    throw err;
  }
  return { ok: true, offered: true, task: `Task/${claimed.id}`, withdrawn: withdrawing.length };
}

const transaction = (entry: BundleEntry[]): Bundle => ({ resourceType: 'Bundle', type: 'transaction', entry });

/**
 * The Condition she assigned, recorded once per review (a conditional create on the review's key: a
 * duplicate delivery finds the same one): confirmed and active, her as asserter and recorder, her answers
 * as its evidence, the review's journey tags.
 */
async function recordCondition(
  medplum: MedplumClient,
  {
    review,
    key,
    coding,
    clinician,
    response,
  }: {
    review: Task;
    key: string;
    coding: Coding;
    clinician: string;
    response: QuestionnaireResponse & { id: string };
  },
): Promise<Condition & { id: string }> {
  const identifier = `${SYSTEMS.eligibilityKey}|${key}`;
  const condition: Condition = {
    resourceType: 'Condition',
    meta: { tag: (review.meta?.tag ?? []).filter((t) => t.system === SYSTEMS.episode) },
    identifier: [{ system: SYSTEMS.eligibilityKey, value: key }],
    clinicalStatus: {
      coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-clinical', code: 'active' }],
    },
    verificationStatus: {
      coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-ver-status', code: 'confirmed' }],
    },
    code: { coding: [coding] },
    subject: review.for as Reference<Patient>,
    asserter: { reference: clinician } as Condition['asserter'],
    recorder: { reference: clinician } as Condition['recorder'],
    recordedDate: response.authored ?? new Date().toISOString(),
    evidence: [{ detail: [{ reference: `QuestionnaireResponse/${response.id}` }] }],
  };
  let recorded: Condition | undefined;
  try {
    const written = await medplum.executeBatch({
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        {
          resource: condition,
          request: { method: 'POST', url: 'Condition', ifNoneExist: `identifier=${encodeURIComponent(identifier)}` },
        },
      ],
    });
    // What the create answered (made now, or the one its key found); read back only when it does not say.
    const answered = written.entry?.[0]?.resource as Condition | undefined;
    if (
      answered?.resourceType === 'Condition' &&
      answered.identifier?.some((i) => i.system === SYSTEMS.eligibilityKey && i.value === key)
    ) {
      recorded = answered;
    }
  } catch (err) {
    if (!lostRace(err)) {
      throw err;
    }
  }
  recorded ??= await medplum.searchOne('Condition', { identifier }, { cache: 'no-cache' });
  if (!recorded?.id || recorded.subject?.reference !== review.for?.reference) {
    throw new Error('the assigned Condition could not be read back');
  }
  return recorded as Condition & { id: string };
}

async function inConditionCatalog(medplum: MedplumClient, code: string, organization: string | undefined) {
  return (await conditionCatalogs(medplum, organization)).some((v) =>
    (v.compose?.include ?? []).some(
      (include) => include.system === ICD10CM && (include.concept ?? []).some((c) => c.code === code),
    ),
  );
}

/** The catalog's active plans, the tenant's and the platform's, whoever they are published to. */
async function activePlans(medplum: MedplumClient): Promise<PlanDefinition[]> {
  const plans = await Promise.all(
    [CATALOG.tenant, CATALOG.platform].map((tag) =>
      searchAll(medplum, 'PlanDefinition', { _tag: `${CATALOG.system}|${tag}`, status: 'active' }),
    ),
  );
  return plans.flat();
}

/** The active clinical protocols published to the tenant whose goal addresses this ICD-10-CM code. */
async function treatingProtocols(
  medplum: MedplumClient,
  code: string,
  organization: string | undefined,
): Promise<PlanDefinition[]> {
  const plans = await activePlans(medplum);
  return plans.filter(
    (plan) =>
      isPublishedTo(plan, organization) &&
      planTypeOf(plan) === 'clinical-protocol' &&
      (plan.goal ?? []).some((g) =>
        (g.addresses ?? []).some((a) => a.coding?.some((c) => c.system === ICD10CM && c.code === code)),
      ),
  );
}

export interface Option {
  protocol: PlanDefinition;
  option: ActivityDefinition;
  canonical: string;
  preferred: boolean;
}

/** Each protocol's options: the sub-actions of its choice group (`selectionBehavior` exactly-one). */
async function optionsOf(
  medplum: MedplumClient,
  protocols: PlanDefinition[],
  organization: string | undefined,
): Promise<Option[]> {
  // Every option's definition read at once (fewer round trips), kept in the protocols' order.
  const choices = protocols.flatMap((protocol) =>
    ((protocol.action ?? []).find((a) => a.selectionBehavior === 'exactly-one')?.action ?? []).map((action) => ({
      protocol,
      action,
    })),
  );
  const found = await Promise.all(
    choices.map(async ({ protocol, action }) => {
      const canonical = action.definitionCanonical ?? '';
      const [url, version] = canonical.split('|');
      const [option] = (await medplum.searchResources('ActivityDefinition', { url, version })) as ActivityDefinition[];
      if (option && isPublishedTo(option, organization) && option.status === 'active') {
        const preferred = action.extension?.some((e) => e.url === EXTENSIONS.guidelinePreferred && e.valueBoolean);
        return [{ protocol, option, canonical, preferred: preferred === true }];
      }
      return [];
    }),
  );
  return found.flat();
}

/** The patient's own record, as the rules read it: a collection Bundle. */
async function patientRecord(medplum: MedplumClient, patient: Patient & { id: string }): Promise<Bundle> {
  const subject = `Patient/${patient.id}`;
  const [conditions, observations, medications, allergies] = await Promise.all([
    searchAll(medplum, 'Condition', { subject }),
    searchAll(medplum, 'Observation', { subject }),
    searchAll(medplum, 'MedicationRequest', { subject }),
    searchAll(medplum, 'AllergyIntolerance', { patient: subject }),
  ]);
  const resources: Resource[] = [patient, ...conditions, ...observations, ...medications, ...allergies];
  return { resourceType: 'Bundle', type: 'collection', entry: resources.map((resource) => ({ resource })) };
}

export interface Finding {
  option: Option;
  fired: FiredRule[];
}

/** A rule that fires, or that cannot be decided: `missing` names the facts her record lacks for it. */
export interface FiredRule {
  code: string;
  kind: string;
  description: string;
  missing?: string[];
}

/**
 * Every rule of every option, evaluated over her record: the rules that fire, and the rules that cannot be
 * decided because a fact they need is not on her record (its `requires`: each a named fact and a FHIRPath
 * expression true when the record has it). A rule that cannot be decided is a finding too, never "clear":
 * its option is "not determined", with the missing facts named.
 */
export function assess(options: Option[], record: Bundle): Finding[] {
  return options.map((option) => ({
    option,
    fired: (option.option.extension ?? [])
      .filter((e) => e.url === EXTENSIONS.eligibilityRule)
      .map(ruleOf)
      .flatMap((rule): FiredRule[] => {
        const verdict = evaluate(rule.expression, record);
        const { expression: _expression, requires, ...fired } = rule;
        if (verdict === 'unevaluable') {
          return [{ ...fired, description: `${rule.description} ${UNEVALUABLE}`.trim() }];
        }
        if (verdict === 'applies') {
          return [fired];
        }
        // Clear on what is known: decided only when every fact it needs is on her record.
        const missing = requires.filter((fact) => evaluate(fact.expression, record) !== 'applies').map((f) => f.fact);
        return missing.length > 0
          ? [{ ...fired, description: `${rule.description} ${notDetermined(missing)}`, missing }]
          : [];
      }),
  }));
}

/** What a finding says when its rule could not be evaluated (it then counts as applying: fail closed). */
export const UNEVALUABLE = '(This rule could not be evaluated on the record, so it is treated as applying.)';

/** What a finding says when a fact its rule needs is not on her record. */
export const notDetermined = (missing: string[]): string =>
  `Not determined: her record has no ${missing.join(', no ')}. Record ${missing.length === 1 ? 'it' : 'them'}, or give your reason to proceed without.`;

function ruleOf(extension: Extension) {
  const part = (url: string) => extension.extension?.find((e) => e.url === url);
  return {
    code: part('code')?.valueCode ?? 'unnamed-rule',
    kind: part('kind')?.valueCode ?? 'contraindication',
    description: part('description')?.valueString ?? '',
    expression: part('expression')?.valueExpression?.expression ?? '',
    requires: (extension.extension ?? [])
      .filter((e) => e.url === 'requires')
      .map((e) => ({
        fact: e.valueExpression?.description ?? 'a fact the rule needs',
        expression: e.valueExpression?.expression ?? '',
      })),
  };
}

/**
 * A rule's verdict: `clear` only when its expression evaluates to exactly `false`; `applies` when to
 * exactly `true`; anything else (no expression, an error, empty, several values, not a boolean) is
 * `unevaluable`, which fires like `applies` (fail closed), with a finding that says so.
 */
export function evaluate(expression: string, record: Bundle): 'applies' | 'clear' | 'unevaluable' {
  if (!expression.trim()) {
    return 'unevaluable';
  }
  try {
    const result = evalFhirPath(expression, record);
    if (result.length === 1 && result[0] === false) {
      return 'clear';
    }
    return result.length === 1 && result[0] === true ? 'applies' : 'unevaluable';
  } catch {
    return 'unevaluable';
  }
}

async function selectionOf(medplum: MedplumClient, key: string): Promise<Task | undefined> {
  return medplum.searchOne('Task', { identifier: `${SYSTEMS.eligibilityKey}|${key}` }, { cache: 'no-cache' });
}

/** Step 1: the selection task, claimed once per review (a duplicate delivery finds the same one). */
async function claimSelection(
  medplum: MedplumClient,
  review: Task,
  patient: Patient & { id: string },
  key: string,
  queue: CareTeam | undefined,
): Promise<Task | undefined> {
  const entry = clinicianTask({
    code: SELECT_TREATMENT,
    description: 'Select a treatment option',
    patient,
    queue,
    focus: { reference: `Task/${review.id}` },
    tags: (review.meta?.tag ?? []).filter((t) => t.system === SYSTEMS.episode),
  });
  const draft: Task = {
    ...(entry.resource as Task),
    status: 'draft',
    identifier: [{ system: SYSTEMS.eligibilityKey, value: key }],
  };
  try {
    const written = await medplum.executeBatch({
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        {
          resource: draft,
          request: {
            method: 'POST',
            url: 'Task',
            ifNoneExist: `identifier=${encodeURIComponent(`${SYSTEMS.eligibilityKey}|${key}`)}`,
          },
        },
      ],
    });
    // What the create answered (made now, or the one its key found); read back only when it does not say.
    const answered = written.entry?.[0]?.resource as Task | undefined;
    if (
      answered?.resourceType === 'Task' &&
      answered.identifier?.some((i) => i.system === SYSTEMS.eligibilityKey && i.value === key)
    ) {
      return answered;
    }
  } catch (err) {
    if (!lostRace(err)) {
      throw err;
    }
  }
  return selectionOf(medplum, key);
}

/** Step 2: the findings, the selection task made ready under If-Match, and the provenance: one transaction. */
function findingsBundle({
  claimed,
  patient,
  condition,
  device,
  options,
  findings,
}: {
  claimed: Task;
  patient: Patient & { id: string };
  condition: Condition & { id: string };
  device: Device;
  options: Option[];
  findings: Finding[];
}): Bundle {
  const now = new Date().toISOString();
  const author = { reference: `Device/${device.id}` };
  const issueEntries: BundleEntry[] = [];
  const issuesByOption = new Map<string, string[]>();
  for (const finding of findings) {
    for (const rule of finding.fired) {
      const fullUrl = `urn:uuid:${randomUUID()}`;
      const issue: DetectedIssue = {
        resourceType: 'DetectedIssue',
        meta: { tag: claimed.meta?.tag },
        status: 'preliminary',
        code: { coding: [{ system: SYSTEMS.eligibilityRule, code: rule.code }], text: rule.kind },
        severity: rule.kind === 'prerequisite' ? 'moderate' : 'high',
        patient: { reference: `Patient/${patient.id}` },
        identifiedDateTime: now,
        author,
        implicated: [versioned(finding.option.option)],
        detail: rule.description,
      };
      issueEntries.push({ fullUrl, resource: issue, request: { method: 'POST', url: 'DetectedIssue' } });
      issuesByOption.set(finding.option.canonical, [...(issuesByOption.get(finding.option.canonical) ?? []), fullUrl]);
    }
  }
  const results: Parameters = {
    resourceType: 'Parameters',
    id: 'results',
    parameter: findings.map(
      (f): ParametersParameter => ({
        name: 'option',
        part: [
          { name: 'option', valueCanonical: f.option.canonical },
          { name: 'protocol', valueCanonical: `${f.option.protocol.url}|${f.option.protocol.version}` },
          { name: 'eligible', valueBoolean: f.fired.length === 0 },
          { name: 'determined', valueBoolean: f.fired.every((r) => !r.missing) },
          { name: 'preferred', valueBoolean: f.option.preferred },
          ...f.fired.map((r) => ({ name: 'issue', valueCode: r.code })),
        ],
      }),
    ),
  };
  const guidance: GuidanceResponse = {
    resourceType: 'GuidanceResponse',
    id: 'eligibility',
    status: 'success',
    moduleUri: `${SYSTEMS.device}/eligibility-engine`,
    subject: { reference: `Patient/${patient.id}` },
    occurrenceDateTime: now,
    performer: author,
    reasonReference: [versioned(condition) as Reference<Condition>],
    outputParameters: { reference: '#results' },
  };
  const form = selectionForm(
    findings.map((f) => ({
      canonical: f.option.canonical,
      title: f.option.option.title ?? f.option.option.name ?? f.option.canonical,
      preferred: f.option.preferred,
      findings: f.fired.map(({ code, description, missing }) => ({
        code,
        description,
        ...(missing ? { missing } : {}),
      })),
    })),
  );
  const inputs: TaskInput[] = findings.map((f) => ({
    type: { coding: [{ system: SYSTEMS.taskKind, code: 'treatment-option' }] },
    valueCanonical: f.option.canonical,
    extension: [
      { url: EXTENSIONS.eligible, valueBoolean: f.fired.length === 0 },
      ...(f.option.preferred ? [{ url: EXTENSIONS.guidelinePreferred, valueBoolean: true }] : []),
    ],
  }));
  const stored = storedForm(form, patient.managingOrganization?.reference);
  const diagnosis = condition.code?.coding?.find((c) => c.system === ICD10CM);
  const selection: Task = {
    ...claimed,
    status: 'ready',
    description: `Select a treatment for ${diagnosis?.display ?? diagnosis?.code ?? 'the condition assigned'} (${diagnosis?.code ?? ''})`,
    contained: [results, guidance],
    focus: { reference: stored.reference },
    reasonReference: versioned(condition),
    input: [formInput(stored.reference, form.title), ...inputs],
    note: [
      {
        text: 'Eligibility is advisory (the form says it in words; the contained GuidanceResponse and the DetectedIssues are the record).',
      },
      { text: formInstructions(form) },
    ],
  };
  const provenance: Provenance = {
    resourceType: 'Provenance',
    target: [
      { reference: `Patient/${patient.id}` },
      { reference: `Task/${claimed.id}` },
      ...issueEntries.map((e) => ({ reference: e.fullUrl })),
    ],
    recorded: now,
    activity: { text: 'treatment eligibility' },
    agent: [authorAgent(author)],
    entity: [
      { role: 'source', what: versioned(condition) },
      ...[...new Set(options.map((o) => o.protocol))].map((p) => ({ role: 'source' as const, what: versioned(p) })),
      ...options.map((o) => ({ role: 'source' as const, what: versioned(o.option) })),
    ],
  };
  return {
    resourceType: 'Bundle',
    type: 'transaction',
    entry: [
      {
        resource: selection,
        request: { method: 'PUT', url: `Task/${claimed.id}`, ifMatch: `W/"${claimed.meta?.versionId}"` },
      },
      ...issueEntries,
      stored.entry,
      { resource: provenance, request: { method: 'POST', url: 'Provenance' } },
    ],
  };
}
