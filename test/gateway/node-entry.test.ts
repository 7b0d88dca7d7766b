import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually, type NpmStart, startNpmStart } from '../support/npm-start';
import { scaled } from '../support/slowness';

/** `npm start`'s entry as a user runs it: a process, a port, a printed token, then curl. */
let started: NpmStart | undefined;
afterAll(() => started?.stop());

describe('npm start (src/node.ts)', () => {
  it('prints a token that reads the demo patient through the gateway, and stops on SIGTERM', {
    timeout: scaled(90_000),
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
      const port = new URL((started as NpmStart).gatewayUrl).port;
      const path = join(started?.cwd as string, '.data', `demo-tokens.port-${port}.json`);
      expect(Object.keys(JSON.parse(await readFile(path, 'utf8'))).sort()).toEqual(['alice', 'bob', 'carol', 'dave']);
      // Bearer tokens: readable by the owner alone.
      expect((await stat(path)).mode & 0o777).toBe(0o600);
    });

    // GraphQL, which once stopped the whole server (its schema outgrows a small heap): its schema built before
    // the port opened (its first query no longer stalls everyone for seconds), answered, her own record only,
    // and everyone is still served.
    expect(output()).toMatch(/GraphQL: +schema built at start \(\d+\.\d s\)/);
    const graphql = await fetch(`${started.medplumUrl}fhir/R4/$graphql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ PatientList { name { given } } }' }),
    });
    expect(graphql.status).toBe(200);
    expect(await graphql.json()).toEqual({ data: { PatientList: [{ name: [{ given: ['Alice'] }] }] } });
    expect((await fetch(`${base}/v1/patient/profile`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(
      200,
    );

    // A second one whose gateway port is taken says so in one line, before any banner or token.
    const port = new URL(started.gatewayUrl).port;
    const second = await startNpmStart({ PORT: port }).then(
      () => undefined,
      (err: unknown) => String(err),
    );
    expect(second).toMatch(
      new RegExp(
        `npm start exited with 1: Port ${port} is in use \\(127\\.0\\.0\\.1:${port}\\): stop what uses it, or start with another PORT\\.\\n$`,
      ),
    );

    started.child.kill('SIGTERM');
    expect(await started.exited).toBe(143);
  });
});
