import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { ClientApplication } from '@medplum/fhirtypes';
import { EDGE_KEY_CHECK, SYSTEMS } from '../../contracts/systems';
import { checkEdgeKey, edgeKeyId, signInAs } from '../../src/edge/edge-key';
import { type AttackContext, entriesOf, medplumCall, message, type Person, REFUSED, row } from './common';

/**
 * The gateway's EDGE_STATEMENT_KEY checked against the Project's (issue 49 item 3; src/edge/edge-key.ts,
 * bots/edge-key-check.ts), on a real Medplum: its own client (provisioned, tagged `…/integration|gateway`)
 * runs the check; the lane's key answers ok, another key "mismatch"; the Node entry does not start with
 * another key and starts with the lane's; nobody else runs the check or learns the key's id; the client
 * reads nothing else.
 */
export async function edgeKeyCheck(ctx: AttackContext, people: Map<string, Person>): Promise<void> {
  const family = "The gateway's edge-statement key";
  const steps = {
    check: `${family}: its own client (the ClientApplication tagged ${SYSTEMS.integration}|${EDGE_KEY_CHECK.integration}, client credentials) runs ${EDGE_KEY_CHECK.bot}: the lane's key (the Project's) answers ok; a random other key answers mismatch; the bot's answer holds the key's id only, never the key`,
    node: `${family}: the Node entry (src/node.ts over this Medplum with the gateway's client) with another key exits 1 before listening, naming EDGE_STATEMENT_KEY; with the Project's key it starts`,
    others: `${family}: attack: alice, carol, the Northwind and the Southridge clinicians run ${EDGE_KEY_CHECK.bot} directly on Medplum: refused (403/404, or the bot's 403), and no answer holds the key's id`,
    reads: `${family}: attack: the gateway's client reads Patient, Organization, ClientApplication, Practitioner, Consent, Task (403 or nothing) and runs patient-home and accept-agreements (refused); its Bot search lists only ${EDGE_KEY_CHECK.bot}`,
  };
  let client: { clientId: string; clientSecret: string } | undefined;
  try {
    const found = await ctx.adminGet(
      `fhir/R4/ClientApplication?_tag=${encodeURIComponent(`${SYSTEMS.integration}|${EDGE_KEY_CHECK.integration}`)}`,
    );
    const app = entriesOf(found.body)[0] as ClientApplication | undefined;
    client = app?.id && app.secret ? { clientId: app.id, clientSecret: app.secret } : undefined;
  } catch (err) {
    row(steps.check, 'FAILED', `the gateway's client: ${message(err)}`);
    return;
  }
  if (!client) {
    for (const step of Object.values(steps)) {
      row(step, 'FAILED', "no ClientApplication tagged as the gateway's (was the project provisioned?)");
    }
    return;
  }
  const gateway = { baseUrl: ctx.baseUrl, ...client };
  const id = await edgeKeyId(ctx.edgeStatementKey);

  // The check itself, both ways, and what the bot answers.
  try {
    const right = await checkEdgeKey(gateway, ctx.edgeStatementKey);
    const wrong = await checkEdgeKey(gateway, randomBytes(32).toString('hex'));
    const token = await clientToken(ctx.baseUrl, client);
    const answer = await medplumCall(
      ctx.baseUrl,
      token,
      'POST',
      `fhir/R4/Bot/$execute?identifier=${encodeURIComponent(`${SYSTEMS.bots}|${EDGE_KEY_CHECK.bot}`)}`,
      { body: {} },
    );
    const text = JSON.stringify(answer.body);
    const ok =
      right.ok &&
      !wrong.ok &&
      wrong.reason === 'mismatch' &&
      answer.status === 200 &&
      (answer.body as { keyId?: string }).keyId === id &&
      !text.includes(ctx.edgeStatementKey);
    row(
      steps.check,
      ok ? 'ok' : 'FAILED',
      `the lane's key: ${JSON.stringify(right)}; another: ${wrong.ok ? 'ok' : wrong.reason}; the bot: ${answer.status} ${text.slice(0, 120)} (the id ${id.slice(0, 12)}…, the key absent: ${!text.includes(ctx.edgeStatementKey)})`,
    );
  } catch (err) {
    row(steps.check, 'FAILED', message(err));
  }

  // The Node entry, as an operator starts it.
  try {
    const wrong = await startNode(ctx, client, randomBytes(32).toString('hex'));
    const right = await startNode(ctx, client, ctx.edgeStatementKey);
    const ok =
      wrong.code === 1 &&
      wrong.output.includes("Not starting: EDGE_STATEMENT_KEY is not the Project's edge-statement key") &&
      !wrong.output.includes('Patient Care API at') &&
      right.output.includes('Patient Care API at');
    row(
      steps.node,
      ok ? 'ok' : 'FAILED',
      `another key: exit ${wrong.code}, "${wrong.output.trim().split('\n').at(-1)?.slice(0, 160)}"; the Project's: "${right.output.trim().split('\n')[0]?.slice(0, 100)}"`,
    );
  } catch (err) {
    row(steps.node, 'FAILED', message(err));
  }

  // Nobody else runs it.
  try {
    const seen: string[] = [];
    let ok = true;
    for (const key of ['alice', 'carol', 'northwind-clinician', 'southridge-clinician']) {
      const person = people.get(key);
      if (!person) {
        ok = false;
        seen.push(`${key}: not signed in`);
        continue;
      }
      const answer = await medplumCall(
        ctx.baseUrl,
        person.token,
        'POST',
        `fhir/R4/Bot/$execute?identifier=${encodeURIComponent(`${SYSTEMS.bots}|${EDGE_KEY_CHECK.bot}`)}`,
        { body: {} },
      );
      const refused = REFUSED.includes(answer.status) || (answer.body as { ok?: boolean })?.ok === false;
      const leaks = JSON.stringify(answer.body ?? '').includes(id);
      ok &&= refused && !leaks;
      seen.push(`${person.who}: ${answer.status}${leaks ? ' (the id!)' : ''}`);
    }
    row(steps.others, ok ? 'held' : 'FAILED', seen.join('; '));
  } catch (err) {
    row(steps.others, 'FAILED', message(err));
  }

  // What the client reads: nothing but its bot.
  try {
    const token = await clientToken(ctx.baseUrl, client);
    const seen: string[] = [];
    let ok = true;
    for (const type of ['Patient', 'Organization', 'ClientApplication', 'Practitioner', 'Consent', 'Task']) {
      const answer = await medplumCall(ctx.baseUrl, token, 'GET', `fhir/R4/${type}?_count=5`);
      const n = answer.status === 200 ? entriesOf(answer.body).length : 0;
      ok &&= answer.status === 403 || n === 0;
      seen.push(`${type} ${answer.status}${n ? ` (${n}!)` : ''}`);
    }
    for (const bot of ['patient-home', 'accept-agreements']) {
      const answer = await medplumCall(
        ctx.baseUrl,
        token,
        'POST',
        `fhir/R4/Bot/$execute?identifier=${encodeURIComponent(`${SYSTEMS.bots}|${bot}`)}`,
        { body: {} },
      );
      ok &&= answer.status >= 400;
      seen.push(`${bot} ${answer.status}`);
    }
    const bots = await medplumCall(ctx.baseUrl, token, 'GET', 'fhir/R4/Bot?_count=50');
    const names = entriesOf(bots.body).map((b) => (b as { name?: string }).name);
    ok &&= names.length === 1 && names[0] === EDGE_KEY_CHECK.bot;
    row(steps.reads, ok ? 'held' : 'FAILED', `${seen.join(', ')}; its Bot search: ${names.join(', ')}`);
  } catch (err) {
    row(steps.reads, 'FAILED', message(err));
  }
}

