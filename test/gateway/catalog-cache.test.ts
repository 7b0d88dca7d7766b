import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CATALOG } from '../../contracts/systems';
import { createCatalogCache } from '../../src/medplum/catalog-cache';
import { startTestGateway, type TestGateway } from '../support/gateway';

/** Short-lived copies of a tenant's published catalog (src/medplum/catalog-cache.ts, issue 27). */
describe('the catalog cache', () => {
  it('serves a copy for its time, shares one read between concurrent calls, keeps no failure, holds a bounded number', async () => {
    let now = 0;
    let reads = 0;
    const cache = createCatalogCache({ ttlMs: 1_000, maxEntries: 2, clock: () => new Date(now) });
    const load = (value: string) => () => {
      reads++;
      return Promise.resolve(value);
    };
    expect(await Promise.all([cache.get('a', load('a1')), cache.get('a', load('a2'))])).toEqual(['a1', 'a1']);
    expect(reads).toBe(1);
    now = 999;
    expect(await cache.get('a', load('a3'))).toBe('a1');
    now = 1_000;
    expect(await cache.get('a', load('a4'))).toBe('a4');
    await expect(cache.get('b', () => Promise.reject(new Error('429')))).rejects.toThrow('429');
    expect(await cache.get('b', load('b1'))).toBe('b1');
    await cache.get('c', load('c1'));
    reads = 0;
    expect(await cache.get('a', load('a5'))).toBe('a5'); // 'a' was the oldest of three: dropped
    expect(reads).toBe(1);
    const never = createCatalogCache({ ttlMs: 0 });
    expect(await never.get('a', load('x'))).toBe('x');
    expect(await never.get('a', load('y'))).toBe('y');
  });
});

describe('requirements from the cache, per tenant', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway();
  });
  afterAll(() => gw?.close());

  it('a Southridge patient’s read never answers a Northwind patient (and back), one after the other within the copy’s time', async () => {
    const unmet = async (who: 'carol' | 'bob' | 'dave' | 'alice') =>
      (
        (await gw.call('GET', '/v1/agreements/requirements', { token: gw.backend.patients[who].token })).body as {
          unmet: { url: string }[];
        }
      ).unmet.map((u) => u.url);
    expect(await unmet('carol')).not.toContainEqual(expect.stringContaining('/northwind/'));
    expect(await unmet('bob')).toEqual(
      expect.arrayContaining([
        'https://patient-care.example/agreements/northwind/terms',
        'https://patient-care.example/agreements/northwind/privacy',
      ]),
    );
    expect(await unmet('dave')).not.toContainEqual(expect.stringContaining('/northwind/'));
  });

  it('a service of one tenant, read for its patient, is still not found for the other tenant’s, whatever was read before', async () => {
    const services = await gw.backend.admin.searchResources('HealthcareService', {
      _tag: `${CATALOG.system}|${CATALOG.tenant}`,
    });
    const northwindOnly = services.find((s) =>
      s.meta?.accounts?.some((a) => a.reference === gw.backend.patients.bob.patient.managingOrganization?.reference),
    );
    expect(northwindOnly).toBeDefined();
    const ask = (who: 'bob' | 'carol') =>
      gw.call(
        'GET',
        `/v1/agreements/requirements?healthcareService=${encodeURIComponent(`HealthcareService/${northwindOnly?.id}`)}`,
        { token: gw.backend.patients[who].token },
      );
    expect((await ask('bob')).status).toBe(200);
    expect((await ask('carol')).status).toBe(404);
    expect((await ask('bob')).status).toBe(200);
  });
});
