import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MedplumClient, type WithId } from '@medplum/core';
import type {
  CareTeam,
  Organization,
  Practitioner,
  PractitionerRole,
  ProjectMembership,
  Slot,
  Task,
} from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queueType, tenantQueue } from '../../bots/lib/queues';
import { addDays, localDate } from '../../bots/lib/slots';
import { QUEUES_PARAMETER, SYSTEMS } from '../../contracts/systems';
import { applyDefinition, type ProvisionReport } from '../../src/provision/apply';
import { readBotBundles } from '../../src/provision/bundles';
import { clinicDefinition, type LoadedClinic, loadClinic } from '../../src/provision/clinic';
import { planningClient } from '../../src/provision/plan';
import { registerPatient, tenantApp } from '../support/attack-registration';
import { EXAMPLE, EXAMPLE_ENV } from '../support/clinic';
import { startTestGateway, type TestGateway } from '../support/gateway';

/**
 * A clinic that is not the demo (docs/clinic.md's example, Lakeside), provisioned from its file onto a
 * Medplum (issue 49 items 1, 2): its people sign in and work their queues, a second run writes nothing,
 * and day-2 edits of the file (a clinician moved to another queue, one who left, a day away, a new version
 * of an agreement) are planned by `--dry-run` without a write, then applied with their effects.
 */
let gw: TestGateway;
let dir: string;
const TODAY = new Date().toISOString().slice(0, 10);

function load(): LoadedClinic {
  const result = loadClinic(join(dir, 'clinic.yaml'), EXAMPLE_ENV);
  if (!result.ok) {
    throw new Error(JSON.stringify(result.problems));
  }
  return result.loaded;
}

function edit(change: (text: string) => string): void {
  const file = join(dir, 'clinic.yaml');
  const text = readFileSync(file, 'utf8');
  const changed = change(text);
  expect(changed).not.toBe(text);
  writeFileSync(file, changed);
}

async function provision(medplum = gw.backend.admin): Promise<ProvisionReport> {
  const loaded = load();
  const definition = clinicDefinition(loaded);
  return applyDefinition(medplum, definition, {
    bundles: readBotBundles(definition),
    edgeStatementKey: gw.backend.edgeStatementKey,
    webhookSecrets: loaded.webhookSecrets,
    runBots: false,
  });
}

const byTag = <T extends 'Practitioner' | 'CareTeam' | 'Organization' | 'PractitionerRole' | 'Schedule'>(
  type: T,
  key: string,
) => gw.backend.admin.searchOne(type, { _tag: `${SYSTEMS.provisioning}|${key}` }, { cache: 'no-cache' });

async function membershipOf(practitioner: WithId<Practitioner>): Promise<WithId<ProjectMembership> | undefined> {
  return gw.backend.admin.searchOne(
    'ProjectMembership',
    { profile: `Practitioner/${practitioner.id}` },
    { cache: 'no-cache' },
  );
}

/** Signs in as Medplum's apps do: e-mail and password, then the code for a token. */
async function signIn(email: string, password: string): Promise<MedplumClient> {
  const medplum = new MedplumClient({ baseUrl: gw.backend.baseUrl, fetch: gw.backend.fetch, cacheTime: 0 });
  const login = await medplum.startLogin({ email, password, projectId: gw.backend.project.id });
  await medplum.processCode(login.code as string);
  return medplum;
}

const queuesOf = (membership: ProjectMembership | undefined): string | undefined =>
  membership?.access?.flatMap((a) => a.parameter ?? []).find((p) => p.name === QUEUES_PARAMETER)?.valueString;

/** The free Slots of a Schedule on a local date (in Los Angeles, Lakeside's time zone). */
async function freeOn(schedule: string, date: string): Promise<Slot[]> {
  const slots = await gw.backend.admin.searchResources(
    'Slot',
    { schedule, status: 'free', _count: '1000' },
    { cache: 'no-cache' },
  );
  return slots.filter((s) => localDate(Date.parse(s.start), 'America/Los_Angeles') === date);
}

