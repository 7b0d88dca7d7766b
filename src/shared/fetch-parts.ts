/**
 * The parts of a `fetch(input, init)` call that a transport of our own needs as plain values:
 * no WHATWG Request is built, which on Node costs more than the rest of a short call.
 */

/** Header names and values as a record; names lower-cased when asked (HTTP names are case-blind). */
export function headerRecord(init: HeadersInit | undefined, lowerCase = false): Record<string, string> {
  const headers: Record<string, string> = {};
  if (!init) {
    return headers;
  }
  if (init instanceof Headers) {
    init.forEach((value, name) => {
      headers[name] = value;
    });
    return headers;
  }
  if (Array.isArray(init)) {
    for (const [name, value] of init) {
      headers[lowerCase ? name.toLowerCase() : name] = value;
    }
    return headers;
  }
  for (const name in init) {
    headers[lowerCase ? name.toLowerCase() : name] = init[name];
  }
  return headers;
}

/** A request body as bytes: strings encoded, bytes as they are, anything else (Blob, form, stream) read. */
export async function requestBytes(body: BodyInit | null | undefined): Promise<Uint8Array | undefined> {
  if (body === null || body === undefined) {
    return undefined;
  }
  if (typeof body === 'string') {
    return new TextEncoder().encode(body);
  }
  if (body instanceof Uint8Array) {
    return body;
  }
  if (body instanceof ArrayBuffer) {
    return new Uint8Array(body);
  }
  return new Uint8Array(await new Response(body).arrayBuffer());
}
