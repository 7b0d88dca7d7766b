import type { Patient } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACCEPTED_BODY_TYPES, FORBIDDEN_REASONS, UNAUTHENTICATED_REASONS } from '../../contracts/errors';
import { WRITE_OWNERS } from '../../contracts/fhir';
import { UNKNOWN_RESOURCE_TYPE } from '../../contracts/resource-types';
import { DEFAULT_LIMITS } from '../../src/app';
import { type ApiResponse, startTestGateway, type TestGateway } from '../support/gateway';
import { badTokens } from '../support/tokens';

/**
 * DESIGN section 4: every failure is `{error: {code, message, details}}`, and `details` always carries
 * the request id (the X-Request-Id header) next to what the code promises. The response validator
 * checks the shape on every call of every test; these check each status's own fields.
 */
const BODY_LIMIT = 16 * 1024;

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ limits: { ...DEFAULT_LIMITS, bodyBytes: BODY_LIMIT } });
});
afterAll(() => gw?.close());

const alice = () => gw.backend.patients.alice;

/** The envelope's `error`, after checking the status, the code and that `details.requestId` is the header's. */
function failure(res: ApiResponse, status: number, code: string, label = '') {
  expect(res.status, label).toBe(status);
  const { error } = res.body as { error: { code: string; message: string; details: Record<string, unknown> } };
  expect(error.code, label).toBe(code);
  expect(error.details.requestId, label).toBe(res.headers.get('x-request-id'));
  return error;
}

describe('every error has details', () => {
  it('404 unknown route: the method and path the gateway saw, never the query', async () => {
    const res = await gw.call('GET', '/v1/nothing-here?secret=1');
    expect(failure(res, 404, 'not_found').details).toEqual({
      method: 'GET',
      path: '/v1/nothing-here',
      requestId: res.headers.get('x-request-id'),
    });
  });

  it('404 unknown route: a long path is echoed bounded', async () => {
    const res = await gw.call('GET', `/v1/${'x'.repeat(5000)}`);
    expect((failure(res, 404, 'not_found').details.path as string).length).toBeLessThanOrEqual(256);
  });

  it('404 unknown id: the request id and nothing that tells absent from foreign', async () => {
    const absent = await gw.call('GET', '/v1/fhir/Observation/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e');
    const foreign = await gw.call('PUT', `/v1/fhir/Patient/${gw.backend.patients.bob.patient.id}`, {
      body: { ...gw.backend.patients.bob.patient },
    });
    for (const res of [absent, foreign]) {
      expect(Object.keys(failure(res, 404, 'not_found').details)).toEqual(['requestId']);
    }
  });

  it('401: details.reason says which of missing, invalid, expired or ended, and WWW-Authenticate', async () => {
    const reasons = new Set<string>();
    for (const bad of await badTokens(gw.backend)) {
      if (bad.status !== 401) {
        continue;
      }
      const res = await gw.call('GET', '/v1/patient/profile', { token: bad.token });
      const { details } = failure(res, 401, 'unauthenticated', bad.name);
      const expected =
        bad.token === null
          ? 'missing_token'
          : bad.name === 'expired'
            ? 'expired'
            : bad.name === 'revoked login'
              ? 'revoked'
              : 'invalid_token';
      expect(details, bad.name).toEqual({ reason: expected, requestId: res.headers.get('x-request-id') });
      expect(res.headers.get('www-authenticate'), bad.name).toBe('Bearer error="invalid_token"');
      reasons.add(details.reason as string);
    }
    const notBearer = await gw.call('GET', '/v1/patient/profile', {
      token: null,
      headers: { authorization: 'Basic dXNlcjpwYXNz' },
    });
    expect(failure(notBearer, 401, 'unauthenticated').details.reason).toBe('invalid_token');
    expect([...reasons].sort()).toEqual([...UNAUTHENTICATED_REASONS].sort());
  });

  it('403: details.reason for a staff, bot or machine token, a policy denial and answers for someone else', async () => {
    for (const bad of (await badTokens(gw.backend)).filter((b) => b.status === 403)) {
      const res = await gw.call('GET', '/v1/patient/profile', { token: bad.token });
      expect(failure(res, 403, 'forbidden', bad.name).details.reason, bad.name).toBe('not_a_patient');
    }
    const policy = await gw.call('GET', '/v1/fhir/AuditEvent');
    expect(failure(policy, 403, 'forbidden').details.reason).toBe('access_policy');
    const someoneElse = await gw.call('POST', '/v1/fhir/QuestionnaireResponse', {
      body: {
        resourceType: 'QuestionnaireResponse',
        status: 'completed',
        subject: { reference: `Patient/${gw.backend.patients.bob.patient.id}` },
      },
    });
    expect(failure(someoneElse, 403, 'forbidden').details.reason).toBe('not_own_record');
    expect(FORBIDDEN_REASONS).toEqual(['not_a_patient', 'access_policy', 'not_own_record']);
  });

  it('412 on PUT /v1/fhir/Patient/{id} with a stale If-Match: details.ifMatch is what was sent', async () => {
    const patient = (await gw.call('GET', `/v1/fhir/Patient/${alice().patient.id}`)).body as Patient;
    const res = await gw.call('PUT', `/v1/fhir/Patient/${patient.id}`, {
      body: { ...patient, gender: 'unknown' },
      headers: { 'if-match': 'W/"not-the-version"' },
    });
    expect(failure(res, 412, 'version_conflict').details.ifMatch).toBe('W/"not-the-version"');
    const stored = await gw.backend.systemRepo.readResource<Patient>('Patient', patient.id as string);
    expect(stored.meta?.versionId).toBe(patient.meta?.versionId);
  });

  it('415: details.accepted lists the body media types', async () => {
    const res = await gw.call('PUT', `/v1/fhir/Patient/${alice().patient.id}`, {
      rawBody: 'resourceType=Patient',
      headers: { 'content-type': 'text/plain' },
    });
    expect(failure(res, 415, 'unsupported_media_type').details.accepted).toEqual(ACCEPTED_BODY_TYPES);
  });

  it('413: details.limit in bytes', async () => {
    const res = await gw.call('POST', '/v1/fhir/QuestionnaireResponse', {
      body: { resourceType: 'QuestionnaireResponse', status: 'completed', text: { div: 'x'.repeat(BODY_LIMIT) } },
    });
    expect(failure(res, 413, 'payload_too_large').details.limit).toBe(BODY_LIMIT);
  });

  it('405 on a path with other methods: details.allow, the same as the Allow header', async () => {
    const res = await gw.call('DELETE', '/v1/agreements/requirements');
    const { details } = failure(res, 405, 'method_not_allowed');
    expect(details.allow).toEqual(['GET', 'HEAD']);
    expect(res.headers.get('allow')).toBe('GET, HEAD');
  });

  it('405 on a record-plane write: details.use names the owner, details.allow what the path has', async () => {
    const res = await gw.call('POST', '/v1/fhir/Observation', { body: { resourceType: 'Observation' } });
    expect(failure(res, 405, 'method_not_allowed').details).toEqual({
      use: WRITE_OWNERS.Observation,
      allow: ['GET', 'HEAD'],
      requestId: res.headers.get('x-request-id'),
    });
    expect(res.headers.get('allow')).toBe('GET, HEAD');
  });

  it('400: details.issues', async () => {
    const res = await gw.call('POST', '/v1/agreements/acceptances', { body: { agreements: [] } });
    const issues = failure(res, 400, 'invalid_request').details.issues as { path: string; message: string }[];
    expect(issues.map((i) => i.path)).toEqual(['agreements']);
  });
});

