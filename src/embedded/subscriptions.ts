import { matchesSearchRequest, parseSearchRequest } from '@medplum/core';
import type { Bot, Resource, Subscription } from '@medplum/fhirtypes';
import { BotExecutionError } from './bots/operations';
import type { ResourceChange, SqliteRepository } from './store/repo';

export const SUPPORTED_INTERACTION_URL =
  'https://medplum.com/fhir/StructureDefinition/subscription-supported-interaction';

export interface SubscriptionJob {
  subscription: Subscription;
  botId: string;
  resource: Resource;
  interaction: ResourceChange['interaction'];
  attempt: number;
}

export interface SubscriptionQueueOptions {
  /** The system's view of the store: reads Subscriptions across projects. */
  systemRepo: SqliteRepository;
  runBot: (
    bot: Bot,
    input: Resource | { deletedResource: Resource },
    requester: string | undefined,
    headers: Record<string, string>,
  ) => Promise<unknown>;
  /**
   * Total tries of a delivery the platform failed to make (the Bot unreadable, not deployed, no
   * membership). A failure of the bot's own code is never retried, as on Medplum: the reconciler
   * re-drives lost work.
   */
  maxAttempts?: number;
  retryDelayMs?: number;
  onError?: (job: SubscriptionJob, err: unknown) => void;
}

/**
 * Bot runs for deliveries at once: a burst of writes queues its deliveries (job records, no
 * work) instead of starting a bot run for each at once; Medplum's subscription worker likewise runs a
 * bounded number of jobs at a time. Below the embedded Medplum's `$execute` cap of 128, so deliveries
 * leave patients' own calls room.
 */
export const MAX_CONCURRENT_DELIVERIES = 16;

/**
 * Delivers committed changes to bots whose rest-hook Subscription matches them. Fed only from
 * after-COMMIT callbacks, so a rolled-back write never fires. Runs asynchronously in process; retries
 * only what the platform failed to deliver, never a bot's own failure (as Medplum); tells tests when it
 * has nothing left to do (`idle()`).
 */
export class SubscriptionQueue {
  private readonly pending: SubscriptionJob[] = [];
  private inFlight = 0;
  /** Deliveries running a bot now (retries waiting for their turn are not). */
  private running = 0;
  private scheduled = 0;
  private waiters: (() => void)[] = [];
  private closed = false;

  constructor(private readonly options: SubscriptionQueueOptions) {}

  /** Called after COMMIT with the transaction's changes. */
  enqueueChanges(changes: ResourceChange[]): void {
    if (this.closed || changes.length === 0) {
      return;
    }
    this.scheduled++;
    queueMicrotask(() => {
      this.match(changes)
        .catch(() => undefined)
        .finally(() => {
          this.scheduled--;
          this.pump();
        });
    });
  }

