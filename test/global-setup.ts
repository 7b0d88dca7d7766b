import { execFileSync } from 'node:child_process';

/**
 * Builds the bot bundles and the SDK package once, so `vitest` run on its own tests exactly what gets
 * deployed and what a patient app installs.
 */
export default function setup(): void {
  for (const script of ['scripts/build-bots.ts', 'packages/sdk/build.ts']) {
    execFileSync(process.execPath, ['--import', 'tsx', script], { stdio: 'inherit' });
  }
}
