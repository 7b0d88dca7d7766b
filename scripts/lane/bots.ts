// Bots and bot-only writes: a bot's code and $execute, and what only bots write (CarePlans, Consents, a tenant).
import type { Bot } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import type { AttackKit } from './attack-kit';
import { type AttackContext, describe, entriesOf, medplumCall, message, REFUSED, register, row } from './common';

/** Reads of a bot's code and where it is, $execute of bots patients may not run, and writes only bots make. */
export async function botsAndBotOnlyWrites(ctx: AttackContext, kit: AttackKit): Promise<void> {
  const { baseUrl, projectId } = ctx;
  const { people, direct, attack, control } = kit;
  // Bots: their code, and $execute of a bot patients may not run.
  const botOf = async (key: string): Promise<Bot | undefined> =>
    entriesOf((await ctx.adminGet(`fhir/R4/Bot?identifier=${encodeURIComponent(`${SYSTEMS.bots}|${key}`)}`)).body)[0] as
      | Bot
      | undefined;
  // A real Medplum answers a Bot's code as a presigned storage URL (`<base>storage/<id>/<version>?...`).
  const binaryOf = (url: string | undefined): string | undefined => {
    const id = url?.startsWith('Binary/') ? url.slice(7) : /\/storage\/([\w-]+)\//.exec(url ?? '')?.[1];
    return id ? `Binary/${id.split('/')[0]}` : undefined;
  };
  const completeTask = await botOf('complete-task');
  const code = binaryOf(completeTask?.executableCode?.url);
  const source = binaryOf(completeTask?.sourceCode?.url);
  await control(
    "the admin reads a bot's code Binary (Bot.executableCode.url)",
    { who: 'admin', token: ctx.adminToken, profile: '' },
    code,
    () => medplumCall(baseUrl, ctx.adminToken, 'GET', `fhir/R4/${code}`),
  );
  for (const attacker of ['bob', 'northwind-clinician']) {
    const who = people.get(attacker)?.who ?? attacker;
    await attack(
      `${who} reads the complete-task bot's code Binary (executableCode)`,
      { attacker, target: code },
      (a, t) => direct(a, 'GET', t),
    );
    await attack(
      `${who} reads the complete-task bot's source Binary (sourceCode)`,
      { attacker, target: source },
      (a, t) => direct(a, 'GET', t),
    );
  }
  // A patient may read the bots she runs, but not where their code is (reads.test.ts).
  const patientBot = people.get('bob');
  if (patientBot && completeTask?.id) {
    const answer = await direct(patientBot, 'GET', `Bot/${completeTask.id}`);
    const shows = /executableCode|sourceCode/.test(answer.text);
    row(
      'attack: bob (Northwind patient) reads the complete-task Bot: where its code is',
      shows ? 'FAILED' : 'held',
      `expected no executableCode/sourceCode, got ${describe(answer)}${shows ? ' showing them' : ''}`,
    );
  }
  // GET /v1/agreements/requirements is a read the gateway computes with her own token (082b830): the
  // journey's step 4 and each form case's intake ask it through the gateway; no bot of it is provisioned.
  const requirementsBot = await botOf('agreement-requirements');
  row(
    'no agreement-requirements bot is provisioned (the gateway computes GET /v1/agreements/requirements)',
    requirementsBot ? 'FAILED' : 'ok',
    requirementsBot
      ? `Bot/${requirementsBot.id} has the identifier ${SYSTEMS.bots}|agreement-requirements (a project provisioned before 082b830?)`
      : `no Bot with the identifier ${SYSTEMS.bots}|agreement-requirements`,
  );
  for (const key of ['eligibility', 'compose-offer', 'reconcile', 'materialize-slots', 'sms-opt-out', 'webhooks']) {
    const bot = await botOf(key);
    await attack(
      `bob (Northwind patient) runs the ${key} bot ($execute), not a patient's`,
      { attacker: 'bob', target: bot?.id ? `Bot/${bot.id}` : undefined },
      (a, t) => direct(a, 'POST', `${t}/$execute`, {}),
    );
  }
  // Clinicians read the bots that write their patients' records, by name (Medplum's app names authors so),
  // never their code; a read is leave to $execute, so each such bot refuses her run itself (NAMED_BOTS in
  // src/provision/policies/bots.ts). The webhooks bot (a delivery of her choosing) stays unreadable, so
  // Medplum refuses her run of it.
  const clinician = people.get('northwind-clinician');
  for (const key of ['complete-task', 'eligibility', 'reconcile', 'visit-completion', 'materialize-slots']) {
    const bot = await botOf(key);
    const answer = await control(
      `the northwind clinician reads the ${key} bot by name (an author in Medplum's app)`,
      clinician,
      bot?.id ? `Bot/${bot.id}` : undefined,
      () => direct(clinician as NonNullable<typeof clinician>, 'GET', `Bot/${bot?.id}`),
    );
    if (answer) {
      const shows = /executableCode|sourceCode/.test(answer.text);
      row(
        `attack: the northwind clinician reads the ${key} Bot: where its code is`,
        shows ? 'FAILED' : 'held',
        `expected no executableCode/sourceCode, got ${describe(answer)}${shows ? ' showing them' : ''}`,
      );
    }
  }
  for (const [who, key] of [
    ['northwind-clinician', 'webhooks'],
    ['southridge-clinician', 'webhooks'],
  ] as const) {
    const bot = await botOf(key);
    await attack(
      `the ${who.replace('-clinician', '')} clinician runs the ${key} bot ($execute)`,
      { attacker: who, target: bot?.id ? `Bot/${bot.id}` : undefined },
      (a, t) => direct(a, 'POST', `${t}/$execute`, key === 'webhooks' ? { resourceType: 'Task', id: 'x' } : {}),
    );
  }
  for (const [key, input] of [
    ['access-log', { limit: 1 }],
    ['reconcile', {}],
    ['materialize-slots', {}],
  ] as const) {
    const bot = await botOf(key);
    const target = bot?.id ? `Bot/${bot.id}` : undefined;
    if (!clinician || !target) {
      row(`attack: the northwind clinician runs the ${key} bot ($execute)`, 'not reached', 'no clinician or bot');
      continue;
    }
    try {
      const answer = await direct(clinician, 'POST', `${target}/$execute`, input);
      const body = answer.body as { ok?: boolean; error?: { status?: number } } | undefined;
      const held = REFUSED.includes(answer.status) || (body?.ok === false && body.error?.status === 403);
      row(
        `attack: the northwind clinician runs the ${key} bot ($execute): refused by the bot`,
        held ? 'held' : 'FAILED',
        `expected 403 (Medplum's or the bot's result), got ${describe(answer)} ${answer.text.slice(0, 120)}`,
      );
    } catch (err) {
      row(
        `attack: the northwind clinician runs the ${key} bot ($execute)`,
        'FAILED',
        `the call threw: ${message(err)}`,
      );
    }
  }

  // The machine clients that write (provisioning's own, tagged by it; the SMS integration) are named to
  // clinicians, never their secrets; a tenant's patient app is not hers to read (MACHINE_CLIENTS).
  const clientOf = async (tag: string) =>
    entriesOf((await ctx.adminGet(`fhir/R4/ClientApplication?_tag=${encodeURIComponent(tag)}`)).body)[0];
  const provisioner = await clientOf(`${SYSTEMS.integration}|provisioning`);
  for (const who of ['northwind-clinician', 'southridge-clinician']) {
    const person = people.get(who);
    const answer = await control(
      `the ${who.replace('-clinician', '')} clinician reads the provisioning client by name (an author in Medplum's app)`,
      person,
      provisioner?.id ? `ClientApplication/${provisioner.id}` : undefined,
      () => direct(person as NonNullable<typeof person>, 'GET', `ClientApplication/${provisioner?.id}`),
    );
    if (answer) {
      const shows = /"secret"|retiringSecret|identityProvider/.test(answer.text);
      row(
        `attack: the ${who.replace('-clinician', '')} clinician reads the provisioning client: its secret`,
        shows ? 'FAILED' : 'held',
        `expected no secret, got ${describe(answer)}${shows ? ' showing it' : ''}`,
      );
    }
  }
  const northwindApp = ctx.appIdOf('northwind');
  await attack(
    "the southridge clinician reads Northwind's patient app (ClientApplication)",
    { attacker: 'southridge-clinician', target: northwindApp ? `ClientApplication/${northwindApp}` : undefined },
    (a, t) => direct(a, 'GET', t),
  );
  await attack(
    'bob (Northwind patient) reads the provisioning client',
    { attacker: 'bob', target: provisioner?.id ? `ClientApplication/${provisioner.id}` : undefined },
    (a, t) => direct(a, 'GET', t),
  );

  // Bot-only writes.
  const bob = people.get('bob');
  await attack(
    'bob (Northwind patient) creates a CarePlan for himself directly',
    { attacker: 'bob', target: bob?.profile },
    (a) =>
      direct(a, 'POST', 'CarePlan', {
        resourceType: 'CarePlan',
        status: 'active',
        intent: 'plan',
        subject: { reference: a.profile },
      }),
  );
  await attack(
    'bob (Northwind patient) creates a Consent for himself directly',
    { attacker: 'bob', target: bob?.profile },
    (a) =>
      direct(a, 'POST', 'Consent', {
        resourceType: 'Consent',
        status: 'active',
        scope: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/consentscope', code: 'treatment' }] },
        category: [{ coding: [{ system: 'http://loinc.org', code: '59284-0' }] }],
        patient: { reference: a.profile },
        dateTime: new Date().toISOString(),
      }),
  );
  // Nobody chooses a tenant by sending meta.accounts: Medplum keeps what a non-admin sends whenever it
  // derives none itself (a patient not yet homed, an upload naming no patient).
  const southridge = entriesOf(
    (await ctx.adminGet(`fhir/R4/Organization?_tag=${encodeURIComponent(`${SYSTEMS.provisioning}|org-southridge`)}`))
      .body,
  )[0];
  const elsewhere = southridge?.id ? [{ reference: `Organization/${southridge.id}` }] : undefined;
  try {
    const newcomer = await register(baseUrl, projectId, ctx.appIdOf('northwind'));
    people.set('newcomer', newcomer);
  } catch (err) {
    row('sign-up: a new Northwind patient, not yet homed', 'FAILED', message(err));
  }
  await attack(
    'a new patient, not yet homed, puts herself in Southridge (her Patient with meta.accounts)',
    { attacker: 'newcomer', target: elsewhere ? people.get('newcomer')?.profile : undefined },
    async (a, t) => {
      const own = await direct(a, 'GET', t);
      return direct(a, 'PUT', t, { ...(own.body as object), meta: { accounts: elsewhere } });
    },
  );
  await attack(
    'bob (Northwind patient) files an upload in Southridge (a Binary with meta.accounts)',
    { attacker: 'bob', target: elsewhere ? bob?.profile : undefined },
    (a) =>
      direct(a, 'POST', 'Binary', {
        resourceType: 'Binary',
        contentType: 'application/pdf',
        data: btoa('%PDF-1.7 filed elsewhere'),
        securityContext: { reference: a.profile },
        meta: { accounts: elsewhere },
      }),
  );
  await attack(
    'bob (Northwind patient) reads the Project (its secrets hold the edge key)',
    { attacker: 'bob', target: `Project/${projectId}` },
    (a, t) => direct(a, 'GET', t),
  );
  for (const key of ['bob', 'northwind-clinician']) {
    const person = people.get(key);
    if (!person) {
      continue;
    }
    const answer = await medplumCall(baseUrl, person.token, 'GET', 'auth/me');
    const shows = answer.text.includes(ctx.edgeStatementKey);
    row(
      `attack: ${person.who} reads auth/me: the Project's secrets`,
      answer.status === 200 && !shows ? 'held' : 'FAILED',
      `expected 200 without the edge-statement key, got ${answer.status}${shows ? ' WITH the key' : ''}`,
    );
  }
}
