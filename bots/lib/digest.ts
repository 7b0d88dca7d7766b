import { createHash } from 'node:crypto';
import { canonicalJson } from './canonical';

/** The payload's fingerprint: a repeat with the same payload replays, another payload is a conflict. */
export function payloadDigest(payload: unknown): string {
  return createHash('sha256').update(canonicalJson(payload)).digest('base64url');
}
