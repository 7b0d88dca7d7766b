import { OperationOutcomeError } from '@medplum/core';
import type { Consent, DocumentReference, Patient } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import { agreementDocument } from '../../src/provision/agreements';
import type { DemoActor } from '../support/backend';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { freshPatient } from '../support/patients';

/**
 * The demo patients are only read here: every test that accepts, withdraws or moves someone does it to
 * a patient of its own (`freshPatient`), and the one that publishes a new version runs its own backend,
 * so each test passes alone and in any order.
 */
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw?.close());

const A = 'https://patient-care.example/agreements';
type Unmet = { url: string; version: string; sourceUrl: string; category: string }[];

const demo = (key: string) => gw.backend.patients[key];
async function requirements(
  who: DemoActor,
  query = '',
  on: TestGateway = gw,
): Promise<{ satisfied: boolean; unmet: Unmet }> {
  const res = await on.call('GET', `/v1/agreements/requirements${query}`, { token: who.token });
  expect(res.status, res.text).toBe(200);
  return res.body as { satisfied: boolean; unmet: Unmet };
}
const coords = (unmet: Unmet) => unmet.map((u) => `${u.url}|${u.version}`);
const accept = (who: DemoActor, agreements: unknown[], on: TestGateway = gw) =>
  on.call('POST', '/v1/agreements/acceptances', {
    token: who.token,
    body: { agreements },
    headers: { 'content-type': 'application/json', 'user-agent': 'test-agent/1.0', 'x-forwarded-for': '203.0.113.7' },
  });
const withdraw = (who: DemoActor, body: unknown) =>
  gw.call('POST', '/v1/agreements/withdrawals', {
    token: who.token,
    body,
    headers: { 'content-type': 'application/json' },
  });
const consentsOf = (who: DemoActor, on: TestGateway = gw) =>
  on.backend.systemRepo.searchResources<Consent>({
    resourceType: 'Consent',
    filters: [{ code: 'patient', operator: 'eq', value: `Patient/${who.patient.id}` }],
    count: 1000,
  });
const historyFingerprint = () =>
  gw.backend.db.reader
    .prepare("SELECT count(*) AS n, max(seq) AS s FROM history WHERE type NOT IN ('AuditEvent', 'Login')")
    .get();

/** A patient of their own who has accepted everything asked of them: their Consents, by `url|version`. */
async function patientWhoAcceptedAll(options: Parameters<typeof freshPatient>[1]) {
  const patient = await freshPatient(gw.backend, options);
  const asked = coords((await requirements(patient)).unmet);
  expect((await accept(patient, asked)).status).toBe(200);
  expect(await requirements(patient)).toEqual({ satisfied: true, unmet: [] });
  return { patient, accepted: asked };
}

describe('requirement resolution rules on the demo catalog', () => {
  it('rule 1: the organization that sets none gets the platform baseline; one that sets its own gets its own', async () => {
    const carol = await requirements(demo('carol')); // southridge (sets none), NY
    expect(coords(carol.unmet)).toEqual([`${A}/terms|2026-01`, `${A}/privacy|2026-01`]);
    const bob = await requirements(demo('bob')); // northwind (own set), TX
    expect(coords(bob.unmet)).toEqual(expect.arrayContaining([`${A}/northwind/terms|3`, `${A}/northwind/privacy|3`]));
    expect(bob.unmet.every((u) => !u.url.endsWith('/terms') || u.url.includes('northwind'))).toBe(true);
  });

  it('rule 1: agreements attached to the assessment being entered join the set', async () => {
    const service = await gw.backend.admin.searchOne('HealthcareService', {
      _tag: `${SYSTEMS.provisioning}|service-weight-intake`,
    });
    const carol = await requirements(demo('carol'), `?healthcareService=HealthcareService/${service?.id}`);
    expect(coords(carol.unmet)).toEqual([`${A}/terms|2026-01`, `${A}/privacy|2026-01`, `${A}/weight-program|1`]);
    expect(carol.unmet[2].category).toBe('program');
    expect(carol.unmet[2].sourceUrl).toBe(`${A}/weight-program/1.html`);
  });

  it("rule 1: the document's protocol example, an assessment canonical, brings that assessment's agreement", async () => {
    const parameters = (gw.doc.paths?.['/v1/agreements/requirements']?.get?.parameters ?? []) as {
      name: string;
      schema: { example?: string };
    }[];
    const example = parameters.find((p) => p.name === 'protocol')?.schema.example as string;
    const carol = await requirements(demo('carol'), `?${new URLSearchParams({ protocol: example })}`);
    expect(coords(carol.unmet)).toEqual([`${A}/terms|2026-01`, `${A}/privacy|2026-01`, `${A}/weight-program|1`]);
  });

  it("rule 2: filtered by the patient's state; moving the patient changes the requirements", async () => {
    const mover = await freshPatient(gw.backend, { tenant: 'southridge', state: 'NY' });
    expect((await requirements(mover)).unmet.some((u) => u.category === 'state-specific')).toBe(false);
    const patient = (await gw.call('GET', '/v1/patient/profile', { token: mover.token })).body as Patient;
    const move = (state: string) =>
      gw.call('PUT', `/v1/fhir/Patient/${patient.id}`, {
        token: mover.token,
        body: { ...patient, meta: undefined, address: [{ ...patient.address?.[0], state }] },
      });
    expect((await move('TX')).status).toBe(200);
    expect(coords((await requirements(mover)).unmet)).toContain(`${A}/telehealth-texas|2026-01`);
    expect((await move('CA')).status).toBe(200);
    const inCalifornia = coords((await requirements(mover)).unmet);
    expect(inCalifornia).toContain(`${A}/privacy-california|2026-02`);
    expect(inCalifornia).not.toContain(`${A}/telehealth-texas|2026-01`);
  });

  it("rule 3: the version for the patient's state replaces the default of its category (one per category)", async () => {
    const dave = await requirements(demo('dave')); // southridge, CA
    expect(coords(dave.unmet)).toEqual([`${A}/terms|2026-01`, `${A}/privacy-california|2026-02`]);
    const alice = await requirements(demo('alice')); // northwind, CA
    expect(alice.unmet.filter((u) => u.category === 'privacy').map((u) => u.url)).toEqual([`${A}/privacy-california`]);
  });

  it('rule 4: a state adds its state-specific agreement', async () => {
    const bob = await requirements(demo('bob')); // TX
    expect(bob.unmet.find((u) => u.category === 'state-specific')?.url).toBe(`${A}/telehealth-texas`);
    expect((await requirements(demo('dave'))).unmet.some((u) => u.category === 'state-specific')).toBe(false);
  });
});

