import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually, type NpmStart, startNpmStart } from '../support/npm-start';

/** `npm start`'s entry as a user runs it: a process, a port, a printed token, then curl. */
let started: NpmStart | undefined;
afterAll(() => started?.stop());

describe('npm start (src/node.ts)', () => {
  it('prints a token that reads the demo patient through the gateway, and stops on SIGTERM', {
    timeout: 90_000,
  }, async () => {
    started = await startNpmStart();
    const { gatewayUrl: base, token } = started;
    const profile = await fetch(`${base}/v1/patient/profile`, { headers: { authorization: `Bearer ${token}` } });
    expect(profile.status).toBe(200);
    expect(await profile.json()).toMatchObject({ resourceType: 'Patient', name: [{ given: ['Alice'] }] });
    const record = await fetch(`${base}/v1/fhir/Observation`, { headers: { authorization: `Bearer ${token}` } });
    expect(record.status).toBe(200);
    expect(((await record.json()) as { entry?: unknown[] }).entry?.length).toBeGreaterThan(0);

    // The access log is JSON lines without the token.
    const output = () => (started as NpmStart).stdout();
    await eventually(() => {
      const logLines = output()
        .split('\n')
        .filter((line) => line.startsWith('{'));
      expect(logLines.map((line) => JSON.parse(line).route)).toContain('/v1/patient/profile');
      expect(logLines.join('\n')).not.toContain(token);
    });
    await eventually(async () => {
      const file = await readFile(join(started?.cwd as string, '.data', 'demo-tokens.json'), 'utf8');
      expect(Object.keys(JSON.parse(file)).sort()).toEqual(['alice', 'bob', 'carol', 'dave']);
    });

    started.child.kill('SIGTERM');
    expect(await started.exited).toBe(143);
  });
});
