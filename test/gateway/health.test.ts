import { describe, expect, it } from 'vitest';
import { createApp, DEFAULT_LIMITS } from '../../src/app';

/** The operator's probes (docs/deploy.md): liveness never reaches Medplum; readiness asks it, sparingly. */
function appWith(medplum: (url: string) => Promise<Response>, clock = () => new Date()) {
  const calls: string[] = [];
  const app = createApp({
    medplum: {
      baseUrl: 'http://medplum.test/',
      fetch: ((input: RequestInfo | URL) => {
        const url = String(input instanceof Request ? input.url : input);
        calls.push(url);
        return medplum(url);
      }) as typeof fetch,
    },
    issuer: 'http://medplum.test/',
    projectId: 'p',
    limits: DEFAULT_LIMITS,
    clock,
  });
  return { app, calls };
}

describe('health and readiness', () => {
  it('/healthz answers without a session and without asking Medplum', async () => {
    const { app, calls } = appWith(async () => new Response('{}'));
    const res = await app.request('/healthz');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true });
    expect(calls).toEqual([]);
  });

  it("/readyz is 200 when Medplum's health check answers, 503 when it fails or is unreachable; one probe serves 5 s", async () => {
    let at = Date.UTC(2026, 10, 27, 12);
    let up = true;
    const { app, calls } = appWith(
      async () => (up ? new Response('{"ok":true}') : new Response('down', { status: 503 })),
      () => new Date(at),
    );
    const answers = await Promise.all(Array.from({ length: 10 }, () => app.request('/readyz')));
    expect(answers.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(calls).toEqual(['http://medplum.test/healthcheck']);
    up = false;
    expect((await app.request('/readyz')).status).toBe(200);
    at += 5_001;
    const down = await app.request('/readyz');
    expect(down.status).toBe(503);
    expect(down.headers.get('retry-after')).toBe('5');
    expect(((await down.json()) as { error: { code: string } }).error.code).toBe('upstream_unavailable');
    expect(calls).toHaveLength(2);

    const unreachable = appWith(async () => {
      throw new TypeError('fetch failed');
    });
    expect((await unreachable.app.request('/readyz')).status).toBe(503);
  });
});
