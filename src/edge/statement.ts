import type { EdgeStatement } from '../../contracts/bot-inputs';
import { EDGE_STATEMENT } from '../../contracts/systems';
import { base64url } from '../shared/base64url';

/**
 * Signs what only the gateway can see of a call (client address, user agent) for a bot, bound to the
 * patient's session and valid for a minute: `<base64url(JSON)>.<base64url(HMAC-SHA256)>`. The key is
 * the Project secret `edge-statement-key`, which bots read from `event.secrets` and check
 * (bots/lib/trust.ts `edgeFacts`). Web Crypto only, so the same code runs on Workers.
 */
export type EdgeSigner = (facts: Omit<EdgeStatement, 'iat' | 'exp'>) => Promise<string>;

export function createEdgeSigner(key: string, clock: () => Date = () => new Date()): EdgeSigner {
  const hmacKey = crypto.subtle.importKey(
    'raw',
    new TextEncoder().encode(key),
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['sign'],
  );
  return async (facts) => {
    const iat = Math.floor(clock().getTime() / 1000);
    // Printable ASCII only, so the statement stays within the bounded size bots accept.
    const ua = facts.ua?.replace(/[^\x20-\x7e]/g, '').slice(0, 512) || undefined;
    const statement: EdgeStatement = { ...facts, ua, iat, exp: iat + EDGE_STATEMENT.maxAgeSeconds };
    const payload = base64url(new TextEncoder().encode(JSON.stringify(statement)));
    const signature = await crypto.subtle.sign('HMAC', await hmacKey, new TextEncoder().encode(payload));
    return `${payload}.${base64url(new Uint8Array(signature))}`;
  };
}
