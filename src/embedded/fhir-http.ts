import { badRequest, ContentType, getStatus, isOk, isOperationOutcome, OperationOutcomeError } from '@medplum/core';
import type { FhirRequest, FhirRouter, HttpMethod } from '@medplum/fhir-router';
import type { Binary, Bundle, OperationOutcome, Resource } from '@medplum/fhirtypes';
import { withBufferedBody } from '../shared/buffered-body';
import { MAX_JSON_DEPTH, nestedDeeperThan } from '../shared/json-depth';
import type { AttachmentUrls } from './attachments';
import type { SqliteRepository } from './store/repo';

const FHIR_JSON = 'application/fhir+json; charset=utf-8';

/** One call to the FHIR endpoint, whether it came over HTTP or from a client in this process. */
export interface FhirCall {
  method: string;
  url: URL;
  /** Header names in lower case. */
  headers: Record<string, string>;
  /** The body, read when the method carries one. */
  body(): Promise<Uint8Array>;
}

export function outcomeResponse(outcome: OperationOutcome, status = getStatus(outcome)): Response {
  return jsonResponse(outcome, status, { 'content-type': FHIR_JSON });
}

/** What a failure inside this server says: nothing of its own message, which may hold patient data. */
const INTERNAL_ERROR: OperationOutcome = {
  resourceType: 'OperationOutcome',
  issue: [{ severity: 'error', code: 'exception', details: { text: 'Internal server error' } }],
};

/**
 * A thrown error as an answer: an OperationOutcome (a refusal, or the caller's mistake) as it is;
 * anything else is this server failing, a 500 without the error's text, as on Medplum's server.
 */
export function thrownResponse(err: unknown): Response {
  if (err instanceof OperationOutcomeError) {
    return outcomeResponse(err.outcome);
  }
  return isOperationOutcome(err) ? outcomeResponse(err) : outcomeResponse(INTERNAL_ERROR, 500);
}

/** JSON as bytes the Response also keeps at hand, so an in-process caller reads them without a stream. */
function jsonResponse(body: unknown, status: number, headers: Record<string, string>): Response {
  const bytes = new TextEncoder().encode(JSON.stringify(body));
  return withBufferedBody(new Response(bytes, { status, headers }), bytes);
}

/**
 * Reads the request body the way Medplum's server does: FHIR/JSON bodies parsed (malformed JSON is a
 * 400 OperationOutcome), and a raw upload to `Binary` wrapped into a Binary resource.
 */
async function readBody(call: FhirCall, resourcePath: string, maxBytes: number): Promise<unknown> {
  const method = call.method;
  if (method === 'GET' || method === 'DELETE' || method === 'HEAD') {
    return undefined;
  }
  const contentType = (call.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  const bytes = await call.body();
  if (bytes.byteLength > maxBytes) {
    throw new BodyError(badRequest(`Request body exceeds ${maxBytes} bytes`), 413);
  }
  const binaryPath = /^Binary(\/([^/]+))?$/.exec(resourcePath);
  if (binaryPath && (method === 'POST' || (method === 'PUT' && binaryPath[2]))) {
    // Medplum's Binary endpoint (packages/server/src/fhir/binary.ts): the body is the content, whatever
    // its type (JSON included), except a Binary resource sent as `application/fhir+json` for its own id.
    if (contentType === ContentType.FHIR_JSON) {
      const resource = parseJson(bytes);
      if (isBinaryResource(resource) && (!binaryPath[2] || resource.id === binaryPath[2])) {
        if (nestedDeeperThan(resource, MAX_JSON_DEPTH)) {
          throw new BodyError(badRequest(`JSON body nested deeper than ${MAX_JSON_DEPTH} levels`));
        }
        return resource;
      }
    }
    // The upload's security context comes from X-Security-Context (uploadBinaryData); the caller's
    // policy then judges the Binary like any write.
    const securityContext = call.headers['x-security-context'];
    const binary: Binary = {
      resourceType: 'Binary',
      ...(binaryPath[2] ? { id: binaryPath[2] } : {}),
      contentType: contentType || 'application/octet-stream',
      data: Buffer.from(bytes).toString('base64'),
      ...(securityContext ? { securityContext: { reference: securityContext } } : {}),
    };
    return binary;
  }
  const text = new TextDecoder().decode(bytes);
  if (contentType === ContentType.FORM_URL_ENCODED) {
    return Object.fromEntries(new URLSearchParams(text));
  }
  if (text.length === 0) {
    return undefined;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text) as unknown;
  } catch {
    throw new BodyError(badRequest('Malformed JSON body'));
  }
  if (nestedDeeperThan(parsed, MAX_JSON_DEPTH)) {
    throw new BodyError(badRequest(`JSON body nested deeper than ${MAX_JSON_DEPTH} levels`));
  }
  return parsed;
}

function parseJson(bytes: Uint8Array): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(bytes)) as unknown;
  } catch {
    return undefined;
  }
}

