import type { WithId } from '@medplum/core';
import type { Bot, Project } from '@medplum/fhirtypes';
import type { Database } from './store/database';
import type { ResourceChange, SqliteRepository } from './store/repo';

/** Minute, hour, day of month, month, day of week (0 = Sunday): the five fields of a cron string. */
const FIELDS: [min: number, max: number][] = [
  [0, 59],
  [0, 23],
  [1, 31],
  [1, 12],
  [0, 6],
];

/**
 * Whether a five-field cron string (`*`, `n`, `a-b`, `* /n` steps, `a-b/n`, comma lists; UTC) names
 * this minute. Medplum schedules `Bot.cronString` with the same syntax. An invalid string never matches.
 */
export function cronMatches(expression: string, at: Date): boolean {
  const parts = expression.trim().split(/\s+/);
  if (parts.length !== 5) {
    return false;
  }
  const values = [at.getUTCMinutes(), at.getUTCHours(), at.getUTCDate(), at.getUTCMonth() + 1, at.getUTCDay()];
  return parts.every((part, i) => fieldMatches(part, values[i], FIELDS[i]));
}

function fieldMatches(field: string, value: number, [min, max]: [number, number]): boolean {
  return field.split(',').some((item) => {
    const [range, stepText] = item.split('/');
    const step = stepText === undefined ? 1 : Number(stepText);
    if (!Number.isInteger(step) || step < 1) {
      return false;
    }
    let from = min;
    let to = max;
    if (range !== '*') {
      const [a, b] = range.split('-').map(Number);
      from = a;
      to = b ?? (stepText === undefined ? a : max);
    }
    if (!Number.isInteger(from) || !Number.isInteger(to) || from < min || to > max || from > to) {
      return false;
    }
    return value >= from && value <= to && (value - from) % step === 0;
  });
}

export interface CronOptions {
  systemRepo: SqliteRepository;
  db: Database;
  /** Runs a bot as Medplum's cron does: its own membership, the Bot itself as input, no requester. */
  runBot: (bot: WithId<Bot>) => Promise<unknown>;
  onError?: (bot: WithId<Bot>, err: unknown) => void;
}

/**
 * Runs scheduled bots once a minute, as Medplum's cron worker does (packages/server/src/workers/cron.ts):
 * a bot is scheduled, or unscheduled, only when it is written with a cron string that differs from its
 * previous version's, and only while its Project has the `cron` feature. A bot written before the
 * feature was turned on stays unscheduled until it is written with a new cron string again (provisioning
 * does that). The schedule is kept in the store, as Medplum keeps it in Redis: it survives a restart.
 */
export class CronScheduler {
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** Bot changes are applied in commit order: a quick unschedule-then-schedule must not swap. */
  private pending: Promise<void> = Promise.resolve();

  constructor(private readonly options: CronOptions) {}

  /** After a commit: (un)schedule the bots whose cron string changed. */
  onChanges(changes: readonly ResourceChange[]): void {
    const bots = changes.filter((c) => c.resource.resourceType === 'Bot');
    if (bots.length === 0) {
      return;
    }
    this.pending = this.pending.then(async () => {
      for (const change of bots) {
        await this.reschedule(change).catch(() => undefined);
      }
    });
  }

  /** Resolves when every change handed over so far is applied to the schedule. */
  settled(): Promise<void> {
    return this.pending;
  }

  private async reschedule(change: ResourceChange): Promise<void> {
    const bot = change.resource as WithId<Bot>;
    const before = change.interaction === 'create' ? undefined : cronStringOf(change.previous as Bot | undefined);
    const after = change.interaction === 'delete' ? undefined : cronStringOf(bot);
    if (change.interaction === 'delete') {
      this.options.db.writer.prepare('DELETE FROM cron_job WHERE bot_id = ?').run(bot.id);
      return;
    }
    if (before === after) {
      return;
    }
    const projectId = bot.meta?.project;
    const project = projectId
      ? await this.options.systemRepo.readResource<Project>('Project', projectId).catch(() => undefined)
      : undefined;
    if (!project?.features?.includes('cron')) {
      return;
    }
    if (after) {
      this.options.db.writer
        .prepare(
          'INSERT INTO cron_job (bot_id, pattern) VALUES (?, ?) ON CONFLICT (bot_id) DO UPDATE SET pattern = excluded.pattern',
        )
        .run(bot.id, after);
    } else {
      this.options.db.writer.prepare('DELETE FROM cron_job WHERE bot_id = ?').run(bot.id);
    }
  }

  /** Runs every scheduled bot due at `at` (tests call this directly; `start` calls it each minute). */
  async tick(at: Date): Promise<void> {
    await this.settled();
    const jobs = this.options.db.reader.prepare('SELECT bot_id, pattern FROM cron_job').all() as {
      bot_id: string;
      pattern: string;
    }[];
    const due = jobs.filter((job) => cronMatches(job.pattern, at));
    await Promise.all(
      due.map(async (job) => {
        const bot = await this.options.systemRepo.readResource<Bot>('Bot', job.bot_id).catch(() => undefined);
        if (bot) {
          await this.options.runBot(bot).catch((err: unknown) => this.options.onError?.(bot, err));
        }
      }),
    );
  }

  start(now: () => Date = () => new Date()): void {
    const schedule = () => {
      const current = now();
      const untilNextMinute = 60_000 - (current.getTime() % 60_000);
      this.timer = setTimeout(() => {
        this.tick(now())
          .catch(() => undefined)
          .finally(schedule);
      }, untilNextMinute);
      this.timer.unref?.();
    };
    schedule();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}

/** The cron string Medplum schedules (workers/cron.ts getCronStringForBot): a valid `cronString`, else none. */
function cronStringOf(bot: Bot | undefined): string | undefined {
  const value = bot?.cronString?.trim();
  return value && value.split(/\s+/).length === 5 ? value : undefined;
}
