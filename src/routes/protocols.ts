import { ProtocolsSchema, protocolsRoute } from '../../contracts/protocols';
import type { App } from '../app-env';
import { publishedOfferings } from '../medplum/catalog';
import { medplumOf } from '../medplum/client';

export function registerProtocolRoutes(app: App): void {
  app.openapi(protocolsRoute, async (c) => {
    const { patientId } = c.get('session');
    const { protocols, withheld, missing } = await publishedOfferings(medplumOf(c), patientId);
    return c.json(
      ProtocolsSchema.parse({
        protocols,
        ...(withheld > 0 ? { incomplete: { missing, withheld, fix: `PUT /v1/fhir/Patient/${patientId}` } } : {}),
      }),
      200,
    );
  });
}
