import { randomBytes } from 'node:crypto';
import { MedplumClient } from '@medplum/core';
import { EDGE_STATEMENT } from '../../contracts/systems';
import { applyDefinition, type ProvisionReport } from '../provision/apply';
import { readBotBundles } from '../provision/bundles';
import type { ProvisionDefinition } from '../provision/definition';
import { type BootstrapResult, bootstrapProject } from './bootstrap';
import { createEmbeddedMedplum, type EmbeddedMedplum, type EmbeddedMedplumOptions } from './server';
import { lockStore } from './store/lock';

export interface LaunchedMedplum extends EmbeddedMedplum, BootstrapResult {
  provisioning: ProvisionReport;
  /** The Project secret bots check the gateway's edge statements with; the gateway signs with it. */
  edgeStatementKey: string;
  /** A project-admin MedplumClient (client credentials), the same way `npm run provision` signs in. */
  admin: MedplumClient;
}

export const DEFAULT_PROJECT_NAME = 'Patient Care';

/**
 * Starts the embedded Medplum and provisions it exactly as a real Medplum is provisioned: an admin
 * client signs in with client credentials and the definition is applied over the Medplum API.
 */
export async function launchEmbeddedMedplum(
  options: EmbeddedMedplumOptions & { definition: ProvisionDefinition; projectName?: string; runBots?: boolean },
): Promise<LaunchedMedplum> {
  // Before anything is read or written: a second Medplum on this file refuses to start (store/lock.ts).
  const lock = lockStore(options.dbPath);
  try {
    return await launchLocked(options, lock.release);
  } catch (err) {
    lock.release();
    throw err;
  }
}

async function launchLocked(
  options: EmbeddedMedplumOptions & { definition: ProvisionDefinition; projectName?: string; runBots?: boolean },
  releaseLock: () => void,
): Promise<LaunchedMedplum> {
  const embedded = await createEmbeddedMedplum(options);
  const bootstrap = await bootstrapProject(
    embedded.systemRepo,
    options.projectName ?? DEFAULT_PROJECT_NAME,
    options.definition.project.features,
    options.definition.resources.filter((r) => r.presetId),
  );
  const admin = new MedplumClient({ baseUrl: embedded.baseUrl, fetch: embedded.fetch, cacheTime: 0 });
  await admin.startClientLogin(bootstrap.adminClient.id, bootstrap.adminClient.secret as string);
  // Kept across restarts (it is in the store), made once: the gateway of this process signs with it.
  const edgeStatementKey =
    bootstrap.project.secret?.find((s) => s.name === EDGE_STATEMENT.secretName)?.valueString ??
    randomBytes(32).toString('base64url');
  const provisioning = await applyDefinition(admin, options.definition, {
    bundles: readBotBundles(options.definition),
    edgeStatementKey,
    runBots: options.runBots,
  });
  return {
    ...embedded,
    ...bootstrap,
    admin,
    provisioning,
    edgeStatementKey,
    close() {
      embedded.close();
      releaseLock();
    },
  };
}
