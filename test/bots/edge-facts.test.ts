import { createHmac } from 'node:crypto';
import type { BotEvent } from '@medplum/core';
import { describe, expect, it } from 'vitest';
import { edgeFacts } from '../../bots/lib/trust';
import { EDGE_STATEMENT } from '../../contracts/systems';
import { createEdgeSigner } from '../../src/edge/statement';

/**
 * What a bot believes of the gateway's edge statement (bots/lib/trust.ts `edgeFacts`, issue 25's mutation
 * list): only one signed with the Project's key, for this very session, issued now (not in the future)
 * and living at most EDGE_STATEMENT.maxAgeSeconds. Anything else yields nothing.
 */
const KEY = 'k'.repeat(43);
const event = {
  secrets: { [EDGE_STATEMENT.secretName]: { name: EDGE_STATEMENT.secretName, valueString: KEY } },
} as unknown as BotEvent;
const caller = { profile: 'Patient/p1', loginId: 'login-1' };
const facts = { sub: 'Patient/p1', lid: 'login-1', ip: '203.0.113.9', ua: 'App/1.0' };
const now = () => Math.floor(Date.now() / 1000);

/** A statement with these claims, signed with `key`. */
const signed = (claims: Record<string, unknown>, key = KEY) => {
  const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
  return `${payload}.${createHmac('sha256', key).update(payload).digest('base64url')}`;
};

describe('edgeFacts', () => {
  it('believes a statement the gateway signed for this session just now', async () => {
    const statement = await createEdgeSigner(KEY)(facts);
    expect(edgeFacts(event, caller, statement)).toEqual({ ipAddress: '203.0.113.9', userAgent: 'App/1.0' });
    const iat = now();
    expect(edgeFacts(event, caller, signed({ ...facts, iat, exp: iat + EDGE_STATEMENT.maxAgeSeconds }))).toEqual({
      ipAddress: '203.0.113.9',
      userAgent: 'App/1.0',
    });
  });

  it.each([
    ['expired', () => ({ ...facts, iat: now() - 120, exp: now() - 60 })],
    ['issued in the future', () => ({ ...facts, iat: now() + 30, exp: now() + 30 + EDGE_STATEMENT.maxAgeSeconds })],
    ['living longer than allowed', () => ({ ...facts, iat: now(), exp: now() + EDGE_STATEMENT.maxAgeSeconds + 1 })],
    ['without iat', () => ({ ...facts, exp: now() + 30 })],
    ['without exp', () => ({ ...facts, iat: now() })],
    ['for another patient', () => ({ ...facts, sub: 'Patient/p2', iat: now(), exp: now() + 30 })],
    ['for another session of hers', () => ({ ...facts, lid: 'login-2', iat: now(), exp: now() + 30 })],
  ])('believes nothing of one %s', (_name, claims) => {
    expect(edgeFacts(event, caller, signed(claims()))).toEqual({});
  });

  it('believes nothing signed with another key, nor a statement without a key set, nor none', async () => {
    const fresh = { ...facts, iat: now(), exp: now() + 30 };
    expect(edgeFacts(event, caller, signed(fresh, 'another key'))).toEqual({});
    expect(edgeFacts({ secrets: {} } as unknown as BotEvent, caller, signed(fresh))).toEqual({});
    expect(edgeFacts(event, caller, undefined)).toEqual({});
    expect(edgeFacts(event, caller, `${signed(fresh).split('.')[0]}.`)).toEqual({});
  });
});
