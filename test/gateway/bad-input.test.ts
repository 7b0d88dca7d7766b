import fc from 'fast-check';
import { generateSync, type JsonSchema } from 'json-schema-faker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import { botInputSchemas } from '../../scripts/bot-build';
import { platformDefinition } from '../../src/provision/definition';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { bodyFor, type Operation, operationsOf } from '../support/operations';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw?.close());

/** What a rejected request must leave untouched: every version of every record (audit trail aside). */
const fingerprint = () =>
  gw.backend.db.reader
    .prepare("SELECT count(*) AS n, max(seq) AS s FROM history WHERE type NOT IN ('AuditEvent', 'Login')")
    .get() as {
    n: number;
    s: number;
  };

/** The request body schema of an operation, with component references inlined. */
function bodySchema(op: Operation): JsonSchema | undefined {
  const item = gw.doc.paths?.[op.template] as Record<
    string,
    { requestBody?: { content: Record<string, { schema: unknown }> } }
  >;
  const schema = Object.values(item[op.method.toLowerCase()]?.requestBody?.content ?? {})[0]?.schema;
  const inline = (value: unknown): unknown => {
    if (Array.isArray(value)) {
      return value.map(inline);
    }
    if (value && typeof value === 'object') {
      const ref = (value as { $ref?: string }).$ref;
      if (ref) {
        return inline(gw.doc.components?.schemas?.[ref.split('/').pop() as string]);
      }
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, inline(v)]));
    }
    return value;
  };
  return schema ? (inline(schema) as JsonSchema) : undefined;
}

type Mutation =
  | { kind: 'schema-valid'; seed: number }
  | { kind: 'drop-field'; field: number }
  | { kind: 'replace-field'; field: number; value: unknown }
  | { kind: 'replace-body'; value: unknown }
  | { kind: 'malformed-json'; cut: number }
  | { kind: 'wrong-content-type' }
  | { kind: 'weird-id'; id: string }
  | { kind: 'weird-query'; key: string; value: string };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('schema-valid' as const), seed: fc.integer({ min: 1, max: 1_000_000 }) }),
  fc.record({ kind: fc.constant('drop-field' as const), field: fc.nat(10) }),
  fc.record({ kind: fc.constant('replace-field' as const), field: fc.nat(10), value: fc.jsonValue() }),
  fc.record({ kind: fc.constant('replace-body' as const), value: fc.jsonValue() }),
  fc.record({ kind: fc.constant('malformed-json' as const), cut: fc.nat(200) }),
  fc.record({ kind: fc.constant('wrong-content-type' as const) }),
  fc.record({ kind: fc.constant('weird-id' as const), id: fc.string({ minLength: 1, maxLength: 80 }) }),
  fc.record({
    kind: fc.constant('weird-query' as const),
    key: fc.string({ minLength: 1, maxLength: 20 }),
    value: fc.string({ maxLength: 40 }),
  }),
);

/** Drops or replaces one field of a JSON object body (the field chosen by index). */
function mutateField(body: unknown, m: Extract<Mutation, { kind: 'drop-field' | 'replace-field' }>): unknown {
  const record = { ...((body as Record<string, unknown>) ?? {}) };
  const keys = Object.keys(record);
  const key = keys[m.field % Math.max(keys.length, 1)] ?? 'x';
  if (m.kind === 'drop-field') {
    delete record[key];
  } else {
    record[key] = m.value;
  }
  return record;
}

async function send(op: Operation, m: Mutation) {
  const ownId = gw.backend.patients.alice.patient.id;
  const type = op.operationId.startsWith('fhir.refuse') ? 'Observation' : 'Patient';
  let id = ownId;
  let query = '';
  let body: unknown = bodyFor(op, ownId);
  let rawBody: string | undefined;
  const headers: Record<string, string> = {};
  const schema = bodySchema(op);
  switch (m.kind) {
    case 'schema-valid':
      body = schema
        ? {
            ...(generateSync(schema, { seed: m.seed, maxDepth: 4 }) as object),
            ...(op.method === 'PUT' ? { id: ownId } : {}),
          }
        : body;
      break;
    case 'drop-field':
    case 'replace-field':
      body = mutateField(body, m);
      break;
    case 'replace-body':
      body = m.value;
      break;
    case 'malformed-json':
      rawBody = JSON.stringify(body ?? { resourceType: 'Patient' }).slice(0, -1 - (m.cut % 5));
      body = undefined;
      break;
    case 'wrong-content-type':
      headers['content-type'] = 'text/plain';
      break;
    case 'weird-id':
      id = encodeURIComponent(m.id);
      break;
    case 'weird-query':
      query = `?${encodeURIComponent(m.key)}=${encodeURIComponent(m.value)}`;
      break;
  }
  const path = op.template.replace('{type}', type).replace('{id}', id) + query;
  const sendBody = op.method === 'GET' ? {} : rawBody !== undefined ? { rawBody } : body !== undefined ? { body } : {};
  return gw.call(op.method, path, { ...sendBody, headers });
}

