import { defineConfig } from 'vitest/config';

/**
 * The tests `npm run mutation` (stryker.config.mjs) runs against each mutant: the unit tests of the mutated
 * modules, none of which starts a Medplum, so a mutant costs well under a second (docs/mutation.md says why
 * the gateway-level tests of the same modules are left out).
 */
export default defineConfig({
  test: {
    include: [
      'test/gateway/admission-limits.test.ts',
      'test/gateway/json-body-limits.test.ts',
      'test/bots/answers.test.ts',
      'test/bots/measurements.test.ts',
      'test/events/feed-cursor.test.ts',
      'test/gateway/idempotency-head.test.ts',
      'test/gateway/idempotency-rules.test.ts',
      'test/bots/access-log-rules.test.ts',
      'test/bots/event-rules.test.ts',
      'test/bots/visit-decision.test.ts',
    ],
    testTimeout: 10_000,
    pool: 'forks',
  },
});
