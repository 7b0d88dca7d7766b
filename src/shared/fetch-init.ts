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
export async function requestBytes(body: BodyInit | null | undefined): Promise<Uint8Array<ArrayBuffer> | undefined> {
  if (body === null || body === undefined) {
    return undefined;
  }
  if (typeof body === 'string') {
    return new TextEncoder().encode(body);
  }
  if (body instanceof Uint8Array) {
    // A view on shared memory is copied: the bytes sent must not change under the receiver.
    return body.buffer instanceof ArrayBuffer ? (body as Uint8Array<ArrayBuffer>) : new Uint8Array(body);
  }
  if (body instanceof ArrayBuffer) {
    return new Uint8Array(body);
  }
  return new Uint8Array(await new Response(body).arrayBuffer());
}

/** A fetch call as plain values, for a transport of our own. Header names in lower case. */
export interface PlainCall {
  method: string;
  url: URL;
  headers: Record<string, string>;
  body: BodyInit | null | undefined;
}

/**
 * The call as plain values when a transport of our own may take it as it is: a URL (not a Request),
 * and no body, or text or bytes with their type stated, on a method that may carry one. Otherwise
 * undefined: the call takes the standard path (a form, a Blob, a stream, a body with no type, a body
 * on GET or HEAD), where fetch's own rules decide its bytes, its Content-Type, or that it is refused.
 */
export function plainCall(input: RequestInfo | URL, init: RequestInit | undefined): PlainCall | undefined {
  if (typeof input !== 'string' && !(input instanceof URL)) {
    return undefined;
  }
  const method = (init?.method ?? 'GET').toUpperCase();
  const headers = headerRecord(init?.headers, true);
  return passesAsIs(method, init?.body, headers)
    ? { method, url: new URL(input), headers, body: init?.body }
    : undefined;
}

function passesAsIs(method: string, body: BodyInit | null | undefined, headers: Record<string, string>): boolean {
  if (body === undefined || body === null) {
    return true;
  }
  const typed = headers['content-type'] !== undefined;
  const bytesOrText = typeof body === 'string' || body instanceof Uint8Array || body instanceof ArrayBuffer;
  return method !== 'GET' && method !== 'HEAD' && typed && bytesOrText;
}
