// Mutation testing of the modules that enforce a limit (docs/mutation.md): `npm run mutation`, not part
// of `npm test`. Incremental: reports/stryker-incremental.json (local, not in git) holds the last results,
// and a run tests again only the mutants whose code or covering tests changed since (`-- --force`: all).
/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutation.config.ts' },
  coverageAnalysis: 'perTest',
  mutate: [
    'src/shared/admission.ts',
    'src/edge/admission.ts',
    'src/shared/json-depth.ts',
    'src/edge/json-body.ts',
    'bots/lib/answers.ts',
    'contracts/work-forms.ts:255-262', // optionMatching, which bots/lib/answers.ts uses
    'bots/lib/measurements.ts',
    'src/events/feed.ts',
    'src/edge/idempotency.ts:1-73', // the fingerprint (requestHead) and the KeyStore contract
    'src/edge/idempotency.ts:101-228', // the key's rules over its store: claim, replay, 422, 409, take-over, release
    'bots/access-log.ts:189-308', // her access log's rules: genuine, entryOf, sameGroup
    'bots/lib/events.ts', // what a version tells: her feed's and her tenant's webhooks' one reading
    'bots/lib/webhooks.ts:23-40', // delivered, the signature
    'bots/lib/webhooks.ts:107-164', // retries: unanswered, nextTry, the kept delivery
    'bots/visit-completion.ts:225-242', // visitState: the visit's decision
    'bots/lib/visits.ts:84-105', // ownSegments, positionOf: which segments are the visit's
  ],
  concurrency: 2,
  incremental: true,
  incrementalFile: 'reports/stryker-incremental.json',
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  ignorePatterns: ['.data', 'dist', 'test-artifacts', 'scratch', 'reports', '.stryker-tmp*'],
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
};
