// The same script in TypeScript: `.mts`, so that it is an ES module whatever package.json says and
// top-level await works (under tsx, and under Node 24, which strips the types).
import { createPatientCareClient, PatientCareApiError } from '@patient-care/sdk';

const baseUrl = process.env.PATIENT_CARE_URL ?? 'http://localhost:8787';
const config = await createPatientCareClient({ baseUrl }).config.get();

const sdk = createPatientCareClient({ baseUrl, accessToken: process.env.PATIENT_TOKEN });
const profile = await sdk.patient.profile();
const { unmet } = await sdk.agreements.requirements();
const { acceptances } = await sdk.agreements.accept(unmet);
const after = await sdk.agreements.requirements();

const refused: unknown = await createPatientCareClient({ baseUrl, accessToken: 'not-a-token' })
  .patient.profile()
  .catch((error: unknown) => error);

console.log(
  JSON.stringify({
    projectId: config.projectId,
    given: profile.name?.[0]?.given,
    unmet,
    acceptances,
    satisfiedAfter: after.satisfied,
    refused:
      refused instanceof PatientCareApiError
        ? { apiError: true, status: refused.status, code: refused.code }
        : { apiError: false },
  }),
);
