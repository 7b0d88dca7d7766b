import { patientAgreements } from '../../bots/lib/agreements';
import {
  AcceptancesSchema,
  acceptancesRoute,
  RequirementsSchema,
  requirementsRoute,
  WithdrawnSchema,
  withdrawalsRoute,
} from '../../contracts/agreements';
import { SYSTEMS } from '../../contracts/systems';
import type { App } from '../app-env';
import { edgeStatement } from '../edge/request';
import type { EdgeSigner } from '../edge/statement';
import { notFound } from '../errors';
import { callBot } from '../medplum/bots';
import { type CatalogCache, cachedAgreementCatalog } from '../medplum/catalog-cache';
import { medplumOf } from '../medplum/client';

const bot = (value: string) => ({ system: SYSTEMS.bots, value });

export function registerAgreementRoutes(app: App, edgeSigner: EdgeSigner | undefined, catalog: CatalogCache): void {
  // A read, computed here with her own token: the same rules the workflow bots' gate applies
  // (bots/lib/agreements.ts), over what her policy lets her read (her Patient and Consents, the
  // agreements published to her tenant, a context of her own); Medplum's policy, not this code, keeps
  // anyone else's out. No bot run, and her own quota, not the platform's. What her tenant publishes is
  // the same for all its patients (the published agreements, a service, what a plan attaches): one read of
  // each serves her tenant's calls for a few seconds.
  app.openapi(requirementsRoute, async (c) => {
    const medplum = medplumOf(c);
    const state = await patientAgreements(
      medplum,
      c.get('session').patientId,
      c.req.valid('query'),
      cachedAgreementCatalog(catalog, medplum),
    );
    if (!state) {
      throw notFound();
    }
    return c.json(RequirementsSchema.parse({ satisfied: state.unmet.length === 0, unmet: state.unmet }), 200);
  });

  app.openapi(acceptancesRoute, async (c) => {
    const { agreements } = c.req.valid('json');
    const coordinates = agreements.map((a) =>
      typeof a === 'string' ? a : 'url' in a ? `${a.url}|${a.version}` : `${a.agreementUrl}|${a.agreementVersion}`,
    );
    const result = await callBot(medplumOf(c), bot('accept-agreements'), {
      agreements: coordinates,
      edge: await edgeStatement(c, edgeSigner),
    });
    return c.json(AcceptancesSchema.parse(result), 200);
  });

  app.openapi(withdrawalsRoute, async (c) => {
    const result = await callBot(medplumOf(c), bot('withdraw-agreement'), c.req.valid('json'));
    return c.json(WithdrawnSchema.parse(result), 200);
  });
}
