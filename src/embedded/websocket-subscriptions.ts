import { badRequest, notFound } from '@medplum/core';
import type { FhirRouter } from '@medplum/fhir-router';
import type { Context } from 'hono';
import { outcomeResponse } from './fhir-http';
import type { SqliteRepository } from './store/repo';

/** The Project feature that turns WebSocket subscriptions on, on Medplum (packages/server/src/config/types.ts). */
const FEATURE = 'websocket-subscriptions';

/** What Medplum answers `$get-ws-binding-token` in a project without the feature (getwsbindingtoken.ts). */
const NOT_ENABLED = badRequest('WebSocket subscriptions not enabled for current project');

/**
 * `GET Subscription/:id/$get-ws-binding-token`, the one route Medplum registers for it
 * (packages/server/src/fhir/routes.ts), which `SubscriptionManager` of @medplum/core (Medplum's apps) calls
 * after creating a `websocket` Subscription. This server serves no WebSocket, so it answers as Medplum
 * answers a project without `websocket-subscriptions` (packages/server/src/fhir/operations/getwsbindingtoken.ts:
 * 400 before the Subscription is even read), and a project with the feature gets the same 400, saying
 * why: a binding token would name a socket no one serves. Other methods and the type level stay 404, as
 * on Medplum.
 */
export function registerWebSocketSubscriptions(router: FhirRouter): void {
  router.add('GET', 'Subscription/:id/$get-ws-binding-token', async (_req, repo) => {
    const features = (repo as unknown as SqliteRepository).caller.project.features ?? [];
    return [
      features.includes(FEATURE)
        ? badRequest('WebSocket subscriptions are not served by the embedded Medplum')
        : NOT_ENABLED,
    ];
  });
}

/**
 * `ws/subscriptions-r4`, the socket `$get-ws-binding-token` names. Medplum accepts the upgrade from anyone
 * and refuses later, per message (packages/server/src/subscriptions/websockets.ts, handleR4SubscriptionConnection):
 * a `bind-with-token` whose token is not a binding token (none can be had without the feature) gets an
 * OperationOutcome and the socket is terminated. This server has no WebSocket implementation, so it
 * refuses at the handshake instead, the nearest sane way (RFC 6455 section 4.2.2: an HTTP error instead
 * of 101): 400 with an OperationOutcome saying so. Either way nothing is ever delivered on it; a
 * client (ReconnectingWebSocket) retries the handshake with backoff where on Medplum it would sit idle.
 * Without an Upgrade header it is 404, as Medplum's HTTP routes answer that path.
 */
export function webSocketSubscriptionsEndpoint(c: Context): Response {
  return c.req.header('upgrade')?.toLowerCase() === 'websocket'
    ? outcomeResponse(badRequest('WebSocket subscriptions not enabled'))
    : outcomeResponse(notFound);
}
