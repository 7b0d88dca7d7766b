import type { Context } from 'hono';
import { MAX_QUERY_BYTES } from '../../contracts/fhir';
import type { App, AppEnv } from '../app-env';
import { publicUrl } from '../edge/request';
import { ApiError } from '../errors';

/** A static file of the reference page (swagger-ui-dist), served by the app itself: no CDN. */
export interface Asset {
  body: BodyInit;
  contentType: string;
}

export type AssetLoader = (name: string) => Promise<Asset | undefined>;

/** The only files the page needs (served under /docs/assets/). */
export const DOCS_ASSETS: Record<string, string> = {
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui.css': 'text/css; charset=utf-8',
};

const OPENAPI_INFO = {
  title: 'Patient Care API',
  version: '1.0.0',
  license: { name: 'Proprietary', url: 'https://patient-care.example/terms' },
  description:
    "The patient-facing surface of the care platform: an action plane of named workflow endpoints and a record plane (`/v1/fhir`) of FHIR R4 reads over the signed-in patient's own chart. Every call acts as the signed-in patient; tenancy is decided by the server. Errors are always the envelope `{error: {code, message, details}}` with the status given for each code, plus `X-Request-Id` on every response.",
};

export function registerDocsRoutes(app: App, assets: AssetLoader | undefined): void {
  // Generated once per server URL (routes are fixed once the app is built): it is ≈ 100 ms of work.
  const documents = new Map<string, string>();
  app.get('/v1/openapi.json', (c) => {
    const server = publicUrl(c);
    let text = documents.get(server);
    if (text === undefined) {
      text = JSON.stringify(openApiDocument(app, c));
      documents.set(server, text);
    }
    return c.body(text, 200, { 'Content-Type': 'application/json' });
  });

  app.get('/docs/assets/:name', async (c) => {
    const name = c.req.param('name');
    const asset = DOCS_ASSETS[name] && assets ? await assets(name) : undefined;
    if (!asset) {
      throw new ApiError('not_found', 'No such asset');
    }
    return c.body(asset.body as ArrayBuffer, 200, {
      'Content-Type': asset.contentType,
      'Cache-Control': 'public, max-age=3600',
    });
  });

  // The environment's host (spec: "names the host it was served from") is PUBLIC_URL's, never the Host header.
  app.get('/', (c) => c.html(referencePage(new URL(publicUrl(c)).host)));
  // Browsers ask for it with the reference page: no icon, said without a 404 in their console.
  app.get('/favicon.ico', (c) => c.body(null, 204, { 'cache-control': 'public, max-age=86400' }));
}

/** The OpenAPI 3.1 document, generated from the contracts the routes validate with (never hand-written). */
export function openApiDocument(app: App, c?: Context<AppEnv>) {
  return withIdempotencyKeys(
    app.getOpenAPI31Document({
      openapi: '3.1.0',
      info: OPENAPI_INFO,
      servers: c ? [{ url: publicUrl(c), description: 'This environment' }] : [{ url: 'https://api.example.test' }],
      tags: [
        { name: 'Session', description: 'Configuration, the signed-in patient and registration.' },
        {
          name: 'Record plane',
          description: `FHIR R4 reads over the patient's record, and the few patient-authored writes. A search query may be at most ${MAX_QUERY_BYTES} bytes once percent-encoded.`,
        },
      ],
    }),
  );
}

const IDEMPOTENCY_KEY = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    "Makes the call safe to retry (draft-ietf-httpapi-idempotency-key-header): the same key with the same request (method, path, query string, Content-Type and body; the query's parameters in any order, the type in any case) within 24 hours answers the first answer again, status and body, with `Idempotent-Replayed: true`, and does nothing; the key with another request is 422 `idempotency_key_reused`; while the first call runs, 409 `request_in_progress` (Retry-After). Keys are the patient's own and kept by the platform, so every instance honours them. A call that ends in a 5xx or 429 keeps no answer: retry it with the same key. The answer is kept before it is sent: a retry sent after the answer arrived always answers it again, at any instance. The SDK sends a new key with every POST and reuses it on its own retries.",
  schema: {
    type: 'string',
    minLength: 1,
    maxLength: 255,
    pattern: '^[\\x21-\\x7e]+$',
    example: '5b8f0d1e-3c2a-4f7e-9d6b-1a2b3c4d5e6f',
  },
};

/**
 * Every POST of `/v1` takes an `Idempotency-Key` (src/edge/idempotency.ts), and may answer its two
 * refusals: added to the generated document here, where the operations are all known.
 */
function withIdempotencyKeys<D>(document: D): D {
  const paths = (document as { paths?: Record<string, Record<string, unknown> | undefined> }).paths ?? {};
  for (const item of Object.values(paths)) {
    const post = item?.post as
      | {
          parameters?: unknown[];
          responses?: Record<
            string,
            { description?: string; content?: Record<string, { schema?: unknown; example?: unknown }> }
          >;
        }
      | undefined;
    if (!post) {
      continue;
    }
    post.parameters = [...(post.parameters ?? []), IDEMPOTENCY_KEY];
    const responses = post.responses ?? {};
    const envelope = Object.values(responses).find(
      (r) =>
        r.content?.['application/json']?.schema &&
        r.description &&
        /error|refus|conflict|invalid|not/i.test(r.description),
    )?.content?.['application/json']?.schema ?? { $ref: '#/components/schemas/Error' };
    const refusal = (status: string, code: string, message: string, description: string) => {
      const existing = responses[status];
      responses[status] = existing
        ? { ...existing, description: `${existing.description ?? ''} With an Idempotency-Key: ${description}` }
        : {
            description: `With an Idempotency-Key: ${description}`,
            content: {
              'application/json': {
                schema: envelope,
                example: {
                  error: {
                    code,
                    message,
                    details: { header: 'Idempotency-Key', requestId: '6f1c2b0e-3c1d-4f7a-9a55-0c7e0a5d2b11' },
                  },
                },
              },
            },
          };
    };
    refusal(
      '409',
      'request_in_progress',
      'A request with this Idempotency-Key is still in progress; try again shortly',
      '`request_in_progress` while the first call with the key runs.',
    );
    refusal(
      '422',
      'idempotency_key_reused',
      'This Idempotency-Key was used with another request; use a new key for a new request',
      '`idempotency_key_reused` when the key was used with another request.',
    );
    post.responses = responses;
  }
  return document;
}

const escapeHtml = (text: string): string =>
  text.replace(
    /[&<>"']/g,
    (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch] as string,
  );

function referencePage(host: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Patient Care API reference</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
<style>body{margin:0;font-family:system-ui,sans-serif}header{padding:12px 20px;background:#0b3d5c;color:#fff}</style>
</head>
<body>
<header>Patient Care API &middot; served from <strong id="served-from">${escapeHtml(host)}</strong></header>
<div id="reference"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script>
window.ui = SwaggerUIBundle({ url: '/v1/openapi.json', dom_id: '#reference', deepLinking: true });
</script>
</body>
</html>`;
}
