import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/**
 * A tenant's webhook receiver, as a patient app's backend runs one: it checks every delivery's signature
 * with the Standard Webhooks reference library (not our own code), and answers what the test tells it to
 * (200 unless a status is queued). On 127.0.0.1, a random port.
 */
export interface Delivery {
  id: string;
  timestamp: number;
  /** The reference library's verdict on the signature (and the timestamp's freshness). */
  verified: boolean;
  body: unknown;
  raw: string;
  headers: IncomingHttpHeaders;
  /** What the receiver answered. */
  answered: number;
  /** When it came (ms since the epoch). */
  at: number;
}

export interface WebhookReceiver {
  url: string;
  deliveries: Delivery[];
  /** The next deliveries are answered with these statuses, in order (then 200 again); 0: never answered. */
  answerNext(...statuses: number[]): void;
  /** Forgets the statuses still queued: 200 again from the next delivery. */
  answerNormally(): void;
  /** Resolves once `count` deliveries have come (or rejects after `ms`). */
  waitFor(count: number, ms?: number): Promise<Delivery[]>;
  close(): Promise<void>;
}

export async function startWebhookReceiver(secret: string, path = '/hooks/patient-care'): Promise<WebhookReceiver> {
  const verifier = new Webhook(secret);
  const deliveries: Delivery[] = [];
  const queued: number[] = [];
  let waiters: (() => void)[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let verified = false;
      try {
        verifier.verify(raw, request.headers as Record<string, string>);
        verified = true;
      } catch {
        verified = false;
      }
      let body: unknown;
      try {
        body = JSON.parse(raw);
      } catch {
        body = undefined;
      }
      const answered = request.url === path && request.method === 'POST' ? (queued.shift() ?? 200) : 404;
      deliveries.push({
        id: String(request.headers['webhook-id']),
        timestamp: Number(request.headers['webhook-timestamp']),
        verified,
        body,
        raw,
        headers: request.headers,
        answered,
        at: Date.now(),
      });
      if (answered !== 0) {
        response.writeHead(answered).end();
      }
      for (const wake of waiters) {
        wake();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${path}`,
    deliveries,
    answerNext: (...statuses) => queued.push(...statuses),
    answerNormally: () => queued.splice(0),
    waitFor: (count, ms = 15_000) =>
      new Promise((resolve, reject) => {
        const check = () => {
          if (deliveries.length >= count) {
            clearTimeout(timer);
            waiters = waiters.filter((w) => w !== check);
            resolve(deliveries.slice(0, count));
          }
        };
        const timer = setTimeout(() => {
          waiters = waiters.filter((w) => w !== check);
          reject(new Error(`${deliveries.length} of ${count} webhook deliveries came in ${ms} ms`));
        }, ms);
        waiters.push(check);
        check();
      }),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A Standard Webhooks signing secret: `whsec_` and base64 of 32 random bytes. */
export const newWebhookSecret = (): string =>
  `whsec_${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64')}`;
