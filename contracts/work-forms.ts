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
 * Clinician work as a questionnaire (JOURNEY J): Medplum's own Task/Questionnaire convention, so that
 * Medplum's Provider app (and any `@medplum/react` UI) renders the form and hands in the answers with no
 * code of ours. The bot that issues the work stores its form, a Questionnaire of the patient's tenant (its
 * `meta.accounts`; clinicians of that tenant read it, patients do not), in the same transaction as the
 * Task, and points the Task at it twice, as the Provider app reads it: `focus` (which makes it show a
 * form) and the FIRST input (which it loads the form from). What the work is about (the intake's
 * episode, the Condition) is the Task's `reasonReference`. Each form is written once and never changed;
 * its `url` names the kind of work and its `version` this one form.
 *
 * She answers with a QuestionnaireResponse and hands it in as the task's output. Both ways a Medplum app
 * writes it are accepted: the Provider app's (saved as she clicks: `questionnaire` the url alone,
 * `source` her, no subject or author, the output `{type: {text: "QuestionnaireResponse"}}`, and the task
 * completed BEFORE the response is), and the admin app's or the clinician helper's (a completed response,
 * then the task completed with the output `questionnaire-response`). Bots believe the form the platform
 * stored and the answers she wrote herself (bots/lib/work-forms.ts).
 */

/** Task.input naming the form (`valueReference` to the stored Questionnaire); always the first input. */
export const FORM_INPUT = 'questionnaire';
/** Task.output naming her answers (`valueReference` to her QuestionnaireResponse). */
export const RESPONSE_OUTPUT = 'questionnaire-response';
/** The output type text the Provider app writes for the same thing. */
export const PROVIDER_APP_OUTPUT = 'QuestionnaireResponse';

export const WORK_FORMS = {
  assignCondition: `${SYSTEMS.workForm}/assign-condition`,
  selectTreatment: `${SYSTEMS.workForm}/select-treatment`,
} as const;

/** The linkIds of the forms. */
export const CONDITION_ITEM = 'condition';
export const OPTION_ITEM = 'option';
/** The selection form's opening text (then `eligibility-<n>`, one per option): eligibility and findings, in words. */
export const ELIGIBILITY_ITEM = 'eligibility';

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
    url: WORK_FORMS.assignCondition,
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
  /** What the engine found against it; `missing`: a rule it could not decide, the facts her record lacks. */
  findings: { code: string; description: string; missing?: string[] }[];
}

/** The facts her record lacks for an option's undecided rules, each once. */
const missingFacts = (option: FormOption): string[] => [...new Set(option.findings.flatMap((f) => f.missing ?? []))];

/** An option's state in words: eligible, not eligible (a rule fires), or not determined (facts missing). */
function eligibilityOf(option: FormOption): string {
  const fires = option.findings.filter((f) => !f.missing).length;
  const missing = missingFacts(option);
  return [
    ...(fires > 0 ? ['not eligible'] : []),
    ...(missing.length > 0 ? [`not determined: no ${missing.join(', no ')} on record`] : []),
  ].join('; ');
}

