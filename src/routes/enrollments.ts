import { activateEnrollmentRoute, EnrollmentSchema, enrollRoute, unenrollRoute } from '../../contracts/enrollments';
import { SYSTEMS } from '../../contracts/systems';
import type { App } from '../app-env';
import { callBot } from '../medplum/bots';

const enrollment = { system: SYSTEMS.bots, value: 'enrollment' };

export function registerEnrollmentRoutes(app: App): void {
  app.openapi(enrollRoute, async (c) => {
    const result = await callBot(c.get('medplum'), enrollment, { operation: 'enroll', ...c.req.valid('json') });
    // 201 when this call enrolled her, 200 when the enrollment already existed.
    const { created, ...answer } = result as { created?: unknown };
    return c.json(EnrollmentSchema.parse(answer), created === true ? 201 : 200);
  });
  app.openapi(activateEnrollmentRoute, async (c) => {
    const { id } = c.req.valid('param');
    const { created: _, ...answer } = (await callBot(c.get('medplum'), enrollment, {
      operation: 'activate',
      carePlan: id,
    })) as { created?: unknown };
    return c.json(EnrollmentSchema.parse(answer), 200);
  });
  app.openapi(unenrollRoute, async (c) => {
    const { id } = c.req.valid('param');
    const { created: _, ...answer } = (await callBot(c.get('medplum'), enrollment, {
      operation: 'unenroll',
      carePlan: id,
    })) as { created?: unknown };
    return c.json(EnrollmentSchema.parse(answer), 200);
  });
}
