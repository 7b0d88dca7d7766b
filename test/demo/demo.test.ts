import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { scaled } from '../support/slowness';

/**
 * Issue 17 item 1: `npm run demo` (scripts/demo.ts, the bots already built by the global setup) runs
 * the whole journey on a fresh in-memory embedded Medplum and exits 0 only when every answer is the one
 * expected.
 */
describe('npm run demo', () => {
  it(
    'narrates the whole journey, every step answered as expected, and exits 0',
    async () => {
      // This Node (24), whatever `node` the PATH names: tsx's CLI run by it.
      const child = spawn(process.execPath, ['node_modules/tsx/dist/cli.mjs', 'scripts/demo.ts'], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
      });
      child.stderr.on('data', (chunk: Buffer) => {
        output += chunk.toString();
      });
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
      expect(code, output.slice(-2000)).toBe(0);
      for (const step of [
        "signs up through Medplum's registration",
        'meets the agreements gate',
        '409 consent_required',
        'assigns a condition',
        'Eligibility arrives',
        'accepts it',
        'decides the order',
        'Her plan is active',
        'books the follow-up video visit',
        'reschedules it',
        'starts its first segment',
        'The journey view',
        'every answer was the one expected',
      ]) {
        expect(output).toContain(step);
      }
      // What each call answered is printed, and no token is.
      expect(output).toMatch(/→ POST \/v1\/tasks\/[^/]+\/complete/);
      expect(output).not.toMatch(/"access_token":"ey|patient-care-demo|"password":"[^…]/);
      // Codes are narrated as codes; only sign-in's authorization codes are hidden (issue 28).
      expect(output).toContain('"code":"http://loinc.org|8480-6"');
      expect(output).toContain('"code":"…"');
    },
    scaled(120_000),
  );
});
