import { createRequestRoute, PatientRequestAnswerSchema } from '../../contracts/requests';
import { SYSTEMS } from '../../contracts/systems';
import type { App } from '../app-env';
import { callBot } from '../medplum/bots';
import { medplumOf } from '../medplum/client';
import { openRequestAgain } from '../medplum/finished-work';

export function registerRequestRoutes(app: App): void {
  app.openapi(createRequestRoute, async (c) => {
    const body = c.req.valid('json');
    // Her open request for the same item is answered as it is, from her own reads.
    const open = await openRequestAgain(medplumOf(c), c.get('session').patientId, body);
    if (open) {
      return c.json(PatientRequestAnswerSchema.parse(open), 200);
    }
    const result = await callBot(medplumOf(c), { system: SYSTEMS.bots, value: 'request-review' }, body);
    // 201 when this call made the request, 200 when the same one was already open.
    const { created, ...answer } = result as { created?: unknown };
    return c.json(PatientRequestAnswerSchema.parse(answer), created === true ? 201 : 200);
  });
}
