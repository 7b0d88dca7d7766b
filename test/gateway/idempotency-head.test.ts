import { describe, expect, it } from 'vitest';
import { requestHead } from '../../src/edge/idempotency';

/**
 * What of a request besides its body an Idempotency-Key's fingerprint covers (src/edge/idempotency.ts
 * `requestHead`, issue 50 item 3), without a Medplum: the gateway-level replays and 422s are
 * test/gateway/idempotency.test.ts and test/gateway/documents.test.ts. Pure, for `npm run mutation`.
 */
const BASE = 'https://gateway.test';

describe('the request head of a fingerprint', () => {
  it('is the method, the path, the query string and the Content-Type, one per line', () => {
    expect(requestHead('POST', `${BASE}/v1/documents?filename=a.png`, 'image/png')).toBe(
      'POST /v1/documents?filename=a.png\nimage/png\n',
    );
    expect(requestHead('POST', `${BASE}/v1/messages`, undefined)).toBe('POST /v1/messages\n\n');
  });

  it('the same request written differently is the same head: parameters in any order, Content-Type in any case or spacing', () => {
    const head = requestHead('POST', `${BASE}/v1/x?b=2&a=1&a=0`, 'application/json; charset=utf-8');
    expect(requestHead('POST', `${BASE}/v1/x?a=0&b=2&a=1`, 'Application/JSON;charset=UTF-8')).toBe(head);
    expect(requestHead('POST', `${BASE}/v1/x?a=0&a=1&b=2`, 'Application/JSON;  charset=utf-8')).toBe(head);
    expect(requestHead('POST', `${BASE}/v1/x?a=1&b=2&a=0`, 'application/json;charset=utf-8')).toBe(head);
    expect(head).toBe('POST /v1/x?a=0&a=1&b=2\napplication/json;charset=utf-8\n');
    // An empty query string is none.
    expect(requestHead('POST', `${BASE}/v1/x?`, undefined)).toBe(requestHead('POST', `${BASE}/v1/x`, undefined));
  });

  it('anything the answer depends on makes another head: method, path, a parameter’s name or value, the media type', () => {
    const head = requestHead('POST', `${BASE}/v1/documents?filename=first.png`, 'image/png');
    for (const other of [
      requestHead('PUT', `${BASE}/v1/documents?filename=first.png`, 'image/png'),
      requestHead('POST', `${BASE}/v1/documents/x?filename=first.png`, 'image/png'),
      requestHead('POST', `${BASE}/v1/documents?filename=second.png`, 'image/png'),
      requestHead('POST', `${BASE}/v1/documents?name=first.png`, 'image/png'),
      requestHead('POST', `${BASE}/v1/documents?filename=first.png&x=1`, 'image/png'),
      requestHead('POST', `${BASE}/v1/documents?filename=first.png`, 'application/pdf'),
      requestHead('POST', `${BASE}/v1/documents?filename=first.png`, undefined),
    ]) {
      expect(other).not.toBe(head);
    }
    // Values sort among equal names, names before values.
    expect(requestHead('POST', `${BASE}/v1/x?b=1&a=2`, undefined)).toBe('POST /v1/x?a=2&b=1\n\n');
    expect(requestHead('POST', `${BASE}/v1/x?a=b&a=a`, undefined)).toBe('POST /v1/x?a=a&a=b\n\n');
    expect(requestHead('POST', `${BASE}/v1/x?a=c&b=0&a=a&a=d&a=b`, undefined)).toBe(
      'POST /v1/x?a=a&a=b&a=c&a=d&b=0\n\n',
    );
    expect(requestHead('POST', `${BASE}/v1/x?a=b&a=d&b=0&a=a&a=c`, undefined)).toBe(
      'POST /v1/x?a=a&a=b&a=c&a=d&b=0\n\n',
    );
  });
});
