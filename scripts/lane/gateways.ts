import { canonicalJson } from '../../bots/lib/canonical';
import { SYSTEMS } from '../../contracts/systems';
import { type AppDeps, createApp } from '../../src/app';
import { type Answer, answerOf, type BotError, errorOf, gatewayDescribe, medplumCall, message, row } from './common';

/** A workflow call the journey made that repeats finished work when made again. */
export interface MadeCall {
  method: string;
  url: string;
  authorization: string;
  body: string;
}

/**
 * The workflow routes whose repeats the gateway answers from the patient's own reads (src/medplum/
 * finished-work.ts), and the bot input each route sends (src/routes/): the bot's own answer to the same
 * call is what the repeat must equal.
 */
export const REPEATABLE: { method: string; path: RegExp; bot: string; input: (id: string, body: object) => object }[] =
  [
    {
      method: 'POST',
      path: /^\/v1\/tasks\/([^/]+)\/complete$/,
      bot: 'complete-task',
      input: (id, body) => ({ task: id, ...body }),
    },
    {
      method: 'POST',
      path: /^\/v1\/orders\/([^/]+)\/decisions$/,
      bot: 'decide-order',
      input: (id, body) => ({ order: id, ...body }),
    },
    { method: 'POST', path: /^\/v1\/assessments()$/, bot: 'start-assessment', input: (_, body) => body },
    {
      method: 'POST',
      path: /^\/v1\/appointments()$/,
      bot: 'appointments',
      input: (_, body) => ({ operation: 'book', ...body }),
    },
    ...(['reschedule', 'cancel', 'encounter'] as const).map((operation) => ({
      method: 'POST',
      path: new RegExp(`^/v1/appointments/([^/]+)/${operation}$`),
      bot: 'appointments',
      input: (id: string, body: object) => ({ operation, appointment: id, ...body }),
    })),
    {
      method: 'POST',
      path: /^\/v1\/enrollments()$/,
      bot: 'enrollment',
      input: (_, body) => ({ operation: 'enroll', ...body }),
    },
    {
      method: 'POST',
      path: /^\/v1\/enrollments\/([^/]+)\/activate$/,
      bot: 'enrollment',
      input: (id) => ({ operation: 'activate', carePlan: id }),
    },
    {
      method: 'DELETE',
      path: /^\/v1\/enrollments\/([^/]+)$/,
      bot: 'enrollment',
      input: (id) => ({ operation: 'unenroll', carePlan: id }),
    },
  ];

export const repeatableOf = (method: string, path: string) =>
  REPEATABLE.filter((r) => r.method === method)
    .map((r) => ({ ...r, id: r.path.exec(path)?.[1] }))
    .find((r) => r.id !== undefined);

/**
 * Each repeatable call of the journey made again through the gateway: 200, no bot run, and the same
 * answer as the bot's own to the same call now (run directly, with her token), the bot's `ok` and
 * `created` aside. The state may have moved on since (a visit booked, then moved and started), so the
 * bot's answer now, not the first one, is the measure.
 */
export async function repeats(
  baseUrl: string,
  made: MadeCall[],
  gatewayFetch: typeof fetch,
  executes: { count: number },
): Promise<void> {
  const seen = new Set<string>();
  for (const call of made) {
    const key = `${call.method} ${call.url} ${call.body}`;
    if (seen.has(key)) {
      continue;
    }
    seen.add(key);
    const path = new URL(call.url).pathname;
    const route = repeatableOf(call.method, path);
    if (!route) {
      continue;
    }
    const before = executes.count;
    const again = await answerOf(
      await gatewayFetch(
        new Request(call.url, {
          method: call.method,
          headers: {
            authorization: call.authorization,
            ...(call.body ? { 'content-type': 'application/json' } : {}),
          },
          body: call.body || undefined,
        }),
      ),
    );
    const runs = executes.count - before;
    const input = route.input(route.id ?? '', call.body ? (JSON.parse(call.body) as object) : {});
    const token = call.authorization.replace(/^Bearer /, '');
    const bot = await medplumCall(
      baseUrl,
      token,
      'POST',
      `fhir/R4/Bot/$execute?identifier=${encodeURIComponent(`${SYSTEMS.bots}|${route.bot}`)}`,
      { body: input },
    );
    const { ok: _ok, created: _created, ...botAnswer } = (bot.body ?? {}) as Record<string, unknown>;
    const refusal = (bot.body as { ok?: boolean; error?: BotError } | undefined)?.error;
    if (bot.status === 200 && botAnswer.error !== undefined && refusal) {
      // The state moved on so that the call repeats no finished work (a segment start once the journey's
      // visit is fulfilled): the bot refuses it now, and the gateway must answer that refusal (it asks the bot).
      const error = errorOf(again);
      const { requestId: _requestId, ...details } = error.details ?? {};
      const sameRefusal =
        again.status === refusal.status &&
        error.code === refusal.code &&
        error.message === refusal.message &&
        canonicalJson(details) === canonicalJson(refusal.details ?? {});
      row(
        `repeat: ${call.method} ${path.replace(/[0-9a-f-]{36}/g, '{id}')} again, once the state moved on (the bot refuses it now): the gateway answers the bot's refusal`,
        sameRefusal ? 'ok' : 'FAILED',
        `${again.status} ${error.code ?? ''} "${error.message ?? ''}" ${JSON.stringify(details)}, ${runs} bot run${runs === 1 ? '' : 's'}; the bot's own answer now ${sameRefusal ? 'the same refusal' : `differs: ${bot.text.slice(0, 200)} vs ${again.text.slice(0, 200)}`}`,
      );
      continue;
    }
    const same = canonicalJson(again.body) === canonicalJson(botAnswer);
    const step = `repeat: ${call.method} ${path.replace(/[0-9a-f-]{36}/g, '{id}')} again, answered by the gateway from her reads`;
    row(
      step,
      again.status === 200 && runs === 0 && same ? 'ok' : 'FAILED',
      `${again.status}, ${runs} bot run${runs === 1 ? '' : 's'}; the bot's own answer now ${same ? 'the same' : `differs: ${bot.text.slice(0, 200)} vs ${again.text.slice(0, 200)}`}`,
    );
  }
}

