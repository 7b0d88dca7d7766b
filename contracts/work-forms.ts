import type {
  Coding,
  Questionnaire,
  QuestionnaireItem,
  QuestionnaireResponse,
  QuestionnaireResponseItemAnswer,
  Task,
  TaskInput,
  TaskOutput,
  ValueSet,
} from '@medplum/fhirtypes';
import { SYSTEMS } from './systems';

/**
 * Clinician work as a questionnaire (JOURNEY J, issue 26). The task a bot issues carries the form of what
 * the clinician must answer: a Questionnaire contained in the Task (a Questionnaire of its own would be
 * in no tenant: Medplum gives a resource a tenant's account only from the patient it is about, and a
 * Questionnaire is about nobody; the Task is hers), named by the input `questionnaire`. She answers it
 * with a QuestionnaireResponse about the patient, and completes the task with it as the output
 * `questionnaire-response`: Medplum's own Task/Questionnaire pattern, rendered by `@medplum/react`'s
 * QuestionnaireForm. Bots believe the form of the version they issued and the answers she wrote herself.
 */

/** Task.input naming the form (`valueReference` to the contained Questionnaire). */
export const FORM_INPUT = 'questionnaire';
/** Task.output naming her answers (`valueReference` to her QuestionnaireResponse). */
export const RESPONSE_OUTPUT = 'questionnaire-response';

export const WORK_FORMS = {
  assignCondition: `${SYSTEMS.workForm}/assign-condition`,
  selectTreatment: `${SYSTEMS.workForm}/select-treatment`,
} as const;

/** The linkIds of the forms. */
export const CONDITION_ITEM = 'condition';
export const OPTION_ITEM = 'option';
const FORM_ID = 'form';

/**
 * The review of an intake: one question, the condition, among the codes of the tenant's condition
 * catalogs (pinned: the form names the versions it was built from).
 */
export function conditionForm(catalogs: ValueSet[]): Questionnaire {
  const codes = catalogs.flatMap((catalog) =>
    (catalog.compose?.include ?? []).flatMap((include) =>
      (include.concept ?? []).map((c): Coding => ({ system: include.system, code: c.code, display: c.display })),
    ),
  );
  return {
    resourceType: 'Questionnaire',
    id: FORM_ID,
    url: WORK_FORMS.assignCondition,
    version: '1',
    status: 'active',
    title: 'Assign a condition',
    derivedFrom: catalogs.flatMap((c) => (c.url ? [`${c.url}|${c.version}`] : [])),
    item: [
      {
        linkId: CONDITION_ITEM,
        text: 'Condition (from the condition catalog)',
        type: 'choice',
        required: true,
        answerOption: codes.map((valueCoding) => ({ valueCoding })),
      },
    ],
  };
}

/** An option as the selection form offers it, with what the engine found against it. */
export interface FormOption {
  canonical: string;
  title: string;
  preferred: boolean;
  findings: { code: string; description: string }[];
}

/** The choice that stands for an option: its canonical as the code, a label that says what is known of it. */
export function optionCoding(option: FormOption): Coding {
  const labels = [
    ...(option.preferred ? ['guideline-preferred'] : []),
    ...(option.findings.length > 0
      ? [`not eligible: ${option.findings.length} finding${option.findings.length === 1 ? '' : 's'} to mitigate`]
      : []),
  ];
  return {
    system: SYSTEMS.treatmentOption,
    code: option.canonical,
    display: labels.length > 0 ? `${option.title} (${labels.join('; ')})` : option.title,
  };
}

/** The linkId of the mitigation of one finding against the option at `index` (1-based) of the form. */
export const mitigationItem = (index: number, code: string) => `mitigation-${index}-${code}`;

/**
 * The selection: the options as choices (the guideline-preferred one labelled, none preselected), and for
 * an ineligible option a mitigation per finding, asked when that option is chosen.
 */
export function selectionForm(options: FormOption[]): Questionnaire {
  const mitigations = options.flatMap((option, i) =>
    option.findings.map(
      (finding): QuestionnaireItem => ({
        linkId: mitigationItem(i + 1, finding.code),
        text: `Mitigation of "${finding.description}" (${option.title})`,
        type: 'text',
        required: true,
        enableWhen: [{ question: OPTION_ITEM, operator: '=', answerCoding: optionCoding(option) }],
      }),
    ),
  );
  return {
    resourceType: 'Questionnaire',
    id: FORM_ID,
    url: WORK_FORMS.selectTreatment,
    version: '1',
    status: 'active',
    title: 'Select a treatment option',
    item: [
      {
        linkId: OPTION_ITEM,
        text: 'Treatment option (eligibility is advisory: see the findings)',
        type: 'choice',
        required: true,
        answerOption: options.map((option) => ({ valueCoding: optionCoding(option) })),
      },
      ...mitigations,
    ],
  };
}

