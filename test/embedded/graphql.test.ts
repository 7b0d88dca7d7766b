import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GraphqlGate } from '../../src/embedded/graphql-gate';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * `$graphql` cannot take the server down (issue 24, src/embedded/graphql-gate.ts): where the heap cannot
 * take Medplum's GraphQL schema, the answer is 503 at once; where it can (`npm start`'s thread), a
 * flood is answered by a bounded number of queries and 429s, and the server goes on.
 */
const graphql = (backend: TestBackend, token: string, query: string) =>
  backend.fetch(new URL('fhir/R4/$graphql', backend.baseUrl), {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ query }),
  });

describe('GraphQL on a heap too small for its schema (a host given less memory)', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await startTestBackend({
      heapStatistics: () => ({ heap_size_limit: 256 * 1024 * 1024, used_heap_size: 80 * 1024 * 1024 }),
    });
  });
  afterAll(() => backend?.close());

  it('200 concurrent queries (patients and a clinician): each 503 at once with Retry-After, naming the REST API; the server goes on', async () => {
    const tokens = [backend.patients.alice.token, backend.patients.carol.token, backend.clinicians.northwind.token];
    const answers = await Promise.all(
      Array.from({ length: 200 }, (_, i) => graphql(backend, tokens[i % tokens.length], '{ PatientList { id } }')),
    );
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set([503]));
    expect(answers[0].headers.get('retry-after')).toBeTruthy();
    expect(await answers[0].text()).toContain('use the FHIR REST API');
    const alice = backend.patients.alice;
    expect((await alice.medplum.readResource('Patient', alice.patient.id)).id).toBe(alice.patient.id);
  });
});

describe('GraphQL where the heap can hold its schema', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await startTestBackend();
  });
  afterAll(() => backend?.close());

  it('200 concurrent queries: answered (each patient her own record only) or 429 with Retry-After; the server goes on', async () => {
    const { alice, carol } = backend.patients;
    const tokens = [alice.token, carol.token, backend.clinicians.northwind.token];
    const answers = await Promise.all(
      Array.from({ length: 200 }, (_, i) => graphql(backend, tokens[i % tokens.length], '{ PatientList { id } }')),
    );
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);
    expect(statuses).toContain(200);
    for (const refused of answers.filter((a) => a.status === 429)) {
      expect(refused.headers.get('retry-after')).toBe('1');
    }
    const first = answers.findIndex((a) => a.status === 200);
    const body = (await answers[first].json()) as { data?: { PatientList?: { id: string }[] } };
    const own = [alice, carol][first % 3]?.patient.id;
    if (first % 3 < 2) {
      expect(body.data?.PatientList?.map((p) => p.id)).toEqual([own]);
    }
    // Once built, later queries are answered.
    const later = await graphql(backend, alice.token, '{ PatientList { id } }');
    expect(later.status).toBe(200);
    expect(((await later.json()) as { data: { PatientList: { id: string }[] } }).data.PatientList).toEqual([
      { id: alice.patient.id },
    ]);
  });

  it('answers the schema query MedplumClient.requestSchema makes (packages/core/src/client.ts): a type’s StructureDefinition by `_filter` and its SearchParameters (issue 26)', async () => {
    const query = `{
      StructureDefinitionList(_filter: "name eq Task") { name, kind, url, snapshot { element { path, min, max, binding { valueSet } } } }
      SearchParameterList(base: "Task", _count: 100) { base, code, type, expression }
    }`;
    const answer = await graphql(backend, backend.clinicians.northwind.token, query);
    expect(answer.status).toBe(200);
    const { data, errors } = (await answer.json()) as {
      data: {
        StructureDefinitionList: { name: string; url: string; snapshot: { element: { path: string }[] } }[];
        SearchParameterList: { code: string; base: string[] }[];
      };
      errors?: unknown;
    };
    expect(errors).toBeUndefined();
    expect(data.StructureDefinitionList.map((sd) => sd.url)).toEqual(['http://hl7.org/fhir/StructureDefinition/Task']);
    const paths = data.StructureDefinitionList[0].snapshot.element.map((e) => e.path);
    expect(paths).toEqual(expect.arrayContaining(['Task.status', 'Task.owner', 'Task.output']));
    expect(data.SearchParameterList.map((p) => p.code)).toEqual(expect.arrayContaining(['status', 'owner', 'code']));
    expect(data.SearchParameterList.every((p) => p.base.includes('Task'))).toBe(true);
  });
});

describe('GraphqlGate', () => {
  it('admits two queries at once; a third is 429 with Retry-After until one ends', async () => {
    const gate = new GraphqlGate(() => ({ heap_size_limit: 4096 * 1024 * 1024, used_heap_size: 0 }));
    const releases: (() => void)[] = [];
    const slow = () => gate.run(() => new Promise<string>((resolve) => releases.push(() => resolve('answered'))));
    const [a, b] = [slow(), slow()];
    const third = await gate.run(async () => 'answered');
    expect(third).toMatchObject({ status: 429, retryAfterSeconds: 1 });
    for (const release of releases) {
      release();
    }
    expect(await Promise.all([a, b])).toEqual(['answered', 'answered']);
    expect(await gate.run(async () => 'answered')).toBe('answered');
  });
});
