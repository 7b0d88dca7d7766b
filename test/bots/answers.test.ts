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

describe('answerProblems, item by item', () => {
  const one = (item: Questionnaire['item']) =>
    ({ resourceType: 'Questionnaire', status: 'active', item }) as Questionnaire;
  const offered = [{ valueCoding: { system: 'urn:a', code: 'x' } }, { valueCoding: { system: 'urn:b', code: 'y' } }];

  it('each item type takes its own value types and no other', () => {
    const takes: Record<string, Record<string, unknown>> = {
      boolean: { valueBoolean: true },
      decimal: { valueDecimal: 1.5, valueInteger: 2 },
      integer: { valueInteger: 2 },
      date: { valueDate: '2020-01-01' },
      dateTime: { valueDateTime: '2020-01-01T00:00:00Z' },
      time: { valueTime: '10:00:00' },
      string: { valueString: 's' },
      text: { valueString: 's' },
      url: { valueUri: 'https://example.org' },
      choice: {
        valueCoding: { code: 'c' },
        valueString: 's',
        valueInteger: 2,
        valueDate: '2020-01-01',
        valueTime: '10:00:00',
        valueReference: { reference: 'Patient/p' },
      },
      'open-choice': { valueCoding: { code: 'c' }, valueString: 's' },
      attachment: { valueAttachment: { url: 'Binary/b' } },
      reference: { valueReference: { reference: 'Patient/p' } },
      quantity: { valueQuantity: { value: 1, code: 'kg' } },
    };
    const values = Object.assign({}, ...Object.values(takes)) as Record<string, unknown>;
    for (const [type, accepted] of Object.entries(takes)) {
      const questionnaire = one([{ linkId: 'q', type: type as 'string' }]);
      for (const [key, value] of Object.entries(values)) {
        const problems = answerProblems(questionnaire, [{ linkId: 'q', answer: [{ [key]: value }] }]);
        const message = `a ${type} item takes ${Object.keys(accepted).join(' or ')}`;
        expect(problems, `${type} ${key}`).toEqual(key in accepted ? [] : [{ path: 'item[linkId=q]', message }]);
      }
    }
    // A type without values (or one FHIR R4 does not have) takes none.
    expect(
      answerProblems(one([{ linkId: 'q', type: 'question' as 'string' }]), [
        { linkId: 'q', answer: [{ valueString: 's' }] },
      ]),
    ).toEqual([{ path: 'item[linkId=q]', message: 'a question item takes no answer' }]);
  });

  it('one value per answer: two are refused, and so is none', () => {
    const questionnaire = one([{ linkId: 'q', type: 'decimal' }]);
    const problem = [{ path: 'item[linkId=q]', message: 'a decimal item takes valueDecimal or valueInteger' }];
    expect(answerProblems(questionnaire, [{ linkId: 'q', answer: [{ valueDecimal: 1, valueInteger: 1 }] }])).toEqual(
      problem,
    );
    expect(answerProblems(questionnaire, [{ linkId: 'q', answer: [{}] }])).toEqual(problem);
  });

  it('one answer unless the item repeats: one passes, two are refused; a repeating item takes both', () => {
    const answer = [{ valueString: 'a' }, { valueString: 'b' }];
    expect(
      answerProblems(one([{ linkId: 'q', type: 'string' }]), [{ linkId: 'q', answer: answer.slice(0, 1) }]),
    ).toEqual([]);
    expect(answerProblems(one([{ linkId: 'q', type: 'string' }]), [{ linkId: 'q', answer }])).toEqual([
      { path: 'item[linkId=q]', message: 'takes one answer' },
    ]);
    expect(answerProblems(one([{ linkId: 'q', type: 'string', repeats: true }]), [{ linkId: 'q', answer }])).toEqual(
      [],
    );
  });

  it('choices: an offered coding (with its system, or a code no other option has); mixed answers each judged', () => {
    const choice = one([{ linkId: 'q', type: 'choice', repeats: true, answerOption: offered }]);
    const answered = (...answer: { valueCoding?: { system?: string; code: string }; valueString?: string }[]) =>
      answerProblems(choice, [{ linkId: 'q', answer }]);
    expect(answered({ valueCoding: { system: 'urn:a', code: 'x' } }, { valueCoding: { code: 'y' } })).toEqual([]);
    expect(
      answered({ valueCoding: { system: 'urn:a', code: 'x' } }, { valueCoding: { system: 'urn:a', code: 'y' } }),
    ).toEqual([{ path: 'item[linkId=q]', message: 'not one of its options' }]);
    // A code two options share needs its system.
    const shared = one([
      {
        linkId: 'q',
        type: 'choice',
        answerOption: [...offered, { valueCoding: { system: 'urn:c', code: 'x' } }],
      },
    ]);
    expect(answerProblems(shared, [{ linkId: 'q', answer: [{ valueCoding: { code: 'x' } }] }])).toEqual([
      { path: 'item[linkId=q]', message: 'not one of its options' },
    ]);
    expect(
      answerProblems(shared, [{ linkId: 'q', answer: [{ valueCoding: { system: 'urn:c', code: 'x' } }] }]),
    ).toEqual([]);
    // A string where the options are codings: not offered (a choice), free text (an open choice).
    expect(answered({ valueString: 'x' })).toEqual([{ path: 'item[linkId=q]', message: 'not one of its options' }]);
    const open = one([{ linkId: 'q', type: 'open-choice', answerOption: offered }]);
    expect(answerProblems(open, [{ linkId: 'q', answer: [{ valueString: 'something else' }] }])).toEqual([]);
    expect(answerProblems(open, [{ linkId: 'q', answer: [{ valueCoding: { system: 'urn:z', code: 'x' } }] }])).toEqual([
      { path: 'item[linkId=q]', message: 'not one of its options' },
    ]);
  });

  it('choices of other values compare the whole value; without options any value of the type is taken', () => {
    const integers = one([{ linkId: 'q', type: 'choice', answerOption: [{ valueInteger: 1 }, { valueInteger: 2 }] }]);
    expect(answerProblems(integers, [{ linkId: 'q', answer: [{ valueInteger: 2 }] }])).toEqual([]);
    expect(answerProblems(integers, [{ linkId: 'q', answer: [{ valueInteger: 3 }] }])).toEqual([
      { path: 'item[linkId=q]', message: 'not one of its options' },
    ]);
    const references = one([
      { linkId: 'q', type: 'choice', answerOption: [{ valueReference: { reference: 'Practitioner/a' } }] },
    ]);
    expect(
      answerProblems(references, [{ linkId: 'q', answer: [{ valueReference: { reference: 'Practitioner/a' } }] }]),
    ).toEqual([]);
    expect(
      answerProblems(references, [
        { linkId: 'q', answer: [{ valueReference: { reference: 'Practitioner/a', display: 'A' } }] },
      ]),
    ).toEqual([{ path: 'item[linkId=q]', message: 'not one of its options' }]);
    const free = one([{ linkId: 'q', type: 'choice' }]);
    expect(answerProblems(free, [{ linkId: 'q', answer: [{ valueCoding: { system: 'urn:z', code: 'z' } }] }])).toEqual(
      [],
    );
  });

  it('required: an empty answer is no answer, a group needs an item, and an empty enableWhen still requires', () => {
    const questionnaire = one([
      { linkId: 'a', type: 'string', required: true },
      { linkId: 'g', type: 'group', required: true, item: [{ linkId: 'c', type: 'string' }] },
      { linkId: 'e', type: 'string', required: true, enableWhen: [] },
      { linkId: 'o', type: 'string' },
    ]);
    expect(
      answerProblems(questionnaire, [
        { linkId: 'a', answer: [] },
        { linkId: 'g', item: [] },
      ]),
    ).toEqual([
      { path: 'item[linkId=a]', message: 'required, not answered' },
      { path: 'item[linkId=g]', message: 'required, not answered' },
      { path: 'item[linkId=e]', message: 'required, not answered' },
    ]);
    expect(
      answerProblems(questionnaire, [
        { linkId: 'a', answer: [{ valueString: 'x' }] },
        { linkId: 'g', item: [{ linkId: 'c' }] },
        { linkId: 'e', answer: [{ valueString: 'y' }] },
      ]),
    ).toEqual([]);
  });

  it('items nested under an answer are checked against the item’s own children, path by path', () => {
    const questionnaire = one([
      { linkId: 'q', type: 'boolean', item: [{ linkId: 'why', type: 'string', required: true }] },
    ]);
    expect(
      answerProblems(questionnaire, [
        { linkId: 'q', answer: [{ valueBoolean: true, item: [{ linkId: 'why', answer: [{ valueBoolean: true }] }] }] },
      ]),
    ).toEqual([{ path: 'item[linkId=q][linkId=why]', message: 'a string item takes valueString' }]);
    expect(
      answerProblems(questionnaire, [{ linkId: 'q', answer: [{ valueBoolean: true, item: [{ linkId: 'other' }] }] }]),
    ).toEqual([
      { path: 'item[linkId=q][linkId=other]', message: 'not an item of this questionnaire' },
      { path: 'item[linkId=q][linkId=why]', message: 'required, not answered' },
    ]);
    const group = one([{ linkId: 'g', type: 'group', item: [{ linkId: 'c', type: 'integer' }] }]);
    expect(
      answerProblems(group, [
        { linkId: 'g', answer: [{ valueString: 'x' }], item: [{ linkId: 'c', answer: [{ valueString: 'y' }] }] },
      ]),
    ).toEqual([
      { path: 'item[linkId=g]', message: 'a group item takes no answer' },
      { path: 'item[linkId=g][linkId=c]', message: 'a integer item takes valueInteger' },
    ]);
  });
});

