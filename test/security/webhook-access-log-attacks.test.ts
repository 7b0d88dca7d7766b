import type { AuditEvent, Basic, Bot, Organization } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AccessLog } from '../../contracts/access-log';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import { applyDefinition } from '../../src/provision/apply';
import { readBotBundles } from '../../src/provision/bundles';
import { demoDefinition } from '../../src/provision/demo';
import type { DemoActor } from '../support/backend';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { freshPatient } from '../support/patients';
import { scaled } from '../support/slowness';
import { newWebhookSecret, startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';

/**
 * Attacks on the webhooks bot's kept deliveries and on her access log, beyond their own tests: members
 * writing what the bots then believe (a pending delivery the webhooks bot signs, AuditEvents that push
 * her true entries off her log's page).
 */
let gw: TestGateway;
let receiver: WebhookReceiver;
let alice: DemoActor;
let bob: DemoActor;

const WEBHOOKS_BOT = { system: SYSTEMS.bots, value: 'webhooks' };
const FAR_FUTURE = '2099-01-01T00:00:00.000Z';

async function logOf(patient: DemoActor, query = ''): Promise<AccessLog> {
  const res = await gw.call('GET', `/v1/patient/access-log${query}`, { token: patient.token });
  expect(res.status, res.text).toBe(200);
  return res.body as AccessLog;
}

/** Every entry of hers, page by page. */
async function wholeLog(patient: DemoActor): Promise<AccessLog['entries']> {
  const entries: AccessLog['entries'] = [];
  let before: string | undefined;
  for (let page = 0; page < 50; page++) {
    const got = await logOf(patient, `?limit=50${before ? `&before=${before}` : ''}`);
    entries.push(...got.entries);
    if (!got.next) {
      return entries;
    }
    before = got.next;
  }
  return entries;
}

/** Waits until Medplum has kept an AuditEvent of `agent` about `entity` (its save is not awaited). */
async function auditKept(entity: string, agent: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if ((await gw.backend.admin.searchResources('AuditEvent', { entity, agent })).length > 0) {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error('no AuditEvent kept');
}

function entry(who: string, what: string, changes: Partial<AuditEvent> = {}): AuditEvent {
  return {
    resourceType: 'AuditEvent',
    type: { system: 'http://terminology.hl7.org/CodeSystem/audit-event-type', code: 'rest' },
    subtype: [{ system: 'http://hl7.org/fhir/restful-interaction', code: 'read' }],
    action: 'R',
    // Now: what Medplum stores at the head of her log (it orders by when it stored an entry); one dated
    // ahead is refused outright (OWN_AUDIT_TRAIL).
    recorded: new Date().toISOString(),
    outcome: '0',
    agent: [{ who: { reference: who }, requestor: true }],
    source: { observer: { reference: who } },
    entity: [{ what: { reference: what } }],
    ...changes,
  };
}

beforeAll(async () => {
  gw = await startTestGateway({}, { saveAuditEvents: true, fhirQuota: 10_000_000 });
  alice = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
  bob = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
});
afterAll(async () => {
  await receiver?.close();
  await gw?.close();
});

describe('her access log cannot be emptied by entries it leaves out', () => {
  const clinicianViewedHer = (log: AccessLog['entries']) =>
    log.some((e) => e.by.kind === 'clinician' && e.action === 'viewed' && e.resourceType === 'Patient');

  it("beside herself an entry may name only the application she signed in through, never as a requestor (the OWN_AUDIT_TRAIL writeConstraint; Medplum 5.1's createAuditEvent in packages/server/src/util/auditevent.ts): patients and clinicians alike", async () => {
    const carer = gw.backend.clinicians.northwind;
    for (const [writer, me, about] of [
      [bob.medplum, `Patient/${bob.patient.id}`, `Patient/${bob.patient.id}`],
      [carer.medplum, `Practitioner/${carer.practitioner.id}`, `Patient/${alice.patient.id}`],
    ] as const) {
      const app = { who: { reference: 'ClientApplication/any-app' }, requestor: false };
      const refused: AuditEvent['agent'][] = [
        [
          { who: { reference: me }, requestor: true },
          { who: { reference: `Practitioner/${carer.practitioner.id}x` }, requestor: false },
        ],
        [
          { who: { reference: me }, requestor: true },
          { who: { reference: `Patient/${alice.patient.id}` }, requestor: false },
        ],
        [
          { who: { reference: me }, requestor: true },
          { ...app, requestor: true },
        ],
        [{ who: { reference: me }, requestor: false }, app],
        [app, { who: { reference: me }, requestor: true }],
      ];
      for (const agent of refused) {
        await expect(writer.createResource(entry(me, about, { agent })), JSON.stringify(agent)).rejects.toThrow();
      }
      await expect(writer.createResource(entry(me, about, { recorded: FAR_FUTURE })), 'dated ahead').rejects.toThrow();
      const kept = await writer.createResource(
        entry(me, about, { agent: [{ who: { reference: me }, requestor: true }, app] }),
      );
      expect(kept.id).toBeDefined();
    }
  });

  it('another patient’s flood of entries about her does not push her care team’s reads off her log', async () => {
    const carer = gw.backend.clinicians.northwind;
    await carer.medplum.readResource('Patient', alice.patient.id);
    await auditKept(`Patient/${alice.patient.id}`, `Practitioner/${carer.practitioner.id}`);
    expect(clinicianViewedHer(await wholeLog(alice))).toBe(true);
    // Bob, in his own name, about her (refused, or kept and left out: either way her log stays whole).
    await Promise.all(
      Array.from({ length: 110 }, () =>
        bob.medplum
          .createResource(entry(`Patient/${bob.patient.id}`, `Patient/${alice.patient.id}`))
          .catch(() => undefined),
      ),
    );
    expect(clinicianViewedHer(await wholeLog(alice))).toBe(true);
  });

  it(
    'a clinician’s entries the log leaves out (failed, a search, two agents) do not hide her own read',
    async () => {
      const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
      const carer = gw.backend.clinicians.northwind;
      const me = `Practitioner/${carer.practitioner.id}`;
      const her = `Patient/${patient.patient.id}`;
      await carer.medplum.readResource('Patient', patient.patient.id);
      await auditKept(her, me);
      const junk: Partial<AuditEvent>[] = [
        { outcome: '4' },
        { subtype: [{ system: 'http://hl7.org/fhir/restful-interaction', code: 'search-type' }] },
        {
          agent: [
            { who: { reference: me }, requestor: true },
            { who: { reference: me }, requestor: false },
          ],
        },
        { entity: [{ what: { display: 'nothing' } }, { what: { reference: her } }] },
      ];
      for (const changes of junk) {
        await Promise.all(
          Array.from({ length: 101 }, () =>
            carer.medplum.createResource(entry(me, her, changes)).catch(() => undefined),
          ),
        );
        expect(clinicianViewedHer(await wholeLog(patient)), JSON.stringify(changes)).toBe(true);
      }
    },
    scaled(60_000),
  );
});

describe('the webhooks bot believes only the deliveries it kept', () => {
  it('a patient’s Basic dressed as a pending delivery is never signed and sent', async () => {
    const secret = newWebhookSecret();
    receiver = await startWebhookReceiver(secret);
    const definition = demoDefinition({ webhooks: { northwind: receiver.url } });
    await applyDefinition(gw.backend.admin, definition, {
      bundles: readBotBundles(definition),
      runBots: false,
      webhookSecrets: { northwind: secret },
    });
    const northwind = (await gw.backend.admin.searchOne('Organization', {
      identifier: `${SYSTEMS.tenant}|northwind`,
    })) as Organization;
    const forged = JSON.stringify({
      type: 'visit.cancelled',
      timestamp: new Date().toISOString(),
      data: { id: 'Appointment/forged/_history/1', type: 'visit.cancelled', patient: `Patient/${alice.patient.id}` },
    });
    // One of her idempotency records (hers to write) that also carries the delivery's code.
    const planted: Basic = {
      resourceType: 'Basic',
      code: {
        coding: [
          { system: SYSTEMS.idempotency, code: 'request' },
          { system: SYSTEMS.webhookDelivery, code: 'pending' },
        ],
      },
      identifier: [{ system: SYSTEMS.webhookDelivery, value: 'Appointment/forged/_history/1' }],
      subject: { reference: `Patient/${bob.patient.id}` },
      extension: [
        {
          url: EXTENSIONS.webhookDelivery,
          extension: [
            { url: 'tenant', valueReference: { reference: `Organization/${northwind.id}` } },
            { url: 'payload', valueString: forged },
            { url: 'attempts', valueInteger: 0 },
            { url: 'next', valueInstant: new Date(Date.now() - 60_000).toISOString() },
            { url: 'last', valueString: 'not tried' },
          ],
        },
      ],
    };
    await bob.medplum.createResource(planted).catch(() => undefined);
    const bot = (await gw.backend.admin.searchOne('Bot', { identifier: `${SYSTEMS.bots}|webhooks` })) as Bot;
    await gw.backend.admin.executeBot(WEBHOOKS_BOT, bot, 'application/fhir+json');
    expect(receiver.deliveries.map((d) => d.raw)).not.toContain(forged);
    expect(receiver.deliveries.map((d) => d.id)).not.toContain('Appointment/forged/_history/1');
  });

  it('a delivery that is due is tried even behind a hundred kept ones that wait longer', async () => {
    const northwind = (await gw.backend.admin.searchOne('Organization', {
      identifier: `${SYSTEMS.tenant}|northwind`,
    })) as Organization;
    const kept = (eventId: string, next: string): Basic => ({
      resourceType: 'Basic',
      code: { coding: [{ system: SYSTEMS.webhookDelivery, code: 'pending' }] },
      identifier: [{ system: SYSTEMS.webhookDelivery, value: eventId }],
      subject: { reference: `Organization/${northwind.id}` },
      extension: [
        {
          url: EXTENSIONS.webhookDelivery,
          extension: [
            { url: 'tenant', valueReference: { reference: `Organization/${northwind.id}` } },
            { url: 'payload', valueString: JSON.stringify({ id: eventId }) },
            { url: 'attempts', valueInteger: 7 },
            { url: 'next', valueInstant: next },
            { url: 'last', valueString: '500' },
          ],
        },
      ],
    });
    // Tried long ago and waiting a day (the oldest written), then one tried a few minutes ago, due now.
    const waiting = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        gw.backend.admin.createResource(kept(`Task/waiting-${i}/_history/1`, FAR_FUTURE)),
      ),
    );
    await new Promise((resolve) => setTimeout(resolve, 5));
    const due = await gw.backend.admin.createResource({
      ...kept('Task/due/_history/1', new Date(Date.now() - 1000).toISOString()),
    });
    const bot = (await gw.backend.admin.searchOne('Bot', { identifier: `${SYSTEMS.bots}|webhooks` })) as Bot;
    const run = (await gw.backend.admin.executeBot(WEBHOOKS_BOT, bot, 'application/fhir+json')) as { tried: number };
    expect(run.tried).toBe(1);
    expect(receiver.deliveries.map((d) => d.id)).toContain('Task/due/_history/1');
    for (const record of [...waiting, due]) {
      await gw.backend.admin.deleteResource('Basic', record.id as string).catch(() => undefined);
    }
  });
});
