import { SYSTEMS } from '../../contracts/systems';
import { agreementReads } from '../../src/provision/definition';
import { startTestBackend } from '../support/backend';
import { deployFixtureBot } from '../support/bots';

export interface TrustCheckResult {
  /** p50 of one `$execute` of the requirements check as a workflow bot (caller verified, input validated), ms. */
  checked: number;
  /** p50 of the same resolution without the checks (the bot as it was before issue 10), ms. */
  unchecked: number;
  ratio: number;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/**
 * What the trust checks cost a requirements call: the real bot against the same resolution without
 * them, both run by the same patient through `$execute` on the same embedded Medplum, in alternating
 * rounds of sequential calls (so both see the same machine), p50 over all calls.
 */
export async function runTrustCheckBench(rounds = 10, callsPerRound = 50): Promise<TrustCheckResult> {
  const backend = await startTestBackend();
  try {
    // What the requirements bot read with (the agreements, her Patient and Consents), for both.
    const policy = agreementReads();
    await deployFixtureBot(backend, 'requirements-checked', policy);
    await deployFixtureBot(backend, 'requirements-unchecked', policy);
    const patient = backend.patients.alice.medplum;
    const checkedBot = { system: SYSTEMS.bots, value: 'test-requirements-checked' };
    const uncheckedBot = { system: SYSTEMS.bots, value: 'test-requirements-unchecked' };
    const input = { context: {} };
    const time = async (bot: typeof checkedBot, into: number[]) => {
      for (let i = 0; i < callsPerRound; i++) {
        const start = performance.now();
        await patient.executeBot(bot, input, 'application/json');
        into.push(performance.now() - start);
      }
    };
    const checked: number[] = [];
    const unchecked: number[] = [];
    await time(checkedBot, []);
    await time(uncheckedBot, []);
    for (let round = 0; round < rounds; round++) {
      await time(checkedBot, checked);
      await time(uncheckedBot, unchecked);
    }
    const result = { checked: median(checked), unchecked: median(unchecked), ratio: 0 };
    result.ratio = result.checked / result.unchecked;
    return result;
  } finally {
    backend.close();
  }
}
