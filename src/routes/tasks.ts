import { SYSTEMS } from '../../contracts/systems';
import { CompletedTaskSchema, completeTaskRoute } from '../../contracts/tasks';
import type { App } from '../app-env';
import { edgeStatement } from '../edge/request';
import type { EdgeSigner } from '../edge/statement';
import { callBot } from '../medplum/bots';

export function registerTaskRoutes(app: App, edgeSigner: EdgeSigner | undefined): void {
  app.openapi(completeTaskRoute, async (c) => {
    const { id } = c.req.valid('param');
    const body = c.req.valid('json');
    // An answer to an offer is a consent: its proof names the session it came from.
    const edge = 'decision' in body ? await edgeStatement(c, edgeSigner) : undefined;
    const result = await callBot(
      c.get('medplum'),
      { system: SYSTEMS.bots, value: 'complete-task' },
      { task: id, ...body, ...(edge ? { edge } : {}) },
    );
    return c.json(CompletedTaskSchema.parse(result), 200);
  });
}
