import { describe, expect, it } from 'vitest';
import { EDGE_KEY_MIN_LENGTH, edgeKeyPlan } from '../../src/provision/edge-key';

/**
 * Which edge-statement key provisioning stores (src/provision/edge-key.ts, issue 49 item 3): given, made,
 * or refused before anything is written. The command's own run over a Medplum is test/provision/cli.test.ts.
 */
const KEY = 'k'.repeat(64);

describe('the edge-statement key of a provisioning run', () => {
  it('a key given is stored; replacing a different stored one says so', () => {
    expect(edgeKeyPlan(KEY, undefined, undefined)).toEqual({ key: KEY, made: false, changed: false });
    expect(edgeKeyPlan(KEY, KEY, 'gateway.env')).toEqual({ key: KEY, made: false, changed: false });
    expect(edgeKeyPlan(KEY, 'x'.repeat(64), undefined)).toEqual({ key: KEY, made: false, changed: true });
  });

  it('none given on a Project without one: a new random key, 256 bits, when there is a file to write it to', () => {
    const first = edgeKeyPlan(undefined, undefined, 'gateway.env');
    const second = edgeKeyPlan('', undefined, 'gateway.env');
    if (!('key' in first) || !('key' in second)) {
      throw new Error('expected keys');
    }
    expect(first).toMatchObject({ made: true, changed: false });
    expect(first.key).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(second.key).not.toBe(first.key);
  });

  it('refused, naming what to do: none given while the Project has one, none and nowhere to write one, one too short', () => {
    expect(edgeKeyPlan(undefined, KEY, 'gateway.env')).toEqual({
      refused: expect.stringMatching(/This Project has an edge-statement key.*same key.*Nothing was written/s),
    });
    expect(edgeKeyPlan(undefined, undefined, undefined)).toEqual({
      refused: expect.stringMatching(/no --out FILE.*Nothing was written/s),
    });
    const short = 'x'.repeat(EDGE_KEY_MIN_LENGTH - 1);
    expect(edgeKeyPlan(short, undefined, 'gateway.env')).toEqual({
      refused: expect.stringMatching(/too short \(31 characters; at least 32\).*openssl rand -hex 32/s),
    });
    expect(edgeKeyPlan('x'.repeat(EDGE_KEY_MIN_LENGTH), undefined, undefined)).toMatchObject({ made: false });
  });
});
