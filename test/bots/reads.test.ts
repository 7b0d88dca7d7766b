import { MedplumClient } from '@medplum/core';
import type { Patient } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import { readingOnce } from '../../bots/lib/reads';

/** bots/lib/reads.ts: one bot run asks Medplum each read once (issue 27), never past a write. */
function client(failFirst = false) {
  const asked: string[] = [];
  let failures = failFirst ? 1 : 0;
  const fetchImpl = async (url: string | URL | Request, init?: RequestInit) => {
    asked.push(`${init?.method ?? 'GET'} ${String(url).replace('http://medplum.test/fhir/R4/', '')}`);
    if (failures > 0) {
      failures--;
      return new Response(
        JSON.stringify({ resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'exception' }] }),
        {
          status: 400,
          headers: { 'content-type': 'application/fhir+json' },
        },
      );
    }
    const body = String(url).includes('?')
      ? {
          resourceType: 'Bundle',
          type: 'searchset',
          entry: [{ resource: { resourceType: 'Patient', id: 'p', gender: 'female' } }],
        }
      : { resourceType: 'Patient', id: 'p', gender: 'female' };
    return new Response(JSON.stringify(body), { headers: { 'content-type': 'application/fhir+json' } });
  };
  const medplum = new MedplumClient({
    baseUrl: 'http://medplum.test/',
    fetch: fetchImpl as typeof fetch,
    cacheTime: 0,
  });
  medplum.setAccessToken('token');
  return { medplum: readingOnce(medplum), asked };
}

describe('a run reads once', () => {
  it('the same read, by whichever call, concurrent or not, is asked once; each caller gets its own copy', async () => {
    const { medplum, asked } = client();
    const [a, b] = await Promise.all([
      medplum.readResource('Patient', 'p'),
      medplum.readReference<Patient>({ reference: 'Patient/p' }),
    ]);
    a.gender = 'male';
    expect(b.gender).toBe('female');
    expect((await medplum.readResource('Patient', 'p')).gender).toBe('female');
    await medplum.searchResources('Patient', { name: 'x' });
    await medplum.searchResources('Patient', new URLSearchParams({ name: 'x' }));
    expect(asked).toEqual(['GET Patient/p', 'GET Patient?name=x']);
  });

  it('a write forgets every read; a no-cache read is always asked; a failed read is asked again', async () => {
    const { medplum, asked } = client();
    await medplum.readResource('Patient', 'p');
    await medplum.updateResource({ resourceType: 'Patient', id: 'p' });
    await medplum.readResource('Patient', 'p');
    await medplum.readResource('Patient', 'p', { cache: 'no-cache' });
    expect(asked).toEqual(['GET Patient/p', 'PUT Patient/p', 'GET Patient/p', 'GET Patient/p']);
    const failing = client(true);
    await expect(failing.medplum.readResource('Patient', 'p')).rejects.toThrow();
    expect((await failing.medplum.readResource('Patient', 'p')).id).toBe('p');
    expect(failing.asked).toEqual(['GET Patient/p', 'GET Patient/p']);
  });
});

describe("the bot's own client on Medplum", () => {
  it("caches nothing: Medplum's vmcontext (packages/server/src/bots/vmcontext.ts) makes it without cacheTime, and outside a browser @medplum/core then keeps no read", async () => {
    const asked: string[] = [];
    const medplum = new MedplumClient({
      baseUrl: 'http://medplum.test/',
      fetch: (async (url: string) => {
        asked.push(String(url));
        return new Response(JSON.stringify({ resourceType: 'Patient', id: 'p' }), {
          headers: { 'content-type': 'application/fhir+json' },
        });
      }) as typeof fetch,
    });
    medplum.setAccessToken('token');
    await medplum.readResource('Patient', 'p');
    await medplum.readResource('Patient', 'p');
    // So the `no-cache` the bots dropped was never needed: a run's reads are readingOnce's alone.
    expect(asked).toHaveLength(2);
  });
});
