import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseJWTPayload, type WithId } from '@medplum/core';
import type { AccessPolicy, Bundle, Login, Project, ProjectMembership } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type Authenticator, authenticate } from '../../src/embedded/auth/authenticate';
import { CallerCache } from '../../src/embedded/auth/cache';
import { createEmbeddedMedplum } from '../../src/embedded/server';
import { startTestBackend, type TestBackend } from '../support/backend';
import { freshPatient } from '../support/patients';

/**
 * Authentication is remembered per token and per login (src/embedded/auth/cache.ts); every write to
 * what a caller was built from still takes effect on the very next call.
 */
let backend: TestBackend;
let clock = Date.now();
beforeAll(async () => {
  backend = await startTestBackend({ clock: () => new Date(clock) });
});
afterAll(() => backend?.close());

const readPatient = async (token: string, patientId: string, on = backend) =>
  (
    await on.fetch(new URL(`fhir/R4/Patient/${patientId}`, on.baseUrl), {
      headers: { authorization: `Bearer ${token}` },
    })
  ).status;

const fresh = (on = backend) => freshPatient(on, { tenant: 'northwind', state: 'CA' });
const loginOf = (token: string) => (parseJWTPayload(token) as { login_id: string }).login_id;
const AUTH_TYPES = ['Login', 'ProjectMembership', 'Project', 'AccessPolicy'];

describe('the authentication cache', () => {
  it('is used: after a login first calls, its next calls neither verify the token nor read the store', async () => {
    const patient = await fresh();
    const reads = vi.spyOn(backend.systemRepo, 'readResource');
    const verifications = vi.spyOn(crypto.subtle, 'verify');
    try {
      expect(await readPatient(patient.token, patient.patient.id)).toBe(200);
      const first = reads.mock.calls.map(([type]) => type);
      expect(verifications).toHaveBeenCalledTimes(1);
      // Login, membership, project and the patient policy: what the caller is built from.
      expect(new Set(first)).toEqual(new Set(AUTH_TYPES));
      reads.mockClear();
      verifications.mockClear();
      for (let i = 0; i < 3; i++) {
        expect(await readPatient(patient.token, patient.patient.id)).toBe(200);
      }
      expect(reads).not.toHaveBeenCalled();
      expect(verifications).not.toHaveBeenCalled();
    } finally {
      reads.mockRestore();
      verifications.mockRestore();
    }
  });

  it('logout: the next call with the token is 401', async () => {
    const patient = await fresh();
    expect(await readPatient(patient.token, patient.patient.id)).toBe(200);
    const out = await backend.fetch(new URL('oauth2/logout', backend.baseUrl), {
      method: 'POST',
      headers: { authorization: `Bearer ${patient.token}` },
    });
    expect(out.status).toBe(200);
    expect(await readPatient(patient.token, patient.patient.id)).toBe(401);
  });

  it('a Login revoked by anyone else: the next call is 401', async () => {
    const patient = await fresh();
    expect(await readPatient(patient.token, patient.patient.id)).toBe(200);
    const login = await backend.systemRepo.readResource<Login>('Login', loginOf(patient.token));
    await backend.systemRepo.updateResource<Login>({ ...login, revoked: true });
    expect(await readPatient(patient.token, patient.patient.id)).toBe(401);
  });

  it('a deactivated membership: the next call is 401; reactivated, 200 again', async () => {
    const patient = await fresh();
    expect(await readPatient(patient.token, patient.patient.id)).toBe(200);
    const membership = await backend.systemRepo.readResource<ProjectMembership>(
      'ProjectMembership',
      patient.membership.id,
    );
    await backend.systemRepo.updateResource<ProjectMembership>({ ...membership, active: false });
    expect(await readPatient(patient.token, patient.patient.id)).toBe(401);
    await backend.systemRepo.updateResource<ProjectMembership>({ ...membership, active: true });
    expect(await readPatient(patient.token, patient.patient.id)).toBe(200);
  });

  it('a deleted membership: the next call is 401', async () => {
    const patient = await fresh();
    expect(await readPatient(patient.token, patient.patient.id)).toBe(200);
    await backend.systemRepo.deleteResource('ProjectMembership', patient.membership.id);
    expect(await readPatient(patient.token, patient.patient.id)).toBe(401);
  });

  it('a membership moved to another policy, then that policy edited: each seen by the next call', async () => {
    const patient = await fresh();
    expect(await readPatient(patient.token, patient.patient.id)).toBe(200);
    const policy = await backend.systemRepo.createResource<AccessPolicy>({
      resourceType: 'AccessPolicy',
      meta: { project: backend.project.id },
      name: 'observations only',
      resource: [{ resourceType: 'Observation', readonly: true }],
    });
    const membership = await backend.systemRepo.readResource<ProjectMembership>(
      'ProjectMembership',
      patient.membership.id,
    );
    await backend.systemRepo.updateResource<ProjectMembership>({
      ...membership,
      access: [{ policy: { reference: `AccessPolicy/${policy.id}` } }],
    });
    expect(await readPatient(patient.token, patient.patient.id)).toBe(403);
    // `%patient` is substituted from the membership's profile, as it was for the original policy.
    await backend.systemRepo.updateResource<AccessPolicy>({
      ...policy,
      resource: [{ resourceType: 'Patient', criteria: 'Patient?_id=%patient.id', readonly: true }],
    });
    expect(await readPatient(patient.token, patient.patient.id)).toBe(200);
    await backend.systemRepo.updateResource<AccessPolicy>({ ...policy, resource: [] });
    expect(await readPatient(patient.token, patient.patient.id)).toBe(403);
  });

  it('a Project written: the next call sees it (transaction-bundles off: entries one by one)', async () => {
    const admin = backend.admin.getAccessToken() as string;
    const bundle: Bundle = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        { request: { method: 'POST', url: 'Basic' }, resource: { resourceType: 'Basic', code: { text: 'kept?' } } },
        { request: { method: 'GET', url: 'Patient/not-there' } },
      ],
    };
    const post = async () =>
      (
        await backend.fetch(new URL('fhir/R4/', backend.baseUrl), {
          method: 'POST',
          headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/fhir+json' },
          body: JSON.stringify(bundle),
        })
      ).status;
    const project = await backend.systemRepo.readResource<Project>('Project', backend.project.id);
    expect(await post()).not.toBe(200);
    await backend.systemRepo.updateResource<Project>({
      ...project,
      features: (project.features ?? []).filter((f) => f !== 'transaction-bundles'),
    });
    try {
      expect(await post()).toBe(200);
    } finally {
      await backend.systemRepo.updateResource<Project>(project);
    }
    expect(await post()).not.toBe(200);
  });

  it('a token past its expiry is 401 although it was remembered', async () => {
    const patient = await fresh();
    expect(await readPatient(patient.token, patient.patient.id)).toBe(200);
    const { exp } = parseJWTPayload(patient.token) as { exp: number };
    const saved = clock;
    clock = exp * 1000;
    try {
      expect(await readPatient(patient.token, patient.patient.id)).toBe(401);
    } finally {
      clock = saved;
    }
    expect(await readPatient(patient.token, patient.patient.id)).toBe(200);
  });

  it('callers are shared, so they are frozen', async () => {
    const patient = await fresh();
    const caller = await authenticate(authenticator(new CallerCache()), `Bearer ${patient.token}`);
    expect(() => {
      caller.accessPolicy?.resource?.push({ resourceType: '*' });
    }).toThrow(TypeError);
    expect(() => {
      caller.membership.admin = true;
    }).toThrow(TypeError);
  });

  it('a caller whose reads were written while it was being built is not kept', async () => {
    const patient = await fresh();
    const callers = new CallerCache();
    const deps = authenticator(callers);
    await authenticate(deps, `Bearer ${patient.token}`);
    const verified = callers.verifiedToken(patient.token, new Date(clock));
    if (!verified) {
      throw new Error('the token was verified: it is remembered');
    }
    expect(callers.caller(verified)).toBeDefined();

    const membership = await backend.systemRepo.readResource<ProjectMembership>(
      'ProjectMembership',
      patient.membership.id,
    );
    callers.forget([{ interaction: 'update', resource: membership }]);
    expect(callers.caller(verified)).toBeUndefined();

    const build = callers.beginBuild();
    const reader = build.reader(backend.systemRepo);
    const login = await reader.readResource<Login>('Login', verified.loginId);
    callers.forget([{ interaction: 'update', resource: login as WithId<Login> }]);
    const caller = await authenticate(authenticator(new CallerCache()), `Bearer ${patient.token}`);
    callers.endBuild(build, verified, caller, new Date(clock));
    expect(callers.caller(verified)).toBeUndefined();
  });
});

