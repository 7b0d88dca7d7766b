import { homeRoute, PatientHomeSchema, profileRoute } from '../../contracts/patient';
import { SYSTEMS } from '../../contracts/systems';
import type { App } from '../app-env';
import { callBot } from '../medplum/bots';
import { medplumOf } from '../medplum/client';
import { readThrough } from '../medplum/passthrough';
import { routeResponse } from './respond';

export function registerPatientRoutes(app: App): void {
  app.openapi(profileRoute, async (c) => {
    const { patientId } = c.get('session');
    return routeResponse(await readThrough(c.get('upstream'), 'Patient', patientId));
  });

  app.openapi(homeRoute, async (c) => {
    // The bot decides, from the caller's token it verifies itself (not a tenant app: 403); no input.
    const result = await callBot(medplumOf(c), { system: SYSTEMS.bots, value: 'patient-home' }, {});
    return c.json(PatientHomeSchema.parse(result), 200);
  });
}
