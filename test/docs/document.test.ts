import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DemoActor } from '../support/backend';
import { createResponseValidator, startTestGateway, type TestGateway } from '../support/gateway';
import { arbitraryOf, type Schema } from '../support/schema-arbitrary';
import { scaled } from '../support/slowness';
import { freeSlots, withVisitToBook } from '../support/visits';

/**
 * The document is the service (issue 28, item 6): requests drawn from the served OpenAPI document alone,
 * by the project's own generator (`test/support/schema-arbitrary.ts`), for every operation it lists: path
 * and query parameters and bodies from their schemas (her own ids and references among the values, so
 * that requests succeed as well as fail), mixed with values the document does not admit and with missing or
 * foreign credentials. Every answer must be one the document gives for that operation: a declared status,
 * its declared media type, a body its schema admits; and never a 5xx. The counts are in docs/development.md.
 */
const RUNS_PER_OPERATION = 60;
const SEED = 20261126;

interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required?: boolean;
  schema: Schema;
}
interface DocumentOperation {
  method: string;
  template: string;
  parameters: Parameter[];
  body?: { mediaType: string; schema: Schema };
}

let gw: TestGateway;
let patient: DemoActor;
/** Her own references by type (`Task` → [`Task/…`]): what a real app would send. */
const hers = new Map<string, string[]>();

beforeAll(async () => {
  gw = await startTestGateway({}, { allSlots: true });
  // A patient with a plan, its tasks, a booked visit and a document: ids of every kind the paths take.
  const visit = await withVisitToBook(gw);
  patient = visit.patient;
  const [slot] = await freeSlots(gw, (await careTeamOf(visit.task)) as string, patient, 5);
  const booked = await gw.call('POST', '/v1/appointments', { token: patient.token, body: { task: visit.task, slot } });
  expect(booked.status, booked.text).toBe(201);
  const uploaded = await gw.app.request('http://gateway.test/v1/documents?filename=reading.png', {
    method: 'POST',
    headers: { authorization: `Bearer ${patient.token}`, 'content-type': 'image/png' },
    body: new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  });
  expect(uploaded.status, await uploaded.clone().text()).toBe(201);
  const draft = await gw.call('POST', '/v1/fhir/QuestionnaireResponse', {
    token: patient.token,
    body: { resourceType: 'QuestionnaireResponse', status: 'in-progress' },
  });
  expect(draft.status, draft.text).toBe(201);
  for (const type of [
    'QuestionnaireResponse',
    'Task',
    'CarePlan',
    'Appointment',
    'EpisodeOfCare',
    'DocumentReference',
    'CareTeam',
  ]) {
    const bundle = (await gw.call('GET', `/v1/fhir/${type}?_count=20`, { token: patient.token })).body as {
      entry?: { resource: { id: string } }[];
    };
    hers.set(
      type,
      (bundle.entry ?? []).map((e) => `${type}/${e.resource.id}`),
    );
  }
  hers.set('Patient', [`Patient/${patient.patient.id}`]);
  const { protocols } = (await gw.call('GET', '/v1/protocols', { token: patient.token })).body as {
    protocols: { healthcareService: string }[];
  };
  hers.set(
    'HealthcareService',
    protocols.map((p) => p.healthcareService),
  );
}, scaled(120_000));
afterAll(() => gw?.close());

async function careTeamOf(task: string): Promise<string | undefined> {
  const { tasks } = (await gw.call('GET', '/v1/tasks', { token: patient.token })).body as {
    tasks: { task: string; careTeam?: string }[];
  };
  return tasks.find((t) => t.task === task)?.careTeam;
}

function operationsOfDocument(): DocumentOperation[] {
  const operations: DocumentOperation[] = [];
  for (const [template, item] of Object.entries(gw.doc.paths ?? {})) {
    for (const [method, raw] of Object.entries(item as Record<string, Record<string, unknown>>)) {
      const op = raw as {
        parameters?: Parameter[];
        requestBody?: { content: Record<string, { schema: Schema }> };
      };
      const [media] = Object.entries(op.requestBody?.content ?? {});
      operations.push({
        method: method.toUpperCase(),
        template,
        parameters: op.parameters ?? [],
        body: media ? { mediaType: media[0], schema: media[1].schema } : undefined,
      });
    }
  }
  return operations;
}

const resolve = (ref: string): Schema => {
  const schema = gw.doc.components?.schemas?.[ref.split('/').pop() as string];
  if (!schema) {
    throw new Error(`${ref} is not in the document`);
  }
  return schema as Schema;
};

/** The type a reference-valued string names (`^CarePlan\/…` patterns), or the path id's resource type. */
const referencedType = (schema: Schema): string | undefined =>
  /^\^([A-Z][A-Za-z]+)\\\//.exec(schema.pattern ?? '')?.[1];

