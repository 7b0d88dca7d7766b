// A patient app's script in plain JavaScript: @patient-care/sdk by name, top-level await.
// PATIENT_CARE_URL: the gateway; PATIENT_TOKEN: the patient's Medplum access token (from sign-in).
import { createPatientCareClient, PatientCareApiError } from '@patient-care/sdk';

const baseUrl = process.env.PATIENT_CARE_URL;
const config = await createPatientCareClient({ baseUrl }).config.get();

const sdk = createPatientCareClient({ baseUrl, accessToken: process.env.PATIENT_TOKEN });
const profile = await sdk.patient.profile();
const { unmet } = await sdk.agreements.requirements();
const { acceptances } = await sdk.agreements.accept(unmet);
const after = await sdk.agreements.requirements();

const refused = await createPatientCareClient({ baseUrl, accessToken: 'not-a-token' })
  .patient.profile()
  .catch((error) => error);

console.log(
  JSON.stringify({
    projectId: config.projectId,
    given: profile.name?.[0]?.given,
    unmet,
    acceptances,
    satisfiedAfter: after.satisfied,
    refused: { apiError: refused instanceof PatientCareApiError, status: refused.status, code: refused.code },
  }),
);
