import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { storeSnapshot } from '../support/journey';

/**
 * A JSON body is checked before any route sees it (issue 24, src/edge/json-body.ts): UTF-8, and nested at
 * most 100 levels, so that nothing that walks it (validation, serialising it for Medplum) runs out of
 * stack: a 400 naming what is wrong, never a 500, and nothing written.
 */
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(() => gw?.close());

async function send(method: string, path: string, body: string | Uint8Array<ArrayBuffer>) {
  const response = await gw.app.request(`http://gateway.test${path}`, {
    method,
    headers: { authorization: `Bearer ${gw.backend.patients.alice.token}`, 'content-type': 'application/fhir+json' },
    body,
  });
  return { status: response.status, body: (await response.json()) as { error?: { code: string; message: string } } };
}

describe('JSON bodies', () => {
  const deep = (levels: number) => `${'{"a":'.repeat(levels)}"x"${'}'.repeat(levels)}`;

  it('nested 5,000 levels deep: 400 invalid_request on the record plane and the action plane, nothing written', async () => {
    const alice = gw.backend.patients.alice;
    const before = storeSnapshot(gw.backend);
    const answers = `{"resourceType":"QuestionnaireResponse","status":"in-progress","item":[{"linkId":"x","deep":${deep(5000)}}]}`;
    const patient = JSON.stringify({ ...alice.patient, deep: 'DEEP' }).replace('"DEEP"', deep(5000));
    for (const [method, path, body] of [
      ['POST', '/v1/fhir/QuestionnaireResponse', answers],
      ['PUT', `/v1/fhir/Patient/${alice.patient.id}`, patient],
      ['POST', '/v1/requests', `{"medication":"x","note":${deep(5000)}}`],
    ]) {
      const res = await send(method, path, body);
      expect(res.status, path).toBe(400);
      expect(res.body.error).toMatchObject({
        code: 'invalid_request',
        message: 'The body nests deeper than 100 levels',
      });
    }
    expect(storeSnapshot(gw.backend)).toEqual(before);
  });

  it('invalid UTF-8 is refused (400), never stored with replacement characters', async () => {
    const before = storeSnapshot(gw.backend);
    const encode = (text: string) => [...new TextEncoder().encode(text)];
    const bytes = new Uint8Array([
      ...encode('{"resourceType":"QuestionnaireResponse","status":"in-progress","item":[{"linkId":"'),
      0xff,
      0xfe,
      ...encode('"}]}'),
    ]);
    const res = await send('POST', '/v1/fhir/QuestionnaireResponse', bytes);
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', message: 'The body is not valid UTF-8' });
    expect(storeSnapshot(gw.backend)).toEqual(before);
  });
});