async function clientToken(baseUrl: string, client: { clientId: string; clientSecret: string }): Promise<string> {
  const response = await signInAs({ baseUrl, ...client });
  const token = ((await response.json()) as { access_token?: string }).access_token;
  if (!token) {
    throw new Error(`the gateway's client could not sign in: ${response.status}`);
  }
  return token;
}

/**
 * `src/node.ts` as an operator starts it over a remote Medplum, with these settings: its output until it
 * listens (then it is stopped) or exits, and its exit code (also test/gateway/edge-key.test.ts).
 */
export function startNodeGateway(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/node.ts'], {
      env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const timer = setTimeout(() => child.kill(), 60_000);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Patient Care API at')) {
        child.kill();
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/** The Node entry over this Medplum with the gateway's client and the key given. */
const startNode = (ctx: AttackContext, client: { clientId: string; clientSecret: string }, key: string) =>
  startNodeGateway({
    MEDPLUM_REMOTE_BASE_URL: ctx.baseUrl,
    PROJECT_ID: ctx.projectId,
    EDGE_STATEMENT_KEY: key,
    GATEWAY_CLIENT_ID: client.clientId,
    GATEWAY_CLIENT_SECRET: client.clientSecret,
    PORT: String(20_000 + Math.floor(Math.random() * 20_000)),
  });