function isBinaryResource(value: unknown): value is Binary {
  return typeof value === 'object' && value !== null && (value as Resource).resourceType === 'Binary';
}

/** An entity tag (`W/"<versionId>"` or `"<versionId>"`) or `*`: the If-Match values that mean something. */
const IF_MATCH = /^(\*|(W\/)?"[^"]+")$/;

/**
 * Medplum's router reads the version between the quotes of If-Match and silently ignores a value without
 * them, so `If-Match: garbage` would write unconditionally (packages/fhir-router/src/fhirrouter.ts,
 * parseIfMatchHeader). A precondition this server cannot read is refused instead, in the header and in
 * every `request.ifMatch` of a batch or transaction.
 */
function unreadableIfMatch(call: FhirCall, path: string, body: unknown): OperationOutcome | undefined {
  const header = call.headers['if-match'];
  if (header !== undefined && !IF_MATCH.test(header.trim())) {
    return badRequest('Invalid If-Match header: expected W/"<versionId>"');
  }
  if (path !== '' || call.method !== 'POST' || !isBundle(body)) {
    return undefined;
  }
  const index = (body.entry ?? []).findIndex((e) => {
    const ifMatch = e?.request?.ifMatch;
    return ifMatch !== undefined && (typeof ifMatch !== 'string' || !IF_MATCH.test(ifMatch.trim()));
  });
  return index < 0
    ? undefined
    : badRequest('Invalid If-Match: expected W/"<versionId>"', `Bundle.entry[${index}].request.ifMatch`);
}

function isBundle(body: unknown): body is Bundle {
  return typeof body === 'object' && body !== null && (body as Resource).resourceType === 'Bundle';
}

export class BodyError extends Error {
  constructor(
    readonly outcome: OperationOutcome,
    readonly status = 400,
  ) {
    super('Invalid request body');
  }
}

/** Handles one `/fhir/R4/...` request through Medplum's FhirRouter with the caller's repository. */
export async function handleFhirRequest(
  call: FhirCall,
  router: FhirRouter,
  repo: SqliteRepository,
  maxBodyBytes: number,
  attachments?: AttachmentUrls,
): Promise<Response> {
  const url = call.url;
  const path = url.pathname.replace(/^\/fhir\/R4\/?/, '');
  let body: unknown;
  try {
    body = await readBody(call, path, maxBodyBytes);
  } catch (err) {
    return err instanceof BodyError ? outcomeResponse(err.outcome, err.status) : thrownResponse(err);
  }
  const unreadable = unreadableIfMatch(call, path, body);
  if (unreadable) {
    return outcomeResponse(unreadable);
  }
  const query: Record<string, string | string[]> = {};
  for (const [key, value] of url.searchParams) {
    const existing = query[key];
    query[key] = existing === undefined ? value : Array.isArray(existing) ? [...existing, value] : [existing, value];
  }
  const request: FhirRequest = {
    method: call.method as HttpMethod,
    url: path + url.search,
    pathname: '',
    body,
    params: {},
    query,
    headers: call.headers,
    // As Medplum: a transaction Bundle is atomic only when the Project has the `transaction-bundles`
    // feature; without it fhir-router processes its entries one by one, as a batch.
    config: {
      transactions: repo.caller.system === true || (repo.caller.project.features ?? []).includes('transaction-bundles'),
    },
  };
  const [outcome, resource, options] = await router.handleRequest(request, repo);
  if (!isOk(outcome)) {
    // A failure may carry its own body (a bot that threw: 400 with the outcome of what it threw).
    return outcomeResponse(isOperationOutcome(resource) ? resource : outcome, getStatus(outcome));
  }
  const status = getStatus(outcome);
  if (!resource) {
    return outcomeResponse(outcome, status);
  }
  // Each reader gets presigned URLs for the Binaries it may read (packages/server/src/fhir/response.ts).
  const presented =
    attachments && resource.resourceType !== 'Binary' ? await attachments.presign(resource, repo) : resource;
  return resourceResponse(call, presented, status, options?.contentType);
}

function resourceResponse(call: FhirCall, resource: Resource, status: number, contentType?: string): Response {
  const accept = call.headers.accept ?? '';
  if (
    resource.resourceType === 'Binary' &&
    call.method === 'GET' &&
    !accept.includes('fhir+json') &&
    !accept.includes('application/json')
  ) {
    const binary = resource as Binary;
    return new Response(Buffer.from(binary.data ?? '', 'base64'), {
      status,
      headers: { 'content-type': binary.contentType ?? 'application/octet-stream' },
    });
  }
  const headers: Record<string, string> = { 'content-type': contentType ?? FHIR_JSON };
  const versionId = resource.meta?.versionId;
  if (versionId) {
    headers.etag = `W/"${versionId}"`;
  }
  if (status === 201 && resource.id) {
    headers.location = `${call.url.origin}/fhir/R4/${resource.resourceType}/${resource.id}/_history/${versionId}`;
  }
  return jsonResponse(resource, status, headers);
}
