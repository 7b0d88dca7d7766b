import type { ClientApplication, Project } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EDGE_STATEMENT } from '../../contracts/systems';
import { startTestBackend, type TestBackend } from '../support/backend';
import { signInAsBot } from '../support/bots';

/**
 * The Project's secrets (the edge-statement key the bots check the gateway's statements with, among
 * them) never reach a patient, a clinician or a bot: a patient who held that key could forge what the
 * gateway vouches for. Medplum's /auth/me answers a fixed subset of the Project
 * (packages/server/src/auth/me.ts: id, name, description, strictMode, superAdmin).
 */
let backend: TestBackend;
let secretValues: string[];
let edgeKey: string | undefined;

beforeAll(async () => {
  backend = await startTestBackend();
  const project = await backend.systemRepo.readResource<Project>('Project', backend.project.id as string);
  secretValues = (project.secret ?? []).map((s) => s.valueString ?? '').filter((v) => v.length > 0);
  edgeKey = project.secret?.find((s) => s.name === EDGE_STATEMENT.secretName)?.valueString;
});
afterAll(() => backend?.close());

async function callers(): Promise<{ who: string; token: string }[]> {
  return [
    { who: 'patient', token: backend.patients.alice.token },
    { who: 'clinician', token: backend.clinicians.northwind.token },
    { who: 'bot', token: (await signInAsBot(backend, 'accept-agreements')).token },
  ];
}

describe('Project secrets', () => {
  it('the project holds the edge-statement key (so the checks below look for something real)', () => {
    expect(secretValues.length).toBeGreaterThan(0);
    expect(edgeKey).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(secretValues).toContain(edgeKey);
  });

  it('/auth/me shows a patient, a clinician and a bot the Project without its secrets', async () => {
    for (const { who, token } of await callers()) {
      const res = await backend.fetch(new URL('auth/me', backend.baseUrl), {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(res.status, who).toBe(200);
      const text = await res.text();
      const body = JSON.parse(text) as { project: Record<string, unknown> };
      expect(body.project.id, who).toBe(backend.project.id);
      expect(Object.keys(body.project).sort(), who).toEqual(expect.arrayContaining(['id', 'resourceType']));
      expect(body.project.secret, who).toBeUndefined();
      for (const value of secretValues) {
        expect(text.includes(value), `${who}: /auth/me holds a project secret`).toBe(false);
      }
      expect(text.includes('passwordHash'), who).toBe(false);
    }
  });

  it('neither can read the Project over FHIR', async () => {
    for (const { who, token } of await callers()) {
      for (const path of [`fhir/R4/Project/${backend.project.id}`, `fhir/R4/Project?_id=${backend.project.id}`]) {
        const res = await backend.fetch(new URL(path, backend.baseUrl), {
          headers: { authorization: `Bearer ${token}` },
        });
        const text = await res.text();
        for (const value of secretValues) {
          expect(text.includes(value), `${who} ${path}`).toBe(false);
        }
      }
    }
  });
});

describe('client secrets', () => {
  it('a bot that reads ClientApplications (their tenant, their integration tag) never sees a secret', async () => {
    for (const key of ['patient-home', 'sms-opt-out']) {
      const { medplum } = await signInAsBot(backend, key);
      const clients = await backend.systemRepo.searchResources<ClientApplication>({
        resourceType: 'ClientApplication',
        count: 100,
      });
      expect(clients.some((c) => c.secret)).toBe(true);
      let readable = 0;
      for (const client of clients) {
        const seen = await medplum.readResource('ClientApplication', client.id as string).catch(() => undefined);
        if (seen) {
          readable++;
          expect(seen.secret, `${key} reads ${client.name}`).toBeUndefined();
          expect(JSON.stringify(seen)).not.toContain(client.secret as string);
        }
      }
      expect(readable, key).toBeGreaterThan(0);
    }
  });
});
