import type { Basic, Extension } from '@medplum/fhirtypes';
import type { Context, MiddlewareHandler } from 'hono';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import type { AppEnv } from '../app-env';
import { ApiError } from '../errors';
import { medplumOf } from '../medplum/client';

/** A key: 1 to 255 visible ASCII characters (draft-ietf-httpapi-idempotency-key-header: a string). */
const KEY = /^[\x21-\x7e]{1,255}$/;
/** How long a key answers its first answer again. */
export const KEY_LIFETIME_MS = 24 * 3600_000;
/** A call holding a key longer than this without an answer is taken to have died; the key is taken over. */
const HOLD_MS = 60_000;

const sha256 = async (bytes: Uint8Array<ArrayBuffer>): Promise<string> =>
  [...new Uint8Array(await crypto.subtle.digest('SHA-256', bytes))]
    .map((b) => b.toString(16).padStart(2, '0'))
    .join('');
const text = (value: string): Uint8Array<ArrayBuffer> => new TextEncoder().encode(value) as Uint8Array<ArrayBuffer>;
const ext = (record: Basic, url: string) => record.extension?.find((e) => e.url === url)?.valueString;

interface Answer {
  status: number;
  contentType: string;
  body: string;
}

/**
 * `Idempotency-Key` on every POST of `/v1` (draft-ietf-httpapi-idempotency-key-header): the same key with
 * the same request (method, path, query string, Content-Type and body) within 24 hours answers the first answer again, status and
 * body (`Idempotent-Replayed: true`), without doing anything; the key with another request is 422
 * `idempotency_key_reused`; while the first call is still running, 409 `request_in_progress`. Keys are
 * hers alone: each is a record of her own in Medplum (a Basic in her compartment, written with her
 * token), so every gateway instance honours it and nobody else's key can collide with hers. A call that
 * ends in a server failure or a rate limit (5xx, 429) keeps no answer: the same key may be tried again.
 * Without the header nothing changes. The record is about her own calls only (a patient writing one
 * directly on Medplum affects what the gateway replays to her, never anyone else).
 *
 * The answer is kept before it is sent (issue 51 item 5): a retry sent after the first answer arrived, at
 * any instance, always finds it and answers it again; 409 `request_in_progress` means the first call has not
 * been answered yet. It costs a keyed POST one write more before its answer (about 10 ms on a real Medplum).
 * If keeping it fails, the answer is still sent, and the key answers 409 until its hold lapses.
 */
/**
 * What of a request besides its body its answer depends on, as the fingerprint's first line: the method,
 * the path, the query string (its parameters in a canonical order: `?a=1&b=2` is `?b=2&a=1`) and the
 * Content-Type (lower case, without spaces: `Application/JSON; charset=utf-8` is
 * `application/json;charset=utf-8`). The same bytes as another file name or another media type are
 * another request.
 */
export function requestHead(method: string, url: string, contentType: string | undefined): string {
  const { pathname, searchParams } = new URL(url);
  const query = [...searchParams].sort(([a, x], [b, y]) => (a === b ? (x < y ? -1 : x > y ? 1 : 0) : a < b ? -1 : 1));
  const search = new URLSearchParams(query).toString();
  const type = (contentType ?? '').toLowerCase().replace(/\s+/g, '');
  return `${method} ${pathname}${search ? `?${search}` : ''}\n${type}\n`;
}

/**
 * Where her keys are kept: her own Basic records in Medplum, written with her token (`medplumKeys`); a test
 * gives another (test/gateway/idempotency-rules.test.ts). Each call is one of Medplum's, with its answers.
 */
export interface KeyStore {
  /** Her record of the key: the one she had, or `fresh` (one wins a race of two; the loser's 409 is thrown). */
  claim(fresh: Basic, keyId: string, her: string): Promise<Basic>;
  /** `record` rewritten as `fresh` under If-Match: thrown when it changed meanwhile. */
  replace(record: Basic, fresh: Basic): Promise<Basic>;
  /** The first answer kept in `record`, under If-Match. */
  keep(record: Basic, answer: string): Promise<unknown>;
  /** The record gone: the key may be tried again. */
  release(record: Basic): Promise<unknown>;
}

/** Her keys in Medplum, with her own token. */
export const medplumKeys = (c: Context<AppEnv>): KeyStore => {
  const medplum = medplumOf(c);
  return {
    claim: (fresh, keyId, her) =>
      medplum.createResourceIfNoneExist<Basic>(
        fresh,
        `identifier=${encodeURIComponent(`${SYSTEMS.idempotency}|${keyId}`)}&subject=${encodeURIComponent(her)}`,
      ),
    replace: (record, fresh) =>
      medplum.updateResource<Basic>(
        { ...fresh, id: record.id, meta: record.meta },
        { headers: { 'If-Match': `W/"${record.meta?.versionId}"` } },
      ),
    keep: (record, answer) =>
      medplum.updateResource<Basic>(
        {
          ...record,
          extension: [
            ...(record.extension ?? []).filter((e) => e.url !== EXTENSIONS.idempotencyAnswer),
            { url: EXTENSIONS.idempotencyAnswer, valueString: answer } as Extension,
          ],
        },
        { headers: { 'If-Match': `W/"${record.meta?.versionId}"` } },
      ),
    release: (record) => medplum.deleteResource('Basic', record.id as string),
  };
};