  /** Resolves once no delivery is pending, running or waiting for a retry. */
  idle(): Promise<void> {
    if (this.isIdle()) {
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  close(): void {
    this.closed = true;
    this.pending.length = 0;
  }

  private isIdle(): boolean {
    return this.pending.length === 0 && this.inFlight === 0 && this.scheduled === 0;
  }

  /** Active subscriptions, read once and again only after a Subscription itself was written. */
  private active: Promise<Subscription[]> | undefined;

  private activeSubscriptions(): Promise<Subscription[]> {
    this.active ??= this.options.systemRepo.searchResources<Subscription>({
      resourceType: 'Subscription',
      filters: [
        { code: 'status', operator: 'eq', value: 'active' },
        { code: 'type', operator: 'eq', value: 'rest-hook' },
      ],
      count: 1000,
    });
    return this.active;
  }

  private async match(changes: ResourceChange[]): Promise<void> {
    // A websocket Subscription (one per criteria each time Medplum's app opens) is never delivered here.
    if (changes.some((c) => isRestHook(c.resource) || (c.previous && isRestHook(c.previous)))) {
      this.active = undefined;
    }
    const subscriptions = await this.activeSubscriptions();
    for (const change of changes) {
      for (const subscription of subscriptions) {
        const botId = /^Bot\/([^/]+)$/.exec(subscription.channel?.endpoint ?? '')?.[1];
        if (
          botId &&
          subscription.channel?.type === 'rest-hook' &&
          subscription.meta?.project === change.resource.meta?.project &&
          matchesSubscription(subscription, change)
        ) {
          this.pending.push({
            subscription,
            botId,
            resource: change.resource,
            interaction: change.interaction,
            attempt: 1,
          });
        }
      }
    }
  }

  private pump(): void {
    while (this.pending.length > 0 && !this.closed && this.running < MAX_CONCURRENT_DELIVERIES) {
      const job = this.pending.shift() as SubscriptionJob;
      this.inFlight++;
      this.running++;
      this.deliver(job).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
    if (this.isIdle()) {
      const waiters = this.waiters;
      this.waiters = [];
      for (const resolve of waiters) {
        resolve();
      }
    }
  }

  private async deliver(job: SubscriptionJob): Promise<void> {
    const maxAttempts = this.options.maxAttempts ?? 3;
    let failure: { err: unknown } | undefined;
    try {
      const bot = await this.options.systemRepo.readResource<Bot>('Bot', job.botId);
      const input = job.interaction === 'delete' ? { deletedResource: job.resource } : job.resource;
      await this.options.runBot(bot, input, job.resource.meta?.author?.reference, deliveryHeaders(job));
    } catch (err) {
      failure = { err };
    } finally {
      this.running--;
    }
    if (!failure) {
      return;
    }
    this.options.onError?.(job, failure.err);
    if (job.attempt < maxAttempts && !this.closed && !(failure.err instanceof BotExecutionError)) {
      const delay = (this.options.retryDelayMs ?? 50) * 2 ** (job.attempt - 1);
      this.inFlight++;
      await new Promise((resolve) => setTimeout(resolve, delay));
      this.inFlight--;
      this.pending.push({ ...job, attempt: job.attempt + 1 });
    }
  }
}

/**
 * The headers of a delivery, as Medplum builds them for a rest-hook and hands them to the bot as
 * `event.headers` (packages/server/src/workers/subscription.ts, buildRestHookHeaders): which
 * Subscription, which interaction, what was deleted, and the Subscription's own `channel.header`s.
 */
export function deliveryHeaders(job: SubscriptionJob): Record<string, string> {
  const headers: Record<string, string> = {
    'Content-Type': 'application/fhir+json',
    'X-Medplum-Subscription': job.subscription.id as string,
    'X-Medplum-Interaction': job.interaction,
  };
  if (job.interaction === 'delete') {
    headers['X-Medplum-Deleted-Resource'] = `${job.resource.resourceType}/${job.resource.id}`;
  }
  for (const header of job.subscription.channel?.header ?? []) {
    const [key, value] = header.split(/:/);
    if (key && value !== undefined) {
      headers[key.trim()] = value.trim();
    }
  }
  return headers;
}

/**
 * Whether a committed change is one `subscription` asks for: its interaction and its criteria. The one
 * matcher of this server, for rest-hook deliveries and WebSocket notifications alike.
 */
export function matchesSubscription(subscription: Subscription, change: ResourceChange): boolean {
  return supportsInteraction(subscription, change.interaction) && matchesCriteria(subscription, change.resource);
}

function isRestHook(resource: Resource): boolean {
  return resource.resourceType === 'Subscription' && resource.channel?.type === 'rest-hook';
}

function supportsInteraction(subscription: Subscription, interaction: ResourceChange['interaction']): boolean {
  const extension = subscription.extension?.find((e) => e.url === SUPPORTED_INTERACTION_URL);
  // Medplum: without the extension every interaction fires.
  return extension?.valueCode ? extension.valueCode === interaction : true;
}

function matchesCriteria(subscription: Subscription, resource: Resource): boolean {
  if (!subscription.criteria) {
    return false;
  }
  const search = parseSearchRequest(subscription.criteria);
  return search.resourceType === resource.resourceType && matchesSearchRequest(resource, search);
}