describe('acceptances', () => {
  it('accepting makes the requirements satisfied, with server-stamped clickwrap proof', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'southridge', state: 'CA' });
    const { unmet } = await requirements(patient);
    expect(coords(unmet)).toEqual([`${A}/terms|2026-01`, `${A}/privacy-california|2026-02`]);
    // Both coordinate forms of the contract, mixed.
    const res = await accept(patient, [
      coords(unmet)[0],
      { agreementUrl: unmet[1].url, agreementVersion: unmet[1].version },
    ]);
    expect(res.status, res.text).toBe(200);
    expect(await requirements(patient)).toEqual({ satisfied: true, unmet: [] });
    const [consent] = (await consentsOf(patient)).filter((c) => c.policy?.[0]?.uri === coords(unmet)[0]);
    expect(consent.status).toBe('active');
    expect(consent.patient?.reference).toBe(`Patient/${patient.patient.id}`);
    const proof = consent.extension?.find((e) => e.url === EXTENSIONS.clickwrapProof)?.extension ?? [];
    const part = (url: string) => proof.find((p) => p.url === url);
    expect(part('who')?.valueReference?.reference).toBe(`Patient/${patient.patient.id}`);
    expect(Date.now() - Date.parse(part('when')?.valueDateTime as string)).toBeLessThan(60_000);
    expect(part('login')?.valueString).toMatch(/^[0-9a-f-]{36}$/);
    expect(part('ipAddress')?.valueString).toBe('203.0.113.7');
    expect(part('userAgent')?.valueString).toBe('test-agent/1.0');
  });

  it('accepts the unmet entries exactly as the requirements check answered them', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const { unmet } = await requirements(patient);
    expect(unmet.length).toBeGreaterThan(0);
    const res = await accept(patient, unmet);
    expect(res.status, res.text).toBe(200);
    expect(await requirements(patient)).toEqual({ satisfied: true, unmet: [] });
    // An entry without its version pins nothing: refused, as every malformed coordinate is.
    expect((await accept(patient, [{ url: unmet[0].url }])).status).toBe(400);
  });

  it('with exactly one agreement unmet, requirements are not satisfied and name exactly that one', async () => {
    // Each of a Texas northwind patient's three required agreements in turn is the one left out.
    const all = coords(
      (await requirements(await freshPatient(gw.backend, { tenant: 'northwind', state: 'TX' }))).unmet,
    );
    expect(all).toEqual([`${A}/northwind/terms|3`, `${A}/northwind/privacy|3`, `${A}/telehealth-texas|2026-01`]);
    for (const left of all) {
      const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'TX' });
      expect(
        (
          await accept(
            patient,
            all.filter((c) => c !== left),
          )
        ).status,
      ).toBe(200);
      const after = await requirements(patient);
      expect(after.satisfied, left).toBe(false);
      expect(coords(after.unmet), left).toEqual([left]);
    }
  });

  it('is idempotent, also for 20 concurrent identical calls: one Consent per agreement', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'TX' });
    const { unmet } = await requirements(patient);
    expect(unmet).toHaveLength(3);
    const calls = await Promise.all(Array.from({ length: 20 }, () => accept(patient, coords(unmet))));
    expect(calls.map((c) => c.status)).toEqual(Array(20).fill(200));
    const consents = await consentsOf(patient);
    expect(consents).toHaveLength(unmet.length);
    const ids = new Set(
      calls.flatMap((c) => (c.body as { acceptances: { consent: string }[] }).acceptances.map((a) => a.consent)),
    );
    expect(ids.size).toBe(unmet.length);
  });

  it('refuses unknown, non-applying or empty lists with a 4xx and writes nothing', async () => {
    const before = historyFingerprint();
    for (const agreements of [[], [`${A}/nope|1`], [`${A}/privacy-california|2026-02`], [`${A}/terms|1999-01`]]) {
      const res = await accept(demo('carol'), agreements); // carol is in NY: the California notice does not apply
      expect(res.status).toBe(400);
    }
    expect(historyFingerprint()).toEqual(before);
  });

  it('a newly published version is unmet again; the old acceptance stays active and unchanged', async () => {
    // Publishing changes every patient's requirements: this test has a backend of its own, and a clock.
    let later = 0;
    const own = await startTestGateway({ clock: () => new Date(Date.now() + later) });
    try {
      const carol = own.backend.patients.carol;
      const { unmet } = await requirements(carol, '', own);
      expect((await accept(carol, coords(unmet), own)).status).toBe(200);
      const [oldTerms] = (await consentsOf(carol, own)).filter((c) => c.policy?.[0]?.uri === `${A}/terms|2026-01`);
      const published = agreementDocument({
        key: 'terms-v2',
        url: `${A}/terms`,
        version: '2026-06',
        category: 'terms',
        title: 'Terms of use',
        required: true,
        published: '2026-06-01',
      });
      await own.backend.admin.createResource(published.resource as DocumentReference);
      // Her tenant's published agreements are read at most every 10 s (src/medplum/catalog-cache.ts):
      // within that, the copy read before; past it, the new version.
      expect(await requirements(carol, '', own)).toEqual({ satisfied: true, unmet: [] });
      later += 10_001;
      expect(await requirements(carol, '', own)).toEqual({
        satisfied: false,
        unmet: [{ url: `${A}/terms`, version: '2026-06', sourceUrl: `${A}/terms/2026-06.html`, category: 'terms' }],
      });
      const stillThere = await own.backend.systemRepo.readResource<Consent>('Consent', oldTerms.id as string);
      expect(stillThere.status).toBe('active');
      expect(stillThere.meta?.versionId).toBe(oldTerms.meta?.versionId);
    } finally {
      own.close();
    }
  });

  it('with 1,010 published versions of one agreement, the newest is the one asked for', async () => {
    // One page holds at most 1,000: a catalog read that stops at the first page asks for an old
    // version. Published in order, oldest first, so the newest is the last of 1,010 stored. Writing
    // them in one go is 101,000 quota points, twice what Medplum gives an admin a minute: raised here.
    const own = await startTestGateway({}, { fhirQuota: 1_000_000 });
    try {
      const versions = Array.from({ length: 1010 }, (_, i) => i);
      const day = (i: number) => new Date(Date.UTC(2026, 1, 1) + i * 3600_000).toISOString();
      await own.backend.admin.executeBatch({
        resourceType: 'Bundle',
        type: 'transaction',
        entry: versions.map((i) => ({
          resource: agreementDocument({
            key: `terms-${i}`,
            url: `${A}/terms`,
            version: `v${i}`,
            category: 'terms',
            title: 'Terms of use',
            required: true,
            published: day(i),
          }).resource as DocumentReference,
          request: { method: 'POST' as const, url: 'DocumentReference' },
        })),
      });
      const { unmet } = await requirements(own.backend.patients.carol, '', own);
      expect(unmet.filter((u) => u.url === `${A}/terms`)).toEqual([
        { url: `${A}/terms`, version: 'v1009', sourceUrl: `${A}/terms/v1009.html`, category: 'terms' },
      ]);
    } finally {
      own.close();
    }
  });
});