async function makeSlots(): Promise<{ withdrawn: number }> {
  let withdrawn = 0;
  for (let run = 0; run < 20; run++) {
    const result = (await gw.backend.admin.executeBot(
      { system: SYSTEMS.bots, value: 'materialize-slots' },
      {},
      'application/json',
    )) as { remaining?: number; withdrawn?: number };
    withdrawn += result.withdrawn ?? 0;
    if (!result.remaining) {
      break;
    }
  }
  return { withdrawn };
}

/** A working day of Claire Moreau (Monday to Thursday) at least three days ahead. */
function aWorkingDay(): string {
  for (let n = 3; ; n++) {
    const date = addDays(localDate(Date.now(), 'America/Los_Angeles'), n);
    const day = new Date(`${date}T12:00:00Z`).getUTCDay();
    if (day >= 1 && day <= 4) {
      return date;
    }
  }
}

beforeAll(async () => {
  // No copy of the catalog kept (the gateway keeps one 10 seconds): a new version is read at once.
  gw = await startTestGateway({ catalogTtlMs: 0 }, { fhirQuota: 1_000_000 });
  dir = mkdtempSync(join(tmpdir(), 'clinic-'));
  cpSync(EXAMPLE, dir, { recursive: true });
  // Its events go nowhere in a test (a closed port on this machine), not to the example's host.
  edit((t) => t.replace('https://hooks.lakeside-health.example/patient-care', 'http://127.0.0.1:9/hooks'));
});

afterAll(() => gw?.close());

describe('a clinic provisioned from its file', () => {
  let first: ProvisionReport;

  it('makes its tenant, queues, people, calendar and agreements; its people sign in with their first passwords', async () => {
    first = await provision();
    for (const key of [
      'org-lakeside',
      'app-lakeside',
      'queue-lakeside-intake',
      'queue-lakeside-treatment',
      'clinician-lakeside-okafor',
      'clinician-lakeside-lindqvist',
      'visit-practitioner-lakeside-moreau',
      'visit-schedule-lakeside-moreau',
      'agreement-lakeside-terms-2026-12',
      'agreement-lakeside-oregon-telehealth-1',
      'catalog-lakeside-plan-hypertension-treatment-v2',
      'catalog-jurisdiction-us-or',
      'backend-lakeside-app-server',
    ]) {
      expect(first.created, key).toContain(key);
    }
    const okafor = await signIn('grace.okafor@lakeside-health.example', EXAMPLE_ENV.LAKESIDE_OKAFOR_PASSWORD);
    expect((okafor.getProfile() as Practitioner).name?.[0]?.family).toBe('Okafor');
    const moreau = await signIn('claire.moreau@lakeside-health.example', EXAMPLE_ENV.LAKESIDE_MOREAU_PASSWORD);
    expect((moreau.getProfile() as Practitioner).name?.[0]?.family).toBe('Moreau');
    // Each document is stored with its version, its hash provable.
    const terms = await gw.backend.admin.searchOne(
      'DocumentReference',
      { _tag: `${SYSTEMS.provisioning}|agreement-lakeside-terms-2026-12` },
      { cache: 'no-cache' },
    );
    const text = readFileSync(join(dir, 'agreements/terms-2026-12.html'));
    expect(terms?.content?.[0]?.attachment).toMatchObject({
      contentType: 'text/html',
      url: 'https://lakeside-health.example/agreements/terms/2026-12.html',
      data: text.toString('base64'),
      size: text.byteLength,
    });
  });

  it('routes each kind of work to the queue the file names, and the rest to its default queue', async () => {
    const org = (await byTag('Organization', 'org-lakeside')) as WithId<Organization>;
    const her = { resourceType: 'Patient' as const, managingOrganization: { reference: `Organization/${org.id}` } };
    const intake = (await byTag('CareTeam', 'queue-lakeside-intake')) as WithId<CareTeam>;
    const treatment = (await byTag('CareTeam', 'queue-lakeside-treatment')) as WithId<CareTeam>;
    expect((await tenantQueue(gw.backend.admin, her, 'select-treatment'))?.id).toBe(treatment.id);
    expect((await tenantQueue(gw.backend.admin, her, 'review-reading'))?.id).toBe(treatment.id);
    expect((await tenantQueue(gw.backend.admin, her, 'review-intake'))?.id).toBe(intake.id);
    expect((await tenantQueue(gw.backend.admin, her))?.id).toBe(intake.id);
    // Each clinician works her queues, and is a member of them.
    const lindqvist = (await byTag('Practitioner', 'clinician-lakeside-lindqvist')) as WithId<Practitioner>;
    expect(queuesOf(await membershipOf(lindqvist))).toBe(`'CareTeam/${treatment.id}'`);
    expect(treatment.participant?.map((p) => p.member?.reference)).toEqual([`Practitioner/${lindqvist.id}`]);
  });

  it('a second run writes nothing, and its plan has no write', async () => {
    const plan = planningClient(gw.backend.admin);
    const planned = await provision(plan.client);
    expect(plan.writes).toEqual([]);
    expect(planned.created).toEqual([]);
    const again = await provision();
    expect({ created: again.created, updated: again.updated }).toEqual({ created: [], updated: [] });
  });
});

