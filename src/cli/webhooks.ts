import { SYSTEMS } from '../../contracts/systems';
import { WEBHOOK_DELIVERY_STATUSES, WEBHOOK_OPERATIONS } from '../../contracts/webhook-rules';
import type { WebhookTryResult } from '../../contracts/webhooks';

/**
 * `npm run webhooks -- log|test|replay <event-id>`: a tenant backend's webhook operations (docs/webhooks.md),
 * signed in as the backend itself (client credentials), with nothing but `fetch` and Medplum's own API, so
 * that it reads as what a backend in any language does: the token endpoint, one FHIR search (the delivery
 * log), one `Bot/$execute` (a test event, a replay). Never an admin's credentials: what it may do is what
 * the backend's access policy and the two bots let it.
 */

const USAGE = [
  'usage: npm run webhooks -- log [--status pending|failed|delivered] [--json]',
  '       npm run webhooks -- test [--json]',
  '       npm run webhooks -- replay <event-id> [--json]',
  '',
  "A tenant backend's webhook: its delivery log (the deliveries kept after a failed try), a signed test event",
  'to its endpoint, and a replay of a kept delivery now (the same webhook-id). docs/webhooks.md',
  '',
  "  MEDPLUM_BASE_URL                     Medplum's base URL",
  "  MEDPLUM_CLIENT_ID, MEDPLUM_CLIENT_SECRET  the backend's client (provisioning's --out names them",
  '                                       TENANT_BACKEND_<TENANT>_<KEY>_CLIENT_ID and _SECRET)',
  '  --backend <TENANT>_<KEY>             read TENANT_BACKEND_<TENANT>_<KEY>_CLIENT_ID and _SECRET instead',
  '  --json                               print what Medplum answered, as JSON',
].join('\n');

type Out = Pick<Console, 'log' | 'error'>;

interface Io {
  env: Record<string, string | undefined>;
  fetch: typeof fetch;
  out: Out;
}

/** A kept delivery, as the log prints it. */
export interface LogEntry {
  eventId: string;
  status: string;
  type?: string;
  attempts?: number;
  last?: string;
  next?: string;
  updated?: string;
}

/** Runs the command; the exit code (0 done, 1 refused or not delivered, 2 a mistake in the command). */
export async function webhooksCommand(argv: string[], io: Io): Promise<number> {
  const [action, ...rest] = argv;
  const json = rest.includes('--json');
  const args = rest.filter((a) => a !== '--json');
  const flag = (name: string): string | undefined => {
    const at = args.indexOf(name);
    return at >= 0 ? args[at + 1] : undefined;
  };
  if (!action || action === '--help' || action === '-h' || args.includes('--help')) {
    io.out.log(USAGE);
    return action ? 0 : 2;
  }
  const backend = flag('--backend');
  const prefix = backend ? `TENANT_BACKEND_${backend.toUpperCase().replace(/[^A-Z0-9]+/g, '_')}` : 'MEDPLUM';
  const baseUrl = io.env.MEDPLUM_BASE_URL;
  const clientId = io.env[`${prefix}_CLIENT_ID`];
  const clientSecret = io.env[`${prefix}_CLIENT_SECRET`];
  if (!baseUrl || !clientId || !clientSecret) {
    io.out.error(`missing: MEDPLUM_BASE_URL, ${prefix}_CLIENT_ID and ${prefix}_CLIENT_SECRET\n\n${USAGE}`);
    return 2;
  }
  const base = baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`;
  const known = ['--backend', '--status'];
  const positional = args.filter((a, i) => !a.startsWith('--') && !known.includes(args[i - 1] ?? ''));
  const unknown = args.find((a) => a.startsWith('--') && !known.includes(a));
  if (unknown) {
    io.out.error(`unknown option ${unknown}\n\n${USAGE}`);
    return 2;
  }
  if (action === 'log') {
    const status = flag('--status');
    if (status && !(WEBHOOK_DELIVERY_STATUSES as readonly string[]).includes(status)) {
      io.out.error(`--status is one of ${WEBHOOK_DELIVERY_STATUSES.join(', ')}\n\n${USAGE}`);
      return 2;
    }
    const token = await signIn(io.fetch, base, clientId, clientSecret);
    const entries = await deliveryLog(io.fetch, base, token, status);
    if (json) {
      io.out.log(JSON.stringify(entries, null, 2));
    } else if (entries.length === 0) {
      io.out.log('no kept deliveries');
    } else {
      for (const e of entries) {
        const when = e.status === 'pending' ? `next ${e.next}` : `${e.status} ${e.updated}`;
        io.out.log(`${e.status.padEnd(9)} ${e.eventId}  ${e.type ?? ''}  tries ${e.attempts}, last ${e.last}; ${when}`);
      }
    }
    return 0;
  }
  if (action === 'test' || action === 'replay') {
    const eventId = positional[0];
    if (action === 'replay' && !eventId) {
      io.out.error(`replay needs the event id (the webhook-id) of a kept delivery\n\n${USAGE}`);
      return 2;
    }
    const token = await signIn(io.fetch, base, clientId, clientSecret);
    const answer = await execute(
      io.fetch,
      base,
      token,
      WEBHOOK_OPERATIONS[action].bot,
      action === 'replay' ? { eventId } : {},
    );
    if (json) {
      io.out.log(JSON.stringify(answer, null, 2));
    }
    if (!answer.ok) {
      io.out.error(`refused: ${answer.error.status} ${answer.error.code}: ${answer.error.message}`);
      return 1;
    }
    if (!json) {
      const stands = answer.status ? ` (now ${answer.status}, ${answer.attempts} tries)` : '';
      io.out.log(
        `${answer.eventId}: ${answer.delivered ? 'delivered' : 'not delivered'}, the endpoint answered ${answer.outcome}${stands}`,
      );
    }
    return answer.delivered ? 0 : 1;
  }
  io.out.error(`unknown command ${action}\n\n${USAGE}`);
  return 2;
}

/** Client credentials at Medplum's token endpoint: the backend's access token. */
async function signIn(fetcher: typeof fetch, base: string, clientId: string, clientSecret: string): Promise<string> {
  const response = await fetcher(`${base}oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret }),
  });
  const body = (await response.json().catch(() => ({}))) as { access_token?: string; error_description?: string };
  if (!response.ok || !body.access_token) {
    throw new Error(
      `Medplum refused the sign-in (${response.status}${body.error_description ? `: ${body.error_description}` : ''})`,
    );
  }
  return body.access_token;
}

