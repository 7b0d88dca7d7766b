import { EDGE_KEY_CHECK, SYSTEMS } from '../../../contracts/systems';
import type { KeyedResource } from '../definition';
import { BOT_CODE } from '../policies/bots';
import { CLIENT_SECRETS } from '../policies/common';
import type { AccessPolicyDefinition, PlatformBot } from '../shape';

/**
 * The gateway's own machine client and the one bot it runs: the check of its EDGE_STATEMENT_KEY against the
 * Project's (issue 49 item 3). The client can execute that bot and read nothing else.
 */
export const edgeKeyCheck: PlatformBot = {
  access: {
    key: 'bot-edge-key-check',
    policy: {
      name: 'Bot: edge-key-check',
      // Who runs it: re-read to see it is the gateway's client (never its secret).
      resource: [{ resourceType: 'ClientApplication', interaction: ['read'], hiddenFields: CLIENT_SECRETS }],
    },
  },
  bot: {
    key: EDGE_KEY_CHECK.bot,
    description: "Answers the id of the Project's edge-statement key to the gateway's own client (its start check).",
    accessPolicy: 'bot-edge-key-check',
  },
};

/** The gateway's client: finds and executes the key check, nothing else. */
export const gatewayIntegrationAccess: AccessPolicyDefinition = {
  key: 'integration-gateway',
  policy: {
    name: 'Gateway: checks its edge-statement key',
    resource: [
      {
        resourceType: 'Bot',
        criteria: `Bot?identifier=${SYSTEMS.bots}|${EDGE_KEY_CHECK.bot}`,
        interaction: ['read', 'search'],
        hiddenFields: BOT_CODE,
      },
    ],
  },
};

export const gatewayIntegration: KeyedResource = {
  key: 'integration-gateway',
  resource: {
    resourceType: 'ClientApplication',
    name: 'Patient Care gateway',
    description:
      "The gateway's own client (GATEWAY_CLIENT_ID): at start it checks that its EDGE_STATEMENT_KEY is the Project's.",
    meta: { tag: [{ system: SYSTEMS.integration, code: EDGE_KEY_CHECK.integration }] },
  },
};
