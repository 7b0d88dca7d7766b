import type { BotEvent, MedplumClient } from '@medplum/core';
import type { Appointment, Bundle, BundleEntry, Encounter } from '@medplum/fhirtypes';
import { EXTENSIONS } from '../contracts/systems';
import { absent } from './lib/absent';
import { ASYNC_REVIEW, completedByOwner, issuedVersion } from './lib/queues';
import { lostRace } from './lib/races';
import { readingOnce } from './lib/reads';
import { encountersOf, ownSegments } from './lib/visits';

/**
 * Subscription bot (JOURNEY H): the care team's review of an asynchronous visit, completed by the clinician
 * who took it, fulfils the visit: the Appointment `fulfilled` and its segments `finished`, in one transaction
 * under If-Match, so the patient sees the outcome on her visit (its segments, her record). Only a review the
 * platform issued (its first Bot-written version), about an asynchronous visit of the same patient that is
 * still booked or under way. Believes only its own reads; a duplicate delivery finds the visit fulfilled.
 */
export async function handler(bare: MedplumClient, event: BotEvent): Promise<unknown> {
  const medplum = readingOnce(bare);
  const woken = await completedByOwner(medplum, event, 'visit-review', [ASYNC_REVIEW]);
  if (!woken.ok) {
    return woken;
  }
  const issued = await issuedVersion(medplum, woken.task);
  const [type, id] = (issued?.focus?.reference ?? '').split('/');
  if (!issued || issued.for?.reference !== woken.task.for?.reference || type !== 'Appointment' || !id) {
    return { ok: true, fulfilled: false, reason: 'the review was not issued by the platform' };
  }
  const [appointment, segments] = await Promise.all([
    medplum.readResource('Appointment', id).catch(absent) as Promise<(Appointment & { id: string }) | undefined>,
    encountersOf(medplum, id),
  ]);
  const asynchronous = appointment?.extension?.some(
    (e) => e.url === EXTENSIONS.visitModality && e.valueCode === 'async',
  );
  const hers = appointment?.participant?.some((p) => p.actor?.reference === issued.for?.reference);
  if (!appointment || !asynchronous || !hers) {
    return { ok: true, fulfilled: false, reason: 'not an asynchronous visit of this patient' };
  }
  if (appointment.status === 'fulfilled') {
    return { ok: true, fulfilled: true, appointment: `Appointment/${id}`, replay: true };
  }
  if (appointment.status !== 'booked' && appointment.status !== 'arrived') {
    return { ok: true, fulfilled: false, reason: `the visit is ${appointment.status}` };
  }
  const now = new Date().toISOString();
  const entries: BundleEntry[] = [
    {
      resource: { ...appointment, status: 'fulfilled' },
      request: { method: 'PUT', url: `Appointment/${id}`, ifMatch: `W/"${appointment.meta?.versionId}"` },
    },
    ...ownSegments(appointment, segments)
      .filter((e: Encounter) => e.status === 'planned' || e.status === 'in-progress' || e.status === 'arrived')
      .map(
        (e: Encounter): BundleEntry => ({
          resource: { ...e, status: 'finished', period: { ...e.period, start: e.period?.start ?? now, end: now } },
          request: { method: 'PUT', url: `Encounter/${e.id}`, ifMatch: `W/"${e.meta?.versionId}"` },
        }),
      ),
  ];
  try {
    await medplum.executeBatch({ resourceType: 'Bundle', type: 'transaction', entry: entries } as Bundle);
  } catch (err) {
    if (lostRace(err)) {
      return { ok: true, fulfilled: true, appointment: `Appointment/${id}`, replay: true };
    }
    throw err;
  }
  return { ok: true, fulfilled: true, appointment: `Appointment/${id}` };
}
