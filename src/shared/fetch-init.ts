/**
 * The parts of a `fetch(input, init)` call that a transport of our own needs as plain values:
 * no WHATWG Request is built, which on Node costs more than the rest of a short call.
 */

/**
 * Header names and values as a record. A plain record (what MedplumClient and jose send) is read
 * directly: values trimmed as Headers trims them, names lower-cased when asked, a name given twice
 * joined as Headers joins it. Anything else (Headers, pairs, a Map) goes through Headers itself.
 */
export function headerRecord(init: HeadersInit | undefined, lowerCase = false): Record<string, string> {
  const headers: Record<string, string> = {};
  if (!init) {
    return headers;
  }
  if (Array.isArray(init) || !isPlainRecord(init)) {
    (init instanceof Headers ? init : new Headers(init)).forEach((value, name) => {
      headers[name] = value;
    });
    return headers;
  }
  for (const name in init) {
    const key = lowerCase ? name.toLowerCase() : name;
    const value = String(init[name]).trim();
    headers[key] = headers[key] === undefined ? value : `${headers[key]}, ${value}`;
  }
  return headers;
}

function isPlainRecord(init: HeadersInit): init is Record<string, string> {
  const prototype = Object.getPrototypeOf(init);
  return prototype === Object.prototype || prototype === null;
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
