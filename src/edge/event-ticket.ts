import { base64url, fromBase64url } from '../shared/base64url';

/**
 * A ticket for her event stream in a browser (issue 51 item 2): a web page's native `EventSource` cannot
 * send `Authorization`, and her access token must never sit in a URL (logs, history, referrers). The page
 * asks for a ticket with her token (`POST /v1/events/tickets`) and opens `GET /v1/events?ticket=...`. The
 * ticket is her token sealed (AES-256-GCM, a key derived from the gateway's EDGE_STATEMENT_KEY with HKDF, so
 * every instance opens what any made), valid for TICKET_SECONDS and for her event stream only: unreadable
 * to whoever sees the URL, and of no use elsewhere or later. Web Crypto only (Node and Workers).
 */
export const TICKET_SECONDS = 60;
const PREFIX = 'et1.';
const IV_BYTES = 12;

export interface EventTickets {
  /** Her token sealed into a ticket, and when it stops opening a stream. */
  seal(token: string): Promise<{ ticket: string; expiresAt: string }>;
  /** The token a ticket holds, or undefined when it is not one of ours, altered or expired. */
  open(ticket: string): Promise<string | undefined>;
}

export function createEventTickets(edgeKey: string, clock: () => Date = () => new Date()): EventTickets {
  const key = (async () => {
    const material = await crypto.subtle.importKey('raw', new TextEncoder().encode(edgeKey), 'HKDF', false, [
      'deriveKey',
    ]);
    return crypto.subtle.deriveKey(
      {
        name: 'HKDF',
        hash: 'SHA-256',
        salt: new TextEncoder().encode('patient-care'),
        info: new TextEncoder().encode('event-ticket v1'),
      },
      material,
      { name: 'AES-GCM', length: 256 },
      false,
      ['encrypt', 'decrypt'],
    );
  })();
  return {
    async seal(token) {
      const exp = Math.floor(clock().getTime() / 1000) + TICKET_SECONDS;
      const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
      const sealed = new Uint8Array(
        await crypto.subtle.encrypt(
          { name: 'AES-GCM', iv },
          await key,
          new TextEncoder().encode(JSON.stringify({ t: token, exp })),
        ),
      );
      const bytes = new Uint8Array(IV_BYTES + sealed.byteLength);
      bytes.set(iv);
      bytes.set(sealed, IV_BYTES);
      return { ticket: `${PREFIX}${base64url(bytes)}`, expiresAt: new Date(exp * 1000).toISOString() };
    },
    async open(ticket) {
      if (!ticket.startsWith(PREFIX) || ticket.length > 8192 || !/^[A-Za-z0-9_-]+$/.test(ticket.slice(PREFIX.length))) {
        return undefined;
      }
      try {
        const bytes = fromBase64url(ticket.slice(PREFIX.length));
        const plain = await crypto.subtle.decrypt(
          { name: 'AES-GCM', iv: bytes.slice(0, IV_BYTES) },
          await key,
          bytes.slice(IV_BYTES),
        );
        const { t, exp } = JSON.parse(new TextDecoder().decode(plain)) as { t?: unknown; exp?: unknown };
        const now = clock().getTime() / 1000;
        return typeof t === 'string' && typeof exp === 'number' && now < exp ? t : undefined;
      } catch {
        return undefined;
      }
    },
  };
}
