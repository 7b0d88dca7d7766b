import type { MedplumClient } from '@medplum/core';
import type { Communication, Consent, ProjectMembership, Subscription } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isOptOut } from '../../bots/sms-opt-out';
import { SYSTEMS } from '../../contracts/systems';
import { startTestGateway, type TestGateway } from '../support/gateway';

let gw: TestGateway;
/** Signed in as the platform's SMS integration: the only writer whose inbound SMS the bot believes. */
let integration: MedplumClient;
const A = 'https://patient-care.example/agreements';

beforeAll(async () => {
  gw = await startTestGateway();
  const client = await gw.backend.admin.searchOne('ClientApplication', { _tag: `${SYSTEMS.integration}|sms` });
  const membership = await gw.backend.admin.searchOne('ProjectMembership', {
    profile: `ClientApplication/${client?.id}`,
  });
  integration = (await gw.backend.login(membership as ProjectMembership)).medplum;
  for (const [key, agreements] of [
    ['alice', [`${A}/sms|2026-01`, `${A}/voice|2026-01`]],
    ['bob', [`${A}/sms|2026-01`]],
  ] as const) {
    const res = await gw.call('POST', '/v1/agreements/acceptances', {
      token: gw.backend.patients[key].token,
      body: { agreements },
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(200);
  }
});
afterAll(() => gw?.close());

/** What the platform's SMS integration writes for each inbound message. */
const inbound = (from: string, text: string): Communication => ({
  resourceType: 'Communication',
  status: 'completed',
  category: [{ coding: [{ system: SYSTEMS.communicationCategory, code: 'inbound-sms' }] }],
  medium: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ParticipationMode', code: 'SMSWRIT' }] }],
  sender: { identifier: { system: SYSTEMS.phone, value: from } },
  payload: [{ contentString: text }],
});

const statuses = async (key: string) => {
  const consents = await gw.backend.systemRepo.searchResources<Consent>({
    resourceType: 'Consent',
    filters: [{ code: 'patient', operator: 'eq', value: `Patient/${gw.backend.patients[key].patient.id}` }],
  });
  return Object.fromEntries(consents.map((c) => [c.policy?.[0]?.uri?.split('/').pop(), c.status]));
};

describe('SMS opt-out', () => {
  it('recognises the standard keywords only', () => {
    for (const text of ['STOP', ' stop ', 'Unsubscribe', 'QUIT', 'opt out', 'Cancel', 'END', 'REVOKE', 'STOPALL']) {
      expect(isOptOut(text), text).toBe(true);
    }
    for (const text of ['stop please', 'Hello', 'STOPP', '', 'yes']) {
      expect(isOptOut(text), text).toBe(false);
    }
  });

  it('a reply other than STOP changes nothing', async () => {
    await integration.createResource(
      inbound(gw.backend.patients.bob.patient.telecom?.[0]?.value as string, 'Thanks, see you Tuesday'),
    );
    await gw.backend.subscriptions.idle();
    expect(await statuses('bob')).toEqual({ 'sms|2026-01': 'active' });
  });

  it("STOP from a patient's number flips only that patient's SMS Consent", async () => {
    const alicePhone = gw.backend.patients.alice.patient.telecom?.[0]?.value as string;
    // The same STOP written by anyone but the SMS integration (an admin, a clinician) is not believed.
    await gw.backend.admin.createResource(inbound(alicePhone, 'STOP'));
    await gw.backend.clinicians.northwind.medplum.createResource(inbound(alicePhone, 'STOP')).catch(() => undefined);
    await gw.backend.subscriptions.idle();
    expect(await statuses('alice')).toEqual({ 'sms|2026-01': 'active', 'voice|2026-01': 'active' });

    await integration.createResource(inbound(alicePhone, ' Stop '));
    await gw.backend.subscriptions.idle();
    expect(await statuses('alice')).toEqual({ 'sms|2026-01': 'inactive', 'voice|2026-01': 'active' });
    expect(await statuses('bob')).toEqual({ 'sms|2026-01': 'active' });
    // The withdrawn acceptance stays on the record, readable on the record plane.
    const res = await gw.call('GET', '/v1/fhir/Consent?status=inactive', { token: gw.backend.patients.alice.token });
    expect((res.body as { entry?: unknown[] }).entry).toHaveLength(1);
  });

  it('a STOP whose delivery was lost is applied by the reconciler on its schedule; a later acceptance stays', async () => {
    const subscription = (await gw.backend.admin.searchOne('Subscription', {
      _tag: `${SYSTEMS.provisioning}|subscription-inbound-sms`,
    })) as Subscription;
    const bobPhone = gw.backend.patients.bob.patient.telecom?.[0]?.value as string;
    // The delivery is lost: the subscription is off while the STOP arrives.
    await gw.backend.admin.updateResource({ ...subscription, status: 'off' });
    await integration.createResource(inbound(bobPhone, 'STOP'));
    await gw.backend.subscriptions.idle();
    await gw.backend.admin.updateResource({
      ...(await gw.backend.admin.readResource('Subscription', subscription.id as string)),
      status: 'active',
    });
    expect(await statuses('bob')).toEqual({ 'sms|2026-01': 'active' });

    // A minute the reconciler is not due changes nothing; its minute applies the STOP.
    await gw.backend.cron.tick(new Date('2026-11-23T10:11:00Z'));
    expect(await statuses('bob')).toEqual({ 'sms|2026-01': 'active' });
    await gw.backend.cron.tick(new Date('2026-11-23T10:10:00Z'));
    expect(await statuses('bob')).toEqual({ 'sms|2026-01': 'inactive' });

    // Bob accepts SMS again after his STOP: the next runs leave the new acceptance alone.
    const accepted = await gw.call('POST', '/v1/agreements/acceptances', {
      token: gw.backend.patients.bob.token,
      body: { agreements: [`${A}/sms|2026-01`] },
      headers: { 'content-type': 'application/json' },
    });
    expect(accepted.status).toBe(200);
    await gw.backend.cron.tick(new Date('2026-11-23T10:20:00Z'));
    const consents = await gw.backend.systemRepo.searchResources<Consent>({
      resourceType: 'Consent',
      filters: [{ code: 'patient', operator: 'eq', value: `Patient/${gw.backend.patients.bob.patient.id}` }],
    });
    expect(consents.map((c) => c.status).sort()).toEqual(['active', 'inactive']);
  });
});
