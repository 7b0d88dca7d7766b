import { randomUUID } from 'node:crypto';
import type { Patient, QuestionnaireResponse, Resource } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { platformDefinition } from '../../src/provision/definition';
import {
  type Actor,
  ATTACKER_ROLES,
  attackerFor,
  direct,
  fhirPath,
  patientActor,
  policyTypes,
} from '../support/attack';
import { minimalResource, PLANTED, type ReferenceTargets } from '../support/attack-resources';
import {
  changesSince,
  describeChange,
  foreignChanges,
  type StoreChange,
  storedResource,
  storeMark,
} from '../support/attack-store';
import { ownerOf, type Scene, seedRecord, setUpScene, targetsOf } from '../support/attack-victim';
import { startTestGateway, type TestGateway } from '../support/gateway';

/**
 * Every resource type a policy names (and the platform's own), every write interaction, by a patient
 * of the same tenant, a patient of the other tenant and a clinician of the other tenant, directly on
 * Medplum: refused or without effect on anything but the attacker's own record. The writes the spec
 * gives patients still work, on their own record only.
 */
const VICTIM = 'bob';
const TYPES = policyTypes(platformDefinition);

let gw: TestGateway;
let scene: Scene;

beforeAll(async () => {
  gw = await startTestGateway();
  scene = await setUpScene(gw, VICTIM, platformDefinition);
});
afterAll(() => gw?.close());

interface WriteRequest {
  name: string;
  kind: 'create' | 'update' | 'delete';
  method: string;
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
}

const JSON_PATCH = { 'content-type': 'application/json-patch+json' };

const transaction = (type: 'transaction' | 'batch', method: string, url: string, resource?: Resource) => ({
  resourceType: 'Bundle',
  type,
  entry: [{ request: { method, url }, ...(resource ? { resource } : {}) }],
});

/**
 * Every way to change an existing resource: plain, conditional, patched, inside a transaction or batch;
 * for a Task, also claiming it for `claimant` (owner -> them, in-progress: JOURNEY F) and completing it.
 */
function changesOf(target: Resource, claimant?: string): WriteRequest[] {
  const { resourceType: type, id } = target;
  const changed = {
    ...target,
    extension: [...((target as { extension?: unknown[] }).extension ?? []), PLANTED],
  } as Resource;
  const patch = [
    (target as { extension?: unknown[] }).extension
      ? { op: 'add', path: '/extension/-', value: PLANTED }
      : { op: 'add', path: '/extension', value: [PLANTED] },
  ];
  const work =
    type === 'Task'
      ? ([
          ['claim', { ...target, status: 'in-progress', ...(claimant ? { owner: { reference: claimant } } : {}) }],
          ['complete', { ...target, status: 'completed' }],
        ] as const)
      : [];
  return [
    ...work.map(([name, body]): WriteRequest => ({ name, kind: 'update', method: 'PUT', path: `${type}/${id}`, body })),
    { name: 'update', kind: 'update', method: 'PUT', path: `${type}/${id}`, body: changed },
    { name: 'conditional update', kind: 'update', method: 'PUT', path: `${type}?_id=${id}`, body: changed },
    { name: 'patch', kind: 'update', method: 'PATCH', path: `${type}/${id}`, body: patch, headers: JSON_PATCH },
    {
      name: 'update in a transaction',
      kind: 'update',
      method: 'POST',
      path: '',
      body: transaction('transaction', 'PUT', `${type}/${id}`, changed),
    },
    { name: 'delete', kind: 'delete', method: 'DELETE', path: `${type}/${id}` },
    { name: 'conditional delete', kind: 'delete', method: 'DELETE', path: `${type}?_id=${id}` },
    {
      name: 'delete in a batch',
      kind: 'delete',
      method: 'POST',
      path: '',
      body: transaction('batch', 'DELETE', `${type}/${id}`),
    },
  ];
}

/** Every way to create: plain, "extended" (forged accounts), conditional, upsert, inside a transaction. */
function createsOf(resource: Resource): WriteRequest[] {
  const type = resource.resourceType;
  return [
    { name: 'create', kind: 'create', method: 'POST', path: type, body: resource },
    {
      name: 'create with X-Medplum: extended',
      kind: 'create',
      method: 'POST',
      path: type,
      body: resource,
      headers: { 'x-medplum': 'extended' },
    },
    {
      name: 'conditional create',
      kind: 'create',
      method: 'POST',
      path: type,
      body: resource,
      headers: { 'if-none-exist': `_id=${randomUUID()}` },
    },
    {
      name: 'conditional update that creates',
      kind: 'create',
      method: 'PUT',
      path: `${type}?_id=${randomUUID()}`,
      body: resource,
    },
    {
      name: 'create in a transaction',
      kind: 'create',
      method: 'POST',
      path: '',
      body: transaction('transaction', 'POST', type, resource),
    },
  ];
}

