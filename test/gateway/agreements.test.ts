import { OperationOutcomeError } from '@medplum/core';
import type { Consent, DocumentReference, Patient } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import { agreementDocument } from '../../src/provision/agreements';
import { startTestGateway, type TestGateway } from '../support/gateway';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw?.close());

const A = 'https://patient-care.example/agreements';
type Unmet = { url: string; version: string; sourceUrl: string; category: string }[];

const token = (key: string) => gw.backend.patients[key].token;
async function requirements(key: string, query = ''): Promise<{ satisfied: boolean; unmet: Unmet }> {
  const res = await gw.call('GET', `/v1/agreements/requirements${query}`, { token: token(key) });
  expect(res.status, res.text).toBe(200);
  return res.body as { satisfied: boolean; unmet: Unmet };
}
const coords = (unmet: Unmet) => unmet.map((u) => `${u.url}|${u.version}`);
const accept = (key: string, agreements: unknown[]) =>
  gw.call('POST', '/v1/agreements/acceptances', {
    token: token(key),
    body: { agreements },
    headers: { 'content-type': 'application/json', 'user-agent': 'test-agent/1.0', 'x-forwarded-for': '203.0.113.7' },
  });
const withdraw = (key: string, body: unknown) =>
  gw.call('POST', '/v1/agreements/withdrawals', {
    token: token(key),
    body,
    headers: { 'content-type': 'application/json' },
  });
const consentsOf = (key: string) =>
  gw.backend.systemRepo.searchResources<Consent>({
    resourceType: 'Consent',
    filters: [{ code: 'patient', operator: 'eq', value: `Patient/${gw.backend.patients[key].patient.id}` }],
    count: 1000,
  });
const historyFingerprint = () =>
  gw.backend.db.reader
    .prepare("SELECT count(*) AS n, max(seq) AS s FROM history WHERE type NOT IN ('AuditEvent', 'Login')")
    .get();

describe('requirement resolution rules on the demo catalog', () => {
  it('rule 1: the organization that sets none gets the platform baseline; one that sets its own gets its own', async () => {
    const carol = await requirements('carol'); // southridge (sets none), NY
    expect(coords(carol.unmet)).toEqual([`${A}/terms|2026-01`, `${A}/privacy|2026-01`]);
    const bob = await requirements('bob'); // northwind (own set), TX
    expect(coords(bob.unmet)).toEqual(expect.arrayContaining([`${A}/northwind/terms|3`, `${A}/northwind/privacy|3`]));
    expect(bob.unmet.every((u) => !u.url.endsWith('/terms') || u.url.includes('northwind'))).toBe(true);
  });

  it('rule 1: agreements attached to the assessment being entered join the set', async () => {
    const service = await gw.backend.admin.searchOne('HealthcareService', {
      _tag: `${SYSTEMS.provisioning}|service-weight-intake`,
    });
    const carol = await requirements('carol', `?healthcareService=HealthcareService/${service?.id}`);
    expect(coords(carol.unmet)).toEqual([`${A}/terms|2026-01`, `${A}/privacy|2026-01`, `${A}/weight-program|1`]);
    expect(carol.unmet[2].category).toBe('program');
    expect(carol.unmet[2].sourceUrl).toBe(`${A}/weight-program/1.html`);
  });

  it("rule 2: filtered by the patient's state; moving the patient changes the requirements", async () => {
    const carol = gw.backend.patients.carol;
    expect((await requirements('carol')).unmet.some((u) => u.category === 'state-specific')).toBe(false);
    const patient = (await gw.call('GET', '/v1/patient/profile', { token: carol.token })).body as Patient;
    const move = (state: string) =>
      gw.call('PUT', `/v1/fhir/Patient/${patient.id}`, {
        token: carol.token,
        body: { ...patient, meta: undefined, address: [{ ...patient.address?.[0], state }] },
      });
    expect((await move('TX')).status).toBe(200);
    expect(coords((await requirements('carol')).unmet)).toContain(`${A}/telehealth-texas|2026-01`);
    expect((await move('CA')).status).toBe(200);
    const inCalifornia = coords((await requirements('carol')).unmet);
    expect(inCalifornia).toContain(`${A}/privacy-california|2026-02`);
    expect(inCalifornia).not.toContain(`${A}/telehealth-texas|2026-01`);
    expect((await move('NY')).status).toBe(200);
  });

  it("rule 3: the version for the patient's state replaces the default of its category (one per category)", async () => {
    const dave = await requirements('dave'); // southridge, CA
    expect(coords(dave.unmet)).toEqual([`${A}/terms|2026-01`, `${A}/privacy-california|2026-02`]);
    const alice = await requirements('alice'); // northwind, CA
    expect(alice.unmet.filter((u) => u.category === 'privacy').map((u) => u.url)).toEqual([`${A}/privacy-california`]);
  });

  it('rule 4: a state adds its state-specific agreement', async () => {
    const bob = await requirements('bob'); // TX
    expect(bob.unmet.find((u) => u.category === 'state-specific')?.url).toBe(`${A}/telehealth-texas`);
    expect((await requirements('dave')).unmet.some((u) => u.category === 'state-specific')).toBe(false);
  });
});

