import { expect, it } from 'vitest';
import { startTestBackend } from '../support/backend';

it("a failure inside the embedded Medplum (not the caller's doing) is a 500 that does not echo its message", async () => {
  const backend = await startTestBackend();
  const token = backend.patients.alice.token;
  const url = new URL(`fhir/R4/Patient/${backend.patients.alice.patient.id}`, backend.baseUrl);
  // The store going away under a running server: every call now fails inside Medplum, token check first.
  backend.db.close();
  for (const send of [
    () => backend.fetch(url, { headers: { authorization: `Bearer ${token}` } }),
    () => backend.app.fetch(new Request(url, { headers: { authorization: `Bearer ${token}` } })),
  ]) {
    const response = await send();
    const text = await response.text();
    expect(response.status).toBe(500);
    expect(text).not.toMatch(/database|sqlite|not open/i);
  }
});
