import { MedplumClient } from '@medplum/core';
import { describe, expect, it } from 'vitest';
import { applyDefinition, OLDEST_SUPPORTED_MEDPLUM } from '../../src/provision/apply';
import { demoDefinition } from '../../src/provision/demo';

/**
 * Provisioning refuses a Medplum release older than the oldest supported (5.1.24: Binary securityContext
 * checked on reads since 5.1.18, AuditEvents kept without leaking since 5.1.24), before it writes anything.
 * The remote Medplum is a fetch that answers `/healthcheck` as packages/server/src/healthcheck.ts does, and
 * records every other call.
 */
function remoteMedplum(version: string) {
  const calls: string[] = [];
  const fetchImpl = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = new URL(String(input));
    calls.push(`${init?.method ?? 'GET'} ${url.pathname}`);
    if (url.pathname === '/healthcheck') {
      return Response.json({ ok: true, version, postgres: true, redis: true });
    }
    return Response.json(
      { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'forbidden' }] },
      { status: 403 },
    );
  }) as typeof fetch;
  const medplum = new MedplumClient({ baseUrl: 'https://medplum.example/', fetch: fetchImpl, cacheTime: 0 });
  medplum.setAccessToken('a-project-admin-token');
  return { medplum, calls };
}

const provision = (medplum: MedplumClient) =>
  applyDefinition(medplum, demoDefinition(), { bundles: {}, edgeStatementKey: 'k'.repeat(64) });

describe('the Medplum releases provisioning accepts', () => {
  it('refuses 5.0.10 and 5.1.23 by name, saying why, after one look at /healthcheck', async () => {
    for (const version of ['5.0.10-e9bc9bcf4', '5.1.23-abc1234']) {
      const { medplum, calls } = remoteMedplum(version);
      const refusal = provision(medplum);
      await expect(refusal).rejects.toThrow(`Medplum ${version} is older than ${OLDEST_SUPPORTED_MEDPLUM}`);
      await expect(refusal).rejects.toThrow(/securityContext.*AuditEvents.*Nothing was written/s);
      expect(calls).toEqual(['GET /healthcheck']);
    }
  });

  it('goes on for 5.1.24, 5.1.29 and later (here to the next call, which the fake refuses)', async () => {
    for (const version of ['5.1.24-0000000', '5.1.29-f5d2946', '5.2.13']) {
      const { medplum, calls } = remoteMedplum(version);
      await expect(provision(medplum)).rejects.not.toThrow(/older than/);
      expect(calls[0]).toBe('GET /healthcheck');
      expect(calls.length).toBeGreaterThan(1);
    }
  });
});