/** The gateway instances of the lane, in their round-robin order. */
export const GATEWAY_NAMES = ['A', 'B'] as const;

/** One gateway instance of the lane: its own `createApp`, a fetch that calls it, its own bot-run count. */
export interface GatewayInstance {
  name: string;
  fetch: typeof fetch;
  /** Its `Bot/$execute` calls to Medplum. */
  executes: { count: number };
}

/**
 * A gateway instance as a process runs one: `createApp` with these settings over Medplum at `baseUrl`.
 * Nothing is shared with another instance but Medplum itself (no module-level state in src/app.ts or
 * src/medplum/: each instance has its own catalog cache, admission counters and token verifier). Its
 * `Bot/$execute` calls are counted on it and in `total`.
 */
export function gatewayInstance(
  name: string,
  baseUrl: string,
  total: { count: number },
  deps: Omit<AppDeps, 'medplum'>,
): GatewayInstance {
  const executes = { count: 0 };
  const app = createApp({
    ...deps,
    medplum: {
      baseUrl,
      fetch: ((input: RequestInfo | URL, init?: RequestInit) => {
        if ((input instanceof Request ? input.url : input.toString()).includes('/Bot/$execute')) {
          executes.count++;
          total.count++;
        }
        return fetch(input, init);
      }) as typeof fetch,
    },
  });
  return {
    name,
    executes,
    fetch: ((input: RequestInfo | URL, init?: RequestInit) => app.fetch(new Request(input, init))) as typeof fetch,
  };
}

/** A call made through the lane's round robin: the instance that served it, and what it answered. */
export interface ServedCall {
  instance: string;
  method: string;
  path: string;
  status: number;
}

export const N_GATEWAYS = 'N gateways';

export const N_GATEWAYS_REPEATS_STEP = `${N_GATEWAYS} (a): the repeats of her finished work were served alternately by instances A and B too (each by the other instance than the one before)`;

/** How calls were shared: per instance, its count and statuses (`A 23 (200 x15, 201 x8)`). */
export function servedBy(calls: ServedCall[], instances: GatewayInstance[]): string {
  return instances
    .map((instance) => {
      const mine = calls.filter((c) => c.instance === instance.name);
      const statuses = new Map<number, number>();
      for (const c of mine) {
        statuses.set(c.status, (statuses.get(c.status) ?? 0) + 1);
      }
      const histogram = [...statuses.entries()]
        .sort(([a], [b]) => a - b)
        .map(([status, n]) => `${status} x${n}`)
        .join(', ');
      return `${instance.name} ${mine.length}${histogram ? ` (${histogram})` : ''}`;
    })
    .join('; ');
}

/** Calls shared alike: every instance served some, counts within one of each other, and each call by the other instance than the one before. */
export function sharedAlike(calls: ServedCall[], instances: GatewayInstance[]): { good: boolean; why: string } {
  const counts = instances.map((instance) => calls.filter((c) => c.instance === instance.name).length);
  const alternate = calls.findIndex((c, i) => i > 0 && c.instance === calls[i - 1].instance);
  const spread = Math.max(...counts) - Math.min(...counts);
  const good = counts.every((n) => n > 0) && spread <= 1 && alternate === -1;
  const why =
    alternate === -1
      ? 'each call served by the other instance than the one before'
      : `calls ${alternate} and ${alternate + 1} both served by ${calls[alternate].instance} (${calls[alternate].method} ${calls[alternate].path})`;
  return { good, why: `${why}; counts differ by ${spread}` };
}