describe('day 2: the file edited and applied again', () => {
  const holiday = aWorkingDay();
  let patient: { token: string; patientId: string };
  let okaforToken: string;
  let taken: WithId<Task>;
  let lindqvist: WithId<Practitioner>;
  let treatment: WithId<CareTeam>;
  let intake: WithId<CareTeam>;

  it('before: her slots that day, a patient who accepted everything, work Dr. Lindqvist took', async () => {
    await makeSlots();
    const schedule = await byTag('Schedule', 'visit-schedule-lakeside-moreau');
    expect((await freeOn(`Schedule/${schedule?.id}`, holiday)).length).toBeGreaterThan(0);
    const org = (await byTag('Organization', 'org-lakeside')) as WithId<Organization>;
    patient = await registerPatient(
      gw.backend,
      `lakeside-${Date.now()}@example.com`,
      tenantApp(gw.backend, `Organization/${org.id}`),
    );
    // Homed in Lakeside by the app she registered through.
    expect((await gw.call('POST', '/v1/patient/home', { token: patient.token })).status).toBe(200);
    const before = await gw.call('GET', '/v1/agreements/requirements', { token: patient.token });
    const unmet = (before.body as { unmet: { url: string; version: string }[] }).unmet;
    expect(
      unmet.map((u) => `${u.url}|${u.version}`),
      JSON.stringify(unmet),
    ).toContain('https://lakeside-health.example/agreements/terms|2026-12');
    const accepted = await gw.call('POST', '/v1/agreements/acceptances', {
      token: patient.token,
      body: { agreements: unmet },
      headers: { 'content-type': 'application/json', 'user-agent': 'test-agent/1.0' },
    });
    expect(accepted.status, accepted.text).toBe(200);
    const after = await gw.call('GET', '/v1/agreements/requirements', { token: patient.token });
    expect(after.body).toMatchObject({ satisfied: true });
    lindqvist = (await byTag('Practitioner', 'clinician-lakeside-lindqvist')) as WithId<Practitioner>;
    treatment = (await byTag('CareTeam', 'queue-lakeside-treatment')) as WithId<CareTeam>;
    intake = (await byTag('CareTeam', 'queue-lakeside-intake')) as WithId<CareTeam>;
    taken = await gw.backend.admin.createResource<Task>(
      {
        resourceType: 'Task',
        meta: { accounts: [{ reference: `Organization/${org.id}` }] },
        status: 'in-progress',
        intent: 'order',
        code: { coding: [{ system: SYSTEMS.taskKind, code: 'select-treatment' }], text: 'Select a treatment' },
        for: { reference: `Patient/${patient.patientId}` },
        performerType: queueType(treatment),
        owner: { reference: `Practitioner/${lindqvist.id}` },
      },
      { headers: { 'X-Medplum': 'extended' } },
    );
    okaforToken = (
      await signIn('grace.okafor@lakeside-health.example', EXAMPLE_ENV.LAKESIDE_OKAFOR_PASSWORD)
    ).getAccessToken() as string;
  });

  it('the plan (--dry-run) names every change and writes nothing', async () => {
    edit((t) =>
      t
        // Dr. Lindqvist moves to intake, Dr. Okafor leaves the clinic, Dr. Haddad joins for treatment.
        .replace('queues: [treatment]\n', 'queues: [intake]\n')
        .replace(/ {6}- key: okafor\n(?: {8}.*\n)+/, '')
        .replace(
          '    visitPractitioners:\n',
          '      - key: haddad\n        name: { given: Rana, family: Haddad }\n        email: rana.haddad@lakeside-health.example\n        queues: [treatment]\n        passwordEnv: LAKESIDE_OKAFOR_PASSWORD\n\n    visitPractitioners:\n',
        )
        // A day away for Dr. Moreau.
        .replace(
          '- { from: 2026-12-25, reason: Christmas Day }',
          `- { from: ${holiday}, reason: Training day }\n          - { from: 2026-12-25, reason: Christmas Day }`,
        )
        // Its app server is replaced by another.
        .replace(
          '- { key: app-server, name: Lakeside app server }',
          '- { key: app-server-2, name: Lakeside app server 2 }',
        )
        // A new version of the terms, published today.
        .replace(
          '            document: agreements/terms-2026-12.html\n',
          `            document: agreements/terms-2026-12.html\n          - version: "${TODAY}"\n            published: ${TODAY}\n            document: agreements/terms-next.html\n`,
        ),
    );
    writeFileSync(join(dir, 'agreements/terms-next.html'), '<p>Lakeside terms of care, the next version.</p>\n');
    const membershipBefore = await membershipOf(lindqvist);
    const plan = planningClient(gw.backend.admin);
    const planned = await provision(plan.client);
    expect(planned.created).toContain(`agreement-lakeside-terms-${TODAY}`);
    expect(planned.updated).toEqual(
      expect.arrayContaining([
        'membership-clinician-lakeside-lindqvist',
        'queue-lakeside-intake',
        'queue-lakeside-treatment',
        'visit-role-lakeside-moreau',
        'work-returned-clinician-lakeside-lindqvist-1',
        'retired-lakeside/okafor',
        'retired-backend-lakeside/app-server',
      ]),
    );
    expect(planned.created).toEqual(
      expect.arrayContaining(['backend-lakeside-app-server-2', 'clinician-lakeside-haddad']),
    );
    expect(plan.writes.length).toBeGreaterThan(0);
    // Nothing of it happened.
    expect(await membershipOf(lindqvist)).toEqual(membershipBefore);
    const okafor = (await byTag('Practitioner', 'clinician-lakeside-okafor')) as WithId<Practitioner>;
    expect(await membershipOf(okafor)).toBeDefined();
    expect((await gw.backend.admin.readResource('Task', taken.id, { cache: 'no-cache' })).owner).toBeDefined();
  });

  it('applied: the move, the leaver, the day away and the new version, each with its effect', async () => {
    const report = await provision();
    expect(report.updated).toContain('retired-lakeside/okafor');
    // Dr. Lindqvist works intake now, not treatment; what she had taken from treatment is back in it.
    expect(queuesOf(await membershipOf(lindqvist))).toBe(`'CareTeam/${intake.id}'`);
    const returned = await gw.backend.admin.readResource('Task', taken.id, { cache: 'no-cache' });
    expect(returned.owner).toBeUndefined();
    expect(returned.status).toBe('ready');
    const lindqvistApp = await signIn(
      'erik.lindqvist@lakeside-health.example',
      EXAMPLE_ENV.LAKESIDE_LINDQVIST_PASSWORD,
    );
    // Her old queue refuses her: she cannot take its work again; who works it now can.
    await expect(
      lindqvistApp.updateResource({
        ...returned,
        owner: { reference: `Practitioner/${lindqvist.id}` },
        status: 'in-progress',
      }),
    ).rejects.toThrow();
    expect((await gw.backend.admin.readResource('Task', taken.id, { cache: 'no-cache' })).owner).toBeUndefined();
    const haddad = await signIn('rana.haddad@lakeside-health.example', EXAMPLE_ENV.LAKESIDE_OKAFOR_PASSWORD);
    const haddadRef = `Practitioner/${haddad.getProfile()?.id}`;
    const hers = await haddad.updateResource({ ...returned, owner: { reference: haddadRef }, status: 'in-progress' });
    expect(hers.owner?.reference).toBe(haddadRef);
    // Each queue lists who works it now, and nobody else.
    const members = async (key: string) =>
      ((await byTag('CareTeam', key)) as CareTeam).participant?.map((p) => p.member?.reference) ?? [];
    expect(await members('queue-lakeside-intake')).toEqual([`Practitioner/${lindqvist.id}`]);
    expect(await members('queue-lakeside-treatment')).toEqual([haddadRef]);
    // Dr. Okafor can no longer sign in, and her token is refused; her Practitioner stays.
    const okafor = (await byTag('Practitioner', 'clinician-lakeside-okafor')) as WithId<Practitioner>;
    expect(await membershipOf(okafor)).toBeUndefined();
    await expect(
      signIn('grace.okafor@lakeside-health.example', EXAMPLE_ENV.LAKESIDE_OKAFOR_PASSWORD),
    ).rejects.toThrow();
    const withOldToken = await gw.backend.fetch(`${gw.backend.baseUrl}fhir/R4/Patient`, {
      headers: { authorization: `Bearer ${okaforToken}` },
    });
    expect(withOldToken.status).toBe(401);
    // The backend removed from the file no longer signs in; its replacement does.
    const signInAs = async (key: string) => {
      const client = await gw.backend.admin.searchOne(
        'ClientApplication',
        { _tag: `${SYSTEMS.tenantBackend}|lakeside/${key}` },
        { cache: 'no-cache' },
      );
      const medplum = new MedplumClient({ baseUrl: gw.backend.baseUrl, fetch: gw.backend.fetch, cacheTime: 0 });
      await medplum.startClientLogin(client?.id as string, client?.secret as string);
      return medplum;
    };
    await expect(signInAs('app-server')).rejects.toThrow();
    expect((await (await signInAs('app-server-2')).readResource('Patient', patient.patientId)).id).toBe(
      patient.patientId,
    );
    // The day away: none of her slots that day is offered any more.
    const role = (await byTag('PractitionerRole', 'visit-role-lakeside-moreau')) as WithId<PractitionerRole>;
    expect(role.notAvailable?.[0]).toEqual({ description: 'Training day', during: { start: holiday, end: holiday } });
    const { withdrawn } = await makeSlots();
    expect(withdrawn).toBeGreaterThan(0);
    const schedule = await byTag('Schedule', 'visit-schedule-lakeside-moreau');
    expect(await freeOn(`Schedule/${schedule?.id}`, holiday)).toEqual([]);
    expect((await freeOn(`Schedule/${schedule?.id}`, addDays(holiday, 7))).length).toBeGreaterThan(0);
    // The new terms: she must accept them again before anything else.
    const requirements = await gw.call('GET', '/v1/agreements/requirements', { token: patient.token });
    expect(requirements.body).toMatchObject({
      satisfied: false,
      unmet: [expect.objectContaining({ url: 'https://lakeside-health.example/agreements/terms', version: TODAY })],
    });
    // And a second run writes nothing.
    const again = await provision();
    expect({ created: again.created, updated: again.updated }).toEqual({ created: [], updated: [] });
  });

  it('a published version whose text was edited is refused by the rehearsal, before anything is written', async () => {
    writeFileSync(join(dir, 'agreements/terms-2026-12.html'), '<p>Quietly changed terms.</p>\n');
    const plan = planningClient(gw.backend.admin);
    await expect(provision(plan.client)).rejects.toThrow(
      'agreement-lakeside-terms-2026-12 is published and write-once: publish a new version under a new key instead',
    );
    expect(plan.writes.filter((w) => w.target.startsWith('DocumentReference'))).toEqual([]);
  });
});
