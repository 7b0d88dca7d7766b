// A tenant's webhooks on a real Medplum: delivered signed by the webhooks bot that Medplum's Subscriptions
// wake, only the tenant's, kept and tried again after a failure, and turned off again.
import { MedplumClient } from '@medplum/core';
import type { Basic, Bot } from '@medplum/fhirtypes';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import { WEBHOOK_OPERATIONS, WebhookEventSchema, WebhookTestEventSchema } from '../../contracts/webhooks';
import { applyDefinition } from '../../src/provision/apply';
import { webhookSubscriptions } from '../../src/provision/bots/webhooks';
import { readBotBundles } from '../../src/provision/bundles';
import { demoDefinition } from '../../src/provision/demo';
import { createPatientCareClient } from '../../src/sdk';
import { newWebhookSecret, startWebhookReceiver, type WebhookReceiver } from '../../test/support/webhook-receiver';
import {
  type AttackContext,
  message,
  type Person,
  PUBLIC_URL,
  pause,
  register,
  row,
  startAssessmentThroughGateway,
} from './common';

const KEPT = `${SYSTEMS.webhookDelivery}|pending,${SYSTEMS.webhookDelivery}|failed`;
/** A tenant backend's delivery log: what is kept, delivered later ones too (docs/webhooks.md). */
const DELIVERY_LOG = `${KEPT},${SYSTEMS.webhookDelivery}|delivered`;

/**
 * (a) provisioning gives Northwind an endpoint (a receiver on this machine) and its secret; a new
 * Northwind patient starts an assessment: her events reach the receiver, each signature valid under the
 * Standard Webhooks reference library, each id one of her feed's; (b) a new Southridge patient's events
 * (no endpoint) reach nobody; (c) the receiver refuses one delivery (503): it is kept, and tried again
 * when due (a scheduled run, as Medplum's cron makes it) with the same id and body and a valid new
 * signature, then no longer kept; (d) provisioning without the endpoint turns its Subscriptions off: a
 * later patient's events reach nobody; (f) Northwind's backend reads its delivery log, tests its endpoint
 * and replays a refused delivery, and Southridge's backend sees and replays none of it.
 */
