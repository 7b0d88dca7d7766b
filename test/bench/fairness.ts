import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { DEMO_TENANTS } from '../../src/provision/demo';
import { NPM_START_ENV, start } from './gateway';

/**
 * Issue 37 item 5: no group of callers holds the rest at 429/503. One process set up as `npm start`
 * (its own admission limits: 32 a caller, 256 in all), N self-registered patients flooding it (each with
 * 32 calls always in flight on `GET /v1/agreements/requirements`), and a victim reading her profile one
 * call at a time: her share of 200s and her p50/p99, alone and under floods of 10 and of 100 accounts.
 */
export interface FairnessRound {
  accounts: number;
  victim: { calls: number; ok: number; statuses: Record<string, number>; p50Ms: number; p99Ms: number };
  flood: { calls: number; statuses: Record<string, number> };
}

export async function runFairnessBench(seconds: number, floods: number[] = [0, 10, 100]): Promise<FairnessRound[]> {
  const helper = start<{ token: string; baseUrl: string; projectId: string }>('test/bench/serve-npm-start.ts', {
    PORT: '18313',
    GATEWAY_PORT: '18290',
    BENCH_ADMISSION: 'default',
    ...NPM_START_ENV,
  });
  try {
    const { baseUrl, projectId } = await helper.ready;
    const gateway = 'http://127.0.0.1:18290';
    const clientId = DEMO_TENANTS[0].appId;
    const accounts: string[] = [];
    for (let i = 0; i <= Math.max(...floods); i += 4) {
      const batch = Math.min(4, Math.max(...floods) + 1 - i);
      accounts.push(
        ...(await Promise.all(Array.from({ length: batch }, () => register(baseUrl, gateway, projectId, clientId)))),
      );
    }
    const [victimToken, ...flooders] = accounts;
    const rounds: FairnessRound[] = [];
    for (const n of floods) {
      rounds.push(await round(gateway, victimToken as string, flooders.slice(0, n), seconds));
    }
    return rounds;
  } finally {
    helper.child.kill();
  }
}

async function round(gateway: string, victim: string, flooders: string[], seconds: number): Promise<FairnessRound> {
  const until = Date.now() + seconds * 1000;
  const floodStatuses: number[] = [];
  const floods = flooders.flatMap((token) =>
    Array.from({ length: 32 }, async () => {
      while (Date.now() < until) {
        const r = await fetch(`${gateway}/v1/agreements/requirements`, {
          headers: { authorization: `Bearer ${token}` },
        });
        await r.arrayBuffer();
        floodStatuses.push(r.status);
      }
    }),
  );
  const victimStatuses: number[] = [];
  const latencies: number[] = [];
  // She starts once the flood is under way, and reads one call at a time.
  await new Promise((resolve) => setTimeout(resolve, flooders.length ? 500 : 0));
  while (Date.now() < until) {
    const began = performance.now();
    const r = await fetch(`${gateway}/v1/patient/profile`, { headers: { authorization: `Bearer ${victim}` } });
    await r.arrayBuffer();
    latencies.push(performance.now() - began);
    victimStatuses.push(r.status);
  }
  await Promise.all(floods);
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  return {
    accounts: flooders.length,
    victim: {
      calls: victimStatuses.length,
      ok: victimStatuses.filter((s) => s === 200).length,
      statuses: count(victimStatuses),
      p50Ms: at(0.5),
      p99Ms: at(0.99),
    },
    flood: { calls: floodStatuses.length, statuses: count(floodStatuses) },
  };
}

const count = (statuses: number[]) =>
  statuses.reduce<Record<string, number>>((all, s) => {
    all[s] = (all[s] ?? 0) + 1;
    return all;
  }, {});

/**
 * Sign-up is rate limited per address, as on Medplum (160 auth calls a minute): one address registering a
 * hundred accounts waits out the window, as an attacker would (or uses many addresses).
 */
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
