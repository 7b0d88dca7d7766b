import type { Bundle, Resource, Task } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import { platformDefinition } from '../../src/provision/definition';
import {
  type Actor,
  ATTACKER_ROLES,
  type AttackerRole,
  attackerFor,
  direct,
  fhirPath,
  isSubscriptionBot,
  patientActor,
  policyTypes,
  publishedByTag,
} from '../support/attack';
import { type ExposureKind, exposureOf, leaked, patientTenants, resourcesIn } from '../support/attack-exposure';
import { patientCompartmentParams, referenceParams } from '../support/attack-resources';
import { inOwnRecord, storedResource, storedResources } from '../support/attack-store';
import { type Scene, secretOf, setUpScene } from '../support/attack-victim';
import { startTestGateway, type TestGateway } from '../support/gateway';

/**
 * Every type the policies name, read every way FHIR offers (read, vread, history, search, `_include`,
 * `_revinclude`, `_compartment`, chained and `_has` searches, batch), directly on Medplum by a patient
 * of the same tenant, a patient of the other tenant and a clinician of the other tenant: not one
 * resource of another patient (for the clinician: of another tenant's patient) or of another tenant.
 */
const VICTIM = 'bob';
const TYPES = policyTypes(platformDefinition);
const PUBLISHED = publishedByTag(platformDefinition);

let gw: TestGateway;
let scene: Scene;
/** Seeded items of the victim's tenant that were never published to patients. */
let unpublished: Set<string>;

beforeAll(async () => {
  gw = await startTestGateway();
  scene = await setUpScene(gw, VICTIM, platformDefinition);
  unpublished = new Set(
    scene.seeded
      .filter((r) => PUBLISHED.includes(r.resourceType))
      .filter((r) => !r.meta?.compartment?.some((c) => c.reference?.startsWith('Patient/')))
      .map(ref),
  );
  await seedBridges();
});
afterAll(() => gw?.close());

const ref = (r: Resource): string => `${r.resourceType}/${r.id}`;

/**
 * References that cross between records, as a clinician might write them: each patient attacker owns a
 * Task focused on each piece of the victim's data (`_include` bait), and the victim owns a Task focused
 * on each attacker's Observation (`_revinclude` bait; not on the attacker's Patient, which would put it
 * in the attacker's own compartment).
 */
async function seedBridges(): Promise<void> {
  const backend = gw.backend;
  const task = (owner: string, organization: string, focus: string): Task => ({
    resourceType: 'Task',
    status: 'requested',
    intent: 'order',
    for: { reference: owner },
    focus: { reference: focus },
    meta: { project: backend.project.id, accounts: [{ reference: organization }] },
  });
  // Not the victim's Patient: a Task focused on a patient is in that patient's compartment too.
  const victimData = [...scene.seeded.map(ref), ...scene.consents.map((id) => `Consent/${id}`)];
  for (const role of ATTACKER_ROLES) {
    const attacker = attackerFor(backend, VICTIM, role);
    if (attacker.kind !== 'patient') {
      continue;
    }
    for (const focus of victimData) {
      await backend.systemRepo.createResource(task(attacker.profile, attacker.organization, focus));
    }
    const observation = storedResources(backend, 'Observation').find((o) => inOwnRecord(o, attacker.patientId));
    if (observation) {
      await backend.systemRepo.createResource(task(scene.owner.patient, scene.owner.organization, ref(observation)));
    }
  }
}

/** Everything the attacker must not see, of one type, the victim's own record first. */
function forbiddenOf(type: string, attacker: Actor, kinds: ExposureKind[], max = 4): Resource[] {
  const tenants = patientTenants(gw.backend);
  const victimFirst = (r: Resource) => (r.meta?.compartment?.some((c) => c.reference === scene.owner.patient) ? 0 : 1);
  return storedResources(gw.backend, type)
    .filter((r) => {
      const exposure = exposureOf(r, attacker, tenants, unpublished);
      return exposure && kinds.includes(exposure.kind);
    })
    .sort((a, b) => victimFirst(a) - victimFirst(b))
    .slice(0, max);
}

/** Every way to read one resource: read, vread, history, search by id, inside a batch. */
function readsOf(target: Resource): string[] {
  const { resourceType: type, id } = target;
  return [
    `${type}/${id}`,
    `${type}/${id}/_history`,
    `${type}/${id}/_history/${target.meta?.versionId}`,
    `${type}?_id=${id}`,
    `${type}?_id=${id}&_summary=count`,
    `batch:${type}/${id}`,
  ];
}

