import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { DEMO_TENANTS } from '../../src/provision/demo';
import { freePort, NPM_START_ENV, start } from './gateway';

/**
 * Issue 37 item 5: no group of callers holds the rest at 429/503. One process set up as `npm start`
 * (its own admission limits: 32 a caller, 256 in all), N self-registered patients flooding it (each with
 * 32 calls always in flight on `GET /v1/agreements/requirements`), and a victim reading her profile one
 * call at a time: her share of 200s and her p50/p99, alone and under floods of 10 and of 100 accounts.
 */
export interface FairnessRound {
  accounts: number;
  victim: { calls: number; ok: number; statuses: Record<string, number>; p50Ms: number; p99Ms: number };
  /** The flood's answers, and how long its 200s took. */
  flood: { calls: number; statuses: Record<string, number>; p50Ms: number; p99Ms: number };
}

export interface FairnessBench {
  /** One of the flood's calls alone (an account reading its requirements one call at a time), before the floods. */
  theirCallMs: { p50: number; p99: number };
  rounds: FairnessRound[];
}

/** A real Medplum to run the bench on (a project provisioned with the demo definition), instead of npm start. */
export interface RemoteMedplum {
  baseUrl: string;
  projectId: string;
  /** A tenant's patient app (its ClientApplication id): the accounts sign up through it. */
  clientId: string;
}

/**
 * `admission`: the gateway's limits as `npm start` sets them, unless told (`IN_FLIGHT_TOTAL`,
 * `IN_FLIGHT_WAITING`: 0 for none waiting, every call past the total refused at once; `MEDPLUM_IN_FLIGHT`:
 * 0 for no bound of the gateway's own on its calls to Medplum). On `remote`, a
 * gateway process set up as the Node entry sets it up for a remote Medplum.
 */
export async function runFairnessBench(
  seconds: number,
  floods: number[] = [0, 10, 100],
  admission: { total?: string; waiting?: string; medplum?: string } = {},
  remote?: RemoteMedplum,
): Promise<FairnessBench> {
  const gatewayPort = await freePort();
  const limitsEnv = {
    BENCH_ADMISSION: 'default',
    ...(admission.total ? { IN_FLIGHT_TOTAL: admission.total } : {}),
    ...(admission.waiting ? { IN_FLIGHT_WAITING: admission.waiting } : {}),
    ...(admission.medplum ? { MEDPLUM_IN_FLIGHT: admission.medplum } : {}),
    ...NPM_START_ENV,
  };
  const helper = remote
    ? start<string>('test/bench/serve-gateway.ts', limitsEnv)
    : start<{ token: string; baseUrl: string; projectId: string }>('test/bench/serve-npm-start.ts', {
        PORT: String(await freePort()),
        GATEWAY_PORT: String(gatewayPort),
        // The accounts are signed up from one address; the crowd the bench stands for has many (Medplum's
        // sign-in limit is per address: 5 a minute would take an hour for a hundred accounts).
        EMBEDDED_LOGIN_RATE_LIMIT: '100000',
        ...limitsEnv,
      });
  try {
    const ready = await helper.ready;
    const { baseUrl, projectId } = typeof ready === 'string' ? (remote as RemoteMedplum) : ready;
    if (remote) {
      helper.child.send({ medplumBaseUrl: remote.baseUrl, projectId: remote.projectId, port: gatewayPort });
      await new Promise((resolve) => helper.child.once('message', resolve));
    }
    const gateway = `http://127.0.0.1:${gatewayPort}`;
    const clientId = remote?.clientId ?? DEMO_TENANTS[0].appId;
    const accounts: string[] = [];
    for (let i = 0; i <= Math.max(...floods); i += 4) {
      const batch = Math.min(4, Math.max(...floods) + 1 - i);
      accounts.push(
        ...(await Promise.all(Array.from({ length: batch }, () => register(baseUrl, gateway, projectId, clientId)))),
      );
    }
    const [victimToken, ...flooders] = accounts;
    const theirs: number[] = [];
    for (let i = 0; i < 300; i++) {
      const began = performance.now();
      const r = await fetch(`${gateway}/v1/agreements/requirements`, {
        headers: { authorization: `Bearer ${flooders[0] ?? victimToken}` },
      });
      await r.arrayBuffer();
      theirs.push(performance.now() - began);
    }
    const rounds: FairnessRound[] = [];
    for (const n of floods) {
      rounds.push(await round(gateway, victimToken as string, flooders.slice(0, n), seconds));
    }
    return { theirCallMs: { p50: quantile(theirs, 0.5), p99: quantile(theirs, 0.99) }, rounds };
  } finally {
    const exited = new Promise((resolve) => helper.child.once('exit', resolve));
    helper.child.kill();
    await exited;
  }
}

