// What tsc must refuse: each line below is an error, or `@ts-expect-error` itself fails the check
// (as it would if the package's types had resolved to `any`).
import { createPatientCareClient, type PatientCareClient } from '@patient-care/sdk';

const sdk: PatientCareClient = createPatientCareClient({ baseUrl: 'https://api.example.com' });

export async function refusedByTypes(): Promise<void> {
  // @ts-expect-error an agreement needs a version
  await sdk.agreements.accept([{ url: 'https://patient-care.example/agreements/terms' }]);
  // @ts-expect-error nor a number
  await sdk.agreements.accept([42]);
  const { unmet } = await sdk.agreements.requirements({ carePlan: 'CarePlan/1' });
  // @ts-expect-error categories are a closed list
  const category: 'marketing' = unmet[0].category;
  // @ts-expect-error a withdrawal names the agreement
  await sdk.agreements.withdraw({ acknowledgeConsequence: true });
  // @ts-expect-error the profile is a FHIR Patient
  const birthDate: number = (await sdk.patient.profile()).birthDate;
  void [category, birthDate];
}