describe('the memory the cache holds', () => {
  it('is bounded: the least recently used caller goes first, and callers whose tokens all expired go', async () => {
    const callers = new CallerCache(() => 0, 2);
    const deps = authenticator(callers);
    const [a, b, c] = await Promise.all([fresh(), fresh(), fresh()]);
    const verified = async (token: string) => {
      await authenticate(deps, `Bearer ${token}`);
      return callers.verifiedToken(token, new Date(clock)) as NonNullable<ReturnType<CallerCache['verifiedToken']>>;
    };
    const va = await verified(a.token);
    const vb = await verified(b.token);
    expect(callers.caller(va)).toBeDefined();
    const vc = await verified(c.token);
    expect(callers.caller(vb)).toBeUndefined();
    expect(callers.caller(va)).toBeDefined();
    expect(callers.caller(vc)).toBeDefined();

    const saved = clock;
    clock = (va.expiresAt + 3600) * 1000;
    try {
      await verified((await fresh()).token);
      expect(callers.caller(va)).toBeUndefined();
      expect(callers.caller(vc)).toBeUndefined();
      expect(callers.verifiedToken(a.token, new Date(saved))).toBeUndefined();
    } finally {
      clock = saved;
    }
  });
});

describe('writes the repository does not report', () => {
  it('another server on the same file deactivates a membership: the next call is 401', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'auth-cache-'));
    const dbPath = join(dir, 'medplum.sqlite');
    const first = await startTestBackend({ dbPath });
    const second = await createEmbeddedMedplum({ dbPath, baseUrl: first.baseUrl });
    try {
      const patient = await fresh(first);
      expect(await readPatient(patient.token, patient.patient.id, first)).toBe(200);
      const membership = await second.systemRepo.readResource<ProjectMembership>(
        'ProjectMembership',
        patient.membership.id,
      );
      await second.systemRepo.updateResource<ProjectMembership>({ ...membership, active: false });
      expect(await readPatient(patient.token, patient.patient.id, first)).toBe(401);
    } finally {
      second.close();
      first.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

function authenticator(callers: CallerCache): Authenticator {
  return {
    systemRepo: backend.systemRepo,
    key: backend.key,
    issuer: backend.baseUrl,
    now: () => new Date(clock),
    callers,
  };
}
