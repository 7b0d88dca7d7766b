import { getSearchParameter, tryGetDataType } from '@medplum/core';
import type { Resource } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import { platformDefinition } from '../../src/provision/definition';
import {
  type Actor,
  ATTACKER_ROLES,
  attackerFor,
  type BotInput,
  direct,
  executeBot,
  fhirPath,
  isSubscriptionBot,
} from '../support/attack';
import { leaked } from '../support/attack-exposure';
import { fakeInboundSms, hostileInputs } from '../support/attack-hostile';
import { proofViolations, resetAcceptances, universalAgreements } from '../support/attack-proof';
import { minimalResource } from '../support/attack-resources';
import { botRanSince, changesSince, describeChange, foreignChanges, storeMark } from '../support/attack-store';
import { otherTenantApps, restoreScene, type Scene, secretsOf, setUpScene } from '../support/attack-victim';
import { startTestGateway, type TestGateway } from '../support/gateway';

/**
 * Every bot of the platform, run directly (`Bot/$execute`, around the gateway) by each attacker with
 * every hostile input: no 5xx, nothing changed outside the attacker's own record, no proof taken from
 * the input, nothing of the victim's in the answer. Subscription bots refuse patients outright.
 */
const VICTIM = 'bob';

let gw: TestGateway;
let scene: Scene;
let ownAgreements: string[];

beforeAll(async () => {
  gw = await startTestGateway();
  scene = await setUpScene(gw, VICTIM, platformDefinition);
  ownAgreements = await universalAgreements(gw.backend);
});
afterAll(() => gw?.close());

async function botId(key: string): Promise<string> {
  const bot = await gw.backend.systemRepo.searchOne({
    resourceType: 'Bot',
    filters: [{ code: 'identifier', operator: 'eq', value: `${SYSTEMS.bots}|${key}` }],
  });
  if (!bot?.id) {
    throw new Error(`bot ${key} is not provisioned`);
  }
  return bot.id;
}

const inputValue = (input: BotInput): unknown => ('raw' in input ? input.raw : input.value);

/** Runs one attack; what went wrong with it, in one line, or undefined. */
async function attack(
  attacker: Actor,
  bot: { key: string; id: string; subscriptionOnly: boolean },
  name: string,
  input: BotInput,
): Promise<string | undefined> {
  const backend = gw.backend;
  await restoreScene(backend, scene);
  if (attacker.patientId) {
    // So that an accept writes new Consents whose proof can be judged.
    await resetAcceptances(backend, attacker.patientId);
  }
  const mark = storeMark(backend);
  const response = await executeBot(backend, attacker.token, bot.key, input);
  await backend.subscriptions.idle();
  const changes = changesSince(backend, mark);
  const problems: string[] = [];
  if (response.status >= 500) {
    problems.push('a server error');
  }
  problems.push(...foreignChanges(changes, attacker).map((c) => `changed ${describeChange(c)}`));
  problems.push(...proofViolations(changes, attacker, inputValue(input)));
  problems.push(...leaked(response.text, secretsOf(scene), inputValue(input)).map((s) => `answer holds "${s}"`));
  if (bot.subscriptionOnly && attacker.kind === 'patient') {
    if (response.status < 400 || response.status >= 500) {
      problems.push('a patient ran a subscription bot (expected 4xx)');
    } else if (botRanSince(backend, mark, bot.id)) {
      problems.push('refused, but only after the bot ran');
    }
  }
  if (problems.length === 0) {
    return undefined;
  }
  const more = problems.length > 3 ? ` (+${problems.length - 3} more)` : '';
  return `${name} -> ${response.status} ${response.text.slice(0, 80)}: ${problems.slice(0, 3).join('; ')}${more}`;
}

describe.each(platformDefinition.bots.map((b) => ({ key: b.key })))(
  'bot $key, run directly with hostile input',
  ({ key }) => {
    it.each(ATTACKER_ROLES)('by a %s: no 5xx, nothing changed outside their own record, no leak', async (role) => {
      const attacker = attackerFor(gw.backend, VICTIM, role);
      const bot = { key, id: await botId(key), subscriptionOnly: isSubscriptionBot(platformDefinition, key) };
      const inputs = hostileInputs({
        attacker,
        victim: scene.victim,
        otherApps: otherTenantApps(gw.backend, attacker.organization),
        ownAgreements,
        victimAgreements: scene.agreements,
        victimReferences: scene.references,
      });
      const problems: string[] = [];
      for (const { name, input } of inputs) {
        const problem = await attack(attacker, bot, name, input);
        if (problem) {
          problems.push(problem);
        }
      }
      expect(problems).toEqual([]);
    });
  },
);

/** The resource a subscription's criteria match, as `Type?param=system|code&...` describes it. */
function matchingResource(criteria: string, victim: Actor): Resource {
  const [type, query = ''] = criteria.split('?');
  const resource = minimalResource(type, {
    patient: victim.profile,
    organization: victim.organization,
    practitioner: victim.profile,
    project: victim.profile,
  }) as unknown as Record<string, unknown>;
  const schema = tryGetDataType(type);
  // The hostile content of an inbound message, where the type has such elements.
  for (const [name, value] of Object.entries(fakeInboundSms(victim.phone ?? '', 'STOP'))) {
    if (name !== 'resourceType' && schema?.elements[name]) {
      resource[name] = value;
    }
  }
  for (const [code, value] of new URLSearchParams(query)) {
    const element = /^\w+\.(\w+)/.exec(getSearchParameter(type, code)?.expression ?? '')?.[1];
    const definition = element ? schema?.elements[element] : undefined;
    if (!element || !definition) {
      continue;
    }
    const [system, token] = value.includes('|') ? value.split('|') : [undefined, value];
    const typed = definition.type[0].code === 'CodeableConcept' ? { coding: [{ system, code: token }] } : token;
    resource[element] = definition.isArray ? [typed] : typed;
  }
  return resource as unknown as Resource;
}

describe.each(platformDefinition.subscriptions.map((s) => ({ key: s.key, criteria: s.criteria })))(
  'subscription $key, woken by an attacker',
  ({ criteria }) => {
    it.each(ATTACKER_ROLES)(
      "a %s who writes what it matches (victim's number, STOP) changes nothing of the victim's",
      async (role) => {
        const backend = gw.backend;
        const attacker = attackerFor(backend, VICTIM, role);
        await restoreScene(backend, scene);
        const trigger = matchingResource(criteria, scene.victim);
        const mark = storeMark(backend);
        const response = await direct(backend, attacker.token, 'POST', fhirPath(trigger.resourceType), {
          body: trigger,
        });
        await backend.subscriptions.idle();
        const created = (response.body as { id?: string } | undefined)?.id;
        // Whether the attacker may write the trigger at all is for writes.test.ts; here: what it woke.
        const woken = foreignChanges(changesSince(backend, mark), attacker).filter((c) => c.id !== created);
        expect(response.status, response.text.slice(0, 200)).toBeLessThan(500);
        expect(woken.map(describeChange)).toEqual([]);
      },
    );
  },
);
