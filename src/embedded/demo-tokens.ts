import { SYSTEMS } from '../../contracts/systems';
import { DEMO_PATIENTS, DEMO_TENANTS } from '../provision/demo';
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

/** Each demo tenant's patient app, by tenant key: the client id a patient app of that tenant is built with. */
export async function demoApps(medplum: LaunchedMedplum): Promise<Record<string, string>> {
  const apps: Record<string, string> = {};
  for (const tenant of DEMO_TENANTS) {
    const app = await medplum.admin.searchOne('ClientApplication', {
      _tag: `${SYSTEMS.provisioning}|app-${tenant.key}`,
    });
    if (app?.id) {
      apps[tenant.key] = app.id;
    }
  }
  return apps;
}
