import { availabilityFor } from '../../bots/availability';
import { readingOnce } from '../../bots/lib/reads';
import { AvailabilitySchema, availabilityRoute } from '../../contracts/scheduling';
import type { App } from '../app-env';
import { botAnswer } from '../medplum/bots';
import type { CatalogCache } from '../medplum/catalog-cache';
import { medplumOf } from '../medplum/client';

export function registerSchedulingRoutes(app: App, catalog: CatalogCache): void {
  // Computed here with HER token, from what she may read herself (her tenant's visit teams, roles, visit
  // Schedules and Slots): her calls spend her own FHIR quota, never the availability bot's, which every
  // patient would share (one patient once spent it in 15 s and everyone's availability was 503). Her
  // tenant's visit directory (roles, licences, Schedules) is kept with the published catalog a few seconds:
  // then a call is her Patient and the Slots (booking checks the licence and the slot again itself).
  app.openapi(availabilityRoute, async (c) => {
    const result = await availabilityFor(
      readingOnce(medplumOf(c)),
      c.get('session').patientId,
      c.req.valid('query'),
      catalog,
    );
    return c.json(AvailabilitySchema.parse(botAnswer(result)), 200);
  });
}