describe('bad input: seeded valid and mutated inputs for every operation', () => {
  it('never a 5xx, always the envelope, and a rejected request changes nothing', async () => {
    const operations = operationsOf(gw);
    expect(operations.length).toBeGreaterThanOrEqual(10);
    for (const op of operations) {
      await fc.assert(
        fc.asyncProperty(mutation, async (m) => {
          const before = fingerprint();
          const res = await send(op, m);
          const label = `${op.operationId} ${JSON.stringify(m).slice(0, 120)} -> ${res.status} ${res.text.slice(0, 200)}`;
          expect(res.status, label).toBeLessThan(500);
          if (res.status >= 400) {
            expect((res.body as { error?: { code?: unknown } }).error?.code, label).toEqual(expect.any(String));
            expect(fingerprint(), label).toEqual(before);
          }
        }),
        { numRuns: 60, seed: 20261122 },
      );
    }
  });
});

/** The bad-input fuzzer again, around the gateway: every bot's `$execute`, called directly on Medplum. */
describe("bad input: every bot's $execute directly on Medplum, as a patient", () => {
  const schemas = JSON.parse(botInputSchemas()) as Record<string, JsonSchema>;

  const execute = async (bot: string, body: string, contentType = 'application/json') => {
    const url = new URL(`fhir/R4/Bot/$execute?identifier=${SYSTEMS.bots}|${bot}`, gw.backend.baseUrl);
    const response = await gw.backend.fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${gw.backend.patients.alice.token}`, 'content-type': contentType },
      body,
    });
    return { status: response.status, body: (await response.text()).slice(0, 300) };
  };

  it('never a 5xx, and whatever is refused changes nothing', async () => {
    expect(platformDefinition.bots.length).toBeGreaterThanOrEqual(5);
    for (const { key } of platformDefinition.bots) {
      const schema = schemas[key];
      expect(schema, key).toBeDefined();
      await fc.assert(
        fc.asyncProperty(mutation, async (m) => {
          let body: unknown = generateSync(schema, { seed: 7, maxDepth: 4 });
          let raw: string | undefined;
          let contentType = 'application/json';
          switch (m.kind) {
            case 'schema-valid':
              body = generateSync(schema, { seed: m.seed, maxDepth: 4 });
              break;
            case 'drop-field':
            case 'replace-field':
              body = mutateField(body, m);
              break;
            case 'replace-body':
              body = m.value;
              break;
            case 'malformed-json':
              raw = JSON.stringify(body).slice(0, -1 - (m.cut % 5));
              break;
            case 'wrong-content-type':
              contentType = 'text/plain';
              break;
            default:
              body = { ...((body as object) ?? {}), [m.kind]: 'x'.repeat(200_000) };
          }
          const before = fingerprint();
          const res = await execute(key, raw ?? JSON.stringify(body ?? null), contentType);
          const label = `${key} ${JSON.stringify(m).slice(0, 120)} -> ${res.status} ${res.body}`;
          expect(res.status, label).toBeLessThan(500);
          const refused = res.status >= 400 || res.body.includes('"ok":false');
          if (refused) {
            expect(fingerprint(), label).toEqual(before);
          }
        }),
        { numRuns: 40, seed: 20261123 },
      );
    }
  });
});

describe('a known path asked with a method it does not have', () => {
  it('is 405 with Allow listing exactly what the document gives that path; an unknown path is 404', async () => {
    const token = gw.backend.patients.alice.token;
    const paths = new Map<string, Set<string>>();
    for (const op of operationsOf(gw)) {
      // The record plane's concrete paths (POST /v1/fhir/QuestionnaireResponse) also match its templated
      // ones (GET /v1/fhir/{type}), so what each allows is the union; the action plane's are one path each.
      if (op.template.includes('{') || op.template.startsWith('/v1/fhir')) {
        continue;
      }
      const methods = paths.get(op.template) ?? new Set<string>();
      methods.add(op.method);
      paths.set(op.template, methods);
    }
    expect(paths.size).toBeGreaterThan(3);
    for (const [path, methods] of paths) {
      const documented = [...methods, ...(methods.has('GET') ? ['HEAD'] : [])].sort();
      const missing = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH'].find((m) => !methods.has(m)) as string;
      const res = await gw.call(missing, path, { token });
      expect(res.status, `${missing} ${path}`).toBe(405);
      expect(res.headers.get('allow'), path).toBe(documented.join(', '));
      expect(res.body).toMatchObject({ error: { code: 'method_not_allowed', details: { allow: documented } } });
    }
    expect((await gw.call('DELETE', '/v1/no-such-thing', { token })).status).toBe(404);
  });

  it('on the record plane, one Allow per path: every refused method names what the patient may do with that type', async () => {
    const token = gw.backend.patients.alice.token;
    const alice = gw.backend.patients.alice.patient.id;
    const expected: [string, string][] = [
      [`/v1/fhir/Patient/${alice}`, 'GET, HEAD, PUT'],
      ['/v1/fhir/Patient', 'GET, HEAD'],
      ['/v1/fhir/QuestionnaireResponse/0d2c8a57', 'GET, HEAD, PUT'],
      ['/v1/fhir/QuestionnaireResponse', 'GET, HEAD, POST'],
      ['/v1/fhir/Observation/0d2c8a57', 'GET, HEAD'],
      ['/v1/fhir/Observation', 'GET, HEAD'],
    ];
    for (const [path, allow] of expected) {
      const methods = ['OPTIONS', 'POST', 'PUT', 'PATCH', 'DELETE'].filter((m) => !allow.includes(m));
      for (const method of methods) {
        const res = await gw.app.request(`http://gateway.test${path}`, {
          method,
          headers: { authorization: `Bearer ${token}` },
        });
        expect(res.status, `${method} ${path}`).toBe(405);
        expect(res.headers.get('allow'), `${method} ${path}`).toBe(allow);
      }
    }
  });
});
