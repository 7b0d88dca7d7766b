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
import { callBot } from '../medplum/bots';

const bot = (value: string) => ({ system: SYSTEMS.bots, value });

export function registerAgreementRoutes(app: App, edgeSigner: EdgeSigner | undefined): void {
  app.openapi(requirementsRoute, async (c) => {
    const context = c.req.valid('query');
    const result = await callBot(c.get('medplum'), bot('agreement-requirements'), { context });
    return c.json(RequirementsSchema.parse(result), 200);
  });

  app.openapi(acceptancesRoute, async (c) => {
    const { agreements } = c.req.valid('json');
    const coordinates = agreements.map((a) =>
      typeof a === 'string' ? a : 'url' in a ? `${a.url}|${a.version}` : `${a.agreementUrl}|${a.agreementVersion}`,
    );
    const result = await callBot(c.get('medplum'), bot('accept-agreements'), {
      agreements: coordinates,
      edge: await edgeStatement(c, edgeSigner),
    });
    return c.json(AcceptancesSchema.parse(result), 200);
  });

  app.openapi(withdrawalsRoute, async (c) => {
    const result = await callBot(c.get('medplum'), bot('withdraw-agreement'), c.req.valid('json'));
    return c.json(WithdrawnSchema.parse(result), 200);
  });
}
