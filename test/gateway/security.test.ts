import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { bodyFor, concretePath, operationsOf } from '../support/operations';
import { type BadToken, badTokens } from '../support/tokens';

let gw: TestGateway;
let tokens: BadToken[];
beforeAll(async () => {
  gw = await startTestGateway();
  tokens = await badTokens(gw.backend);
});
afterAll(() => gw?.close());

describe('auth matrix: every secured operation refuses every bad token', () => {
  it('covers every secured operation of the document', () => {
    const secured = operationsOf(gw).filter((o) => o.secured);
    expect(secured.length).toBeGreaterThanOrEqual(10);
    expect(
      operationsOf(gw)
        .filter((o) => !o.secured)
        .map((o) => o.operationId),
    ).toEqual(['config.get']);
  });

  it('answers 401/403 with the envelope, and nothing else', async () => {
    const ownId = gw.backend.patients.dave.patient.id;
    for (const op of operationsOf(gw).filter((o) => o.secured)) {
      for (const bad of tokens) {
        // Refusal operations are tested on a type they refuse; reads on the patient's own Patient.
        const path =
          concretePath(op.template, {
            id: ownId,
            type: op.operationId.startsWith('fhir.refuse') ? 'Observation' : 'Patient',
          }) + op.requiredQuery;
        const body = bodyFor(op, ownId);
        const res = await gw.call(op.method, path, { token: bad.token, body });
        const label = `${op.operationId} with ${bad.name}`;
        expect(res.status, `${label}: ${res.text}`).toBe(bad.status);
        expect((res.body as { error: { code: string } }).error.code, label).toBe(
          bad.status === 401 ? 'unauthenticated' : 'forbidden',
        );
        if (bad.status === 401) {
          expect(res.headers.get('www-authenticate'), label).toBe('Bearer error="invalid_token"');
        }
        expect(res.text, label).not.toContain('Nguyen');
      }
    }
  });
});
