import type { Questionnaire } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import { answerProblems } from '../../bots/lib/answers';

/** bots/lib/answers.ts: answers as a Questionnaire asks for them (issue 28, item 5). */
const questionnaire: Questionnaire = {
  resourceType: 'Questionnaire',
  status: 'active',
  item: [
    {
      linkId: 'smoker',
      type: 'choice',
      required: true,
      answerOption: [
        { valueCoding: { system: 'urn:s', code: 'never' } },
        { valueCoding: { system: 'urn:s', code: 'daily' } },
      ],
    },
    {
      linkId: 'packs',
      type: 'integer',
      required: true,
      enableWhen: [{ question: 'smoker', operator: '=', answerCoding: { system: 'urn:s', code: 'daily' } }],
    },
    {
      linkId: 'history',
      type: 'group',
      required: true,
      item: [{ linkId: 'since', type: 'date', required: true }],
    },
    { linkId: 'info', type: 'display' },
  ],
};

describe('answerProblems', () => {
  it('a listed choice, a group with its required child, and an enableWhen item left out: fits', () => {
    expect(
      answerProblems(questionnaire, [
        { linkId: 'smoker', answer: [{ valueCoding: { system: 'urn:s', code: 'never' } }] },
        { linkId: 'history', item: [{ linkId: 'since', answer: [{ valueDate: '2020-01-01' }] }] },
      ]),
    ).toEqual([]);
  });

  it('a choice not offered, a group without its required child, a display answered: each named', () => {
    expect(
      answerProblems(questionnaire, [
        { linkId: 'smoker', answer: [{ valueCoding: { system: 'urn:s', code: 'weekly' } }] },
        { linkId: 'history', item: [{ linkId: 'since', answer: [{ valueString: 'long ago' }] }] },
        { linkId: 'info', answer: [{ valueString: 'x' }] },
      ]),
    ).toEqual([
      { path: 'item[linkId=smoker]', message: 'not one of its options' },
      { path: 'item[linkId=history][linkId=since]', message: 'a date item takes valueDate' },
      { path: 'item[linkId=info]', message: 'a display item takes no answer' },
    ]);
    expect(
      answerProblems(questionnaire, [
        { linkId: 'smoker', answer: [{ valueCoding: { system: 'urn:s', code: 'never' } }] },
      ]),
    ).toEqual([{ path: 'item[linkId=history]', message: 'required, not answered' }]);
  });
});
