import http from 'node:http';
import https from 'node:https';

/**
 * Node only: a small `fetch` over node:http with keep-alive agents, for the gateway's calls to
 * Medplum. The WHATWG fetch of Node (undici) costs several times more CPU per call, and on the
 * gateway's hot path (one Medplum call per request) that cost is most of the gateway's own work.
 * Covers what MedplumClient uses: method, headers, string/bytes body, AbortSignal; buffered body.
 */
export function keepAliveFetch(maxSockets = 64): typeof fetch {
  const agents = {
    'http:': new http.Agent({ keepAlive: true, maxSockets }),
    'https:': new https.Agent({ keepAlive: true, maxSockets }),
  };
  return ((input: RequestInfo | URL, init: RequestInit = {}) =>
    new Promise<Response>((resolve, reject) => {
      const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
      const transport = url.protocol === 'https:' ? https : http;
      const headers: Record<string, string> = {};
      new Headers(init.headers).forEach((value, key) => {
        headers[key] = value;
      });
      const body = init.body as string | Uint8Array | undefined | null;
      if (body !== undefined && body !== null) {
        headers['content-length'] = String(Buffer.byteLength(body));
      }
      const request = transport.request(
        url,
        {
          method: init.method ?? 'GET',
          headers,
          agent: agents[url.protocol as 'http:' | 'https:'],
          signal: init.signal ?? undefined,
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('error', reject);
          response.on('end', () => {
            const responseHeaders = new Headers();
            for (const [key, value] of Object.entries(response.headers)) {
              if (value !== undefined) {
                responseHeaders.set(key, Array.isArray(value) ? value.join(', ') : value);
              }
            }
            const status = response.statusCode ?? 502;
            const payload = status === 204 || status === 304 ? null : Buffer.concat(chunks);
            resolve(new Response(payload, { status, headers: responseHeaders }));
          });
        },
      );
      request.on('error', reject);
      if (body !== undefined && body !== null) {
        request.write(body);
      }
      request.end();
    })) as typeof fetch;
}