/** A resource of the type naming the victim in every patient reference, claiming the victim's tenant. */
function plantedFor(type: string, victim: ReferenceTargets): Resource {
  const resource = minimalResource(type, victim);
  return { ...resource, meta: { accounts: [{ reference: victim.organization }] } };
}

interface WriteOutcome {
  request: WriteRequest;
  status: number;
  text: string;
  changes: StoreChange[];
}

async function write(actor: Actor, request: WriteRequest): Promise<WriteOutcome> {
  const backend = gw.backend;
  const mark = storeMark(backend);
  const response = await direct(backend, actor.token, request.method, fhirPath(request.path), {
    body: request.body,
    headers: request.headers,
  });
  await backend.subscriptions.idle();
  return { request, status: response.status, text: response.text, changes: changesSince(backend, mark) };
}

const summary = (o: WriteOutcome): string =>
  `${o.request.name} ${o.request.method} ${o.request.path || '/'} -> ${o.status} ${o.text.slice(0, 100)}`;

/** What went wrong: a server error, or a change the attacker must not be able to cause. */
function judge(outcome: WriteOutcome, attacker: Actor, strict = false): string | undefined {
  const changed = strict ? outcome.changes : foreignChanges(outcome.changes, attacker);
  if (outcome.status >= 500) {
    return `${summary(outcome)}: a server error`;
  }
  if (changed.length > 0) {
    return `${summary(outcome)}: changed ${changed.map(describeChange).join(', ')}`;
  }
  return undefined;
}

const targetsFor = (victim: ReturnType<typeof ownerOf>): ReferenceTargets => ({
  ...victim,
  project: `Project/${gw.backend.project.id}`,
});

describe('what the spec lets a patient write, directly on Medplum', () => {
  it('still works on their own record: Patient PUT, QuestionnaireResponse POST and PUT', async () => {
    const alice = patientActor(gw.backend, 'alice');
    const own = storedResource(gw.backend, 'Patient', alice.patientId as string) as Patient;
    const put = await write(alice, {
      name: 'own Patient',
      kind: 'update',
      method: 'PUT',
      path: `Patient/${own.id}`,
      body: { ...own, meta: undefined, name: [{ given: ['Alicia'], family: own.name?.[0]?.family }] },
    });
    expect(put.status, summary(put)).toBe(200);
    expect((storedResource(gw.backend, 'Patient', own.id as string) as Patient).name?.[0]?.given).toEqual(['Alicia']);

    const answers: QuestionnaireResponse = {
      resourceType: 'QuestionnaireResponse',
      status: 'in-progress',
      subject: { reference: alice.profile },
      author: { reference: alice.profile },
      source: { reference: alice.profile },
    };
    const created = await write(alice, {
      name: 'own answers',
      kind: 'create',
      method: 'POST',
      path: 'QuestionnaireResponse',
      body: answers,
    });
    expect(created.status, summary(created)).toBe(201);
    const id = (JSON.parse(created.text) as { id: string }).id;
    const updated = await write(alice, {
      name: 'own answers',
      kind: 'update',
      method: 'PUT',
      path: `QuestionnaireResponse/${id}`,
      body: { ...answers, id, status: 'completed' },
    });
    expect(updated.status, summary(updated)).toBe(200);
    expect(judge(created, alice)).toBeUndefined();
    expect(judge(updated, alice)).toBeUndefined();
  });

  it("a patient's own Patient PUT cannot move them to another tenant or change who they are", async () => {
    const carol = patientActor(gw.backend, 'carol');
    const northwind = patientActor(gw.backend, 'alice').organization;
    const own = storedResource(gw.backend, 'Patient', carol.patientId as string) as Patient;
    const outcome = await write(carol, {
      name: 'own Patient, another tenant',
      kind: 'update',
      method: 'PUT',
      path: `Patient/${own.id}`,
      body: {
        ...own,
        meta: { accounts: [{ reference: northwind }] },
        managingOrganization: { reference: northwind },
        identifier: [{ system: 'https://attacker.example/id', value: 'someone-else' }],
      },
      headers: { 'x-medplum': 'extended' },
    });
    expect(outcome.status, summary(outcome)).toBeLessThan(500);
    const after = storedResource(gw.backend, 'Patient', own.id as string) as Patient;
    expect(after.managingOrganization).toEqual(own.managingOrganization);
    expect(after.meta?.accounts).toEqual(own.meta?.accounts);
    expect(after.identifier).toEqual(own.identifier);
  });

  describe.each(['subject', 'author', 'source'])('a QuestionnaireResponse whose %s is another patient', (field) => {
    it('is refused directly on Medplum, created or updated, and nothing lands in their record', async () => {
      const alice = patientActor(gw.backend, 'alice');
      // The attacker's own reference elsewhere keeps it in their own compartment too.
      const answers: QuestionnaireResponse = {
        resourceType: 'QuestionnaireResponse',
        status: 'completed',
        subject: { reference: alice.profile },
        author: { reference: alice.profile },
        source: { reference: alice.profile },
        [field]: { reference: scene.owner.patient },
      };
      const problems: string[] = [];
      for (const request of createsOf(answers)) {
        const outcome = await write(alice, request);
        if (outcome.status < 400 || outcome.status >= 500) {
          problems.push(`${summary(outcome)}: not refused`);
        }
        const problem = judge(outcome, alice);
        if (problem) {
          problems.push(problem);
        }
      }
      const own = await write(alice, {
        name: 'own answers',
        kind: 'create',
        method: 'POST',
        path: 'QuestionnaireResponse',
        body: { ...answers, [field]: { reference: alice.profile } },
      });
      expect(own.status, summary(own)).toBe(201);
      const ownId = (JSON.parse(own.text) as { id: string }).id;
      for (const request of changesOf({ ...answers, id: ownId }).filter((r) => r.kind === 'update')) {
        const outcome = await write(alice, request);
        const problem = judge(outcome, alice);
        if (problem) {
          problems.push(problem);
        }
      }
      expect(problems).toEqual([]);
    });

    it('is refused through the gateway, created or updated', async () => {
      const alice = patientActor(gw.backend, 'alice');
      const body = {
        resourceType: 'QuestionnaireResponse',
        status: 'completed',
        [field]: { reference: scene.owner.patient },
      };
      const mark = storeMark(gw.backend);
      const created = await gw.call('POST', '/v1/fhir/QuestionnaireResponse', { token: alice.token, body });
      const own = await gw.call('POST', '/v1/fhir/QuestionnaireResponse', {
        token: alice.token,
        body: { resourceType: 'QuestionnaireResponse', status: 'in-progress' },
      });
      const ownId = (own.body as { id: string }).id;
      const updated = await gw.call('PUT', `/v1/fhir/QuestionnaireResponse/${ownId}`, {
        token: alice.token,
        body: { ...body, id: ownId },
      });
      const refused = (s: number) => s >= 400 && s < 500;
      expect(refused(created.status), `create -> ${created.status} ${created.text.slice(0, 200)}`).toBe(true);
      expect(refused(updated.status), `update -> ${updated.status} ${updated.text.slice(0, 200)}`).toBe(true);
      expect(foreignChanges(changesSince(gw.backend, mark), alice).map(describeChange)).toEqual([]);
    });
  });
});

