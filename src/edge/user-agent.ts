export const MAX_USER_AGENT = 512;

/** Control (Cc) and format (Cf: bidi overrides, zero-width) characters and line separators. */
const UNPRINTABLE = /[\p{Cc}\p{Cf}\u2028\u2029]/gu;

/**
 * A user agent fit for a record: without characters that break or disguise a line (a bidi override
 * can make a stored agent read differently from what was sent), at most 512 characters.
 */
export function cleanUserAgent(raw: string | undefined): string | undefined {
  if (raw === undefined) {
    return undefined;
  }
  // Cut before cleaning as well, so a 16 KiB header is not scanned whole.
  let text = raw
    .slice(0, MAX_USER_AGENT * 4)
    .replace(UNPRINTABLE, '')
    .trim()
    .slice(0, MAX_USER_AGENT);
  if (/[\uD800-\uDBFF]$/.test(text)) {
    text = text.slice(0, -1);
  }
  return text || undefined;
}
