import type { Basic, Bot, Communication, Organization, Subscription } from '@medplum/fhirtypes';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import { WEBHOOK_RETRY_MINUTES, WebhookEventSchema } from '../../contracts/webhooks';
import { applyDefinition } from '../../src/provision/apply';
import { readBotBundles } from '../../src/provision/bundles';
import { demoDefinition } from '../../src/provision/demo';
import type { DemoActor } from '../support/backend';
import { demoClinician } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { completeTasks, startAssessment } from '../support/journey';
import { freshPatient } from '../support/patients';
import { scaled } from '../support/slowness';
import { newWebhookSecret, startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';

/**
 * A tenant's webhooks (contracts/webhooks.ts): every event of its patients POSTed to its endpoint, signed
 * as Standard Webhooks (checked here with the reference library), tried again with backoff after a
 * failure, the same id each time; nothing of another tenant's, nothing of her record but ids.
 *
 * Medplum behaviour relied on, as the embedded Medplum mirrors it: a Subscription's criteria
 * `Task?_compartment=Organization/<tenant>` matches on the written version's `meta.compartment`
 * (packages/server/src/workers/subscription.ts `matchesCriteria` -> @medplum/core
 * `resourceMatchesSubscriptionCriteria`, packages/core/src/search/match.ts; the compartment is stamped
 * before the job is queued, packages/server/src/fhir/repo.ts `updateResourceImpl`); a cron run's input is
 * the Bot itself (packages/server/src/workers/cron.ts `executeBot({ bot, runAs, input: bot })`); a
 * subscription bot whose code fails is not run again (workers/subscription.ts `execBot`).
 */
let gw: TestGateway;
let receiver: WebhookReceiver;
let secret: string;
let alice: DemoActor;
let carol: DemoActor;

const WEBHOOKS_BOT = { system: SYSTEMS.bots, value: 'webhooks' };

/** Provisioning, as an operator runs it again with northwind's endpoint (or without it). */
async function provisionWebhooks(webhooks: Record<string, string>, secrets: Record<string, string> = {}) {
  const definition = demoDefinition({ webhooks });
  return applyDefinition(gw.backend.admin, definition, {
    bundles: readBotBundles(definition),
    runBots: false,
    webhookSecrets: secrets,
  });
}

/** The deliveries kept for another try, as the operator sees them in Medplum. */
const kept = async (): Promise<Basic[]> =>
  gw.backend.admin.searchResources('Basic', {
    code: `${SYSTEMS.webhookDelivery}|pending,${SYSTEMS.webhookDelivery}|failed`,
    _count: '100',
  });

const part = (record: Basic, url: string) =>
  record.extension?.find((e) => e.url === EXTENSIONS.webhookDelivery)?.extension?.find((e) => e.url === url);

/** A scheduled run of the bot (Medplum's cron gives it the Bot as input), as an admin executes it. */
async function scheduledRun(): Promise<{ tried: number; delivered: number }> {
  const bot = (await gw.backend.admin.searchOne('Bot', { identifier: `${SYSTEMS.bots}|webhooks` })) as Bot;
  const { tried, delivered } = (await gw.backend.admin.executeBot(WEBHOOKS_BOT, bot, 'application/fhir+json')) as {
    tried: number;
    delivered: number;
  };
  return { tried, delivered };
}

/** Makes every kept delivery due now (as time passing would). */
async function makeDue(): Promise<void> {
  for (const record of await kept()) {
    const parts = record.extension?.[0]?.extension?.map((e) =>
      e.url === 'next' ? { url: 'next', valueInstant: new Date(Date.now() - 1000).toISOString() } : e,
    );
    await gw.backend.admin.updateResource({
      ...record,
      extension: [{ url: EXTENSIONS.webhookDelivery, extension: parts }],
    });
  }
}

beforeAll(async () => {
  // Provisioning is run again and again here, as an admin: more than a minute's FHIR quota of one member.
  gw = await startTestGateway({}, { fhirQuota: 1_000_000 });
  secret = newWebhookSecret();
  receiver = await startWebhookReceiver(secret);
  await provisionWebhooks({ northwind: receiver.url }, { northwind: secret });
  alice = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
  carol = await freshPatient(gw.backend, { tenant: 'southridge', state: 'CA' });
});
afterAll(async () => {
  await receiver?.close();
  await gw?.close();
});

describe('webhooks', () => {
  it("delivers her events signed, with the feed's ids and nothing but ids", async () => {
    const before = receiver.deliveries.length;
    await startAssessment(gw, alice, 'assessments/weight-intake');
    await gw.backend.subscriptions.idle();
    const got = receiver.deliveries.slice(before);
    expect(got.length).toBeGreaterThan(0);
    for (const delivery of got) {
      expect(delivery.verified, delivery.raw).toBe(true);
      const event = WebhookEventSchema.parse(delivery.body);
      expect(event.data.patient).toBe(`Patient/${alice.patient.id}`);
      expect(delivery.id).toBe(event.data.id);
      expect(Math.abs(delivery.timestamp - Date.now() / 1000)).toBeLessThan(60);
    }
    // The same events her feed gives her, by id.
    const feed = (await gw.call('GET', '/v1/events?limit=100', { token: alice.token })).body as {
      events: { id: string; type: string }[];
    };
    const fed = feed.events.filter((e) => e.type !== 'agreements.changed').map((e) => `${e.id} ${e.type}`);
    expect(got.map((d) => `${d.id} ${(d.body as { type: string }).type}`).sort()).toEqual(fed.sort());
    expect(fed.some((e) => e.endsWith('task.ready'))).toBe(true);
  });

  it('delivers her care team’s message as message.received, and nothing for her own answer or a message in her name by someone else', async () => {
    const clinician = await demoClinician(gw.backend, 'northwind');
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const her = { reference: `Patient/${patient.patient.id}` };
    const me = { reference: clinician.profile.reference as string };
    const thread = await clinician.medplum.createResource<Communication>({
      resourceType: 'Communication',
      status: 'in-progress',
      subject: her,
      sender: me,
      recipient: [her, me],
    });
    await gw.backend.subscriptions.idle();
    const before = receiver.deliveries.length;
    const message = await clinician.medplum.createResource<Communication>({
      resourceType: 'Communication',
      status: 'in-progress',
      subject: her,
      sender: me,
      recipient: [her],
      sent: new Date().toISOString(),
      partOf: [{ reference: `Communication/${thread.id}` }],
      payload: [{ contentString: 'How are you today?' }],
    });
    await gw.backend.subscriptions.idle();
    const got = receiver.deliveries.slice(before).map((d) => WebhookEventSchema.parse(d.body));
    expect(got.map((e) => [e.type, e.data.subject, e.data.patient])).toEqual([
      ['message.received', `Communication/${message.id}`, her.reference],
    ]);
    // Her answer (the send-message bot's) is no event of hers; a message naming a clinician as sender that
    // the clinician did not write (the admin's, here) is none either.
    const after = receiver.deliveries.length;
    expect(
      (await gw.call('POST', `/v1/messages/${thread.id}`, { token: patient.token, body: { text: 'Fine' } })).status,
    ).toBe(201);
    await gw.backend.admin.createResource<Communication>({ ...message, id: undefined, meta: undefined });
    await gw.backend.subscriptions.idle();
    expect(receiver.deliveries.slice(after)).toEqual([]);
  });

  it("delivers nothing of a tenant without an endpoint, and nothing of one tenant's to another", async () => {
    const before = receiver.deliveries.length;
    await startAssessment(gw, carol, 'assessments/weight-intake');
    await gw.backend.subscriptions.idle();
    expect(receiver.deliveries.slice(before)).toEqual([]);
    // Not even when the bot is handed carol's task by someone who may execute it (an admin).
    const task = (await gw.backend.admin.searchOne('Task', { patient: `Patient/${carol.patient.id}` })) as {
      id: string;
    };
    await gw.backend.admin.executeBot(WEBHOOKS_BOT, { resourceType: 'Task', id: task.id }, 'application/fhir+json');
    expect(receiver.deliveries.slice(before)).toEqual([]);
  });

  it('delivers only the event types its endpoint takes (a clinic file’s webhook.events)', async () => {
    const org = (await gw.backend.admin.searchOne('Organization', {
      identifier: `${SYSTEMS.tenant}|northwind`,
    })) as Organization & {
      id: string;
    };
    const only = [{ url: EXTENSIONS.webhookEvents, valueCode: 'task.completed' }];
    await gw.backend.admin.updateResource({ ...org, extension: [...(org.extension ?? []), ...only] });
    try {
      const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
      const before = receiver.deliveries.length;
      const started = await startAssessment(gw, patient, 'assessments/weight-intake');
      await gw.backend.subscriptions.idle();
      expect(receiver.deliveries.slice(before)).toEqual([]);
      await completeTasks(gw, patient, started.tasks.slice(0, 1), { 'http://loinc.org|29463-7': 80 });
      await gw.backend.subscriptions.idle();
      const types = receiver.deliveries.slice(before).map((d) => (d.body as { type: string }).type);
      expect(types.length).toBeGreaterThan(0);
      expect(new Set(types)).toEqual(new Set(['task.completed']));
    } finally {
      const now = (await gw.backend.admin.readResource('Organization', org.id, { cache: 'no-cache' })) as Organization;
      await gw.backend.admin.updateResource({
        ...now,
        extension: now.extension?.filter((e) => e.url !== EXTENSIONS.webhookEvents),
      });
    }
  });

  it('believes only its own reads: an invented version or record is not delivered', async () => {
    const before = receiver.deliveries.length;
    const task = (await gw.backend.admin.searchOne('Task', { patient: `Patient/${alice.patient.id}` })) as {
      id: string;
    };
    for (const input of [
      { resourceType: 'Task', id: task.id, meta: { versionId: 'invented-version' }, status: 'ready' },
      { resourceType: 'Task', id: 'no-such-task', status: 'ready', for: { reference: `Patient/${alice.patient.id}` } },
      { resourceType: 'Appointment', id: 'no-such-visit', status: 'booked' },
    ]) {
      await gw.backend.admin.executeBot(WEBHOOKS_BOT, input, 'application/fhir+json');
    }
    expect(receiver.deliveries.slice(before)).toEqual([]);
  });

  it('nobody else runs it: patients and clinicians cannot execute the bot', async () => {
    for (const medplum of [alice.medplum, gw.backend.clinicians.northwind.medplum]) {
      await expect(
        medplum.executeBot(WEBHOOKS_BOT, { resourceType: 'Task', id: 'x' }, 'application/fhir+json'),
      ).rejects.toThrow(/Not found|Forbidden/);
    }
  });

  it('keeps a failed delivery, invisible to her, and tries it again with backoff, the same id', async () => {
    receiver.answerNext(503);
    const before = receiver.deliveries.length;
    await gw.call('POST', '/v1/assessments', { token: alice.token, body: {} }); // a 400: nothing happens
    const bob = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    await startAssessment(gw, bob, 'assessments/weight-intake');
    await gw.backend.subscriptions.idle();
    const first = receiver.deliveries.slice(before);
    const failed = first.find((d) => d.answered === 503);
    expect(failed?.verified).toBe(true);
    const records = await kept();
    expect(records.map((r) => r.identifier?.[0]?.value)).toEqual([failed?.id]);
    const record = records[0];
    expect(part(record, 'attempts')?.valueInteger).toBe(1);
    expect(part(record, 'last')?.valueString).toBe('503');
    const wait = Date.parse(part(record, 'next')?.valueInstant as string) - Date.now();
    expect(wait).toBeGreaterThan((WEBHOOK_RETRY_MINUTES[0] - 1) * 60_000);
    expect(wait).toBeLessThanOrEqual(WEBHOOK_RETRY_MINUTES[0] * 60_000);
    // Not hers to read (nor bob's, whose event it is), and no PHI in it but ids.
    for (const patient of [alice, bob]) {
      expect(
        (await patient.medplum.searchResources('Basic', { code: `${SYSTEMS.webhookDelivery}|pending` })).length,
      ).toBe(0);
    }

    // Not due yet: a scheduled run leaves it.
    expect(await scheduledRun()).toEqual({ tried: 0, delivered: 0 });
    // Due, and failing again: the next wait is the schedule's second.
    await makeDue();
    receiver.answerNext(500);
    expect(await scheduledRun()).toEqual({ tried: 1, delivered: 0 });
    const again = (await kept())[0];
    expect(part(again, 'attempts')?.valueInteger).toBe(2);
    expect(Date.parse(part(again, 'next')?.valueInstant as string) - Date.now()).toBeGreaterThan(
      (WEBHOOK_RETRY_MINUTES[1] - 1) * 60_000,
    );
    // Due, and answered: delivered with the same id and body, a new valid signature; no longer kept.
    await makeDue();
    const count = receiver.deliveries.length;
    expect(await scheduledRun()).toEqual({ tried: 1, delivered: 1 });
    const retried = receiver.deliveries.slice(count);
    expect(retried.map((d) => [d.id, d.raw, d.verified, d.answered])).toEqual([[failed?.id, failed?.raw, true, 200]]);
    expect(await kept()).toHaveLength(0);
  });

  it('gives up after the last try and keeps the delivery as failed', async () => {
    receiver.answerNext(500);
    const before = receiver.deliveries.length;
    const dave = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    await startAssessment(gw, dave, 'assessments/weight-intake');
    await gw.backend.subscriptions.idle();
    expect(receiver.deliveries.slice(before).some((d) => d.answered === 500)).toBe(true);
    for (let attempt = 2; attempt <= WEBHOOK_RETRY_MINUTES.length + 1; attempt++) {
      await makeDue();
      receiver.answerNext(500);
      await scheduledRun();
    }
    const [record] = await kept();
    expect(record.code?.coding?.[0]?.code).toBe('failed');
    expect(part(record, 'attempts')?.valueInteger).toBe(WEBHOOK_RETRY_MINUTES.length + 1);
    // A failed delivery is not tried again.
    await makeDue();
    expect(await scheduledRun()).toEqual({ tried: 0, delivered: 0 });
    await gw.backend.admin.deleteResource('Basic', record.id as string);
  });

  it('an unreachable endpoint is kept like a refusal', async () => {
    const other = await startWebhookReceiver(secret);
    const url = other.url;
    await other.close();
    await provisionWebhooks({ northwind: url });
    const erin = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    await startAssessment(gw, erin, 'assessments/weight-intake');
    await gw.backend.subscriptions.idle();
    const records = await kept();
    expect(records.length).toBeGreaterThan(0);
    expect(new Set(records.map((r) => part(r, 'last')?.valueString))).toEqual(new Set(['unreachable']));
    // The operator mends the endpoint: the next tries go there.
    await provisionWebhooks({ northwind: receiver.url });
    await makeDue();
    const count = receiver.deliveries.length;
    const run = await scheduledRun();
    expect(run.delivered).toBe(records.length);
    expect(receiver.deliveries.slice(count).every((d) => d.verified)).toBe(true);
  });

  it(
    'a receiver that does not answer is waited on once, not for every event: the rest are kept untried',
    async () => {
      for (const record of await kept()) {
        await gw.backend.admin.deleteResource('Basic', record.id as string);
      }
      // Silent (each try waits out the timeout) for the first patient's events, which are tried at once.
      receiver.answerNext(0, 0, 0, 0, 0, 0, 0, 0);
      const gil = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
      await startAssessment(gw, gil, 'assessments/weight-intake');
      await gw.backend.subscriptions.idle();
      const silent = await kept();
      expect(silent.length).toBeGreaterThan(0);
      expect(new Set(silent.map((r) => part(r, 'last')?.valueString))).toEqual(new Set(['timeout']));
      receiver.answerNormally();
      // While they say so, the next patient's events are kept without a try, due with them.
      const before = receiver.deliveries.length;
      const hal = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
      await startAssessment(gw, hal, 'assessments/weight-intake');
      await gw.backend.subscriptions.idle();
      expect(receiver.deliveries.slice(before)).toHaveLength(0);
      const records = await kept();
      const untried = records.filter((r) => part(r, 'last')?.valueString === 'not tried');
      expect(untried.length).toBeGreaterThan(0);
      expect(untried.length + silent.length).toBe(records.length);
      expect(new Set(untried.map((r) => part(r, 'attempts')?.valueInteger))).toEqual(new Set([0]));
      // Once due, the schedule tries them all, and all are delivered.
      await makeDue();
      const count = receiver.deliveries.length;
      expect(await scheduledRun()).toEqual({ tried: records.length, delivered: records.length });
      expect(receiver.deliveries.slice(count).every((d) => d.verified && d.answered === 200)).toBe(true);
      expect(await kept()).toHaveLength(0);
    },
    scaled(30_000),
  );

  it('provisioning refuses an endpoint it would not post to, or one without a secret', async () => {
    await expect(
      provisionWebhooks({ southridge: 'http://example.test/hooks' }, { southridge: secret }),
    ).rejects.toThrow(/https/);
    await expect(
      provisionWebhooks({ southridge: 'https://user:pw@example.test/hooks' }, { southridge: secret }),
    ).rejects.toThrow(/credentials/);
    await expect(provisionWebhooks({ southridge: 'https://example.test/hooks' })).rejects.toThrow(
      /WEBHOOK_SECRET_SOUTHRIDGE/,
    );
    await expect(
      provisionWebhooks({ southridge: 'https://example.test/hooks' }, { southridge: 'not-a-secret' }),
    ).rejects.toThrow(/whsec_/);
  });

  it('rotates its secret: while it holds two, every delivery is signed with both', async () => {
    const next = newWebhookSecret();
    await provisionWebhooks({ northwind: receiver.url }, { northwind: `${next} ${secret}` });
    const before = receiver.deliveries.length;
    const ivy = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    await startAssessment(gw, ivy, 'assessments/weight-intake');
    await gw.backend.subscriptions.idle();
    const got = receiver.deliveries.slice(before);
    expect(got.length).toBeGreaterThan(0);
    for (const delivery of got) {
      // The receiver still on the old secret accepts it (its own check), and so does one on the new.
      expect(delivery.verified).toBe(true);
      expect(() => new Webhook(next).verify(delivery.raw, delivery.headers as Record<string, string>)).not.toThrow();
      expect(String(delivery.headers['webhook-signature']).split(' ')).toHaveLength(2);
    }
    // Three at once, or one that is not a secret, is refused; back to the old one alone.
    await expect(
      provisionWebhooks({ northwind: receiver.url }, { northwind: `${next} ${secret} ${newWebhookSecret()}` }),
    ).rejects.toThrow(/two such/);
    await expect(provisionWebhooks({ northwind: receiver.url }, { northwind: `${next} nope` })).rejects.toThrow(
      /whsec_/,
    );
    await provisionWebhooks({ northwind: receiver.url }, { northwind: secret });
  });

  it('its secret given on one run and left out on the next (it stays stored) writes nothing either way', async () => {
    await provisionWebhooks({ northwind: receiver.url }, { northwind: secret });
    for (const given of [false, true, false, true]) {
      const report = await provisionWebhooks({ northwind: receiver.url }, given ? { northwind: secret } : {});
      expect(report.updated, `secret given: ${given}`).toEqual([]);
    }
  });

  it('a tenant that stops taking webhooks is no longer delivered to', async () => {
    const report = await provisionWebhooks({});
    // Its tasks (created, updated), visits (created, updated) and messages (created).
    expect(report.updated.filter((k) => k.endsWith('-off'))).toHaveLength(5);
    const subscriptions = await gw.backend.admin.searchResources('Subscription', {
      _tag: `${SYSTEMS.provisioning}|subscription-webhook-northwind-task-create`,
    });
    expect(subscriptions.map((s: Subscription) => s.status)).toEqual(['off']);
    const before = receiver.deliveries.length;
    const fay = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    await startAssessment(gw, fay, 'assessments/weight-intake');
    await gw.backend.subscriptions.idle();
    expect(receiver.deliveries.slice(before)).toEqual([]);
    // And a second run changes nothing.
    expect((await provisionWebhooks({})).updated).toEqual([]);
  });
});