describe('a resource type the record service does not know', () => {
  const unknownType = (res: ApiResponse, label: string) => {
    const { details } = failure(res, 400, 'invalid_request', label);
    expect(details.issues, label).toEqual([{ path: 'type', message: UNKNOWN_RESOURCE_TYPE }]);
  };

  it('is 400 invalid_request naming `type`, on a search and a read', async () => {
    unknownType(await gw.call('GET', '/v1/fhir/NotAType'), 'search');
    unknownType(await gw.call('GET', '/v1/fhir/NotAType/0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e'), 'read');
  });

  it('is the same 400 for a write some type allows (POST on a collection, PUT on an instance)', async () => {
    for (const [method, path] of [
      ['POST', '/v1/fhir/NotAType'],
      ['PUT', '/v1/fhir/NotAType/abc'],
    ]) {
      unknownType(await gw.call(method, path, { body: { resourceType: 'NotAType', id: 'abc' } }), `${method} ${path}`);
    }
  });

  it('method before type: a method no type allows on the path is 405 whatever the type', async () => {
    const writes = [
      ['PUT', '/v1/fhir/NotAType'],
      ['PATCH', '/v1/fhir/NotAType'],
      ['DELETE', '/v1/fhir/NotAType'],
      ['POST', '/v1/fhir/NotAType/abc'],
      ['PATCH', '/v1/fhir/NotAType/abc'],
      ['DELETE', '/v1/fhir/NotAType/abc'],
      ['DELETE', '/v1/fhir/Observation/abc'],
    ];
    for (const [method, path] of writes) {
      const body = method === 'DELETE' ? undefined : { resourceType: 'NotAType', id: 'abc' };
      const res = await gw.call(method, path, { body });
      const { details } = failure(res, 405, 'method_not_allowed', `${method} ${path}`);
      expect(details.allow, `${method} ${path}`).toEqual(['GET', 'HEAD']);
      expect(res.headers.get('allow')).toBe('GET, HEAD');
    }
    // And an ended session is 401 there too, not a 405 that says nothing of it.
    const ended = (await badTokens(gw.backend)).find((b) => b.name === 'revoked login');
    const res = await gw.call('DELETE', '/v1/fhir/NotAType/abc', { token: ended?.token });
    expect(failure(res, 401, 'unauthenticated').details.reason).toBe('revoked');
  });

  it('a known type not writable by patients stays 405', async () => {
    const res = await gw.call('DELETE', '/v1/fhir/Bot/abc');
    expect(failure(res, 405, 'method_not_allowed').details.use).toMatch(/^none/);
  });
});