const chunks = <T>(items: T[], size: number): T[][] =>
  Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size));

/** Every search of a type that could reach the victim: by compartment, chains, includes, `_has`. */
function searchesOf(type: string, attacker: Actor): string[] {
  const victim = scene.victim;
  const identifier = `${SYSTEMS.demoPatient}|${VICTIM}`;
  const compartmentParams = patientCompartmentParams(type);
  const includes = referenceParams(type).map((p) => `_include=${type}:${p.code}`);
  const revincludes = TYPES.flatMap((other) =>
    referenceParams(other)
      .filter((p) => p.targets.includes(type))
      .map((p) => `_revinclude=${other}:${p.code}`),
  );
  const victimData = storedResources(gw.backend, type).filter((r) =>
    r.meta?.compartment?.some((c) => c.reference === scene.owner.patient),
  );
  return [
    `${type}?_count=100`,
    `${type}/_history?_count=100`,
    `${type}?_compartment=${victim.profile}`,
    `${type}?_compartment=${victim.profile}&_summary=count`,
    `${type}?_compartment=${victim.organization}&_count=100`,
    ...(attacker.organization === victim.organization ? [] : [`${type}?_compartment=${attacker.organization}`]),
    ...compartmentParams.flatMap((p) => [
      `${type}?${p}=${victim.profile}`,
      `${type}?${p}=${victim.profile}&_summary=count`,
      `${type}?${p}.name=${victim.family}`,
      `${type}?${p}:Patient.name=${victim.family}`,
      `${type}?${p}.identifier=${encodeURIComponent(identifier)}`,
      `${type}?${p}:Patient._id=${victim.patientId}`,
    ]),
    ...chunks(includes, 12).map((c) => `${type}?_count=100&${c.join('&')}`),
    ...chunks(includes, 12).map(
      (c) => `${type}?_count=100&${c.join('&').replaceAll('_include=', '_include:iterate=')}`,
    ),
    ...chunks(revincludes, 12).map((c) => `${type}?_count=100&${c.join('&')}`),
    ...compartmentParams.flatMap((p) => [
      `Patient?_has:${type}:${p}:_id=${victimData[0]?.id ?? 'none'}`,
      `Patient?_has:${type}:${p}:_lastUpdated=gt2000-01-01`,
    ]),
  ];
}

/** Runs one read (a path, or `batch:<path>` for a GET inside a batch Bundle) and says what it exposed. */
async function exposed(attacker: Actor, request: string, kinds: ExposureKind[]): Promise<string | undefined> {
  const backend = gw.backend;
  const response = request.startsWith('batch:')
    ? await direct(backend, attacker.token, 'POST', fhirPath(''), {
        body: { resourceType: 'Bundle', type: 'batch', entry: [{ request: { method: 'GET', url: request.slice(6) } }] },
      })
    : await direct(backend, attacker.token, 'GET', fhirPath(request));
  const label = `${request} -> ${response.status}`;
  if (response.status >= 500) {
    return `${label}: a server error ${response.text.slice(0, 120)}`;
  }
  const tenants = patientTenants(backend);
  const problems = new Set<string>();
  for (const { type, id } of resourcesIn(response.body)) {
    const stored = storedResource(backend, type, id);
    const exposure = stored ? exposureOf(stored, attacker, tenants, unpublished) : undefined;
    if (exposure && kinds.includes(exposure.kind)) {
      problems.add(exposure.why);
    }
  }
  const total = (response.body as Bundle | undefined)?.total;
  if (request.includes('_summary=count') && total) {
    // A count is a read too: it may not count what the same search does not show.
    const shown = await direct(
      backend,
      attacker.token,
      'GET',
      fhirPath(request.replace('_summary=count', '_count=1000')),
    );
    const matches = ((shown.body as Bundle | undefined)?.entry ?? []).filter((e) => e.search?.mode !== 'include');
    if (total > matches.length) {
      problems.add(`counts ${total} where the same search shows ${matches.length}`);
    }
  }
  const secrets = scene.seeded
    .filter((r) => kinds.includes(exposureOf(r, attacker, tenants, unpublished)?.kind ?? ('none' as ExposureKind)))
    .map((r) => secretOf(r.resourceType, VICTIM));
  for (const secret of leaked(
    response.text,
    [...secrets, ...(kinds.includes('another patient') ? [scene.victim.family ?? ''] : [])],
    request,
  )) {
    problems.add(`holds "${secret}"`);
  }
  return problems.size ? `${label}: ${[...problems].slice(0, 4).join('; ')}` : undefined;
}