describe('acceptances', () => {
  it('accepting makes the requirements satisfied, with server-stamped clickwrap proof', async () => {
    const { unmet } = await requirements('dave');
    // Both coordinate forms of the contract, mixed.
    const res = await accept('dave', [
      coords(unmet)[0],
      { agreementUrl: unmet[1].url, agreementVersion: unmet[1].version },
    ]);
    expect(res.status, res.text).toBe(200);
    expect(await requirements('dave')).toEqual({ satisfied: true, unmet: [] });
    const [consent] = (await consentsOf('dave')).filter((c) => c.policy?.[0]?.uri === coords(unmet)[0]);
    expect(consent.status).toBe('active');
    expect(consent.patient?.reference).toBe(`Patient/${gw.backend.patients.dave.patient.id}`);
    const proof = consent.extension?.find((e) => e.url === EXTENSIONS.clickwrapProof)?.extension ?? [];
    const part = (url: string) => proof.find((p) => p.url === url);
    expect(part('who')?.valueReference?.reference).toBe(`Patient/${gw.backend.patients.dave.patient.id}`);
    expect(Date.now() - Date.parse(part('when')?.valueDateTime as string)).toBeLessThan(60_000);
    expect(part('login')?.valueString).toMatch(/^[0-9a-f-]{36}$/);
    expect(part('ipAddress')?.valueString).toBe('203.0.113.7');
    expect(part('userAgent')?.valueString).toBe('test-agent/1.0');
  });

  it('is idempotent, also for 20 concurrent identical calls: one Consent per agreement', async () => {
    const { unmet } = await requirements('bob');
    const calls = await Promise.all(Array.from({ length: 20 }, () => accept('bob', coords(unmet))));
    expect(calls.map((c) => c.status)).toEqual(Array(20).fill(200));
    const consents = await consentsOf('bob');
    expect(consents).toHaveLength(unmet.length);
    const ids = new Set(
      calls.flatMap((c) => (c.body as { acceptances: { consent: string }[] }).acceptances.map((a) => a.consent)),
    );
    expect(ids.size).toBe(unmet.length);
  });

  it('refuses unknown, non-applying or empty lists with a 4xx and writes nothing', async () => {
    const before = historyFingerprint();
    for (const agreements of [[], [`${A}/nope|1`], [`${A}/privacy-california|2026-02`], [`${A}/terms|1999-01`]]) {
      const res = await accept('carol', agreements); // carol is in NY: the California notice does not apply
      expect(res.status).toBe(400);
    }
    expect(historyFingerprint()).toEqual(before);
  });

  it('a newly published version is unmet again; the old acceptance stays active and unchanged', async () => {
    const { unmet } = await requirements('carol');
    expect((await accept('carol', coords(unmet))).status).toBe(200);
    const [oldTerms] = (await consentsOf('carol')).filter((c) => c.policy?.[0]?.uri === `${A}/terms|2026-01`);
    const published = agreementDocument({
      key: 'terms-v2',
      url: `${A}/terms`,
      version: '2026-06',
      category: 'terms',
      title: 'Terms of use',
      required: true,
      published: '2026-06-01',
    });
    await gw.backend.admin.createResource(published.resource as DocumentReference);
    const after = await requirements('carol');
    expect(coords(after.unmet)).toEqual([`${A}/terms|2026-06`]);
    const stillThere = await gw.backend.systemRepo.readResource<Consent>('Consent', oldTerms.id as string);
    expect(stillThere.status).toBe('active');
    expect(stillThere.meta?.versionId).toBe(oldTerms.meta?.versionId);
  });
});

