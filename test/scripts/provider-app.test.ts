import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseOptions, preflight, refOf, releaseOf, UsageError } from '../../scripts/provider-app';

/**
 * scripts/provider-app.ts (`npm run provider-app`): what it checks before it builds anything. The build
 * itself (npm install and vite build of Medplum's source, about 40 s) is not run here.
 */

/** A stand-in for a Medplum checkout: the app's and packages/core's package.json only. */
function fakeCheckout(version = '5.1.29'): string {
  const dir = mkdtempSync(join(tmpdir(), 'medplum-checkout-'));
  mkdirSync(join(dir, 'examples/medplum-provider'), { recursive: true });
  mkdirSync(join(dir, 'packages/core'), { recursive: true });
  writeFileSync(join(dir, 'examples/medplum-provider/package.json'), JSON.stringify({ version }));
  writeFileSync(join(dir, 'packages/core/package.json'), JSON.stringify({ version }));
  return dir;
}

const usageError = (argv: string[]) => {
  try {
    parseOptions(argv);
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    return (err as Error).message;
  }
  throw new Error(`accepted: ${argv.join(' ')}`);
};

describe('npm run provider-app: the command line', () => {
  const source = fakeCheckout();
  let busy: Server;
  let busyPort = 0;
  beforeAll(async () => {
    busy = createServer();
    await new Promise<void>((done) => busy.listen(0, '127.0.0.1', done));
    busyPort = (busy.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((done) => busy.close(() => done())));

  it('takes a checkout, a Medplum URL (with its trailing slash) and the defaults', () => {
    const options = parseOptions(['--source', source, '--medplum', 'http://localhost:8103']);
    expect(options).toEqual({
      source,
      medplum: 'http://localhost:8103/',
      out: resolve('.provider-app'),
      port: 3001,
      host: '127.0.0.1',
      buildOnly: false,
    });
    const other = parseOptions(
      ['--source', source, '--medplum', 'https://api.example/medplum', '--out', 'x', '--port', '35999', '--build-only'],
      '/tmp',
    );
    expect(other).toMatchObject({
      medplum: 'https://api.example/medplum/',
      out: '/tmp/x',
      port: 35999,
      buildOnly: true,
    });
    expect(releaseOf(source)).toBe('5.1.29');
  });

  it('names each problem of a bad invocation', () => {
    expect(usageError([])).toMatch(/^no --source: /);
    expect(usageError(['--source', tmpdir(), '--medplum', 'http://localhost:8103/'])).toMatch(
      /has no examples\/medplum-provider\/package\.json: name the top folder of a checkout of Medplum's source/,
    );
    expect(usageError(['--source', source])).toMatch(/^no --medplum: /);
    expect(usageError(['--source', source, '--medplum', 'localhost:8103'])).toMatch(/is not an http\(s\) URL/);
    expect(usageError(['--source', source, '--medplum', 'ftp://medplum.example/'])).toMatch(/is not an http\(s\) URL/);
    expect(usageError(['--source', source, '--medplum', 'not a url'])).toMatch(/is not a URL/);
    expect(usageError(['--source', source, '--medplum', 'http://a/', '--port', '70000'])).toMatch(/is not a port/);
    expect(usageError(['--source', source, '--medplum', 'http://a/', '--out', join(source, 'out')])).toMatch(
      /inside the checkout/,
    );
    expect(usageError(['--source', source, '--medplum', 'http://a/', '--out', resolve('test')])).toMatch(
      /is a folder this did not make: name a new or empty folder/,
    );
    expect(usageError(['--source', source, '--medplum', 'http://a/', '--bogus'])).toMatch(/Unknown option '--bogus'/);
  });

  it('stops on a port in use before building, and not with --build-only', async () => {
    const argv = ['--source', source, '--medplum', 'http://localhost:8103/', '--port', String(busyPort)];
    await expect(preflight(argv)).rejects.toThrow(`port ${busyPort} on 127.0.0.1 is in use`);
    await expect(preflight([...argv, '--build-only'])).resolves.toMatchObject({ release: '5.1.29' });
  });

  it('names the build by the checkout’s commit in a git work tree, else by its release', () => {
    const repo = fakeCheckout();
    const git = (...args: string[]) =>
      spawnSync('git', ['-C', repo, '-c', 'user.name=t', '-c', 'user.email=t@example', ...args], { encoding: 'utf8' });
    expect(refOf(repo, '5.1.29')).toBe('release 5.1.29');
    git('init', '-q');
    git('commit', '-q', '--allow-empty', '-m', 'release');
    expect(refOf(repo, '5.1.29')).toBe(git('rev-parse', 'HEAD').stdout.trim());
    expect(refOf(join(repo, 'packages'), '5.1.29')).toBe('release 5.1.29');
  });

  it('exits non-zero with one line saying what to do', () => {
    const ran = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/provider-app.ts', '--source', source], {
      encoding: 'utf8',
    });
    expect(ran.status).not.toBe(0);
    expect(ran.stdout).toBe('');
    expect(ran.stderr.trim().split('\n')).toEqual([
      "provider-app: no --medplum: name your Medplum's base URL, e.g. --medplum http://localhost:8103/",
    ]);
  });
});
