import type {
  Attachment,
  Coding,
  Questionnaire,
  QuestionnaireItem,
  QuestionnaireResponseItem,
} from '@medplum/fhirtypes';
import { optionMatching } from '../../contracts/work-forms';

/** The answer value a Questionnaire item type takes (R4 `Questionnaire.item.type` -> `answer.value[x]`). */
const VALUE_OF: Record<string, string[]> = {
  boolean: ['valueBoolean'],
  decimal: ['valueDecimal', 'valueInteger'],
  integer: ['valueInteger'],
  date: ['valueDate'],
  dateTime: ['valueDateTime'],
  time: ['valueTime'],
  string: ['valueString'],
  text: ['valueString'],
  url: ['valueUri'],
  choice: ['valueCoding', 'valueString', 'valueInteger', 'valueDate', 'valueTime', 'valueReference'],
  'open-choice': ['valueCoding', 'valueString'],
  attachment: ['valueAttachment'],
  reference: ['valueReference'],
  quantity: ['valueQuantity'],
};

type Answer = NonNullable<QuestionnaireResponseItem['answer']>[number];

/**
 * What is wrong with answers to a Questionnaire: every answered linkId must be one of its
 * items, at the same place; a required item must be answered; an item takes the value type its `type`
 * says, one answer unless it `repeats`, a choice one of its `answerOption`s when it lists them (a coding
 * without a system counts when its code is one option's alone: contracts/work-forms.ts optionMatching); groups
 * and display items take no answers. An item with `enableWhen` is not required here (whether it is
 * enabled depends on other answers, and refusing an answer a patient could not give would be worse).
 * An empty list means the answers fit.
 */
export function answerProblems(
  questionnaire: Questionnaire,
  items: readonly QuestionnaireResponseItem[],
): { path: string; message: string }[] {
  return check(questionnaire.item ?? [], items, 'item');
}

function check(
  defined: readonly QuestionnaireItem[],
  given: readonly QuestionnaireResponseItem[],
  path: string,
): { path: string; message: string }[] {
  const problems: { path: string; message: string }[] = [];
  const byLinkId = new Map(defined.map((item) => [item.linkId, item]));
  for (const answered of given) {
    const at = `${path}[linkId=${answered.linkId}]`;
    const item = byLinkId.get(answered.linkId);
    if (!item) {
      problems.push({ path: at, message: 'not an item of this questionnaire' });
      continue;
    }
    const answers = answered.answer ?? [];
    if (item.type === 'group' || item.type === 'display') {
      if (answers.length > 0) {
        problems.push({ path: at, message: `a ${item.type} item takes no answer` });
      }
      problems.push(...check(item.item ?? [], answered.item ?? [], at));
      continue;
    }
    if (answers.length > 1 && !item.repeats) {
      problems.push({ path: at, message: 'takes one answer' });
    }
    for (const answer of answers) {
      const problem = valueProblem(item, answer);
      if (problem) {
        problems.push({ path: at, message: problem });
      }
      problems.push(...check(item.item ?? [], answer.item ?? [], at));
    }
  }
  for (const item of defined) {
    if (item.required && !item.enableWhen?.length && !isAnswered(item, given)) {
      problems.push({ path: `${path}[linkId=${item.linkId}]`, message: 'required, not answered' });
    }
  }
  return problems;
}

function isAnswered(item: QuestionnaireItem, given: readonly QuestionnaireResponseItem[]): boolean {
  const answered = given.filter((g) => g.linkId === item.linkId);
  return item.type === 'group'
    ? answered.some((g) => (g.item ?? []).length > 0)
    : answered.some((g) => (g.answer ?? []).length > 0);
}

function valueProblem(item: QuestionnaireItem, answer: Answer): string | undefined {
  const allowed = VALUE_OF[item.type] ?? [];
  const present = Object.keys(answer).filter((key) => key.startsWith('value'));
  if (present.length !== 1 || !allowed.includes(present[0])) {
    return `a ${item.type} item takes ${allowed.join(' or ') || 'no answer'}`;
  }
  if ((item.type === 'choice' || item.type === 'open-choice') && item.answerOption?.length) {
    const key = present[0];
    const value = (answer as Record<string, unknown>)[key];
    const offered = item.answerOption.some((option) => {
      const optionValue = (option as Record<string, unknown>)[key];
      if (key === 'valueCoding') {
        return optionValue !== undefined && optionMatching(item.answerOption ?? [], value as Coding) === optionValue;
      }
      return optionValue !== undefined && JSON.stringify(optionValue) === JSON.stringify(value);
    });
    if (!offered && !(item.type === 'open-choice' && key === 'valueString')) {
      return 'not one of its options';
    }
  }
  return undefined;
}

/**
 * Her answers as clinicians read them (issue 48): each item with its question's text from the pinned
 * Questionnaire, whatever her app sent (Medplum's apps show a response's own `item.text` as the question,
 * never loading the Questionnaire); a choice's coding with its option's display; and each file she attached
 * as the checked upload it is (`checked`, by the url she gave: `Binary/<id>`, its type, size and title), so
 * an app renders it as what it is. Answers themselves are unchanged; items must already fit (answerProblems).
 */
export function readableItems(
  questionnaire: Questionnaire,
  items: readonly QuestionnaireResponseItem[],
  checked: ReadonlyMap<string, Attachment>,
): QuestionnaireResponseItem[] {
  return readable(questionnaire.item ?? [], items, checked);
}

function readable(
  defined: readonly QuestionnaireItem[],
  given: readonly QuestionnaireResponseItem[],
  checked: ReadonlyMap<string, Attachment>,
): QuestionnaireResponseItem[] {
  const byLinkId = new Map(defined.map((item) => [item.linkId, item]));
  return given.map((answered) => {
    const item = byLinkId.get(answered.linkId);
    if (!item) {
      return answered;
    }
    const { text: _text, answer, item: nested, ...rest } = answered;
    return {
      ...rest,
      ...(item.text ? { text: item.text } : {}),
      ...(answer
        ? {
            answer: answer.map((a) => {
              const { item: below, ...value } = a;
              return {
                ...readableValue(item, value, checked),
                ...(below ? { item: readable(item.item ?? [], below, checked) } : {}),
              };
            }),
          }
        : {}),
      ...(nested ? { item: readable(item.item ?? [], nested, checked) } : {}),
    };
  });
}

function readableValue(item: QuestionnaireItem, answer: Answer, checked: ReadonlyMap<string, Attachment>): Answer {
  if (answer.valueCoding && !answer.valueCoding.display) {
    const option = optionMatching(item.answerOption ?? [], answer.valueCoding);
    return option?.display ? { ...answer, valueCoding: { ...answer.valueCoding, display: option.display } } : answer;
  }
  if (answer.valueAttachment?.url) {
    const upload = checked.get(answer.valueAttachment.url);
    return upload ? { ...answer, valueAttachment: upload } : answer;
  }
  return answer;
}
