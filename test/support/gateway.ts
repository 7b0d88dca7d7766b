import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { type App, type AppDeps, createApp, DEFAULT_LIMITS } from '../../src/app';
import { nodeAssetLoader } from '../../src/docs-assets-node';
import { createEventTickets } from '../../src/edge/event-ticket';
import { createEdgeSigner } from '../../src/edge/statement';
import { openApiDocument } from '../../src/routes/docs';
import { startTestBackend, type TestBackend, type TestBackendOptions } from './backend';

type OpenApiDoc = ReturnType<typeof openApiDocument>;

export interface ApiResponse {
  status: number;
  headers: Headers;
  body: unknown;
  text: string;
}

/**
 * Validates a response against the OpenAPI document: the operation's declared statuses and, for
 * JSON bodies, the declared schema. Unknown routes must answer the Error envelope. Every gateway
 * test goes through `TestGateway.call`, so no response escapes this check.
 */
export function createResponseValidator(doc: OpenApiDoc) {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
  addFormats(ajv);
  ajv.addSchema(doc as object, 'openapi.json');
  const paths = (doc.paths ?? {}) as Record<
    string,
    Record<string, { responses: Record<string, { content?: Record<string, unknown> }> }>
  >;
  const templates = Object.keys(doc.paths ?? {}).map((template) => ({
    template,
    regex: new RegExp(`^${template.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/\\\{[^}]+\\\}/g, '[^/]+')}$`),
    params: (template.match(/\{/g) ?? []).length,
  }));
  const escapePointer = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

  return (method: string, path: string, response: ApiResponse): void => {
    const candidates = templates.filter((t) => t.regex.test(path) && paths[t.template]?.[method.toLowerCase()]);
    // The most concrete path wins over more templated ones, as OpenAPI says.
    const match = [...candidates].sort((a, b) => a.params - b.params)[0];
    const contentType = (response.headers.get('content-type') ?? '').split(';')[0];
    let pointer: string;
    if (!match) {
      if (path === '/' || path.startsWith('/docs/assets/')) {
        return;
      }
      pointer = 'openapi.json#/components/schemas/Error';
    } else {
      const operation = paths[match.template][method.toLowerCase()];
      const declared = operation.responses[String(response.status)];
      if (!declared) {
        throw new Error(
          `${method} ${match.template} answered ${response.status}, which the OpenAPI document does not declare`,
        );
      }
      if (!declared.content) {
        return;
      }
      if (!declared.content[contentType]) {
        throw new Error(`${method} ${match.template} ${response.status} answered ${contentType}, not declared`);
      }
      pointer = `openapi.json#/paths/${escapePointer(match.template)}/${method.toLowerCase()}/responses/${response.status}/content/${escapePointer(contentType)}/schema`;
    }
    const validate = ajv.getSchema(pointer) ?? ajv.compile({ $ref: pointer });
    if (!validate(response.body)) {
      throw new Error(
        `${method} ${path} ${response.status} does not match the document: ${ajv.errorsText(validate.errors)}`,
      );
    }
  };
}

export interface TestGateway {
  backend: TestBackend;
  app: App;
  doc: OpenApiDoc;
  /** Calls the gateway and validates the answer against the OpenAPI document. */
  call(
    method: string,
    path: string,
    options?: { token?: string | null; body?: unknown; rawBody?: string; headers?: Record<string, string> },
  ): Promise<ApiResponse>;
  close(): void;
}

/**
 * Calls a gateway app in process and validates each answer against its OpenAPI document (and that it
 * carries X-Request-Id). The token defaults to `defaultToken()`; `null` sends none.
 */
export function createCaller(app: App, doc: OpenApiDoc, defaultToken: () => string): TestGateway['call'] {
  const validate = createResponseValidator(doc);
  return async (method, path, options = {}) => {
    const headers = new Headers(options.headers);
    const token = options.token === undefined ? defaultToken() : options.token;
    if (token !== null) {
      headers.set('authorization', `Bearer ${token}`);
    }
    let body: string | undefined = options.rawBody;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
    }
    if (body !== undefined && !headers.has('content-type')) {
      headers.set('content-type', 'application/fhir+json');
    }
    const response = await app.request(`http://gateway.test${path}`, { method, headers, body });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // not JSON: kept as text
    }
    const result = { status: response.status, headers: response.headers, body: parsed, text };
    validate(method, new URL(path, 'http://gateway.test').pathname, result);
    if (!response.headers.get('x-request-id')) {
      throw new Error(`${method} ${path} answered without X-Request-Id`);
    }
    return result;
  };
}

/**
 * In-process calls have no socket: they arrive as if through the deployment's load balancer, a trusted
 * proxy at this address that appends X-Forwarded-For (so a test's X-Forwarded-For names the client).
 */
export const TEST_LOAD_BALANCER = '192.0.2.10';

/**
 * A gateway app over a test backend, as startTestGateway builds it; `overrides` in place of the defaults
 * (another instance over the same Medplum, other limits, a fetch that counts).
 */
export function testApp(backend: TestBackend, overrides: Partial<AppDeps> = {}): App {
  return createApp({
    medplum: { baseUrl: backend.baseUrl, fetch: backend.fetch },
    issuer: backend.baseUrl,
    projectId: backend.project.id,
    limits: DEFAULT_LIMITS,
    assets: nodeAssetLoader(),
    publicUrl: 'http://gateway.test',
    trustedProxies: [TEST_LOAD_BALANCER],
    peerAddress: () => TEST_LOAD_BALANCER,
    edgeSigner: createEdgeSigner(backend.edgeStatementKey),
    eventTickets: createEventTickets(backend.edgeStatementKey),
    ...overrides,
  });
}

export async function startTestGateway(
  /** Deps of the gateway in place of the defaults; a function of the backend to wrap what it gives. */
  overrides: Partial<AppDeps> | ((backend: TestBackend) => Partial<AppDeps>) = {},
  backendOptions: TestBackendOptions = {},
): Promise<TestGateway> {
  const backend = await startTestBackend(backendOptions);
  const app = testApp(backend, typeof overrides === 'function' ? overrides(backend) : overrides);
  const doc = openApiDocument(app);
  const call = createCaller(app, doc, () => backend.patients.alice.token);
  return { backend, app, doc, call, close: () => backend.close() };
}
