import { decideOrderRoute, OrderDecisionsSchema } from '../../contracts/orders';
import { SYSTEMS } from '../../contracts/systems';
import type { App } from '../app-env';
import { callBot } from '../medplum/bots';

export function registerOrderRoutes(app: App): void {
  app.openapi(decideOrderRoute, async (c) => {
    const { id } = c.req.valid('param');
    const result = await callBot(
      c.get('medplum'),
      { system: SYSTEMS.bots, value: 'decide-order' },
      { order: id, ...c.req.valid('json') },
    );
    return c.json(OrderDecisionsSchema.parse(result), 200);
  });
}