describe('immutability', () => {
  it('published agreement versions cannot be changed by clinicians or bots', async () => {
    const documentOf = async (url: string) =>
      (
        await gw.backend.systemRepo.searchResources<DocumentReference>({
          resourceType: 'DocumentReference',
          filters: [{ code: 'identifier', operator: 'eq', value: `${SYSTEMS.agreement}|${url}` }],
        })
      )[0];
    const platform = await documentOf(`${A}/privacy`);
    const northwind = await documentOf(`${A}/northwind/privacy`);
    // The tenant's own clinician reads its tenant's agreements (DocumentReference is a type they write),
    // and still cannot change them.
    const northwindClinician = gw.backend.clinicians.northwind.medplum;
    expect((await northwindClinician.readResource('DocumentReference', northwind.id as string)).id).toBe(northwind.id);
    const attempts = [
      { who: 'northwind clinician', medplum: northwindClinician, doc: northwind },
      { who: 'northwind clinician', medplum: northwindClinician, doc: platform },
      { who: 'southridge clinician', medplum: gw.backend.clinicians.southridge.medplum, doc: platform },
      { who: 'accept-agreements bot', medplum: await botClient('accept-agreements'), doc: platform },
      { who: 'accept-agreements bot', medplum: await botClient('accept-agreements'), doc: northwind },
    ];
    for (const { who, medplum, doc } of attempts) {
      await expect(medplum.updateResource({ ...doc, description: 'changed' }), who).rejects.toThrow(
        OperationOutcomeError,
      );
    }
    for (const doc of [platform, northwind]) {
      const unchanged = await gw.backend.systemRepo.readResource<DocumentReference>(
        'DocumentReference',
        doc.id as string,
      );
      expect(unchanged.meta?.versionId).toBe(doc.meta?.versionId);
    }
  });

  it("acceptance proof cannot be changed by the patient, a clinician or a bot's own client", async () => {
    const { patient } = await patientWhoAcceptedAll({ tenant: 'southridge', state: 'CA' });
    const [consent] = await consentsOf(patient);
    const tampered = { ...consent, dateTime: '2000-01-01T00:00:00Z' };
    const viaGateway = await gw.call('PUT', `/v1/fhir/Consent/${consent.id}`, { token: patient.token, body: tampered });
    expect(viaGateway.status).toBe(405);
    await expect(patient.medplum.updateResource(tampered)).rejects.toThrow(OperationOutcomeError);
    await expect(gw.backend.clinicians.southridge.medplum.updateResource(tampered)).rejects.toThrow(
      OperationOutcomeError,
    );
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
    const { patient } = await patientWhoAcceptedAll({ tenant: 'southridge', state: 'CA' });
    const url = `${A}/terms`;
    const before = historyFingerprint();
    const refused = await withdraw(patient, { agreementUrl: url });
    expect(refused.status).toBe(422);
    const error = (refused.body as { error: { code: string; details: { consequence: string } } }).error;
    expect(error.code).toBe('acknowledgement_required');
    expect(error.details.consequence).toContain('terms of use');
    expect(historyFingerprint()).toEqual(before);
    const done = await withdraw(patient, { agreementUrl: url, acknowledgeConsequence: true });
    expect(done.status, done.text).toBe(200);
    const [consent] = (await consentsOf(patient)).filter((c) => c.policy?.[0]?.uri?.startsWith(`${url}|`));
    expect(consent.status).toBe('inactive');
    expect(consent.extension?.some((e) => e.url === EXTENSIONS.clickwrapProof)).toBe(true);
    // Unmet again, and only it.
    expect(await requirements(patient)).toEqual({
      satisfied: false,
      unmet: [{ url, version: '2026-01', sourceUrl: `${url}/2026-01.html`, category: 'terms' }],
    });
    expect((await accept(patient, [`${url}|2026-01`])).status).toBe(200);
    expect(await requirements(patient)).toEqual({ satisfied: true, unmet: [] });
    // Accepting again makes a new acceptance: the withdrawn one stays inactive, as it was.
    const byStatus = (await consentsOf(patient))
      .filter((c) => c.policy?.[0]?.uri === `${url}|2026-01`)
      .map((c) => c.status)
      .sort();
    expect(byStatus).toEqual(['active', 'inactive']);
  });

  it('an optional agreement is withdrawn without acknowledgement; never accepted is 404', async () => {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    expect((await withdraw(patient, { agreementUrl: `${A}/sms` })).status).toBe(404);
    expect((await accept(patient, [`${A}/sms|2026-01`])).status).toBe(200);
    expect((await withdraw(patient, { agreementUrl: `${A}/sms` })).status).toBe(200);
    const [sms] = (await consentsOf(patient)).filter((c) => c.policy?.[0]?.uri === `${A}/sms|2026-01`);
    expect(sms.status).toBe('inactive');
  });
});

async function botClient(name: string) {
  const bot = await gw.backend.admin.searchOne('Bot', { identifier: `${SYSTEMS.bots}|${name}` });
  const membership = await gw.backend.admin.searchOne('ProjectMembership', { profile: `Bot/${bot?.id}` });
  return (await gw.backend.login(membership as NonNullable<typeof membership>)).medplum;
}
