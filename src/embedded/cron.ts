import type { WithId } from '@medplum/core';
import type { Bot } from '@medplum/fhirtypes';
import type { SqliteRepository } from './store/repo';

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
  /** Runs a bot as Medplum's cron does: its own membership, the Bot itself as input, no requester. */
  runBot: (bot: WithId<Bot>) => Promise<unknown>;
  onError?: (bot: WithId<Bot>, err: unknown) => void;
}

/** Runs the bots whose `cronString` names the current minute, once a minute, as Medplum's cron worker does. */
export class CronScheduler {
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly options: CronOptions) {}

  /** Runs every bot due at `at` (tests call this directly; `start` calls it each minute). */
  async tick(at: Date): Promise<void> {
    const bots = await this.options.systemRepo.searchResources<Bot>({ resourceType: 'Bot', count: 1000 });
    const due = bots.filter((bot) => bot.cronString && cronMatches(bot.cronString, at));
    await Promise.all(
      due.map((bot) => this.options.runBot(bot).catch((err: unknown) => this.options.onError?.(bot, err))),
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
