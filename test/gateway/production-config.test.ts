import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config';
import worker from '../../src/worker';

/**
 * A gateway over a real Medplum does not serve without what production needs: its edge-statement key
 * first (without it every agreement's clickwrap proof would silently lack her address and app). The
 * embedded default still starts with nothing set.
 */
describe('production settings', () => {
  const remote = { MEDPLUM_REMOTE_BASE_URL: 'https://medplum.example/', PROJECT_ID: 'p1' };

  it('on Node: over a remote Medplum, no EDGE_STATEMENT_KEY refuses to start, naming it; with it, it starts', () => {
    expect(() => loadConfig(remote)).toThrow(/EDGE_STATEMENT_KEY is required over a remote Medplum/);
    expect(() => loadConfig({ MEDPLUM_REMOTE_BASE_URL: 'https://medplum.example/' })).toThrow(/PROJECT_ID/);
    // Its own client too, with which it checks the key is the Project's (test/gateway/edge-key.test.ts).
    expect(() => loadConfig({ ...remote, EDGE_STATEMENT_KEY: 'k'.repeat(32) })).toThrow(
      /GATEWAY_CLIENT_ID and GATEWAY_CLIENT_SECRET are required over a remote Medplum/,
    );
    expect(() => loadConfig({ ...remote, EDGE_STATEMENT_KEY: 'k'.repeat(32), GATEWAY_CLIENT_ID: 'c' })).toThrow(
      /GATEWAY_CLIENT_SECRET/,
    );
    const client = { GATEWAY_CLIENT_ID: 'c', GATEWAY_CLIENT_SECRET: 's' };
    expect(loadConfig({ ...remote, EDGE_STATEMENT_KEY: 'k'.repeat(32), ...client }).remote).toMatchObject({
      baseUrl: 'https://medplum.example/',
      projectId: 'p1',
      gatewayClient: { clientId: 'c', clientSecret: 's' },
    });
    expect(loadConfig({}).remote).toBeUndefined();
  });

  it('as a Worker: every request is refused with a 500 naming the setting (never a secret), before anything is read', async () => {
    let fetched = 0;
    const original = globalThis.fetch;
    globalThis.fetch = (async () => {
      fetched++;
      return new Response('{}');
    }) as typeof fetch;
    try {
      const response = await worker.fetch(new Request('https://api.example/v1/patient/profile'), {
        MEDPLUM_BASE_URL: 'https://medplum.example/',
        PROJECT_ID: 'p1',
      } as Parameters<typeof worker.fetch>[1]);
      expect(response.status).toBe(500);
      const body = (await response.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('internal');
      expect(body.error.message).toContain('EDGE_STATEMENT_KEY');
      // With the key but without its own client: the same, naming the client.
      const clientless = await worker.fetch(new Request('https://api.example/v1/patient/profile'), {
        MEDPLUM_BASE_URL: 'https://medplum.example/',
        PROJECT_ID: 'p1',
        EDGE_STATEMENT_KEY: 'k'.repeat(32),
      } as Parameters<typeof worker.fetch>[1]);
      expect(clientless.status).toBe(500);
      expect(((await clientless.json()) as { error: { message: string } }).error.message).toContain(
        'GATEWAY_CLIENT_ID and GATEWAY_CLIENT_SECRET are required',
      );
      expect(fetched).toBe(0);
    } finally {
      globalThis.fetch = original;
    }
  });
});
