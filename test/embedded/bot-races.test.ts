import { readFileSync } from 'node:fs';
import type { Consent, ProjectMembership } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SYSTEMS } from '../../contracts/systems';
import { runBotBundle } from '../../src/embedded/bots/vm';
import { startTestBackend, type TestBackend } from '../support/backend';

/**
 * Real Medplum answers a conflicting concurrent conditional transaction 409 (after one retry) and a stale
 * If-Match 412 (packages/server/src/fhir/repo.ts, transactions SERIALIZABLE); the single-writer embedded
 * store never does. So the bots run here, as Medplum runs them, over a fetch that makes their transaction
 * lose a race: either a concurrent identical call committed first (the winner's work is done, then the
 * answer is 409/412), or someone else changed things (409 and nothing done).
 */
let backend: TestBackend;
const SMS = 'https://patient-care.example/agreements/sms|2026-01';

beforeAll(async () => {
  backend = await startTestBackend();
});
afterAll(() => backend?.close());

type Race = 'winner-committed' | 'conflict-only';

/** The backend's fetch, except that the first transaction loses: committed by "the winner" first, or not at all. */
function racingFetch(race: Race, status: 409 | 412): typeof fetch {
  let raced = false;
  return (async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = String(input instanceof Request ? input.url : input);
    const isTransaction = init?.method === 'POST' && /\/fhir\/R4\/?$/.test(url);
    if (!isTransaction || raced) {
      return backend.fetch(input, init);
    }
    raced = true;
    if (race === 'winner-committed') {
      await backend.fetch(input, init);
    }
    const outcome =
      status === 409
        ? { resourceType: 'OperationOutcome', id: 'conflict', issue: [{ severity: 'error', code: 'conflict' }] }
        : {
            resourceType: 'OperationOutcome',
            id: 'precondition-failed',
            issue: [{ severity: 'error', code: 'processing', details: { text: 'Precondition Failed' } }],
          };
    return new Response(JSON.stringify(outcome), { status, headers: { 'content-type': 'application/fhir+json' } });
  }) as typeof fetch;
}

async function run(bot: string, input: unknown, fetchImpl: typeof fetch, patient = backend.patients.carol) {
  const record = await backend.admin.searchOne('Bot', { identifier: `${SYSTEMS.bots}|${bot}` });
  const membership = await backend.admin.searchOne('ProjectMembership', { profile: `Bot/${record?.id}` });
  const { token } = await backend.login(membership as ProjectMembership);
  return (await runBotBundle({
    code: readFileSync(`dist/bots/${bot}.js`, 'utf8'),
    baseUrl: backend.baseUrl,
    accessToken: token,
    fetch: fetchImpl,
    timeoutMs: 10_000,
    event: {
      bot: { reference: `Bot/${record?.id}` },
      requester: { reference: `Patient/${patient.patient.id}` } as never,
      input,
      contentType: 'application/json',
      secrets: {},
      traceId: 'race',
      headers: { authorization: `Bearer ${patient.token}` },
    },
  })) as { ok: boolean; acceptances?: { consent: string }[]; error?: { status: number; code: string } };
}

const smsConsents = async () =>
  (
    await backend.systemRepo.searchResources<Consent>({
      resourceType: 'Consent',
      filters: [{ code: 'patient', operator: 'eq', value: `Patient/${backend.patients.carol.patient.id}` }],
    })
  ).filter((c) => c.policy?.[0]?.uri === SMS);

describe('bots when their transaction loses a race (real Medplum answers 409/412)', () => {
  it('accept-agreements: a concurrent identical call won, so the answer is its acceptance and there is one Consent', async () => {
    const result = await run('accept-agreements', { agreements: [SMS] }, racingFetch('winner-committed', 409));
    const consents = await smsConsents();
    expect(consents.filter((c) => c.status === 'active')).toHaveLength(1);
    expect(result).toMatchObject({ ok: true, acceptances: [{ consent: `Consent/${consents[0].id}` }] });
  });

  it('withdraw-agreement: withdrawn concurrently (412 on its If-Match), the answer is the same withdrawal', async () => {
    expect((await run('accept-agreements', { agreements: [SMS] }, backend.fetch)).ok).toBe(true);
    const result = await run(
      'withdraw-agreement',
      { agreementUrl: SMS.split('|')[0] },
      racingFetch('winner-committed', 412),
    );
    expect(result.ok).toBe(true);
    expect((await smsConsents()).filter((c) => c.status === 'active')).toHaveLength(0);
  });

  it('accept-agreements: a conflict that left nothing behind is 409 invalid_state, nothing written', async () => {
    const result = await run('accept-agreements', { agreements: [SMS] }, racingFetch('conflict-only', 409));
    expect(result).toMatchObject({ ok: false, error: { status: 409, code: 'invalid_state' } });
    expect((await smsConsents()).filter((c) => c.status === 'active')).toHaveLength(0);
  });
});