/**
 * N gateways (a): the journey's patient calls (and the lane's probe of her order, made in the journey)
 * were served alternately by the two instances, and the journey, which checks every answer (it throws on
 * an unexpected one), went through.
 */
export function nGatewaysJourney(
  calls: ServedCall[],
  instances: GatewayInstance[],
  journeyError: unknown,
  steps: number,
): void {
  const { good, why } = sharedAlike(calls, instances);
  row(
    `${N_GATEWAYS} (a): the journey's patient calls through the gateway (with the lane's probe of her order made within it: her GET /v1/tasks and a decision it expects refused, 422) were served alternately by two gateway instances (A and B: two createApp over this Medplum, each with its own caches, admission counters and token-key cache), every instance some, the counts within one, every answer as the journey expected`,
    good && journeyError === undefined ? 'ok' : 'FAILED',
    `${calls.length} calls: ${servedBy(calls, instances)}; ${why}; ${journeyError === undefined ? `the journey checked each answer and went through its ${steps} steps` : `the journey stopped at step ${steps}: ${message(journeyError)}`}; the instances in call order: ${calls.map((c) => c.instance).join('')}`,
  );
}

/** N gateways (a), the repeats: the `repeat:` rows' gateway calls were alternately served too. */
export function nGatewaysRepeats(calls: ServedCall[], instances: GatewayInstance[]): void {
  const { good, why } = sharedAlike(calls, instances);
  row(
    N_GATEWAYS_REPEATS_STEP,
    good ? 'ok' : 'FAILED',
    `${calls.length} calls: ${servedBy(calls, instances)}; ${why}; the instances in call order: ${calls.map((c) => c.instance).join('')}`,
  );
}

/** A gateway answer's body without its request ids (each call has its own). */
export function withoutRequestIds(value: unknown): unknown {
  if (Array.isArray(value)) {
    return value.map(withoutRequestIds);
  }
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([key]) => key !== 'requestId')
        .map(([key, inner]) => [key, withoutRequestIds(inner)]),
    );
  }
  return value;
}

/**
 * N gateways (b): the journey's finished workflow calls (task completions, the order's decisions, the
 * assessment start, the booking, the reschedule) made again through instance A and then through instance
 * B: the same answer (status and body but request ids), 200, and neither instance made a `Bot/$execute`
 * (each answered the repeat from her own reads, src/medplum/finished-work.ts). The segment start is left
 * out: once her visit is fulfilled the bot refuses it, and the gateway asks the bot for that refusal.
 */
export async function acrossInstances(made: MadeCall[], instances: GatewayInstance[]): Promise<void> {
  const seen = new Set<string>();
  let index = 0;
  for (const call of made) {
    const key = `${call.method} ${call.url} ${call.body}`;
    const path = new URL(call.url).pathname;
    if (seen.has(key) || !repeatableOf(call.method, path) || /\/encounter$/.test(path)) {
      continue;
    }
    seen.add(key);
    index++;
    const template = path.replace(/[0-9a-f-]{36}/g, '{id}');
    const step = `${N_GATEWAYS} (b): the journey's finished call ${index}, ${call.method} ${template}, again through instance A and through instance B: 200 from each, the same answer (status and body but request ids), no Bot/$execute by either`;
    try {
      const answers: { instance: string; answer: Answer; runs: number }[] = [];
      for (const instance of instances) {
        const before = instance.executes.count;
        const answer = await answerOf(
          await instance.fetch(
            new Request(call.url, {
              method: call.method,
              headers: {
                authorization: call.authorization,
                ...(call.body ? { 'content-type': 'application/json' } : {}),
              },
              body: call.body || undefined,
            }),
          ),
        );
        answers.push({ instance: instance.name, answer, runs: instance.executes.count - before });
      }
      const bodies = answers.map((a) => canonicalJson(withoutRequestIds(a.answer.body)));
      const same =
        bodies.every((b) => b === bodies[0]) && answers.every((a) => a.answer.status === answers[0].answer.status);
      const good = same && answers.every((a) => a.answer.status === 200 && a.runs === 0);
      row(
        step,
        good ? 'ok' : 'FAILED',
        `${answers.map((a) => `${a.instance}: ${gatewayDescribe(a.answer)}, ${a.runs} bot run${a.runs === 1 ? '' : 's'}`).join('; ')}; ${same ? `the same answer (${bodies[0].length} characters: ${bodies[0].slice(0, 160)}${bodies[0].length > 160 ? '…' : ''})` : `answers differ: ${answers.map((a) => `${a.instance} ${a.answer.text.slice(0, 200)}`).join(' vs ')}`}`,
      );
    } catch (err) {
      row(step, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  if (index === 0) {
    row(
      `${N_GATEWAYS} (b): her finished workflow calls again`,
      'FAILED',
      'the journey made no repeatable workflow call',
    );
  }
}
