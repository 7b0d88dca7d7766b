import { spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';

describe('npm run provision against a Medplum over HTTP', () => {
  it('signs in with client credentials and, on an already provisioned project, changes nothing', async () => {
    const server = spawn(process.execPath, ['--import', 'tsx', 'src/embedded/main.ts'], {
      env: { ...process.env, EMBEDDED_MEDPLUM_PORT: '18113', EMBEDDED_MEDPLUM_DB: ':memory:' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: server.stdout }).once('line', resolve);
        server.once('exit', (code) => reject(new Error(`embedded exited ${code}`)));
      });
      const info = JSON.parse(line) as { baseUrl: string; adminClientId: string; adminClientSecret: string };
      const provision = (secret: string, ...extra: string[]) =>
        spawnSync(
          process.execPath,
          [
            '--import',
            'tsx',
            'src/provision/cli.ts',
            '--base-url',
            info.baseUrl,
            '--client-id',
            info.adminClientId,
            '--client-secret',
            secret,
            ...extra,
          ],
          { encoding: 'utf8', timeout: 60_000 },
        );
      const run = provision(info.adminClientSecret, '--demo');
      expect(run.status, run.stderr).toBe(0);
      const report = JSON.parse(run.stdout.trim().split('\n').pop() as string) as {
        created: number;
        updated: number;
        unchanged: number;
        deployed: string[];
      };
      expect(report).toMatchObject({ created: 0, updated: 0, deployed: [] });
      expect(report.unchanged).toBeGreaterThan(20);
      const wrong = provision('wrong');
      expect(wrong.status).toBe(1);
    } finally {
      server.kill();
    }
  });
});
