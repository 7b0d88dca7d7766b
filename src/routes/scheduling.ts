import { AvailabilitySchema, availabilityRoute } from '../../contracts/scheduling';
import { SYSTEMS } from '../../contracts/systems';
import type { App } from '../app-env';
import { callBot } from '../medplum/bots';

export function registerSchedulingRoutes(app: App): void {
  app.openapi(availabilityRoute, async (c) => {
    const result = await callBot(
      c.get('medplum'),
      { system: SYSTEMS.bots, value: 'availability' },
      c.req.valid('query'),
    );
    return c.json(AvailabilitySchema.parse(result), 200);
  });
}