describe('immutability', () => {
  it('published agreement versions cannot be changed by clinicians or bots', async () => {
    const [doc] = await gw.backend.systemRepo.searchResources<DocumentReference>({
      resourceType: 'DocumentReference',
      filters: [{ code: 'identifier', operator: 'eq', value: `${SYSTEMS.agreement}|${A}/privacy` }],
    });
    const clinician = await clinicianClient();
    await expect(clinician.updateResource({ ...doc, description: 'changed' })).rejects.toThrow(OperationOutcomeError);
    const acceptBot = await botClient('accept-agreements');
    await expect(acceptBot.updateResource({ ...doc, description: 'changed' })).rejects.toThrow(OperationOutcomeError);
  });

  it("acceptance proof cannot be changed by the patient, a clinician or a bot's own client", async () => {
    const [consent] = await consentsOf('dave');
    const tampered = { ...consent, dateTime: '2000-01-01T00:00:00Z' };
    const viaGateway = await gw.call('PUT', `/v1/fhir/Consent/${consent.id}`, { token: token('dave'), body: tampered });
    expect(viaGateway.status).toBe(405);
    await expect(gw.backend.patients.dave.medplum.updateResource(tampered)).rejects.toThrow(OperationOutcomeError);
    await expect((await clinicianClient()).updateResource(tampered)).rejects.toThrow(OperationOutcomeError);
    await expect(
      (await botClient('withdraw-agreement')).updateResource({ ...tampered, status: 'inactive' }),
    ).rejects.toThrow(OperationOutcomeError);
    await expect((await botClient('accept-agreements')).updateResource(tampered)).rejects.toThrow(
      OperationOutcomeError,
    );
    const unchanged = await gw.backend.systemRepo.readResource<Consent>('Consent', consent.id as string);
    expect(unchanged.meta?.versionId).toBe(consent.meta?.versionId);
  });
});

describe('withdrawals', () => {
  it('a required agreement needs acknowledgeConsequence; the Consent becomes inactive and is kept', async () => {
    const url = `${A}/terms`;
    const refused = await withdraw('dave', { agreementUrl: url });
    expect(refused.status).toBe(422);
    const error = (refused.body as { error: { code: string; details: { consequence: string } } }).error;
    expect(error.code).toBe('acknowledgement_required');
    expect(error.details.consequence).toContain('terms of use');
    const done = await withdraw('dave', { agreementUrl: url, acknowledgeConsequence: true });
    expect(done.status, done.text).toBe(200);
    const [consent] = (await consentsOf('dave')).filter((c) => c.policy?.[0]?.uri?.startsWith(`${url}|`));
    expect(consent.status).toBe('inactive');
    expect(consent.extension?.some((e) => e.url === EXTENSIONS.clickwrapProof)).toBe(true);
    // Unmet again, at the newest version (2026-06 was published by an earlier test).
    expect(coords((await requirements('dave')).unmet)).toEqual([`${url}|2026-06`]);
    expect((await accept('dave', [`${url}|2026-06`])).status).toBe(200);
    const byUri = new Map((await consentsOf('dave')).map((c) => [c.policy?.[0]?.uri, c.status]));
    expect(byUri.get(`${url}|2026-01`)).toBe('inactive');
    expect(byUri.get(`${url}|2026-06`)).toBe('active');
  });

  it('an optional agreement is withdrawn without acknowledgement; never accepted is 404', async () => {
    expect((await withdraw('alice', { agreementUrl: `${A}/sms` })).status).toBe(404);
    expect((await accept('alice', [`${A}/sms|2026-01`])).status).toBe(200);
    expect((await withdraw('alice', { agreementUrl: `${A}/sms` })).status).toBe(200);
  });
});

async function clinicianClient() {
  const policy = await gw.backend.admin.searchOne('AccessPolicy', { _tag: `${SYSTEMS.provisioning}|policy-clinician` });
  const practitioner = await gw.backend.admin.createResource({
    resourceType: 'Practitioner',
    name: [{ family: 'Reviewer' }],
  });
  const membership = await gw.backend.admin.createResource({
    resourceType: 'ProjectMembership',
    project: { reference: `Project/${gw.backend.project.id}` },
    user: { reference: `Practitioner/${practitioner.id}` },
    profile: { reference: `Practitioner/${practitioner.id}` },
    accessPolicy: { reference: `AccessPolicy/${policy?.id}` },
  });
  return (await gw.backend.login(membership)).medplum;
}

async function botClient(name: string) {
  const bot = await gw.backend.admin.searchOne('Bot', { identifier: `${SYSTEMS.bots}|${name}` });
  const membership = await gw.backend.admin.searchOne('ProjectMembership', { profile: `Bot/${bot?.id}` });
  return (await gw.backend.login(membership as NonNullable<typeof membership>)).medplum;
}