/** The choice that stands for an option: its canonical as the code, a label that says what is known of it. */
export function optionCoding(option: FormOption): Coding {
  const labels = [
    ...(option.preferred ? ['guideline-preferred'] : []),
    ...(option.findings.length > 0
      ? [
          `${eligibilityOf(option)}: ${option.findings.length} finding${option.findings.length === 1 ? '' : 's'} to mitigate`,
        ]
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
 * The items of a selection form that mitigate the findings against the option chosen (`code`, its
 * canonical): those of its place among the choices (`mitigation-<place>-...`), as every form issued names them.
 */
export function mitigationsAsked(form: Questionnaire | undefined, code: string): QuestionnaireItem[] {
  const choices = form?.item?.find((item) => item.linkId === OPTION_ITEM)?.answerOption ?? [];
  const place = choices.findIndex((o) => o.valueCoding?.code === code);
  if (place < 0) {
    return [];
  }
  const prefix = mitigationItem(place + 1, '');
  return (form?.item ?? []).filter((item) => item.linkId.startsWith(prefix));
}

/**
 * The selection: the options as choices (the guideline-preferred one labelled, none preselected), and for
 * an ineligible option a mitigation per finding, each saying which option it is for. Always shown, never
 * hidden behind the choice (no `enableWhen`): Medplum's Provider app (5.1.29, TaskQuestionnaireForm)
 * completes the copy of the response it loaded with the task, whose items it fills in place; an item
 * that appeared only once an option was chosen is not in that copy, so a mitigation typed there was
 * dropped from the completed answers (the selection then refused as unmitigated). Answered for the option
 * chosen only: the others' are ignored.
 */
export function selectionForm(options: FormOption[]): Questionnaire {
  const mitigations = options.flatMap((option, i) =>
    option.findings.map(
      (finding): QuestionnaireItem => ({
        linkId: mitigationItem(i + 1, finding.code),
        text: `If you choose ${option.title}: your mitigation of "${finding.description}"`,
        type: 'text',
      }),
    ),
  );
  return {
    resourceType: 'Questionnaire',
    url: WORK_FORMS.selectTreatment,
    status: 'active',
    title: 'Select a treatment option',
    item: [
      // A paragraph each (a form app shows a display item's text as one paragraph).
      ...eligibilityInWords(options).map(
        (text, i): QuestionnaireItem => ({
          linkId: i === 0 ? ELIGIBILITY_ITEM : `${ELIGIBILITY_ITEM}-${i}`,
          text,
          type: 'display',
        }),
      ),
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
 * What the engine found, in words, for the clinician who chooses (advisory: the choice is hers): a heading,
 * then each option eligible or not, the guideline's preference, and every finding against it.
 */
export function eligibilityInWords(options: FormOption[]): string[] {
  const lines = options.map((option) => {
    const preferred = option.preferred ? ', guideline-preferred' : '';
    if (option.findings.length === 0) {
      return `${option.title}: eligible${preferred}.`;
    }
    // Each finding a clause of one sentence: its own closing full stop dropped.
    const findings = option.findings.map((f) => f.description.replace(/\.\s*$/, '')).join('; ');
    const missing = missingFacts(option);
    const record =
      missing.length > 0
        ? ` To decide it, record on her chart: ${missing.join('; ')}; or give your reason as its mitigation.`
        : '';
    return `${option.title}: ${eligibilityOf(option)}${preferred}. Findings: ${findings}. Choosing it asks for a mitigation of each.${record}`;
  });
  return ['Eligibility, computed by the platform (advisory: the choice is yours):', ...lines];
}

/**
 * The form as text, for a task's `note`: what to answer, for an app that shows a task's form only as a
 * link (Medplum's admin app): each item's linkId and text, its choices (code and label) and when it is
 * asked, and how to hand the answers in.
 */
export function formInstructions(form: Questionnaire): string {
  const items = (form.item ?? [])
    .filter((item) => item.type !== 'display')
    .map((item) => {
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
    `To complete: answer this task's form (${form.title}, ${form.url}), then complete the task. In Medplum's Provider app: assign the task to yourself, fill in the form shown on it, and mark it completed. Elsewhere: a QuestionnaireResponse to the form, handed in as the output "${RESPONSE_OUTPUT}".`,
    ...items.map((line) => `- ${line}`),
  ].join('\n');
}

/** The input that names a task's stored form (always the task's first input: the Provider app reads that one). */
export const formInput = (reference: string, title: string | undefined): TaskInput => ({
  type: { text: FORM_INPUT },
  valueReference: { reference, ...(title ? { display: title } : {}) },
});

/**
 * The stored form a task points at: `Questionnaire/<id>` named by both its focus and its first input (as
 * the Provider app reads it), or undefined. Who stored it is the reader's to check (bots/lib/work-forms.ts).
 */
export function formReference(task: Task): string | undefined {
  const first = task.input?.[0];
  const reference = first?.type?.text === FORM_INPUT ? first.valueReference?.reference : undefined;
  return reference?.startsWith('Questionnaire/') && task.focus?.reference === reference ? reference : undefined;
}

/** The output that hands in her answers. */
export const responseOutput = (reference: string): TaskOutput => ({
  type: { text: RESPONSE_OUTPUT },
  valueReference: { reference },
});

/**
 * The reference of the answers a completed task hands in: the output named `questionnaire-response`, by
 * its text or by a coding's code (what Medplum's admin app's CodeableConcept field writes: it cannot write
 * text), or `QuestionnaireResponse` (what the Provider app writes).
 */
export const responseReference = (task: Task): string | undefined =>
  task.output?.find(
    (o) =>
      o.type?.text === RESPONSE_OUTPUT ||
      o.type?.text === PROVIDER_APP_OUTPUT ||
      o.type?.coding?.some((c) => c.code === RESPONSE_OUTPUT),
  )?.valueReference?.reference;

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
