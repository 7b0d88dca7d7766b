import { activateEnrollmentRoute, EnrollmentSchema, enrollRoute, unenrollRoute } from '../../contracts/enrollments';
import { SYSTEMS } from '../../contracts/systems';
import type { App } from '../app-env';
import { callBot } from '../medplum/bots';
import type { CatalogCache } from '../medplum/catalog-cache';
import { medplumOf } from '../medplum/client';
import { currentEnrollment, herReads, settledEnrollment } from '../medplum/finished-work';

const enrollment = { system: SYSTEMS.bots, value: 'enrollment' };

export function registerEnrollmentRoutes(app: App, catalog: CatalogCache): void {
  // Enrollment work already done (enrolled, active, revoked) is answered as it is from her own reads (issue
  // 27, item 1); anything else is the bot's.
  app.openapi(enrollRoute, async (c) => {
    const body = c.req.valid('json');
    const current = await currentEnrollment(
      herReads(catalog, medplumOf(c), c.get('session').patientId),
      c.get('session').patientId,
      body.healthcareService,
    );
    if (current) {
      return c.json(EnrollmentSchema.parse(current), 200);
    }
    const result = await callBot(medplumOf(c), enrollment, { operation: 'enroll', ...body });
    // 201 when this call enrolled her, 200 when the enrollment already existed.
    const { created, ...answer } = result as { created?: unknown };
    return c.json(EnrollmentSchema.parse(answer), created === true ? 201 : 200);
  });
  app.openapi(activateEnrollmentRoute, async (c) => {
    const { id } = c.req.valid('param');
    const active = await settledEnrollment(medplumOf(c), c.get('session').patientId, id, 'active');
    if (active) {
      return c.json(EnrollmentSchema.parse(active), 200);
    }
    const { created: _, ...answer } = (await callBot(medplumOf(c), enrollment, {
      operation: 'activate',
      carePlan: id,
    })) as { created?: unknown };
    return c.json(EnrollmentSchema.parse(answer), 200);
  });
  app.openapi(unenrollRoute, async (c) => {
    const { id } = c.req.valid('param');
    const revoked = await settledEnrollment(medplumOf(c), c.get('session').patientId, id, 'revoked');
    if (revoked) {
      return c.json(EnrollmentSchema.parse(revoked), 200);
    }
    const { created: _, ...answer } = (await callBot(medplumOf(c), enrollment, {
      operation: 'unenroll',
      carePlan: id,
    })) as { created?: unknown };
    return c.json(EnrollmentSchema.parse(answer), 200);
  });
}
