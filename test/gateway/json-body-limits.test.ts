import { OpenAPIHono } from '@hono/zod-openapi';
import { describe, expect, it } from 'vitest';
import type { AppEnv } from '../../src/app-env';
import { guardJsonBody } from '../../src/edge/json-body';
import { ApiError } from '../../src/errors';
import { MAX_JSON_DEPTH, nestedDeeperThan } from '../../src/shared/json-depth';

/**
 * The JSON body guard at its edges (src/edge/json-body.ts, src/shared/json-depth.ts): exactly
 * MAX_JSON_DEPTH levels pass and one more is refused, whatever nests (objects, arrays, both); only JSON
 * media types are read; what passes reaches the route as sent. The gateway-wide behaviour (nothing
 * written, every plane) is test/gateway/json-body.test.ts.
 */
function guarded(skipped: string[] = []) {
  const app = new OpenAPIHono<AppEnv>();
  app.use(
    '*',
    guardJsonBody((path) => skipped.includes(path)),
  );
  app.all('*', async (c) => c.json({ text: await c.req.text() }));
  app.onError((err) =>
    err instanceof ApiError
      ? Response.json({ code: err.code, message: err.message, details: err.details }, { status: err.status })
      : new Response(null, { status: 500 }),
  );
  return async (body: BodyInit, init: { method?: string; type?: string; path?: string } = {}) => {
    const res = await app.request(`http://gateway.test${init.path ?? '/v1/x'}`, {
      method: init.method ?? 'POST',
      headers: { 'content-type': init.type ?? 'application/json' },
      body,
    });
    return { status: res.status, body: (await res.json()) as { text?: string; message?: string; details?: unknown } };
  };
}

const objects = (levels: number) => `${'{"a":'.repeat(levels)}"x"${'}'.repeat(levels)}`;
const arrays = (levels: number) => `${'['.repeat(levels)}1${']'.repeat(levels)}`;
/** Objects and arrays in turn, `levels` in all, the deepest holding an empty object. */
const mixed = (levels: number) => {
  let text = '{}';
  for (let level = 1; level < levels; level++) {
    text = level % 2 ? `[0,${text}]` : `{"n":null,"b":${text}}`;
  }
  return text;
};

describe('JSON nesting limit', () => {
  it(`is ${MAX_JSON_DEPTH} levels`, () => {
    expect(MAX_JSON_DEPTH).toBe(100);
  });

  for (const [shape, build] of [
    ['objects', objects],
    ['arrays', arrays],
    ['objects and arrays', mixed],
  ] as const) {
    it(`${shape}: ${MAX_JSON_DEPTH} levels pass, ${MAX_JSON_DEPTH + 1} are refused`, async () => {
      expect(nestedDeeperThan(JSON.parse(build(MAX_JSON_DEPTH)), MAX_JSON_DEPTH)).toBe(false);
      expect(nestedDeeperThan(JSON.parse(build(MAX_JSON_DEPTH + 1)), MAX_JSON_DEPTH)).toBe(true);
      const send = guarded();
      const at = await send(build(MAX_JSON_DEPTH));
      expect(at).toEqual({ status: 200, body: { text: build(MAX_JSON_DEPTH) } });
      const over = await send(build(MAX_JSON_DEPTH + 1));
      expect(over).toEqual({
        status: 400,
        body: {
          code: 'invalid_request',
          message: 'The body nests deeper than 100 levels',
          details: { issues: [{ path: '', message: 'nested deeper than 100 levels' }] },
        },
      });
    });
  }

  it('counts the deepest branch, not the first, the last or the widest', () => {
    const wide = (deep: string) => `[${'{},'.repeat(50)}${deep},${'[],'.repeat(50)}1]`;
    expect(nestedDeeperThan(JSON.parse(wide(objects(3))), 4)).toBe(false);
    expect(nestedDeeperThan(JSON.parse(wide(objects(4))), 4)).toBe(true);
    expect(nestedDeeperThan(JSON.parse(`{"a":${objects(1)},"b":${arrays(4)},"c":"x"}`), 4)).toBe(true);
    expect(nestedDeeperThan(JSON.parse(`{"a":${objects(1)},"b":${arrays(3)},"c":"x"}`), 4)).toBe(false);
    // Values that are not containers add no level.
    expect(nestedDeeperThan('text', 0)).toBe(false);
    expect(nestedDeeperThan(null, 0)).toBe(false);
    expect(nestedDeeperThan({ a: null, b: 1, c: 'x', d: true }, 1)).toBe(false);
    expect(nestedDeeperThan([null, [null]], 1)).toBe(true);
  });
});

describe('which bodies are read', () => {
  it('every JSON media type, parameters and case aside', async () => {
    const send = guarded();
    for (const type of [
      'application/json',
      'application/fhir+json',
      'application/json-patch+json',
      'Application/JSON; charset=utf-8',
      ' application/json ;charset=UTF-8',
    ]) {
      expect((await send(objects(MAX_JSON_DEPTH + 1), { type })).status, type).toBe(400);
    }
  });

  it('other media types, GET and HEAD, and the paths that read their own bodies are left to their route', async () => {
    const send = guarded(['/v1/documents']);
    const deep = objects(MAX_JSON_DEPTH + 1);
    for (const type of ['text/plain', 'application/jsonl', 'text/x-application/json', 'application/xml+json+x']) {
      expect(await send(deep, { type }), type).toEqual({ status: 200, body: { text: deep } });
    }
    expect((await send(deep, { path: '/v1/documents' })).status).toBe(200);
    expect((await send(deep, { path: '/v1/documents/x' })).status).toBe(400);
    expect((await send(deep, { method: 'PUT' })).status).toBe(400);
    expect((await send(deep, { method: 'PATCH' })).status).toBe(400);
  });

  it('a body without a media type is left to its route', async () => {
    const app = new OpenAPIHono<AppEnv>();
    app.use(
      '*',
      guardJsonBody(() => false),
    );
    app.post('*', async (c) => c.text(await c.req.text()));
    const deep = new TextEncoder().encode(objects(MAX_JSON_DEPTH + 1));
    const res = await app.request('http://gateway.test/v1/x', { method: 'POST', body: deep });
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect({ status: res.status, text: await res.text() }).toEqual({ status: 200, text: objects(MAX_JSON_DEPTH + 1) });
  });

  it('malformed JSON reaches the route as sent (its validation answers); a stray byte is refused', async () => {
    const send = guarded();
    expect(await send('{"a": [1, 2')).toEqual({ status: 200, body: { text: '{"a": [1, 2' } });
    expect(await send('{"name":"Zoë ✓"}')).toEqual({ status: 200, body: { text: '{"name":"Zoë ✓"}' } });
    const stray = new Uint8Array([...new TextEncoder().encode('{"name":"'), 0xc3, 0x28, 0x22, 0x7d]);
    expect(await send(stray)).toEqual({
      status: 400,
      body: {
        code: 'invalid_request',
        message: 'The body is not valid UTF-8',
        details: { issues: [{ path: '', message: 'not valid UTF-8' }] },
      },
    });
  });
});
