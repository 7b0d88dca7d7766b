import type { Bot, CareTeam, ClientApplication, Task } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import type { Clinician } from '../../src/clinician';
import { platformDefinition } from '../../src/provision/definition';
import { direct, fhirPath } from '../support/attack';
import { storedResources } from '../support/attack-store';
import { demoClinician } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { storeSnapshot } from '../support/journey';
import { AMLODIPINE, assigned } from '../support/spine';

/**
 * Issue 48 item 7: Medplum's Provider app names the author of each record (`meta.author`) by reading it;
 * a Bot the clinician may not read shows as "[Forbidden]". Reading a Bot is also leave to `$execute` it
 * (Medplum reads the Bot as the caller, packages/server/src/fhir/operations/execute.ts), so clinicians read
 * only the bots whose run by her is refused or replays what Medplum delivered them anyway
 * (src/provision/policies/bots.ts NAMED_BOTS): never the webhooks bot. The machine clients that write
 * (the provisioning client, the SMS integration) are read by name too, never their secrets; a tenant's
 * patient app not at all.
 */
let gw: TestGateway;
let clinician: Clinician;
let outsider: Clinician;
beforeAll(async () => {
  gw = await startTestGateway();
  clinician = await demoClinician(gw.backend, 'northwind');
  outsider = await demoClinician(gw.backend, 'southridge');
});
afterAll(() => gw?.close());

// None writes anything of a patient's (the webhooks bot delivers, edge-key-check answers the gateway, the webhook
// test and replay answer a tenant's backend): nobody names them.
const UNNAMED = ['webhooks', 'edge-key-check', 'webhook-test', 'webhook-replay'];

const botByKey = (key: string) =>
  (storedResources(gw.backend, 'Bot') as Bot[]).find((b) =>
    b.identifier?.some((i) => i.system === SYSTEMS.bots && i.value === key),
  ) as Bot & { id: string };

const tokenOf = (who: Clinician) => who.medplum.getAccessToken() as string;

