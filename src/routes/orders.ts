import { decideOrderRoute, OrderDecisionsSchema } from '../../contracts/orders';
import { SYSTEMS } from '../../contracts/systems';
import type { App } from '../app-env';
import { callBot } from '../medplum/bots';
import { medplumOf } from '../medplum/client';
import { repeatedOrderDecisions } from '../medplum/finished-work';

export function registerOrderRoutes(app: App): void {
  app.openapi(decideOrderRoute, async (c) => {
    const { id } = c.req.valid('param');
    const body = c.req.valid('json');
    // The same decisions again, on an order they placed, are answered from her own reads.
    const repeat = await repeatedOrderDecisions(medplumOf(c), c.get('session').patientId, id, body);
    if (repeat) {
      return c.json(OrderDecisionsSchema.parse(repeat), 200);
    }
    const result = await callBot(medplumOf(c), { system: SYSTEMS.bots, value: 'decide-order' }, { order: id, ...body });
    return c.json(OrderDecisionsSchema.parse(result), 200);
  });
}