export function idempotency(keysOf: (c: Context<AppEnv>) => KeyStore = medplumKeys): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const key = c.req.header('idempotency-key');
    const session = c.get('session');
    if (c.req.method !== 'POST' || key === undefined || !session) {
      return next();
    }
    if (!KEY.test(key)) {
      throw new ApiError('invalid_request', 'Idempotency-Key must be 1 to 255 visible ASCII characters', {
        header: 'Idempotency-Key',
      });
    }
    const keys = keysOf(c);
    const her = `Patient/${session.patientId}`;
    // A JSON body was read already (the frame checks it; Hono keeps it); an upload's stream is the route's
    // to read, so a copy of it is hashed here.
    const head = text(requestHead(c.req.method, c.req.url, c.req.header('content-type')));
    const body = new Uint8Array(await (c.req.raw.bodyUsed ? c.req.arrayBuffer() : c.req.raw.clone().arrayBuffer()));
    const whole = new Uint8Array(head.length + body.length);
    whole.set(head);
    whole.set(body, head.length);
    const request = await sha256(whole);
    const keyId = await sha256(text(key));
    const holder = crypto.randomUUID();
    const fresh: Basic = {
      resourceType: 'Basic',
      code: { coding: [{ system: SYSTEMS.idempotency, code: 'request' }] },
      subject: { reference: her },
      identifier: [{ system: SYSTEMS.idempotency, value: keyId }],
      created: new Date().toISOString().slice(0, 10),
      extension: [
        { url: EXTENSIONS.idempotencyRequest, valueString: request },
        { url: EXTENSIONS.idempotencyHolder, valueString: holder },
      ],
    };
    let record = await claim(keys, fresh, keyId, her);
    if (ext(record, EXTENSIONS.idempotencyHolder) !== holder) {
      const age = Date.now() - Date.parse(record.meta?.lastUpdated ?? '');
      const answer = ext(record, EXTENSIONS.idempotencyAnswer);
      if (age > KEY_LIFETIME_MS || (!answer && age > HOLD_MS)) {
        // Expired, or held by a call that died: hers to use again, taken over under If-Match.
        record = await takeOver(keys, record, fresh);
      } else if (ext(record, EXTENSIONS.idempotencyRequest) !== request) {
        throw new ApiError(
          'idempotency_key_reused',
          'This Idempotency-Key was used with another request; use a new key for a new request',
          { header: 'Idempotency-Key' },
        );
      } else if (!answer) {
        throw inProgress();
      } else {
        const first = JSON.parse(answer) as Answer;
        return c.body(first.body, first.status as 200, {
          'content-type': first.contentType,
          'idempotent-replayed': 'true',
        });
      }
    }
    await next();
    const status = c.res.status;
    try {
      if (status >= 500 || status === 429) {
        // Nothing to answer again: the same key may be tried again.
        await keys.release(record);
      } else {
        const answer: Answer = {
          status,
          contentType: c.res.headers.get('content-type') ?? 'application/json',
          body: await c.res.clone().text(),
        };
        await keys.keep(record, JSON.stringify(answer));
      }
    } catch {
      // The answer stands; the key then answers 409 until its hold lapses, and then runs again.
    }
  };
}

const inProgress = () =>
  new ApiError(
    'request_in_progress',
    'A request with this Idempotency-Key is still in progress; try again shortly',
    { header: 'Idempotency-Key', retryAfter: 1 },
    { 'Retry-After': '1' },
  );

/** Her record of the key: the one she had, or this new one (a conditional create: one wins a race). */
async function claim(keys: KeyStore, fresh: Basic, keyId: string, her: string): Promise<Basic> {
  try {
    return await keys.claim(fresh, keyId, her);
  } catch (err) {
    // Two calls with one key at once: Medplum answers the loser's conditional create 409.
    if ((err as { outcome?: { issue?: { code?: string }[] } }).outcome?.issue?.some((i) => i.code === 'conflict')) {
      throw inProgress();
    }
    throw err;
  }
}

async function takeOver(keys: KeyStore, record: Basic, fresh: Basic): Promise<Basic> {
  try {
    return await keys.replace(record, fresh);
  } catch {
    throw inProgress();
  }
}