describe('answerProblems, what the first round of mutation testing found untested', () => {
  const one = (item: Questionnaire['item']) =>
    ({ resourceType: 'Questionnaire', status: 'active', item }) as Questionnaire;

  it('a required item is answered by its own answer, not by another item’s; an item sent bare is not answered', () => {
    const questionnaire = one([
      { linkId: 'a', type: 'string', required: true },
      { linkId: 'g', type: 'group', required: true, item: [{ linkId: 'c', type: 'string' }] },
      { linkId: 'o', type: 'string' },
    ]);
    expect(
      answerProblems(questionnaire, [
        { linkId: 'o', answer: [{ valueString: 'x' }] },
        { linkId: 'a' },
        { linkId: 'g' },
      ]),
    ).toEqual([
      { path: 'item[linkId=a]', message: 'required, not answered' },
      { path: 'item[linkId=g]', message: 'required, not answered' },
    ]);
  });

  it('a display item answered twice is one problem: it takes no answer at all', () => {
    expect(
      answerProblems(one([{ linkId: 'd', type: 'display' }]), [
        { linkId: 'd', answer: [{ valueString: 'x' }, { valueString: 'y' }] },
      ]),
    ).toEqual([{ path: 'item[linkId=d]', message: 'a display item takes no answer' }]);
  });

  it('a coding is not one of options that are not codings', () => {
    const strings = one([{ linkId: 'q', type: 'choice', answerOption: [{ valueString: 'a' }, { valueString: 'b' }] }]);
    expect(answerProblems(strings, [{ linkId: 'q', answer: [{ valueString: 'b' }] }])).toEqual([]);
    expect(answerProblems(strings, [{ linkId: 'q', answer: [{ valueCoding: { code: 'b' } }] }])).toEqual([
      { path: 'item[linkId=q]', message: 'not one of its options' },
    ]);
  });
});