async function attempts(attacker: Actor, requests: string[], kinds: ExposureKind[]): Promise<string[]> {
  const problems: string[] = [];
  for (const request of requests) {
    const problem = await exposed(attacker, request, kinds);
    if (problem) {
      problems.push(problem);
    }
  }
  return problems;
}

const RECORDS_AND_TENANTS: ExposureKind[] = ['another patient', 'another tenant'];

describe('the attacks are real: what a patient may read still reads', () => {
  it('own data, own data with its includes, and published agreements', async () => {
    const alice = patientActor(gw.backend, 'alice');
    const count = async (path: string) => {
      const response = await direct(gw.backend, alice.token, 'GET', fhirPath(path));
      expect(response.status, `${path} ${response.text.slice(0, 200)}`).toBe(200);
      return ((response.body as Bundle).entry ?? []).length;
    };
    expect(await count(`Observation?subject=${alice.profile}`)).toBeGreaterThan(0);
    expect(await count('Task?_count=100&_include=Task:focus')).toBeGreaterThan(0);
    expect(await count(`DocumentReference?identifier=${encodeURIComponent(`${SYSTEMS.agreement}|`)}`)).toBeGreaterThan(
      0,
    );
  });
});

describe.each(TYPES)('reads of %s', (type) => {
  it.each(ATTACKER_ROLES)(
    'by a %s: no other patient or tenant through read, vread, history, search, includes, _compartment, chains, _has',
    async (role: AttackerRole) => {
      const attacker = attackerFor(gw.backend, VICTIM, role);
      const requests = [
        ...forbiddenOf(type, attacker, RECORDS_AND_TENANTS).flatMap(readsOf),
        ...searchesOf(type, attacker),
      ];
      expect(await attempts(attacker, requests, RECORDS_AND_TENANTS)).toEqual([]);
    },
  );
});

describe.each(PUBLISHED)('reads of %s, published to patients by tag', (type) => {
  it('by a patient of the same tenant: nothing of their tenant that was never published (DESIGN section 7)', async () => {
    const attacker = attackerFor(gw.backend, VICTIM, 'patient of the same tenant');
    const requests = [...forbiddenOf(type, attacker, ['unpublished']).flatMap(readsOf), `${type}?_count=100`];
    expect(await attempts(attacker, requests, ['unpublished'])).toEqual([]);
  });
});

describe.each(platformDefinition.bots.map((b) => ({ key: b.key })))('bot $key', ({ key }) => {
  it.each(ATTACKER_ROLES)('by a %s: its code is never readable, a subscription bot not at all', async (role) => {
    const backend = gw.backend;
    const attacker = attackerFor(backend, VICTIM, role);
    const bot = storedResources(backend, 'Bot').find((b) =>
      (b as { identifier?: { system?: string; value?: string }[] }).identifier?.some(
        (i) => i.system === SYSTEMS.bots && i.value === key,
      ),
    ) as (Resource & { executableCode?: { url?: string }; sourceCode?: { url?: string } }) | undefined;
    expect(bot?.executableCode?.url).toMatch(/^Binary\//);
    const problems: string[] = [];
    const mayRead = !(attacker.kind === 'patient' && isSubscriptionBot(platformDefinition, key));
    for (const path of [`Bot/${bot?.id}`, `Bot?identifier=${encodeURIComponent(`${SYSTEMS.bots}|${key}`)}`]) {
      const response = await direct(backend, attacker.token, 'GET', fhirPath(path));
      const bots = resourcesIn(response.body).filter((r) => r.type === 'Bot');
      if (!mayRead && bots.length > 0) {
        problems.push(`${path} -> ${response.status}: a patient can read a subscription bot (and so $execute it)`);
      }
      if (/executableCode|sourceCode/.test(response.text)) {
        problems.push(`${path} -> ${response.status}: shows where the bot's code is`);
      }
    }
    for (const code of [bot?.executableCode?.url, bot?.sourceCode?.url].filter((u): u is string => Boolean(u))) {
      const response = await direct(backend, attacker.token, 'GET', fhirPath(code));
      if (response.status < 400 || response.status >= 500) {
        problems.push(`${code} -> ${response.status}: the bot's code is readable`);
      }
    }
    expect(problems).toEqual([]);
  });
});
