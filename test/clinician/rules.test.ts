import type { ActivityDefinition, Bundle, PlanDefinition } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import { assess, evaluate, type Option, UNEVALUABLE } from '../../bots/eligibility';
import { EXTENSIONS } from '../../contracts/systems';

/**
 * The eligibility engine's rules fail closed (issue 25): a rule is clear only when it evaluates to exactly
 * `false`; one that cannot be evaluated (an error, empty, not a boolean, no expression) marks the option
 * not eligible, with a finding that says why.
 */
const record: Bundle = {
  resourceType: 'Bundle',
  type: 'collection',
  entry: [{ resource: { resourceType: 'Patient', id: 'p', gender: 'female' } }],
};

const rule = (code: string, expression: string | undefined) => ({
  url: EXTENSIONS.eligibilityRule,
  extension: [
    { url: 'code', valueCode: code },
    { url: 'kind', valueCode: 'contraindication' },
    { url: 'description', valueString: `Rule ${code}.` },
    ...(expression === undefined
      ? []
      : [{ url: 'expression', valueExpression: { language: 'text/fhirpath' as const, expression } }]),
  ],
});

const optionWith = (...rules: ReturnType<typeof rule>[]): Option => ({
  protocol: { resourceType: 'PlanDefinition', status: 'active' } as PlanDefinition,
  option: { resourceType: 'ActivityDefinition', status: 'active', extension: rules } as ActivityDefinition,
  canonical: 'https://example/option|1',
  preferred: false,
});

describe('a rule’s verdict', () => {
  it.each([
    ["entry.resource.ofType(Patient).where(gender = 'male').exists()", 'clear'],
    ["entry.resource.ofType(Patient).where(gender = 'female').exists()", 'applies'],
    ['entry.resource.ofType(Patient).deceasedBoolean', 'unevaluable'],
    ['entry.resource.ofType(Patient).gender', 'unevaluable'],
    ['(true | false)', 'unevaluable'],
    ['entry.resource.where(', 'unevaluable'],
    ["'a'.substring('b')", 'unevaluable'],
    ['', 'unevaluable'],
  ])('%j is %s', (expression, verdict) => {
    expect(evaluate(expression, record)).toBe(verdict);
  });
});

describe('an option’s findings', () => {
  it('only rules that are clear let it be eligible; one that cannot be evaluated is a finding that says so', () => {
    const [finding] = assess(
      [
        optionWith(
          rule('clear', "entry.resource.ofType(Patient).where(gender = 'male').exists()"),
          rule('broken', 'entry.resource.where('),
          rule('empty', 'entry.resource.ofType(Patient).deceasedBoolean'),
          rule('missing', undefined),
          rule('fires', "entry.resource.ofType(Patient).where(gender = 'female').exists()"),
        ),
      ],
      record,
    );
    expect(finding.fired).toEqual([
      { code: 'broken', kind: 'contraindication', description: `Rule broken. ${UNEVALUABLE}` },
      { code: 'empty', kind: 'contraindication', description: `Rule empty. ${UNEVALUABLE}` },
      { code: 'missing', kind: 'contraindication', description: `Rule missing. ${UNEVALUABLE}` },
      { code: 'fires', kind: 'contraindication', description: 'Rule fires.' },
    ]);
    const [clear] = assess(
      [optionWith(rule('clear', "entry.resource.ofType(Patient).where(gender = 'male').exists()"))],
      record,
    );
    expect(clear.fired).toEqual([]);
  });
});
