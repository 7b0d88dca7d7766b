import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeIssues } from '../../src/shared/validation-issues';
import { startTestGateway, type TestGateway } from '../support/gateway';

/**
 * A body that matches none of a union's forms names the fields (issue 28, item 4): the issues of the
 * form(s) it came closest to, each with its field, instead of one "Invalid input" at the root.
 */
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw?.close());

const issuesOf = async (path: string, body: unknown) => {
  const res = await gw.call('POST', path, { body });
  expect(res.status).toBe(400);
  return (res.body as { error: { details: { issues: { path: string; message: string }[] } } }).error.details.issues;
};

describe('union-shaped bodies', () => {
  it('POST /v1/requests with {} names each form’s field; with two forms’ fields, names both', async () => {
    const empty = await issuesOf('/v1/requests', {});
    expect(empty[0].message).toMatch(/^Matches none of the 3 accepted forms/);
    expect(empty.slice(1).map((i) => i.path)).toEqual(['medication', 'treatmentOption', 'protocol']);
    const both = await issuesOf('/v1/requests', {
      medication: 'http://www.nlm.nih.gov/research/umls/rxnorm|197361',
      protocol: 'https://patient-care.example/northwind/protocols/hypertension-treatment|2',
    });
    const text = both.map((i) => i.message).join(' ');
    expect(text).toContain('"protocol"');
    expect(text).toContain('"medication"');
  });

  it('POST /v1/tasks/{id}/complete with an unknown decision names `decision` and every value it takes', async () => {
    const issues = await issuesOf('/v1/tasks/abc/complete', { decision: 'maybe' });
    expect(issues.slice(1)).toEqual([
      { path: 'decision', message: 'Invalid input: expected "accept", "decline" or "counter"' },
    ]);
    const empty = await issuesOf('/v1/tasks/abc/complete', {});
    expect(empty.map((i) => i.path)).toEqual(['', 'decision', 'questionnaireResponse', 'measurements']);
  });
});

describe('describeIssues', () => {
  it('one closest form: its issues alone, under the union’s own path; issues outside unions as they are', () => {
    expect(
      describeIssues([
        {
          code: 'invalid_union',
          path: ['items', 0],
          message: 'Invalid input',
          errors: [
            [{ path: ['a'], message: 'Required' }],
            [
              { path: ['b'], message: 'Required' },
              { path: ['c'], message: 'Required' },
            ],
          ],
        },
        { path: ['note'], message: 'Too long' },
      ]),
    ).toEqual([
      { path: 'items.0.a', message: 'Required' },
      { path: 'note', message: 'Too long' },
    ]);
  });
});
