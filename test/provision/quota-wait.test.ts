import { OperationOutcomeError, tooManyRequests } from '@medplum/core';
import type { OperationOutcome } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import { whenQuotaAllows } from '../../src/provision/apply';

/**
 * Provisioning waits out Medplum's FHIR quota instead of stopping half way (issue 23): a call refused for
 * a spent quota (a 429, or a bot that stopped on its own: `throttled`) is made again after the window
 * Medplum names (`_msBeforeNext`), a few times; anything else is not retried.
 */
const throttled = (msBeforeNext: number): OperationOutcomeError => {
  const outcome: OperationOutcome = structuredClone(tooManyRequests);
  outcome.issue[0].diagnostics = JSON.stringify({ _msBeforeNext: msBeforeNext, limit: 50000 });
  return new OperationOutcomeError(outcome);
};

describe('whenQuotaAllows', () => {
  it('makes a call refused for the quota again, after the window, and answers what it then answers', async () => {
    let calls = 0;
    const answer = await whenQuotaAllows(async () => {
      calls++;
      if (calls === 1) {
        throw throttled(10);
      }
      return 'ran';
    });
    expect(answer).toBe('ran');
    expect(calls).toBe(2);
  });

  it('gives up after three refusals, and never retries another failure', async () => {
    let calls = 0;
    await expect(
      whenQuotaAllows(async () => {
        calls++;
        throw throttled(10);
      }),
    ).rejects.toThrow(/Too Many Requests/);
    expect(calls).toBe(3);
    let other = 0;
    await expect(
      whenQuotaAllows(async () => {
        other++;
        throw new OperationOutcomeError({
          resourceType: 'OperationOutcome',
          issue: [{ severity: 'error', code: 'invalid' }],
        });
      }),
    ).rejects.toThrow();
    expect(other).toBe(1);
  });
});
