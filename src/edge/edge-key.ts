import { EDGE_KEY_CHECK, SYSTEMS } from '../../contracts/systems';

/**
 * Whether this gateway's EDGE_STATEMENT_KEY is the Project's (issue 49 item 3): with a wrong key every
 * edge statement it signs is thrown away by the bots, and each agreement's clickwrap proof silently lacks
 * her address and app. Checked at start (Node refuses to start, a Worker to serve) and by `/readyz`, through
 * the gateway's own client (GATEWAY_CLIENT_ID, GATEWAY_CLIENT_SECRET: it can run the check and read
 * nothing else) and the `edge-key-check` bot, which answers the id of the Project's key; the key itself never
 * leaves either side. Web Crypto and fetch only: the same code on Node and Workers.
 */
export interface GatewayClient {
  baseUrl: string;
  clientId: string;
  clientSecret: string;
  fetch?: typeof fetch;
}

/** `mismatch` and `no-key` are the operator's to mend (refuse); `unreachable`, Medplum's (try again). */
export type EdgeKeyVerdict =
  | { ok: true }
  | {
      ok: false;
      reason: 'mismatch' | 'no-key' | 'client-refused' | 'not-provisioned' | 'unreachable';
      message: string;
    };

const TIMEOUT_MS = 5_000;

/** The id of a key, as the bot computes it: HMAC-SHA256(key, context), hex. */
export async function edgeKeyId(key: string): Promise<string> {
  const hmac = await crypto.subtle.importKey(
    'raw',
    new TextEncoder().encode(key),
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['sign'],
  );
  const mac = await crypto.subtle.sign('HMAC', hmac, new TextEncoder().encode(EDGE_KEY_CHECK.context));
  return [...new Uint8Array(mac)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

/** The client's sign-in (client credentials) at Medplum's token endpoint: the answer as it came. */
export function signInAs(client: GatewayClient, signal?: AbortSignal): Promise<Response> {
  return (client.fetch ?? fetch)(`${client.baseUrl}oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: client.clientId,
      client_secret: client.clientSecret,
    }).toString(),
    signal,
  });
}

export async function checkEdgeKey(client: GatewayClient, key: string): Promise<EdgeKeyVerdict> {
  const call = client.fetch ?? fetch;
  const signal = () => AbortSignal.timeout(TIMEOUT_MS);
  let token: string | undefined;
  try {
    const answer = await signInAs(client, signal());
    if (answer.status === 400 || answer.status === 401 || answer.status === 403) {
      await answer.body?.cancel();
      return {
        ok: false,
        reason: 'client-refused',
        message:
          'Medplum refused GATEWAY_CLIENT_ID and GATEWAY_CLIENT_SECRET: use the ones provisioning wrote to its --out file (docs/deploy.md)',
      };
    }
    if (!answer.ok) {
      await answer.body?.cancel();
      return unreachable(`its token endpoint answered ${answer.status}`);
    }
    token = ((await answer.json()) as { access_token?: string }).access_token;
    const headers = { authorization: `Bearer ${token}`, accept: 'application/fhir+json' };
    const found = await call(
      `${client.baseUrl}fhir/R4/Bot?identifier=${encodeURIComponent(`${SYSTEMS.bots}|${EDGE_KEY_CHECK.bot}`)}&_elements=id`,
      { headers, signal: signal() },
    );
    if (!found.ok) {
      await found.body?.cancel();
      return found.status >= 500 ? unreachable(`its Bot search answered ${found.status}`) : notProvisioned();
    }
    const bot = ((await found.json()) as { entry?: { resource?: { id?: string } }[] }).entry?.[0]?.resource?.id;
    if (!bot) {
      return notProvisioned();
    }
    const ran = await call(`${client.baseUrl}fhir/R4/Bot/${bot}/$execute`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: '{}',
      signal: signal(),
    });
    if (!ran.ok) {
      await ran.body?.cancel();
      return ran.status >= 500 || ran.status === 429
        ? unreachable(`the check answered ${ran.status}`)
        : notProvisioned();
    }
    const { keyId } = (await ran.json()) as { keyId?: string | null };
    if (keyId === null) {
      return {
        ok: false,
        reason: 'no-key',
        message:
          'The Project has no edge-statement key: run `npm run provision` with this EDGE_STATEMENT_KEY (docs/deploy.md)',
      };
    }
    if (keyId !== (await edgeKeyId(key))) {
      return {
        ok: false,
        reason: 'mismatch',
        message:
          "EDGE_STATEMENT_KEY is not the Project's edge-statement key: use the key provisioning wrote to its --out file, or run `npm run provision` with this one (docs/deploy.md)",
      };
    }
    return { ok: true };
  } catch (err) {
    return unreachable(err instanceof Error && err.name === 'TimeoutError' ? 'no answer in 5 s' : 'no answer');
  }
}

const notProvisioned = (): EdgeKeyVerdict => ({
  ok: false,
  reason: 'not-provisioned',
  message:
    'The edge-key-check bot is not there for this client: run `npm run provision` of this version (docs/deploy.md)',
});

const unreachable = (why: string): EdgeKeyVerdict => ({
  ok: false,
  reason: 'unreachable',
  message: `The edge-statement key could not be checked (Medplum: ${why}); it is checked again by /readyz`,
});

/** The verdicts an operator must act on: Node does not start, a Worker does not serve. */
export const refuses = (verdict: EdgeKeyVerdict): boolean => !verdict.ok && verdict.reason !== 'unreachable';

/**
 * The check as a gateway keeps it: one at a time, its verdict kept for `ttlMs` (a good one longer), so probes
 * and requests never load Medplum with it.
 */
export function edgeKeyChecker(
  client: GatewayClient,
  key: string,
  options: { ttlMs?: number; now?: () => number } = {},
): () => Promise<EdgeKeyVerdict> {
  const now = options.now ?? Date.now;
  const ttl = options.ttlMs ?? 60_000;
  let last: { at: number; verdict: Promise<EdgeKeyVerdict> } | undefined;
  return async () => {
    if (!last || now() - last.at > ttl) {
      last = { at: now(), verdict: checkEdgeKey(client, key) };
    }
    const current = last;
    const verdict = await current.verdict;
    if (!verdict.ok && verdict.reason === 'unreachable' && last === current && current.at > now() - ttl + 5_000) {
      // Medplum was not there: asked again 5 s from now, not after the whole ttl.
      last = { at: now() - ttl + 5_000, verdict: current.verdict };
    }
    return verdict;
  };
}
