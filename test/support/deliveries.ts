import type { Subscription } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import type { TestBackend } from './backend';

/**
 * Lost subscription deliveries and the reconciler that re-drives them (bots/reconcile.ts), as the fault
 * and visit tests make them.
 */

/** Runs `work` with these provisioned Subscriptions off (their deliveries lost), then turns them back on. */
export async function withSubscriptionsOff(
  backend: TestBackend,
  keys: string[],
  work: () => Promise<unknown>,
): Promise<void> {
  const subscriptions = await Promise.all(
    keys.map(
      async (key) =>
        (await backend.admin.searchOne('Subscription', {
          _tag: `${SYSTEMS.provisioning}|subscription-${key}`,
        })) as Subscription,
    ),
  );
  for (const subscription of subscriptions) {
    await backend.admin.updateResource({ ...subscription, status: 'off' });
  }
  try {
    await work();
    await backend.subscriptions.idle();
  } finally {
    for (const subscription of subscriptions) {
      const current = await backend.admin.readResource('Subscription', subscription.id as string);
      await backend.admin.updateResource({ ...current, status: 'active' });
    }
  }
}

/** The reconciler's next run (every 10 minutes): each call ticks the cron at the next 10-minute mark. */
export function reconciler(backend: TestBackend): () => Promise<void> {
  let runs = 0;
  return () => {
    runs++;
    return backend.cron.tick(new Date(Date.UTC(2026, 10, 25, 12, (runs * 10) % 60)));
  };
}