/** Strings in a drawn body that name a resource of a type she has become one of hers, by the drawn index. */
function withOwnReferences(value: unknown, pick: number): unknown {
  if (typeof value === 'string') {
    const match = /^([A-Z][A-Za-z]+)\/[A-Za-z0-9\-.]{1,64}$/.exec(value);
    const own = match ? hers.get(match[1]) : undefined;
    return own?.length ? own[pick % own.length] : value;
  }
  if (Array.isArray(value)) {
    return value.map((v) => withOwnReferences(v, pick));
  }
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withOwnReferences(v, pick)]));
  }
  return value;
}

/** Something the document does not admit: any string. */
const stray = fc.string({ minLength: 1, maxLength: 30 });

interface DrawnRequest {
  path: string;
  query: [string, string][];
  headers: Record<string, string>;
  body?: string | Uint8Array;
}

/**
 * Requests for an operation: half of them wholly as the document describes (her own token, every value
 * from its schema), half with values it does not admit, broken bodies and missing or foreign credentials.
 */
const requestsOf = (op: DocumentOperation): fc.Arbitrary<DrawnRequest> =>
  fc.oneof(drawnRequests(op, true), drawnRequests(op, false));

function drawnRequests(op: DocumentOperation, described: boolean): fc.Arbitrary<DrawnRequest> {
  const pathParams = op.parameters.filter((p) => p.in === 'path');
  const queryParams = op.parameters.filter((p) => p.in === 'query');
  const parameterValue = (p: Parameter): fc.Arbitrary<unknown> => {
    const drawn = arbitraryOf(p.schema, resolve);
    const type = referencedType(p.schema) ?? (p.name === 'id' ? op.template.split('/')[2] : undefined);
    const own = p.name === 'id' ? idsOf(op.template) : type ? hers.get(type) : undefined;
    const valid = own?.length ? fc.oneof(fc.constantFrom(...own), drawn) : drawn;
    return described ? valid : fc.oneof({ weight: 3, arbitrary: valid }, { weight: 1, arbitrary: stray });
  };
  const drawnPath = fc.record(Object.fromEntries(pathParams.map((p) => [p.name, parameterValue(p)])));
  // A type and an id together are, half the time, one of her own resources (drawn apart they rarely meet).
  const ownResources = [...hers.values()].flat();
  const path =
    op.template.includes('{type}/{id}') && ownResources.length > 0
      ? fc.oneof(
          drawnPath,
          fc.constantFrom(...ownResources).map((ref) => {
            const [type, id] = ref.split('/');
            return { type, id } as Record<string, unknown>;
          }),
        )
      : drawnPath;
  const query = fc.record(Object.fromEntries(queryParams.map((p) => [p.name, parameterValue(p)])), {
    requiredKeys: queryParams.filter((p) => p.required).map((p) => p.name),
  });
  const body = op.body ? bodyOf(op.body, described) : fc.constant(undefined);
  const own = fc.constant(`Bearer ${patient.token}`);
  const credentials = described
    ? own
    : fc.oneof(
        { weight: 4, arbitrary: own },
        { weight: 1, arbitrary: fc.constant(undefined) },
        { weight: 1, arbitrary: stray.map((s) => `Bearer ${s}`) },
      );
  const ifMatch = op.parameters.some((p) => p.name === 'if-match')
    ? fc.option(fc.oneof(fc.constant('W/"1"'), stray), { nil: undefined })
    : fc.constant(undefined);
  return fc.record({ path, query, body, credentials, ifMatch }).map((drawn) => {
    const headers: Record<string, string> = {};
    if (drawn.credentials) {
      headers.authorization = drawn.credentials;
    }
    if (drawn.ifMatch) {
      headers['if-match'] = drawn.ifMatch;
    }
    if (op.body && drawn.body !== undefined) {
      headers['content-type'] = op.body.mediaType;
    }
    const concrete = op.template.replace(/\{(\w+)\}/g, (_, name) => {
      const value = String(drawn.path[name]);
      // A reference drawn for an id keeps its id only.
      return encodeURIComponent(value.includes('/') ? (value.split('/').pop() as string) : value);
    });
    return {
      path: concrete,
      query: Object.entries(drawn.query).map(([k, v]) => [k, String(v)] as [string, string]),
      headers,
      body: described && op.method === 'PUT' ? withPathId(drawn.body, drawn.path.id) : drawn.body,
    };
  });
}

/** An update names the resource of its path (the operations' descriptions say so): the body's `id` is the path's. */
function withPathId(body: string | Uint8Array | undefined, id: unknown): string | Uint8Array | undefined {
  if (typeof body !== 'string' || id === undefined) {
    return body;
  }
  const value = JSON.parse(body) as unknown;
  const own = String(id).split('/').pop();
  return value && typeof value === 'object' && !Array.isArray(value) ? JSON.stringify({ ...value, id: own }) : body;
}

