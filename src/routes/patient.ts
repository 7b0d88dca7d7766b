import { AccessLogSchema, accessLogRoute, DEFAULT_ACCESS_LOG_ENTRIES } from '../../contracts/access-log';
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

  app.openapi(accessLogRoute, async (c) => {
    const { before, limit } = c.req.valid('query');
    // The bot reads her entries for the caller her token names; the page is all the input says.
    const result = await callBot(
      medplumOf(c),
      { system: SYSTEMS.bots, value: 'access-log' },
      {
        ...(before ? { before: new Date(before).toISOString() } : {}),
        limit: limit ? Number(limit) : DEFAULT_ACCESS_LOG_ENTRIES,
      },
    );
    return c.json(AccessLogSchema.parse(result), 200);
  });

  app.openapi(homeRoute, async (c) => {
    // The bot decides, from the caller's token it verifies itself (not a tenant app: 403); no input.
    const result = await callBot(medplumOf(c), { system: SYSTEMS.bots, value: 'patient-home' }, {});
    return c.json(PatientHomeSchema.parse(result), 200);
  });
}
