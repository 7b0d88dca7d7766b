/**
 * PUBLIC_URL, checked once: an absolute http(s) URL without credentials, query or fragment. It may
 * carry a path prefix (a gateway mounted under `/care` behind a proxy). Returned without a trailing
 * slash, ready for `${publicUrl}/v1/...`.
 */
export function parsePublicUrl(text: string): string {
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  if (!url || !/^https?:$/.test(url.protocol) || url.username || url.password || url.search || url.hash) {
    throw new Error(
      `PUBLIC_URL must be an absolute http(s) URL without query or fragment, not "${text.slice(0, 100)}"`,
    );
  }
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}
