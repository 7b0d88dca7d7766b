import { randomBytes } from 'node:crypto';
import type { MedplumClient } from '@medplum/core';
import type { Project } from '@medplum/fhirtypes';
import { EDGE_KEY_CHECK, EDGE_STATEMENT, SYSTEMS } from '../../contracts/systems';

/** The least length of an edge-statement key (`openssl rand -hex 32` gives 64 characters). */
export const EDGE_KEY_MIN_LENGTH = 32;

/** The Project's stored edge-statement key, if any. */
export const storedEdgeKey = (project: Project): string | undefined =>
  project.secret?.find((s) => s.name === EDGE_STATEMENT.secretName)?.valueString || undefined;

/**
 * Which edge-statement key a run stores, or why it refuses (before writing anything): the one given
 * (EDGE_STATEMENT_KEY; a different stored one is replaced: `changed`); none given, a new random one when the
 * Project has none and there is a file to write it to (`made`); none given while the Project has one:
 * refused (the gateways hold that one; a run must not replace it silently); one too short: refused.
 */
export function edgeKeyPlan(
  given: string | undefined,
  stored: string | undefined,
  out: string | undefined,
): { key: string; made: boolean; changed: boolean } | { refused: string } {
  if (given) {
    if (given.length < EDGE_KEY_MIN_LENGTH) {
      return {
        refused: `EDGE_STATEMENT_KEY is too short (${given.length} characters; at least ${EDGE_KEY_MIN_LENGTH}): make one with \`openssl rand -hex 32\`, or leave it unset on a new Project and give --out (docs/deploy.md). Nothing was written.`,
      };
    }
    return { key: given, made: false, changed: stored !== undefined && stored !== given };
  }
  if (stored) {
    return {
      refused:
        'This Project has an edge-statement key, and EDGE_STATEMENT_KEY is not set: run with the same key (it is in the gateway env file an earlier run wrote: `set -a; . ./gateway.env; set +a`), or give a new one to replace it. Nothing was written.',
    };
  }
  if (!out) {
    return {
      refused:
        'EDGE_STATEMENT_KEY is not set and there is no --out FILE to write a new one to: give --out (a key is made and written there, never printed), or set EDGE_STATEMENT_KEY. Nothing was written.',
    };
  }
  return { key: randomBytes(32).toString('base64url'), made: true, changed: false };
}

/**
 * The gateway's own client as provisioning made it (tagged `<integration>|gateway`): its id and secret, for
 * the gateway's settings (GATEWAY_CLIENT_ID, GATEWAY_CLIENT_SECRET), read with a project admin's client.
 */
export async function gatewayClientOf(
  medplum: MedplumClient,
): Promise<{ clientId: string; clientSecret: string } | undefined> {
  const client = await medplum.searchOne(
    'ClientApplication',
    { _tag: `${SYSTEMS.integration}|${EDGE_KEY_CHECK.integration}` },
    { cache: 'no-cache' },
  );
  return client?.id && client.secret ? { clientId: client.id, clientSecret: client.secret } : undefined;
}