describe('the platform’s bots, named to clinicians', () => {
  it('each clinician reads by name every bot that writes her patients’ records, never where its code is; the webhooks and edge-key-check bots not at all', async () => {
    const keys = platformDefinition.bots.map((b) => b.key);
    expect(keys).toHaveLength(24);
    const problems: string[] = [];
    for (const who of [clinician, outsider]) {
      for (const key of keys) {
        const bot = botByKey(key);
        const answer = await direct(gw.backend, tokenOf(who), 'GET', fhirPath(`Bot/${bot.id}`));
        const named = !UNNAMED.includes(key);
        if (named && (answer.status !== 200 || (answer.body as Bot).name !== bot.name)) {
          problems.push(`${key}: ${answer.status}, not named`);
        }
        if (!named && answer.status < 400) {
          problems.push(`${key}: ${answer.status}, readable (so runnable) by a clinician`);
        }
        if (/executableCode|sourceCode/.test(answer.text)) {
          problems.push(`${key}: shows where its code is`);
        }
      }
      // Listing them is not offered: the app reads authors by id.
      expect((await direct(gw.backend, tokenOf(who), 'GET', fhirPath('Bot?_count=50'))).status).toBeGreaterThanOrEqual(
        400,
      );
    }
    expect(problems).toEqual([]);
  });

  it('her `$execute` of each bot she may read is refused or replays what was delivered, and writes nothing; the unnamed one is refused', async () => {
    const { review, selection, condition } = await assigned(gw, clinician);
    await clinician.select(selection.id, AMLODIPINE);
    await gw.backend.subscriptions.idle();
    const inputs = [
      {},
      { resourceType: 'Task', id: review.id },
      { resourceType: 'Task', id: selection.id },
      { resourceType: 'Condition', id: condition.id },
      { resourceType: 'Bot', id: botByKey('reconcile').id },
    ];
    const before = storeSnapshot(gw.backend);
    const reviewBefore = await gw.backend.systemRepo.readResource<Task>('Task', review.id);
    const answers: string[] = [];
    for (const who of [clinician, outsider]) {
      for (const { key } of platformDefinition.bots) {
        for (const input of inputs) {
          const answer = await direct(gw.backend, tokenOf(who), 'POST', fhirPath(`Bot/${botByKey(key).id}/$execute`), {
            body: input,
          });
          const body = answer.body as { ok?: boolean; replay?: boolean; error?: { status?: number } };
          // A refusal (Medplum's, or the bot's own result: Medplum answers a bot's result 200) or a run
          // that replays what was done.
          const refused =
            (answer.status >= 400 && answer.status < 500) ||
            (body.ok === false && (body.error?.status ?? 0) >= 400 && (body.error?.status ?? 0) < 500);
          const replayed = answer.status === 200 && body.ok === true && body.replay === true;
          if (!refused && !replayed) {
            answers.push(`${key} ${JSON.stringify(input)}: ${answer.status} ${answer.text.slice(0, 200)}`);
          }
          if (UNNAMED.includes(key) && answer.status < 400) {
            // Medplum refuses the run itself: the Bot is not hers to read.
            answers.push(`${key}: ran for a clinician`);
          }
        }
      }
    }
    expect(answers).toEqual([]);
    await gw.backend.subscriptions.idle();
    expect(storeSnapshot(gw.backend)).toEqual(before);
    // The review she completed is as it was.
    const after = await gw.backend.systemRepo.readResource<Task>('Task', review.id);
    expect(after.meta?.versionId).toBe(reviewBefore.meta?.versionId);
  });

  it('each clinician reads the provisioning client and the SMS integration by name (authors of what they wrote), never a secret; no patient app, and no patient reads any', async () => {
    const clients = storedResources(gw.backend, 'ClientApplication') as (ClientApplication & { id: string })[];
    const tagged = (code: string) =>
      clients.filter((c) => c.meta?.tag?.some((t) => t.system === SYSTEMS.integration && t.code === code));
    // Provisioning tagged the client it ran as, once: it wrote the care teams, forms and schedules.
    const [provisioner] = tagged('provisioning');
    expect(tagged('provisioning')).toHaveLength(1);
    const careTeam = (storedResources(gw.backend, 'CareTeam') as CareTeam[])[0];
    expect(careTeam?.meta?.author?.reference).toBe(`ClientApplication/${provisioner?.id}`);
    const [sms] = tagged('sms');
    const apps = clients.filter((c) => c.extension?.some((e) => e.url === EXTENSIONS.tenantOrganization));
    expect(apps.length).toBeGreaterThanOrEqual(2);
    const problems: string[] = [];
    for (const who of [clinician, outsider]) {
      for (const client of [provisioner, sms]) {
        const answer = await direct(gw.backend, tokenOf(who), 'GET', fhirPath(`ClientApplication/${client?.id}`));
        if (answer.status !== 200 || (answer.body as ClientApplication).name !== client?.name) {
          problems.push(`${client?.name}: ${answer.status}, not named`);
        }
        if (/"secret"|retiringSecret|identityProvider/.test(answer.text)) {
          problems.push(`${client?.name}: shows a secret`);
        }
      }
      for (const app of apps) {
        const answer = await direct(gw.backend, tokenOf(who), 'GET', fhirPath(`ClientApplication/${app.id}`));
        if (answer.status < 400) {
          problems.push(`${app.name}: ${answer.status} to a clinician`);
        }
      }
    }
    const answer = await direct(
      gw.backend,
      gw.backend.patients.alice.token,
      'GET',
      fhirPath(`ClientApplication/${provisioner?.id}`),
    );
    if (answer.status < 400) {
      problems.push(`the provisioning client: ${answer.status} to a patient`);
    }
    expect(problems).toEqual([]);
  });
});