/** Her own ids for an `{id}` of a path: of the type the path names, or of the action plane's resources. */
function idsOf(template: string): string[] {
  const types: Record<string, string[]> = {
    tasks: ['Task'],
    orders: ['Task'],
    enrollments: ['CarePlan'],
    appointments: ['Appointment'],
    documents: ['DocumentReference'],
    fhir: [...hers.keys()],
  };
  const [, , section, type] = template.split('/');
  const wanted = section === 'fhir' && type !== '{type}' ? [type] : (types[section] ?? []);
  return wanted.flatMap((t) => hers.get(t) ?? []).map((ref) => ref.split('/')[1]);
}

function bodyOf(
  body: { mediaType: string; schema: Schema },
  described: boolean,
): fc.Arbitrary<string | Uint8Array | undefined> {
  if (body.schema.format === 'binary' || body.schema.type === 'string') {
    const bytes = fc.uint8Array({ minLength: 1, maxLength: 64 });
    return described ? bytes : fc.oneof(bytes, fc.constant(undefined));
  }
  const valid = fc
    .tuple(arbitraryOf(body.schema, resolve), fc.nat())
    .map(([value, pick]) => JSON.stringify(withOwnReferences(value, pick)));
  if (described) {
    return valid;
  }
  return fc.oneof(
    { weight: 6, arbitrary: valid },
    { weight: 1, arbitrary: fc.jsonValue().map((v) => JSON.stringify(v)) },
    { weight: 1, arbitrary: valid.map((text) => text.slice(0, -1)) },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );
}

describe('the document is the service', () => {
  it(
    'every answer to requests drawn from the document is one the document gives (counts in docs/development.md)',
    async () => {
      const validate = createResponseValidator(gw.doc);
      const operations = operationsOfDocument();
      const mismatches: string[] = [];
      const statuses = new Map<string, Set<number>>();
      let requests = 0;
      for (const op of operations) {
        const label = `${op.method} ${op.template}`;
        const seen = new Set<number>();
        statuses.set(label, seen);
        await fc.assert(
          fc.asyncProperty(requestsOf(op), async (drawn) => {
            requests += 1;
            const search = drawn.query.length ? `?${new URLSearchParams(drawn.query)}` : '';
            const response = await gw.app.request(`http://gateway.test${drawn.path}${search}`, {
              method: op.method,
              headers: drawn.headers,
              body: drawn.body instanceof Uint8Array ? new Blob([new Uint8Array(drawn.body)]) : drawn.body,
            });
            const text = await response.text();
            let body: unknown = text;
            try {
              body = text ? JSON.parse(text) : undefined;
            } catch {
              // not JSON: the validator says whether the document allows that
            }
            seen.add(response.status);
            const answer = `${op.method} ${drawn.path}${search} -> ${response.status} ${text.slice(0, 160)}`;
            if (response.status >= 500) {
              mismatches.push(`a 5xx: ${answer}`);
              return;
            }
            try {
              validate(op.method, drawn.path, { status: response.status, headers: response.headers, body, text });
            } catch (err) {
              mismatches.push(`${(err as Error).message.slice(0, 300)} (${answer})`);
            }
          }),
          { numRuns: RUNS_PER_OPERATION, seed: SEED },
        );
      }
      const succeeded = [...statuses].filter(([, seen]) => [...seen].some((s) => s < 300)).map(([label]) => label);
      console.info(
        `${requests} requests drawn from the document over ${operations.length} operations, ${mismatches.length} mismatches; ${succeeded.length} operations answered 2xx at least once`,
      );
      expect(mismatches).toEqual([]);
      expect(requests).toBe(operations.length * RUNS_PER_OPERATION);
      // The draws reach the service's success paths, not only its refusals: every read of her record, her
      // tasks and the workflows she can replay.
      expect(succeeded).toEqual(
        expect.arrayContaining([
          'GET /v1/patient/profile',
          'GET /v1/protocols',
          'GET /v1/tasks',
          'GET /v1/fhir/{type}',
          'GET /v1/fhir/{type}/{id}',
          'GET /v1/agreements/requirements',
          'POST /v1/assessments',
          'POST /v1/requests',
          'POST /v1/enrollments',
          'POST /v1/fhir/QuestionnaireResponse',
          'PUT /v1/fhir/Patient/{id}',
          'GET /v1/fhir/Patient/{id}',
          'GET /v1/fhir/QuestionnaireResponse',
          'GET /v1/fhir/QuestionnaireResponse/{id}',
          'PUT /v1/fhir/QuestionnaireResponse/{id}',
          'POST /v1/appointments/{id}/cancel',
          'GET /v1/appointments/{id}/segments',
        ]),
      );
      // What docs/development.md says is what ran.
      expect(readFileSync('docs/development.md', 'utf8')).toContain(
        `${requests.toLocaleString('en-US')} requests drawn from the document over ${operations.length} operations, 0 mismatches`,
      );
    },
    scaled(300_000),
  );
});
