import { createRequestRoute, PatientRequestAnswerSchema } from '../../contracts/requests';
import { SYSTEMS } from '../../contracts/systems';
import type { App } from '../app-env';
import { callBot } from '../medplum/bots';

export function registerRequestRoutes(app: App): void {
  app.openapi(createRequestRoute, async (c) => {
    const result = await callBot(
      c.get('medplum'),
      { system: SYSTEMS.bots, value: 'request-review' },
      c.req.valid('json'),
    );
    // 201 when this call made the request, 200 when the same one was already open.
    const { created, ...answer } = result as { created?: unknown };
    return c.json(PatientRequestAnswerSchema.parse(answer), created === true ? 201 : 200);
  });
}
