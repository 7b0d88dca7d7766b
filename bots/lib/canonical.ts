/**
 * A payload as the text its fingerprint is taken of (bots/lib/digest.ts): keys sorted at every depth,
 * no whitespace. No Node built-in here: the gateway takes the same fingerprint with WebCrypto
 * (src/medplum/finished-work.ts).
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) {
    return `[${value.map(canonicalJson).join(',')}]`;
  }
  if (value && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}