export async function webhookDeliveries(ctx: AttackContext): Promise<void> {
  const family = 'webhooks';
  const steps = {
    delivered: `${family}: (a) Northwind given an endpoint by provisioning; a new Northwind patient starts an assessment: her events reach the endpoint (Medplum's Subscription -> the webhooks bot), every signature valid (standardwebhooks), every webhook-id one of her feed's`,
    read: `${family}: (a2) each delivery's subject and patient read with Northwind's backend credential (client credentials, provisioned with the tenant): all read; the same reads with Southridge's backend credential: all refused`,
    others: `${family}: (b) a new Southridge patient (no endpoint) starts an assessment: none of her events is delivered`,
    retried: `${family}: (c) a delivery answered 503 is kept (a Basic, attempts 1), and tried again once due by the bot's scheduled run: the same id and body, a valid signature, 2xx, no longer kept`,
    operations: `${family}: (f) Northwind's backend operates its webhook (docs/webhooks.md): a delivery refused (503) is in its delivery log (pending) and not in Southridge's backend's (its read refused); a test event reaches the endpoint signed (webhook.test); Southridge's backend's replay of it is answered not found; Northwind's replays it now with the same id and body, delivered, and its log says delivered`,
    silent: `${family}: (e) the endpoint accepts and never answers: the first deliveries wait out the 5 s timeout and are kept ('timeout'); a later patient's events are kept untried ('not tried', due with them), no POST; once due, the scheduled run delivers them all`,
    off: `${family}: (d) provisioning without the endpoint turns Northwind's webhook Subscriptions off: a later patient's events reach nobody`,
  };
  const secret = newWebhookSecret();
  let receiver: WebhookReceiver | undefined;
  const admin = new MedplumClient({ baseUrl: ctx.baseUrl, cacheTime: 0, maxRetries: 4, maxRetryTime: 65_000 });
  admin.setAccessToken(ctx.adminToken);
  const provision = async (webhooks: Record<string, string>) => {
    const definition = demoDefinition({ webhooks });
    return applyDefinition(admin, definition, {
      bundles: readBotBundles(definition),
      edgeStatementKey: ctx.edgeStatementKey,
      webhookSecrets: webhooks.northwind ? { northwind: secret } : {},
      runBots: false,
    });
  };
  const newPatientStarts = async (tenant: string): Promise<Person & { patientRef: string }> => {
    const person = {
      ...(await register(ctx.baseUrl, ctx.projectId, ctx.appIdOf(tenant))),
      who: `a new ${tenant} patient`,
    };
    const api = createPatientCareClient({ baseUrl: PUBLIC_URL, accessToken: person.token, fetch: ctx.gatewayFetch });
    const home = (await api.patient.home()) as { patient?: string };
    await startAssessmentThroughGateway(api, 'assessments/weight-intake');
    const me = (await (
      await ctx.gatewayFetch(`${PUBLIC_URL}/v1/patient/profile`, {
        headers: { authorization: `Bearer ${person.token}` },
      })
    ).json()) as { id?: string };
    return { ...person, patientRef: `Patient/${me.id ?? home.patient ?? ''}` };
  };
  /** Deliveries since `from` about this patient, waited for until `count` came or `ms` passed. */
  const deliveriesOf = async (from: number, patientRef: string, count: number, ms: number) => {
    const until = Date.now() + ms;
    for (;;) {
      const got = (receiver?.deliveries ?? [])
        .slice(from)
        .filter((d) => (d.body as { data?: { patient?: string } } | undefined)?.data?.patient === patientRef);
      if (got.length >= count || Date.now() > until) {
        return got;
      }
      await pause(500);
    }
  };
  /** Kept deliveries made due now, as time passing would make them. */
  const makeDue = async (records: Basic[]) => {
    for (const record of records) {
      const parts = record.extension?.[0]?.extension ?? [];
      const now = new Date(Date.now() - 1000).toISOString();
      await admin.updateResource({
        ...record,
        extension: [
          {
            url: EXTENSIONS.webhookDelivery,
            extension: parts.map((e) => (e.url === 'next' ? { url: 'next', valueInstant: now } : e)),
          },
        ],
      });
    }
  };
  /** The run Medplum's cron makes (its input: the Bot), made by the admin. */
  const scheduledRun = async () => {
    const bot = (await admin.searchOne('Bot', { identifier: `${SYSTEMS.bots}|webhooks` })) as Bot;
    return (await admin.executeBot({ system: SYSTEMS.bots, value: 'webhooks' }, bot, 'application/fhir+json')) as {
      tried?: number;
      delivered?: number;
    };
  };
  const kept = async (): Promise<Basic[]> =>
    admin.searchResources('Basic', { code: KEPT, _count: '100' }, { cache: 'no-cache' });

  /** What the deliveries of (a) named: read again in (a2) by the tenants' backends. */
  let named: string[] = [];
  /** A tenant backend signed in with its client credentials (as the tenant's own server would be). */
  const tenantBackend = async (tenant: string): Promise<MedplumClient> => {
    const client = await admin.searchOne(
      'ClientApplication',
      { _tag: `${SYSTEMS.tenantBackend}|${tenant}/app-server` },
      { cache: 'no-cache' },
    );
    if (!client?.id || !client.secret) {
      throw new Error(`no backend client of ${tenant}`);
    }
    const medplum = new MedplumClient({ baseUrl: ctx.baseUrl, cacheTime: 0 });
    await medplum.startClientLogin(client.id, client.secret);
    return medplum;
  };
  try {
    receiver = await startWebhookReceiver(secret);
    await provision({ northwind: receiver.url });
    const from = receiver.deliveries.length;
    const nina = await newPatientStarts('northwind');
    const feed = (await (
      await ctx.gatewayFetch(`${PUBLIC_URL}/v1/events?limit=100`, {
        headers: { authorization: `Bearer ${nina.token}` },
      })
    ).json()) as { events: { id: string; type: string }[] };
    const fed = feed.events.filter((e) => e.type !== 'agreements.changed');
    const got = await deliveriesOf(from, nina.patientRef, fed.length, 30_000);
    const bad = got.filter((d) => !d.verified || !WebhookEventSchema.safeParse(d.body).success);
    const ids = new Set(fed.map((e) => e.id));
    const strangers = got.filter((d) => !ids.has(d.id));
    const delays = got.map((d) => d.at - Date.parse((d.body as { data: { occurredAt: string } }).data.occurredAt));
    named = [
      ...new Set(
        got.flatMap((d) => {
          const data = (d.body as { data?: { subject?: string; patient?: string } }).data;
          return [data?.subject, data?.patient].filter((r): r is string => Boolean(r));
        }),
      ),
    ];
    row(
      steps.delivered,
      got.length > 0 && got.length >= fed.length && bad.length === 0 && strangers.length === 0 ? 'ok' : 'FAILED',
      `${got.length} deliveries (${got.map((d) => (d.body as { type: string }).type).join(', ')}) for ${fed.length} events of her feed; ${bad.length} unsigned or malformed; ${strangers.length} not in her feed; from the write to the receiver ${delays.map((ms) => `${ms} ms`).join(', ')}`,
    );
  } catch (err) {
    row(steps.delivered, 'FAILED', message(err));
  }
  try {
    const [own, other] = [await tenantBackend('northwind'), await tenantBackend('southridge')];
    const read = async (medplum: MedplumClient, reference: string) =>
      medplum.readReference({ reference }).then(
        () => 'read',
        (err: unknown) => `refused (${(err as { outcome?: { id?: string } }).outcome?.id ?? message(err)})`,
      );
    const mine = await Promise.all(named.map((r) => read(own, r)));
    const theirs = await Promise.all(named.map((r) => read(other, r)));
    row(
      steps.read,
      named.length > 0 && mine.every((m) => m === 'read') && theirs.every((t) => t.startsWith('refused'))
        ? 'ok'
        : 'FAILED',
      `${named.length} records named (${named.map((r) => r.split('/')[0]).join(', ')}): Northwind's backend ${mine.join(', ')}; Southridge's ${theirs.join(', ')}`,
    );
  } catch (err) {
    row(steps.read, 'FAILED', message(err));
  }

  try {
    if (!receiver) {
      throw new Error('no receiver');
    }
    const from = receiver.deliveries.length;
    const sam = await newPatientStarts('southridge');
    await pause(8_000);
    const got = receiver.deliveries.slice(from).filter((d) => JSON.stringify(d.body).includes(sam.patientRef));
    row(
      steps.others,
      got.length === 0 ? 'held' : 'FAILED',
      `${got.length} of her events delivered to Northwind's endpoint`,
    );
  } catch (err) {
    row(steps.others, 'FAILED', message(err));
  }

  try {
    if (!receiver) {
      throw new Error('no receiver');
    }
    for (const record of await kept()) {
      await admin.deleteResource('Basic', record.id as string);
    }
    receiver.answerNext(503);
    const from = receiver.deliveries.length;
    const olga = await newPatientStarts('northwind');
    const first = await deliveriesOf(from, olga.patientRef, 1, 30_000);
    const refused = first.find((d) => d.answered === 503);
    let records: Basic[] = [];
    for (let i = 0; i < 20 && records.length === 0; i++) {
      records = await kept();
      await pause(records.length === 0 ? 500 : 0);
    }
    const record = records[0];
    const parts = record?.extension?.[0]?.extension ?? [];
    const attempts = parts.find((e) => e.url === 'attempts')?.valueInteger;
    // Due now, as time passing would make it; then the run Medplum's cron would make (input: the Bot).
    await makeDue([record]);
    const count = receiver.deliveries.length;
    const run = await scheduledRun();
    const again = receiver.deliveries.slice(count);
    const same =
      again.length === 1 && again[0].id === refused?.id && again[0].raw === refused?.raw && again[0].verified;
    const left = await kept();
    row(
      steps.retried,
      refused && records.length === 1 && attempts === 1 && same && again[0].answered === 200 && left.length === 0
        ? 'ok'
        : 'FAILED',
      `refused ${refused ? refused.id : 'none'}; kept ${records.length} (attempts ${attempts}); the scheduled run tried ${run.tried}, delivered ${run.delivered}; ${again.length} delivery again, same id and body: ${same}; kept after: ${left.length}`,
    );
  } catch (err) {
    row(steps.retried, 'FAILED', message(err));
  }

  try {
    if (!receiver) {
      throw new Error('no receiver');
    }
    for (const record of await kept()) {
      await admin.deleteResource('Basic', record.id as string);
    }
    const [own, other] = [await tenantBackend('northwind'), await tenantBackend('southridge')];
    const log = async (medplum: MedplumClient) =>
      medplum.searchResources('Basic', { code: DELIVERY_LOG, _count: '100' }, { cache: 'no-cache' });
    const statusIn = (records: Basic[], id: string | undefined) =>
      records.find((r) => r.identifier?.[0]?.value === id)?.code?.coding?.[0]?.code;
    receiver.answerNext(503);
    const from = receiver.deliveries.length;
    const tess = await newPatientStarts('northwind');
    const refused = (await deliveriesOf(from, tess.patientRef, 1, 30_000)).find((d) => d.answered === 503);
    let ownLog: Basic[] = [];
    for (let i = 0; i < 20 && !statusIn(ownLog, refused?.id); i++) {
      ownLog = await log(own);
      await pause(statusIn(ownLog, refused?.id) ? 0 : 500);
    }
    const record = ownLog.find((r) => r.identifier?.[0]?.value === refused?.id);
    const otherLog = await log(other);
    const otherRead = record?.id
      ? await other.readResource('Basic', record.id).then(
          () => 'read',
          (err: unknown) => `refused (${(err as { outcome?: { id?: string } }).outcome?.id ?? message(err)})`,
        )
      : 'nothing to read';
    const execute = (medplum: MedplumClient, bot: string, input: unknown) =>
      medplum.executeBot({ system: SYSTEMS.bots, value: bot }, input, 'application/json') as Promise<{
        ok: boolean;
        delivered?: boolean;
        outcome?: unknown;
        eventId?: string;
        error?: { status: number };
      }>;
    const beforeTest = receiver.deliveries.length;
    const tested = await execute(own, WEBHOOK_OPERATIONS.test.bot, {});
    const testDelivery = receiver.deliveries.slice(beforeTest).find((d) => d.id === tested.eventId);
    const testSigned = Boolean(testDelivery?.verified && WebhookTestEventSchema.safeParse(testDelivery.body).success);
    const theirs = await execute(other, WEBHOOK_OPERATIONS.replay.bot, { eventId: refused?.id });
    const beforeReplay = receiver.deliveries.length;
    const replayed = await execute(own, WEBHOOK_OPERATIONS.replay.bot, { eventId: refused?.id });
    const again = receiver.deliveries.slice(beforeReplay);
    const same =
      again.length === 1 && again[0].id === refused?.id && again[0].raw === refused?.raw && again[0].verified;
    const after = statusIn(await log(own), refused?.id);
    row(
      steps.operations,
      refused &&
        statusIn(ownLog, refused.id) === 'pending' &&
        !statusIn(otherLog, refused.id) &&
        otherRead.startsWith('refused') &&
        tested.ok &&
        tested.delivered &&
        testSigned &&
        theirs.error?.status === 404 &&
        replayed.ok &&
        replayed.delivered &&
        same &&
        after === 'delivered'
        ? 'ok'
        : 'FAILED',
      `refused ${refused?.id ?? 'none'}; Northwind's log: ${statusIn(ownLog, refused?.id) ?? 'absent'} (${ownLog.length} kept); Southridge's log: ${statusIn(otherLog, refused?.id) ?? 'absent'} (${otherLog.length} kept), its read ${otherRead}; test: ${tested.ok ? `outcome ${tested.outcome}` : `refused ${tested.error?.status}`}, signed ${testSigned}; Southridge's replay: ${theirs.ok ? 'ran' : theirs.error?.status}; Northwind's replay: ${replayed.ok ? `outcome ${replayed.outcome}` : `refused ${replayed.error?.status}`}, ${again.length} POST, same id and body ${same}; then in its log: ${after}`,
    );
  } catch (err) {
    row(steps.operations, 'FAILED', message(err));
  }

  try {
    if (!receiver) {
      throw new Error('no receiver');
    }
    for (const record of await kept()) {
      await admin.deleteResource('Basic', record.id as string);
    }
    receiver.answerNext(...Array(8).fill(0));
    const from = receiver.deliveries.length;
    const quinn = await newPatientStarts('northwind');
    const waitKept = async (count: number): Promise<Basic[]> => {
      for (let i = 0; i < 60; i++) {
        const records = await kept();
        if (records.length >= count) {
          return records;
        }
        await pause(500);
      }
      return kept();
    };
    const tried = await deliveriesOf(from, quinn.patientRef, 1, 30_000);
    const silent = await waitKept(tried.length);
    receiver.answerNormally();
    const lastOf = (r: Basic) => r.extension?.[0]?.extension?.find((e) => e.url === 'last')?.valueString;
    const between = receiver.deliveries.length;
    const ruth = await newPatientStarts('northwind');
    const records = await waitKept(silent.length + 1);
    await pause(3_000);
    const all = await kept();
    const untried = all.filter((r) => lastOf(r) === 'not tried');
    const postedForRuth = receiver.deliveries
      .slice(between)
      .filter((d) => JSON.stringify(d.body).includes(ruth.patientRef));
    await makeDue(all);
    const run = await scheduledRun();
    const left = await kept();
    row(
      steps.silent,
      silent.length > 0 &&
        silent.every((r) => lastOf(r) === 'timeout') &&
        untried.length > 0 &&
        postedForRuth.length === 0 &&
        run.delivered === all.length &&
        left.length === 0
        ? 'ok'
        : 'FAILED',
      `${tried.length} tried and kept as ${silent.map(lastOf).join(', ')}; the next patient's: ${untried.length} kept untried, ${postedForRuth.length} POSTed (${records.length} kept in all); the scheduled run tried ${run.tried}, delivered ${run.delivered}; kept after: ${left.length}`,
    );
  } catch (err) {
    row(steps.silent, 'FAILED', message(err));
  }

  try {
    if (!receiver) {
      throw new Error('no receiver');
    }
    const report = await provision({});
    const from = receiver.deliveries.length;
    const pia = await newPatientStarts('northwind');
    await pause(8_000);
    const got = receiver.deliveries.slice(from).filter((d) => JSON.stringify(d.body).includes(pia.patientRef));
    const off = report.updated.filter((k) => k.endsWith('-off')).length;
    row(
      steps.off,
      off === webhookSubscriptions('northwind', 'org-northwind').length && got.length === 0 ? 'ok' : 'FAILED',
      `${off} Subscriptions turned off (of ${webhookSubscriptions('northwind', 'org-northwind').length}); ${got.length} of her events delivered`,
    );
  } catch (err) {
    row(steps.off, 'FAILED', message(err));
  } finally {
    await receiver?.close();
  }
}
