import { createHash } from 'node:crypto';
import { defineConfig } from 'vitest/config';

/**
 * A test's time limit is there to end a hung test, not to fail a slow machine (issue 50 item 6). The limits
 * in the suite were set on this project's 2-core machine on a quiet day (the hashing below took about
 * REFERENCE_MS there: its median of five was 75-143 ms on 2026-12-02, the machine idle); on a machine that hashes slower as the suite starts (slower, or busy with other
 * work), every limit grows in proportion: the default ones here, and those a test sets through
 * test/support/slowness.ts (`scaled`). Never below 1, never above 10.
 */
const REFERENCE_MS = 150;

function slowness(): number {
  const once = () => {
    const started = performance.now();
    let digest = Buffer.alloc(64);
    for (let i = 0; i < 40_000; i++) {
      digest = createHash('sha256').update(digest).digest();
    }
    return performance.now() - started;
  };
  const median = Array.from({ length: 5 }, once).sort((a, b) => a - b)[2] as number;
  return Math.min(10, Math.max(1, median / REFERENCE_MS));
}

// Set before the workers start, which inherit it (test/support/slowness.ts reads it).
process.env.TEST_SLOWNESS ??= slowness().toFixed(2);
const SLOWNESS = Number(process.env.TEST_SLOWNESS);

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: Math.round(30_000 * SLOWNESS),
    hookTimeout: Math.round(60_000 * SLOWNESS),
    pool: 'forks',
    globalSetup: ['test/global-setup.ts'],
  },
});
