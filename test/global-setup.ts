import { execFileSync } from 'node:child_process';

/** Builds the bot bundles once, so `vitest` run on its own tests exactly what gets deployed. */
export default function setup(): void {
  execFileSync(process.execPath, ['--import', 'tsx', 'scripts/build-bots.ts'], { stdio: 'inherit' });
}