describe("a patient's own record: no writes beyond what the spec gives them", () => {
  /**
   * The spec's patient writes (spec rule 2): own demographics, own answers, own uploads (`POST /v1/documents`
   * stores a Binary with the patient's token). Nothing else, even on their own record.
   */
  const SPEC_WRITES: Record<string, WriteRequest['kind'][]> = {
    Patient: ['update'],
    QuestionnaireResponse: ['create', 'update'],
    Binary: ['create'],
  };

  it.each(TYPES)('%s', async (type) => {
    const alice = patientActor(gw.backend, 'alice');
    const self = targetsFor(ownerOf(gw.backend, 'alice'));
    const [seeded] = type === 'Patient' ? [] : await seedRecord(gw.backend, ownerOf(gw.backend, 'alice'), [type]);
    const own = type === 'Patient' ? storedResource(gw.backend, 'Patient', alice.patientId as string) : seeded;
    const requests = [...createsOf(plantedFor(type, self)), ...(own ? changesOf(own, alice.profile) : [])].filter(
      (r) => !SPEC_WRITES[type]?.includes(r.kind),
    );
    const problems: string[] = [];
    for (const request of requests) {
      const problem = judge(await write(alice, request), alice, true);
      if (problem) {
        problems.push(problem);
      }
    }
    expect(problems).toEqual([]);
  });
});

describe.each(TYPES)('writes of %s aimed at the victim', (type) => {
  it.each(ATTACKER_ROLES)('by a %s: refused or without effect', async (role) => {
    const attacker = attackerFor(gw.backend, VICTIM, role);
    const requests = [
      ...createsOf(plantedFor(type, targetsFor(scene.owner))),
      ...targetsOf(gw.backend, type, attacker, scene.owner).flatMap((target) => changesOf(target, attacker.profile)),
    ];
    const problems: string[] = [];
    for (const request of requests) {
      const problem = judge(await write(attacker, request), attacker);
      if (problem) {
        problems.push(problem);
      }
    }
    expect(problems).toEqual([]);
  });
});
