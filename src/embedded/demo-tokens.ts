import { SYSTEMS } from '../../contracts/systems';
import { DEMO_PATIENTS } from '../provision/demo';
import type { LaunchedMedplum } from './launch';

/** A freshly minted token for each demo patient, by key (`alice`, ...): what `npm start` prints. */
export async function demoPatientTokens(medplum: LaunchedMedplum): Promise<Record<string, string>> {
  const tokens: Record<string, string> = {};
  for (const demo of DEMO_PATIENTS) {
    const patient = await medplum.admin.searchOne('Patient', { identifier: `${SYSTEMS.demoPatient}|${demo.key}` });
    const membership = await medplum.admin.searchOne('ProjectMembership', { profile: `Patient/${patient?.id}` });
    if (membership) {
      tokens[demo.key] = (await medplum.clientFor(membership)).getAccessToken() as string;
    }
  }
  return tokens;
}