/**
 * The form as text, for a task's `note`: what to answer, where Medplum's app shows nothing of a contained
 * resource (found driving it on a real Medplum): the form's url, each item's linkId and text, its choices
 * (code and label) and when it is asked, and how to hand the answers in.
 */
export function formInstructions(form: Questionnaire): string {
  const items = (form.item ?? []).map((item) => {
    const choices = (item.answerOption ?? [])
      .map((o) => o.valueCoding)
      .filter((c): c is Coding => c !== undefined)
      .map((c) => `${c.code} (${c.display ?? c.code})`);
    const when = (item.enableWhen ?? []).map((w) => `only when ${w.question} is ${w.answerCoding?.code}`);
    return `${item.linkId}${item.required ? ' (required)' : ''}: ${item.text ?? ''} [${item.type}${
      choices.length > 0 ? `: one of ${choices.join('; ')}` : ''
    }]${when.length > 0 ? ` ${when.join(', ')}` : ''}`;
  });
  return [
    `To complete: answer the form ${form.url} (a QuestionnaireResponse about this patient, status completed)`,
    ...items.map((line) => `- ${line}`),
    `then complete this task with the output "${RESPONSE_OUTPUT}" referencing your QuestionnaireResponse.`,
  ].join('\n');
}

/** The input that names a contained form. */
export const formInput = (form: Questionnaire): TaskInput => ({
  type: { text: FORM_INPUT },
  valueReference: { reference: `#${form.id}`, display: form.title },
});

/** The form a task carries (its contained Questionnaire named by the input), if any. */
export function formOf(task: Task): Questionnaire | undefined {
  const reference = task.input?.find((i) => i.type?.text === FORM_INPUT)?.valueReference?.reference ?? '';
  if (!reference.startsWith('#')) {
    return undefined;
  }
  return task.contained?.find(
    (r): r is Questionnaire => r.resourceType === 'Questionnaire' && r.id === reference.slice(1),
  );
}

/** The output that hands in her answers. */
export const responseOutput = (reference: string): TaskOutput => ({
  type: { text: RESPONSE_OUTPUT },
  valueReference: { reference },
});

/**
 * The reference of the answers a completed task hands in: the output named `questionnaire-response`, by
 * its text or by a coding's code (what Medplum app's CodeableConcept field writes: it cannot write text).
 */
export const responseReference = (task: Task): string | undefined =>
  task.output?.find((o) => o.type?.text === RESPONSE_OUTPUT || o.type?.coding?.some((c) => c.code === RESPONSE_OUTPUT))
    ?.valueReference?.reference;

/**
 * The form's own choice that an answer to a choice item names: the option with the same system and code,
 * or, for an answer coding without a system (Medplum app's coding field cannot write one), the one
 * option with that code. Undefined when none, or when a system-less code is ambiguous.
 */
export function chosenOption(form: Questionnaire, response: QuestionnaireResponse, linkId: string): Coding | undefined {
  const given = answersTo(response, linkId)[0]?.valueCoding;
  const item = form.item?.find((i) => i.linkId === linkId);
  return given ? optionMatching(item?.answerOption ?? [], given) : undefined;
}

/** The option coding an answered coding stands for (same system and code, or a code unique among them). */
export function optionMatching(options: readonly { valueCoding?: Coding }[], given: Coding): Coding | undefined {
  const codings = options.flatMap((o) => (o.valueCoding ? [o.valueCoding] : []));
  if (given.system) {
    return codings.find((c) => c.system === given.system && c.code === given.code);
  }
  const same = codings.filter((c) => c.code === given.code);
  return same.length === 1 ? same[0] : undefined;
}

/** The answers to a top-level item. */
export const answersTo = (response: QuestionnaireResponse, linkId: string): QuestionnaireResponseItemAnswer[] =>
  (response.item ?? []).filter((i) => i.linkId === linkId).flatMap((i) => i.answer ?? []);