/** What the victim reads (BENCH_FAIRNESS_VICTIM_PATH: another path, e.g. `/healthz` for the gateway's own loop). */
const VICTIM_PATH = process.env.BENCH_FAIRNESS_VICTIM_PATH ?? '/v1/patient/profile';

async function round(gateway: string, victim: string, flooders: string[], seconds: number): Promise<FairnessRound> {
  // The crowd on its own event loop (a process of its own), so that her calls are timed in this one.
  const crowd = flooders.length ? start<string>('test/bench/flood.ts', {}) : undefined;
  let crowdDone: Promise<{ statuses: number[]; okMs: number[] }> = Promise.resolve({ statuses: [], okMs: [] });
  if (crowd) {
    await crowd.ready;
    crowdDone = new Promise((resolve) => crowd.child.once('message', (m) => resolve(m as never)));
    crowd.child.send({ gateway, tokens: flooders, perAccount: 32, seconds });
  }
  const until = Date.now() + seconds * 1000;
  const victimStatuses: number[] = [];
  const latencies: number[] = [];
  // She starts once the flood is under way, and reads one call at a time.
  await new Promise((resolve) => setTimeout(resolve, flooders.length ? 500 : 0));
  while (Date.now() < until) {
    const began = performance.now();
    const r = await fetch(`${gateway}${VICTIM_PATH}`, { headers: { authorization: `Bearer ${victim}` } });
    await r.arrayBuffer();
    latencies.push(performance.now() - began);
    victimStatuses.push(r.status);
  }
  const flood = await crowdDone;
  return {
    accounts: flooders.length,
    victim: {
      calls: victimStatuses.length,
      ok: victimStatuses.filter((s) => s === 200).length,
      statuses: count(victimStatuses),
      p50Ms: quantile(latencies, 0.5),
      p99Ms: quantile(latencies, 0.99),
    },
    flood: {
      calls: flood.statuses.length,
      statuses: count(flood.statuses),
      p50Ms: quantile(flood.okMs, 0.5),
      p99Ms: quantile(flood.okMs, 0.99),
    },
  };
}

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

const count = (statuses: number[]) =>
  statuses.reduce<Record<string, number>>((all, s) => {
    all[s] = (all[s] ?? 0) + 1;
    return all;
  }, {});

/** Sign-up is rate limited per address, as on Medplum: should a limit still answer 429, wait it out. */
async function paced(call: () => Promise<Response>): Promise<Response> {
  for (;;) {
    const r = await call();
    if (r.status !== 429) {
      return r;
    }
    const wait = Number(r.headers.get('retry-after') ?? '5');
    await r.arrayBuffer();
    await new Promise((resolve) => setTimeout(resolve, Math.max(wait, 1) * 1000));
  }
}

/** A self-registered patient of the tenant's app, as anyone can make one: Medplum's sign-up, then home. */
async function register(baseUrl: string, gateway: string, projectId: string, clientId: string): Promise<string> {
  const verifier = randomBytes(32).toString('hex');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  const post = async (path: string, body: unknown) => {
    const r = await paced(() =>
      fetch(new URL(path, baseUrl), {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }),
    );
    if (!r.ok) {
      throw new Error(`${path}: ${r.status} ${await r.text()}`);
    }
    return (await r.json()) as Record<string, string>;
  };
  const { login } = await post('auth/newuser', {
    firstName: 'Flood',
    lastName: 'Account',
    email: `flood-${randomUUID()}@example.com`,
    password: `a long enough password ${randomUUID()}`,
    projectId,
    clientId,
    codeChallenge: challenge,
    codeChallengeMethod: 'S256',
  });
  const { code } = await post('auth/newpatient', { login, projectId });
  const token = await paced(() =>
    fetch(new URL('oauth2/token', baseUrl), {
      method: 'POST',
      body: new URLSearchParams({ grant_type: 'authorization_code', code: code as string, code_verifier: verifier }),
    }),
  );
  const { access_token } = (await token.json()) as { access_token: string };
  const home = await fetch(`${gateway}/v1/patient/home`, {
    method: 'POST',
    headers: { authorization: `Bearer ${access_token}` },
  });
  if (!home.ok) {
    throw new Error(`home: ${home.status}`);
  }
  return access_token;
}
