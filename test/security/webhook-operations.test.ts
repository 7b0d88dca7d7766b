import { MedplumClient, type WithId } from '@medplum/core';
import type { Basic, ClientApplication, Organization } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import {
  WEBHOOK_OPERATIONS,
  WebhookEventSchema,
  WebhookTestEventSchema,
  WebhookTryResultSchema,
} from '../../contracts/webhooks';
import { webhooksCommand } from '../../src/cli/webhooks';
import { applyDefinition } from '../../src/provision/apply';
import { readBotBundles } from '../../src/provision/bundles';
import { demoDefinition } from '../../src/provision/demo';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { startAssessment } from '../support/journey';
import { freshPatient } from '../support/patients';
import { newWebhookSecret, startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver';

/**
 * A tenant backend's webhook operations (issue 51 item 4, docs/webhooks.md): its delivery log (the
 * webhooks bot's kept deliveries, read on Medplum with its own credential), a signed test event, and a
 * replay of a kept delivery (two bots it executes). Attacked from both sides: the other tenant's backend,
 * a patient and a clinician, directly on Medplum; the bots believe only the requester.
 */
let gw: TestGateway;
const receivers: Record<string, WebhookReceiver> = {};
const backends: Record<string, MedplumClient> = {};
const tenants: Record<string, WithId<Organization>> = {};

const TEST_BOT = { system: SYSTEMS.bots, value: WEBHOOK_OPERATIONS.test.bot };
const REPLAY_BOT = { system: SYSTEMS.bots, value: WEBHOOK_OPERATIONS.replay.bot };
const LOG = {
  code: ['pending', 'failed', 'delivered'].map((s) => `${SYSTEMS.webhookDelivery}|${s}`).join(','),
  _count: '100',
};

async function backendOf(tenant: string): Promise<MedplumClient> {
  const client = (await gw.backend.admin.searchOne('ClientApplication', {
    _tag: `${SYSTEMS.tenantBackend}|${tenant}/app-server`,
  })) as WithId<ClientApplication>;
  const medplum = new MedplumClient({ baseUrl: gw.backend.baseUrl, fetch: gw.backend.fetch, cacheTime: 0 });
  await medplum.startClientLogin(client.id, client.secret as string);
  return medplum;
}

const part = (record: Basic, url: string) =>
  record.extension?.find((e) => e.url === EXTENSIONS.webhookDelivery)?.extension?.find((e) => e.url === url);

/** A northwind patient's first events, the first of which its endpoint refuses: one delivery kept. */
async function keptDelivery(tenant: 'northwind' | 'southridge'): Promise<{ id: string; raw: string }> {
  const receiver = receivers[tenant] as WebhookReceiver;
  receiver.answerNext(503);
  const before = receiver.deliveries.length;
  const patient = await freshPatient(gw.backend, { tenant, state: 'CA' });
  await startAssessment(gw, patient, 'assessments/weight-intake');
  await gw.backend.subscriptions.idle();
  const failed = receiver.deliveries.slice(before).find((d) => d.answered === 503);
  if (!failed) {
    throw new Error(`no delivery of ${tenant} was refused`);
  }
  return { id: failed.id, raw: failed.raw };
}

/** What a bot answered, or how Medplum refused to run it (its status). */
async function run(medplum: MedplumClient, bot: { system: string; value: string }, input: unknown): Promise<unknown> {
  try {
    return await medplum.executeBot(bot, input, 'application/json');
  } catch (err) {
    const id = (err as { outcome?: { issue?: { code?: string }[] } }).outcome?.issue?.[0]?.code;
    return { refusedByMedplum: id ?? String(err) };
  }
}

beforeAll(async () => {
  gw = await startTestGateway({}, { fhirQuota: 1_000_000 });
  const secrets: Record<string, string> = {};
  for (const tenant of ['northwind', 'southridge']) {
    secrets[tenant] = newWebhookSecret();
    receivers[tenant] = await startWebhookReceiver(secrets[tenant]);
  }
  const definition = demoDefinition({
    webhooks: { northwind: receivers.northwind?.url as string, southridge: receivers.southridge?.url as string },
  });
  await applyDefinition(gw.backend.admin, definition, {
    bundles: readBotBundles(definition),
    runBots: false,
    webhookSecrets: secrets,
  });
  for (const tenant of ['northwind', 'southridge']) {
    backends[tenant] = await backendOf(tenant);
    tenants[tenant] = (await gw.backend.admin.searchOne('Organization', {
      identifier: `${SYSTEMS.tenant}|${tenant}`,
    })) as WithId<Organization>;
  }
});
afterAll(async () => {
  for (const receiver of Object.values(receivers)) {
    await receiver.close();
  }
  await gw?.close();
});

describe("a tenant backend's delivery log", () => {
  it('holds its tenant’s kept deliveries, ids only, for its backend and nobody else', async () => {
    const kept = await keptDelivery('northwind');
    const northwind = backends.northwind as MedplumClient;
    const log = await northwind.searchResources('Basic', LOG);
    const entry = log.find((r) => r.identifier?.[0]?.value === kept.id) as WithId<Basic>;
    expect(entry.code?.coding?.[0]?.code).toBe('pending');
    expect(entry.subject?.reference).toBe(`Organization/${tenants.northwind?.id}`);
    expect(part(entry, 'attempts')?.valueInteger).toBe(1);
    expect(part(entry, 'last')?.valueString).toBe('503');
    expect(part(entry, 'next')?.valueInstant).toBeDefined();
    // The payload is the event as it was POSTed: ids, never her record.
    expect(WebhookEventSchema.parse(JSON.parse(part(entry, 'payload')?.valueString as string)).data.id).toBe(kept.id);
    expect(JSON.parse(part(entry, 'payload')?.valueString as string)).toEqual(JSON.parse(kept.raw));
    // Whatever it asks, only its tenant's and only deliveries: a Basic of its tenant of another code is not shown.
    const other = await gw.backend.admin.createResource<Basic>({
      resourceType: 'Basic',
      code: { coding: [{ system: SYSTEMS.idempotency, code: 'request' }] },
      subject: { reference: `Organization/${tenants.northwind?.id}` },
    });
    const all = await northwind.searchResources('Basic', { _count: '100' });
    expect(all.map((r) => r.id)).not.toContain(other.id);
    expect(all.every((r) => r.subject?.reference === `Organization/${tenants.northwind?.id}`)).toBe(true);
    await expect(northwind.readResource('Basic', other.id as string)).rejects.toThrow(/Not found|Forbidden/);
    // It reads, never writes.
    await expect(northwind.updateResource({ ...entry, code: { text: 'x' } })).rejects.toThrow(/Forbidden|Not found/);
    await expect(northwind.deleteResource('Basic', entry.id)).rejects.toThrow(/Forbidden|Not found/);

    // The other tenant's backend, a patient of the tenant and its clinician: none of it.
    const alice = gw.backend.patients.alice;
    const clinician = gw.backend.clinicians.northwind?.medplum as MedplumClient;
    for (const [who, medplum] of [
      ['southridge backend', backends.southridge as MedplumClient],
      ['northwind patient', alice.medplum],
      ['northwind clinician', clinician],
    ] as const) {
      const seen = await medplum.searchResources('Basic', LOG).catch(() => []);
      expect(
        seen.map((r) => r.id),
        who,
      ).not.toContain(entry.id);
      await expect(medplum.readResource('Basic', entry.id), who).rejects.toThrow(/Not found|Forbidden/);
    }
  });
});

describe("a tenant backend's test event", () => {
  it('arrives at its own endpoint signed, as webhook.test, and its outcome is answered', async () => {
    const receiver = receivers.northwind as WebhookReceiver;
    const before = receiver.deliveries.length;
    const answer = WebhookTryResultSchema.parse(await run(backends.northwind as MedplumClient, TEST_BOT, {}));
    expect(answer).toMatchObject({ ok: true, delivered: true, outcome: 200 });
    const got = receiver.deliveries.slice(before);
    expect(got).toHaveLength(1);
    expect(got[0]?.verified).toBe(true);
    const event = WebhookTestEventSchema.parse(got[0]?.body);
    expect(event.data.id).toBe(answer.eventId);
    expect(got[0]?.id).toBe(answer.eventId);
    expect(receivers.southridge?.deliveries.some((d) => d.id === answer.eventId)).toBe(false);
    // A refusal is answered as such, and not kept.
    receiver.answerNext(500);
    const refused = WebhookTryResultSchema.parse(await run(backends.northwind as MedplumClient, TEST_BOT, {}));
    expect(refused).toMatchObject({ ok: true, delivered: false, outcome: 500 });
    const log = await gw.backend.admin.searchResources('Basic', LOG);
    expect(log.some((r) => r.identifier?.[0]?.value === refused.eventId)).toBe(false);
  });

  it('is refused to a patient and a clinician (Medplum: they cannot read the bot), and to any requester but a backend', async () => {
    const receiver = receivers.northwind as WebhookReceiver;
    const before = receiver.deliveries.length;
    for (const medplum of [gw.backend.patients.alice.medplum, gw.backend.clinicians.northwind?.medplum]) {
      for (const bot of [TEST_BOT, REPLAY_BOT]) {
        expect(await run(medplum as MedplumClient, bot, {})).toHaveProperty('refusedByMedplum');
      }
    }
    // A project admin may read every bot: the bot itself refuses it (its requester is no tenant backend).
    expect(await run(gw.backend.admin, TEST_BOT, {})).toMatchObject({ ok: false, error: { status: 403 } });
    // Nothing in the input chooses a tenant.
    expect(await run(backends.northwind as MedplumClient, TEST_BOT, { tenant: 'southridge' })).toMatchObject({
      ok: false,
      error: { status: 400 },
    });
    expect(receiver.deliveries.slice(before)).toEqual([]);
  });

  it(`is bounded: at most ${WEBHOOK_OPERATIONS.test.perMinute} a minute for one backend, the next told when to come back`, async () => {
    const southridge = backends.southridge as MedplumClient;
    const receiver = receivers.southridge as WebhookReceiver;
    const before = receiver.deliveries.length;
    for (let i = 0; i < WEBHOOK_OPERATIONS.test.perMinute; i++) {
      expect(await run(southridge, TEST_BOT, {})).toMatchObject({ ok: true, delivered: true });
    }
    const limited = (await run(southridge, TEST_BOT, {})) as {
      ok: false;
      error: { status: number; details: { retryAfter: number } };
    };
    expect(limited).toMatchObject({ ok: false, error: { status: 429, code: 'rate_limited' } });
    expect(limited.error.details.retryAfter).toBeGreaterThan(0);
    expect(limited.error.details.retryAfter).toBeLessThanOrEqual(60);
    expect(receiver.deliveries.slice(before)).toHaveLength(WEBHOOK_OPERATIONS.test.perMinute);
    expect(receiver.deliveries.slice(before).every((d) => d.verified)).toBe(true);
    // Every run counts, refused ones too; another backend's budget is its own.
    expect(await run(backends.northwind as MedplumClient, TEST_BOT, {})).toMatchObject({ ok: true });
  });
});

describe("a tenant backend's replay", () => {
  it('tries a kept delivery at once with the same webhook-id and body; the log then says delivered', async () => {
    const kept = await keptDelivery('northwind');
    const northwind = backends.northwind as MedplumClient;
    const receiver = receivers.northwind as WebhookReceiver;

    // Refused again: recorded, still pending, its schedule unchanged.
    const [before] = (await northwind.searchResources('Basic', LOG)).filter(
      (r) => r.identifier?.[0]?.value === kept.id,
    ) as WithId<Basic>[];
    receiver.answerNext(500);
    const again = WebhookTryResultSchema.parse(await run(northwind, REPLAY_BOT, { eventId: kept.id }));
    expect(again).toMatchObject({ ok: true, delivered: false, outcome: 500, status: 'pending', attempts: 2 });
    const after = (await northwind.readResource('Basic', before?.id as string)) as Basic;
    expect(part(after, 'last')?.valueString).toBe('500');
    expect(part(after, 'next')?.valueInstant).toBe(part(before as Basic, 'next')?.valueInstant);

    // Answered: delivered with the same id and body, signed anew.
    const count = receiver.deliveries.length;
    const replayed = WebhookTryResultSchema.parse(await run(northwind, REPLAY_BOT, { eventId: kept.id }));
    expect(replayed).toMatchObject({ ok: true, delivered: true, outcome: 200, status: 'delivered', attempts: 3 });
    expect(receiver.deliveries.slice(count).map((d) => [d.id, d.raw, d.verified])).toEqual([[kept.id, kept.raw, true]]);
    const log = (await northwind.searchResources('Basic', LOG)).filter((r) => r.identifier?.[0]?.value === kept.id);
    expect(
      log.map((r) => [r.code?.coding?.[0]?.code, part(r, 'attempts')?.valueInteger, part(r, 'last')?.valueString]),
    ).toEqual([['delivered', 3, '200']]);
    // Delivered already: not sent again.
    expect(await run(northwind, REPLAY_BOT, { eventId: kept.id })).toMatchObject({
      ok: false,
      error: { status: 409 },
    });
    expect(receiver.deliveries.length).toBe(count + 1);
  });

  it("another tenant's delivery is answered as one that does not exist, and nobody else replays", async () => {
    const kept = await keptDelivery('northwind');
    const before = receivers.northwind?.deliveries.length;
    const notFound = { ok: false, error: { status: 404, code: 'not_found' } };
    expect(await run(backends.southridge as MedplumClient, REPLAY_BOT, { eventId: kept.id })).toMatchObject(notFound);
    // An id of no kept delivery answers the same.
    const invented = `${kept.id.split('/_history/')[0]}/_history/invented`;
    expect(await run(backends.northwind as MedplumClient, REPLAY_BOT, { eventId: invented })).toMatchObject(notFound);
    // A patient and a clinician cannot run it; an admin is no backend.
    for (const medplum of [gw.backend.patients.alice.medplum, gw.backend.clinicians.northwind?.medplum]) {
      expect(await run(medplum as MedplumClient, REPLAY_BOT, { eventId: kept.id })).toHaveProperty('refusedByMedplum');
    }
    expect(await run(gw.backend.admin, REPLAY_BOT, { eventId: kept.id })).toMatchObject({
      ok: false,
      error: { status: 403 },
    });
    // Not an event id at all: refused as input.
    expect(await run(backends.northwind as MedplumClient, REPLAY_BOT, { eventId: '../../Patient' })).toMatchObject({
      ok: false,
      error: { status: 400 },
    });
    expect(receivers.northwind?.deliveries.length).toBe(before);
    const [record] = (await gw.backend.admin.searchResources('Basic', {
      identifier: `${SYSTEMS.webhookDelivery}|${kept.id}`,
    })) as Basic[];
    expect(record?.code?.coding?.[0]?.code).toBe('pending');
    expect(part(record as Basic, 'attempts')?.valueInteger).toBe(1);
  });
});

describe("npm run webhooks (the backend's own credentials, plain fetch: the calls docs/webhooks.md names)", () => {
  async function cli(argv: string[]): Promise<{ code: number; out: string; err: string }> {
    const client = (await gw.backend.admin.searchOne('ClientApplication', {
      _tag: `${SYSTEMS.tenantBackend}|northwind/app-server`,
    })) as WithId<ClientApplication>;
    const lines: string[] = [];
    const errors: string[] = [];
    const code = await webhooksCommand(argv, {
      env: {
        MEDPLUM_BASE_URL: gw.backend.baseUrl,
        TENANT_BACKEND_NORTHWIND_APP_SERVER_CLIENT_ID: client.id,
        TENANT_BACKEND_NORTHWIND_APP_SERVER_CLIENT_SECRET: client.secret,
      },
      fetch: gw.backend.fetch as typeof fetch,
      out: { log: (line: string) => lines.push(line), error: (line: string) => errors.push(line) },
    });
    return { code, out: lines.join('\n'), err: errors.join('\n') };
  }

  it('log, replay and test, as the northwind backend', async () => {
    const kept = await keptDelivery('northwind');
    const log = await cli(['log', '--backend', 'northwind_app_server', '--status', 'pending', '--json']);
    expect(log.code, log.err).toBe(0);
    const entries = JSON.parse(log.out) as { eventId: string; status: string; attempts: number; last: string }[];
    expect(entries.find((e) => e.eventId === kept.id)).toMatchObject({ status: 'pending', attempts: 1, last: '503' });
    expect(entries.every((e) => e.status === 'pending')).toBe(true);

    const replay = await cli(['replay', kept.id, '--backend', 'northwind_app_server']);
    expect(replay.code, replay.err).toBe(0);
    expect(replay.out).toContain(`${kept.id}: delivered, the endpoint answered 200 (now delivered, 2 tries)`);
    const again = await cli(['replay', kept.id, '--backend', 'northwind_app_server']);
    expect([again.code, again.err]).toEqual([1, expect.stringContaining('refused: 409 invalid_state')]);

    const test = await cli(['test', '--backend', 'northwind_app_server']);
    expect(test.code, test.err).toBe(0);
    expect(test.out).toMatch(/^webhook-test\/[0-9a-f-]{36}: delivered, the endpoint answered 200$/);

    // Mistakes in the command are named, before any call.
    expect((await cli(['replay', '--backend', 'northwind_app_server'])).code).toBe(2);
    expect((await cli(['log', '--status', 'lost', '--backend', 'northwind_app_server'])).code).toBe(2);
    expect((await cli(['log'])).err).toContain('MEDPLUM_CLIENT_ID');
  });
});
