import type { PractitionerRoleAvailableTime } from '@medplum/fhirtypes';

/**
 * Wall-clock time in a time zone, and the free Slots a schedule's working hours make (JOURNEY H). Pure
 * functions over `Intl` (in every JavaScript runtime, Medplum's bot vm included), shared by the bot that
 * materialises Slots and by what counts them per day, so the two can never disagree on a day's edges.
 */

const DAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'] as const;

/** The wall-clock parts of an instant in a time zone. */
function partsIn(instant: number, timeZone: string): { y: number; m: number; d: number; h: number; mi: number } {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone,
    hourCycle: 'h23',
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
  }).formatToParts(new Date(instant));
  const get = (type: string) => Number(parts.find((p) => p.type === type)?.value);
  return { y: get('year'), m: get('month'), d: get('day'), h: get('hour'), mi: get('minute') };
}

/** Minutes the zone is ahead of UTC at an instant (negative west of Greenwich). */
function offsetMinutes(instant: number, timeZone: string): number {
  const { y, m, d, h, mi } = partsIn(instant, timeZone);
  return Math.round((Date.UTC(y, m - 1, d, h, mi) - Math.floor(instant / 60_000) * 60_000) / 60_000);
}

/**
 * The instant of a wall-clock time (`YYYY-MM-DD`, `HH:MM`) in a time zone. A time the clocks skip (the
 * spring-forward hour) does not exist: undefined. A time they repeat takes its first occurrence.
 */
export function zonedInstant(date: string, time: string, timeZone: string): number | undefined {
  const [y, m, d] = date.split('-').map(Number);
  const [h, mi] = time.split(':').map(Number);
  const wall = Date.UTC(y, m - 1, d, h, mi);
  // Two passes settle the offset on either side of a change.
  const first = wall - offsetMinutes(wall, timeZone) * 60_000;
  const candidates = [first, wall - offsetMinutes(first, timeZone) * 60_000].sort((a, b) => a - b);
  const exact = candidates.find((c) => {
    const p = partsIn(c, timeZone);
    return p.y === y && p.m === m && p.d === d && p.h === h && p.mi === mi;
  });
  return exact;
}

/** The local date (`YYYY-MM-DD`) of an instant in a time zone. */
export function localDate(instant: number, timeZone: string): string {
  const { y, m, d } = partsIn(instant, timeZone);
  return `${String(y).padStart(4, '0')}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}`;
}

/** The date `days` after a `YYYY-MM-DD` date. */
export function addDays(date: string, days: number): string {
  const [y, m, d] = date.split('-').map(Number);
  return new Date(Date.UTC(y, m - 1, d + days)).toISOString().slice(0, 10);
}

/** Whether a string names a time zone this runtime knows. */
export function isTimeZone(timeZone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone });
    return true;
  } catch {
    return false;
  }
}

/**
 * The free slots of working hours (`availableTime`, wall-clock in `timeZone`; `allDay` is the whole day), `minutes` long, on the
 * `days` local dates from `from`: each `{start, end}` as ISO instants, in order. A slot that would start
 * in a skipped hour is not made; one in a repeated hour is made once.
 */
export function workingSlots(
  availableTime: PractitionerRoleAvailableTime[],
  timeZone: string,
  from: string,
  days: number,
  minutes: number,
): { start: string; end: string }[] {
  const slots: { start: string; end: string }[] = [];
  for (let i = 0; i < days; i++) {
    const date = addDays(from, i);
    const [y, m, d] = date.split('-').map(Number);
    const day = DAYS[new Date(Date.UTC(y, m - 1, d)).getUTCDay()];
    for (const hours of availableTime) {
      const startTime = hours.allDay ? '00:00' : hours.availableStartTime;
      const endTime = hours.allDay ? '24:00' : hours.availableEndTime;
      if (!hours.daysOfWeek?.includes(day) || !startTime || !endTime) {
        continue;
      }
      const [sh, sm] = startTime.split(':').map(Number);
      const [eh, em] = endTime.split(':').map(Number);
      for (let t = sh * 60 + sm; t + minutes <= eh * 60 + em; t += minutes) {
        const time = `${String(Math.floor(t / 60)).padStart(2, '0')}:${String(t % 60).padStart(2, '0')}`;
        const start = zonedInstant(date, time, timeZone);
        if (start !== undefined) {
          slots.push({ start: new Date(start).toISOString(), end: new Date(start + minutes * 60_000).toISOString() });
        }
      }
    }
  }
  return slots.sort((a, b) => a.start.localeCompare(b.start));
}
