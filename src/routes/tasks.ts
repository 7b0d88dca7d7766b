import { SYSTEMS } from '../../contracts/systems';
import { CompletedTaskSchema, completeTaskRoute } from '../../contracts/tasks';
import type { App } from '../app-env';
import { callBot } from '../medplum/bots';

export function registerTaskRoutes(app: App): void {
  app.openapi(completeTaskRoute, async (c) => {
    const { id } = c.req.valid('param');
    const result = await callBot(
      c.get('medplum'),
      { system: SYSTEMS.bots, value: 'complete-task' },
      { task: id, ...c.req.valid('json') },
    );
    return c.json(CompletedTaskSchema.parse(result), 200);
  });
}
