import type { Context } from 'hono';
import {
  AcceptancesSchema,
  acceptancesRoute,
  RequirementsSchema,
  requirementsRoute,
  WithdrawnSchema,
  withdrawalsRoute,
} from '../../contracts/agreements';
import { SYSTEMS } from '../../contracts/systems';
import type { App, AppEnv } from '../app-env';
import { clientAddress, userAgent } from '../edge/request';
import { callBot } from '../medplum/bots';

const bot = (value: string) => ({ system: SYSTEMS.bots, value });

export function registerAgreementRoutes(app: App): void {
  app.openapi(requirementsRoute, async (c) => {
    const context = c.req.valid('query');
    const result = await callBot(c.get('medplum'), bot('agreement-requirements'), { context });
    return c.json(RequirementsSchema.parse(result), 200);
  });

  app.openapi(acceptancesRoute, async (c) => {
    const { agreements } = c.req.valid('json');
    const coordinates = agreements.map((a) => (typeof a === 'string' ? a : `${a.agreementUrl}|${a.agreementVersion}`));
    const result = await callBot(c.get('medplum'), bot('accept-agreements'), {
      agreements: coordinates,
      session: sessionProof(c),
    });
    return c.json(AcceptancesSchema.parse(result), 200);
  });

  app.openapi(withdrawalsRoute, async (c) => {
    const result = await callBot(c.get('medplum'), bot('withdraw-agreement'), c.req.valid('json'));
    return c.json(WithdrawnSchema.parse(result), 200);
  });
}

/** Clickwrap proof of the session, from the verified token and the connection, never the body. */
function sessionProof(c: Context<AppEnv>): { loginId: string; ipAddress?: string; userAgent?: string } {
  return {
    loginId: c.get('session').loginId,
    ipAddress: clientAddress(c),
    userAgent: userAgent(c),
  };
}
