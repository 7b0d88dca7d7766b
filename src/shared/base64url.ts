/** Bytes as base64url without padding (RFC 4648 section 5), with the platform's `btoa` (Node and Workers). */
export function base64url(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) {
    binary += String.fromCharCode(byte);
  }
  return btoa(binary).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
}