/** The delivery log: one search; the backend's policy keeps it to its tenant's deliveries. */
async function deliveryLog(fetcher: typeof fetch, base: string, token: string, status?: string): Promise<LogEntry[]> {
  const statuses = status ? [status] : WEBHOOK_DELIVERY_STATUSES;
  const query = new URLSearchParams({
    code: statuses.map((s) => `${SYSTEMS.webhookDelivery}|${s}`).join(','),
    _sort: '-_lastUpdated',
    _count: '100',
  });
  const bundle = (await medplumJson(fetcher, `${base}fhir/R4/Basic?${query}`, token)) as {
    entry?: { resource: DeliveryRecord }[];
  };
  return (bundle.entry ?? []).map(({ resource }) => logEntry(resource));
}

interface DeliveryRecord {
  code?: { coding?: { system?: string; code?: string }[] };
  identifier?: { system?: string; value?: string }[];
  meta?: { lastUpdated?: string };
  extension?: { url: string; extension?: { url: string; [value: string]: unknown }[] }[];
}

/** One kept delivery as the webhooks bot writes it (bots/lib/webhooks.ts `pendingRecord`). */
export function logEntry(record: DeliveryRecord): LogEntry {
  const parts = record.extension?.find((e) => e.url.endsWith('/webhook-delivery'))?.extension ?? [];
  const part = (url: string) => parts.find((p) => p.url === url);
  let type: string | undefined;
  try {
    type = (JSON.parse(String(part('payload')?.valueString)) as { type?: string }).type;
  } catch {
    type = undefined;
  }
  return {
    eventId: record.identifier?.find((i) => i.system === SYSTEMS.webhookDelivery)?.value ?? '',
    status: record.code?.coding?.find((c) => c.system === SYSTEMS.webhookDelivery)?.code ?? '',
    type,
    attempts: part('attempts')?.valueInteger as number | undefined,
    last: part('last')?.valueString as string | undefined,
    next: part('next')?.valueInstant as string | undefined,
    updated: record.meta?.lastUpdated,
  };
}

type BotAnswer = WebhookTryResult | { ok: false; error: { status: number; code: string; message: string } };

/** `Bot/$execute` by the bot's identifier: Medplum answers 200 with what the bot returned. */
async function execute(
  fetcher: typeof fetch,
  base: string,
  token: string,
  bot: string,
  input: unknown,
): Promise<BotAnswer> {
  const url = `${base}fhir/R4/Bot/$execute?identifier=${encodeURIComponent(`${SYSTEMS.bots}|${bot}`)}`;
  return (await medplumJson(fetcher, url, token, input)) as BotAnswer;
}

async function medplumJson(fetcher: typeof fetch, url: string, token: string, body?: unknown): Promise<unknown> {
  const response = await fetcher(url, {
    method: body === undefined ? 'GET' : 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      accept: 'application/json',
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const answer = (await response.json().catch(() => undefined)) as
    | { resourceType?: string; issue?: { diagnostics?: string; details?: { text?: string } }[] }
    | undefined;
  if (!response.ok) {
    const issue = answer?.issue?.[0];
    throw new Error(
      `Medplum answered ${response.status}: ${issue?.details?.text ?? issue?.diagnostics ?? 'no outcome'}`,
    );
  }
  return answer;
}

if (process.argv[1]?.endsWith('webhooks.ts')) {
  webhooksCommand(process.argv.slice(2), { env: process.env, fetch, out: console })
    .then((code) => {
      process.exitCode = code;
    })
    .catch((err: unknown) => {
      console.error(err instanceof Error ? err.message : String(err));
      process.exitCode = 1;
    });
}
