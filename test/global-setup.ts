import { execFileSync } from 'node:child_process';

/**
 * Builds the bot bundles, the SDK package and the reference page's assets once, so `vitest` run on its
 * own tests exactly what gets deployed, what a patient app installs, and what the Worker serves.
 */
export default function setup(): void {
  for (const script of ['scripts/build-bots.ts', 'packages/sdk/build.ts', 'scripts/build-docs-assets.ts']) {
    execFileSync(process.execPath, ['--import', 'tsx', script], { stdio: 'inherit' });
  }
}
