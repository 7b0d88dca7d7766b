/**
 * Bodies a fetch already holds whole, keyed by the Response that carries them. A Response hands
 * out its bytes only through a stream or a promise, and on Node both first build the platform's
 * full Response object (about a tenth of the gateway's own work on a pass-through read, profiled
 * under `npm run bench` load).
 * The pooled fetch, the embedded Medplum's in-process answers and the gateway's deadline (which
 * reads a streamed body whole) keep the bytes at hand; a read passed through hands them on unchanged.
 */
const buffered = new WeakMap<Response, Uint8Array<ArrayBuffer>>();

export function withBufferedBody(response: Response, bytes: Uint8Array<ArrayBuffer>): Response {
  buffered.set(response, bytes);
  return response;
}

export function hasBufferedBody(response: Response): boolean {
  return buffered.has(response);
}

/** The whole body: the bytes the fetch kept, or read from the Response itself. */
export async function bodyBytes(response: Response): Promise<Uint8Array<ArrayBuffer>> {
  return buffered.get(response) ?? new Uint8Array(await response.arrayBuffer());
}
