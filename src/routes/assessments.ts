import { AssessmentSchema, startAssessmentRoute } from '../../contracts/assessments';
import { SYSTEMS } from '../../contracts/systems';
import type { App } from '../app-env';
import { callBot } from '../medplum/bots';
import type { CatalogCache } from '../medplum/catalog-cache';
import { medplumOf } from '../medplum/client';
import { herReads, resumedAssessment } from '../medplum/finished-work';

export function registerAssessmentRoutes(app: App, catalog: CatalogCache): void {
  app.openapi(startAssessmentRoute, async (c) => {
    const { healthcareService } = c.req.valid('json');
    // An assessment she has started is resumed from her own reads.
    const resumed = await resumedAssessment(
      herReads(catalog, medplumOf(c), c.get('session').patientId),
      c.get('session').patientId,
      healthcareService,
    );
    if (resumed) {
      return c.json(AssessmentSchema.parse(resumed), 200);
    }
    const result = await callBot(
      medplumOf(c),
      { system: SYSTEMS.bots, value: 'start-assessment' },
      { healthcareService },
    );
    // 201 when this call started it, 200 when it resumed what was there (the bot knows which).
    const { created, ...assessment } = result as { created?: unknown };
    return c.json(AssessmentSchema.parse(assessment), created === true ? 201 : 200);
  });
}
