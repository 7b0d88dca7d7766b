import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Patient, ProjectMembership } from '@medplum/fhirtypes';
import { afterAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import { launchEmbeddedMedplum } from '../../src/embedded/launch';
import { demoDefinition } from '../../src/provision/demo';

/**
 * A restart on the same store after a demo patient's own writes: a PUT of her Patient without `meta`
 * drops the provisioning tag (Medplum stores the resource as sent), yet the next start finds her by
 * her demo identifier (read-only to patients), makes no second Patient, and her login still names her.
 */
const dir = mkdtempSync(join(tmpdir(), 'pc-restart-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('provisioning across restarts', () => {
  it('a patient’s PUT without meta loses or duplicates nothing on the next start', async () => {
    const dbPath = join(dir, 'store.sqlite');
    const alices = async (medplum: Awaited<ReturnType<typeof launchEmbeddedMedplum>>) =>
      medplum.admin.searchResources('Patient', { identifier: `${SYSTEMS.demoPatient}|alice` }, { cache: 'no-cache' });

    const first = await launchEmbeddedMedplum({ dbPath, definition: demoDefinition() });
    const [alice] = await alices(first);
    const membership = (await first.admin.searchOne('ProjectMembership', {
      profile: `Patient/${alice.id}`,
    })) as ProjectMembership;
    const own = await first.clientFor(membership);
    const { meta: _dropped, ...withoutMeta } = await own.readResource('Patient', alice.id as string);
    const written = await own.updateResource({ ...withoutMeta, birthDate: alice.birthDate } as Patient);
    expect(written.meta?.tag?.some((t) => t.system === SYSTEMS.provisioning) ?? false).toBe(false);
    first.close();

    const second = await launchEmbeddedMedplum({ dbPath, definition: demoDefinition() });
    try {
      const after = await alices(second);
      expect(after.map((p) => p.id)).toEqual([alice.id]);
      expect(after[0].meta?.tag?.some((t) => t.system === SYSTEMS.provisioning)).toBe(true);
      const memberships = await second.admin.searchResources(
        'ProjectMembership',
        { profile: `Patient/${alice.id}` },
        { cache: 'no-cache' },
      );
      expect(memberships.map((m) => m.id)).toEqual([membership.id]);
      expect(await second.admin.searchResources('Patient', { name: alice.name?.[0]?.family ?? '' })).toHaveLength(1);
    } finally {
      second.close();
    }
  });
});
