import type { MedplumClient } from '@medplum/core';
import type { BundleEntry, Condition, MedicationRequest, RequestGroup, Task } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import { absent } from './absent';
import { searchAll } from './search';

/**
 * A Condition the platform recorded, revised afterwards (JOURNEY D.1): what of it is clinical, and what a
 * clinical revision undoes. Shared by the offers (an answer to an offer pinned to an older version) and by
 * eligibility (which re-runs on a clinical revision).
 */

/**
 * The clinical facts of a Condition, comparable across versions: its codes (system and code, not their
 * display), its clinical and verification status, whom it is about. A note, a display text or an onset
 * comment is not clinical: an offer made on the version before still stands.
 */
export function clinicalFacts(condition: Condition): string {
  const codes = (concept: { coding?: { system?: string; code?: string }[] } | undefined) =>
    (concept?.coding ?? [])
      .map((c) => `${c.system ?? ''}|${c.code ?? ''}`)
      .sort()
      .join(',');
  return JSON.stringify([
    codes(condition.code),
    codes(condition.clinicalStatus),
    codes(condition.verificationStatus),
    condition.subject?.reference ?? '',
  ]);
}

/** Whether a Condition, as it now is, is still one to treat (not refuted, not entered in error, not over). */
export function stillToTreat(condition: Condition): boolean {
  const verification = condition.verificationStatus?.coding?.map((c) => c.code) ?? [];
  const clinical = condition.clinicalStatus?.coding?.map((c) => c.code) ?? [];
  return (
    !verification.some((c) => c === 'refuted' || c === 'entered-in-error') &&
    !clinical.some((c) => c === 'inactive' || c === 'resolved' || c === 'remission')
  );
}

/** The version a reference pins (`Condition/<id>/_history/<vid>`), read; undefined when it pins none. */
export async function pinnedVersion(
  medplum: MedplumClient,
  reference: string | undefined,
): Promise<Condition | undefined> {
  const [type, id, history, versionId] = (reference ?? '').split('/');
  return type === 'Condition' && id && history === '_history' && versionId
    ? ((await medplum.readVersion('Condition', id, versionId).catch(absent)) as Condition | undefined)
    : undefined;
}

const OPEN = ['draft', 'requested', 'received', 'accepted', 'ready', 'in-progress', 'on-hold'];

/**
 * What a clinical revision of a Condition withdraws, as transaction entries under If-Match: every open offer
 * she was made against an older version (the proposal revoked, its items cancelled, her offer task
 * cancelled, saying why), and every open selection of her care team for an older version (cancelled). The
 * platform's own work only: offers and selections carry the Condition they were made for, by version.
 */
export async function withdrawnByRevision(
  medplum: MedplumClient,
  condition: Condition & { id: string },
): Promise<BundleEntry[]> {
  const subject = condition.subject?.reference ?? '';
  const current = `Condition/${condition.id}/_history/${condition.meta?.versionId}`;
  const older = (reference: string | undefined) =>
    !!reference && reference.startsWith(`Condition/${condition.id}/_history/`) && reference !== current;
  const [groups, tasks] = await Promise.all([
    searchAll(medplum, 'RequestGroup', { subject, status: 'active', intent: 'proposal' }),
    searchAll(medplum, 'Task', {
      subject,
      code: ['treatment-offer', 'select-treatment', 'review-response'].map((k) => `${SYSTEMS.taskKind}|${k}`).join(','),
      status: OPEN.join(','),
    }),
  ]);
  const revoked = groups.filter((g) => older(g.reasonReference?.[0]?.reference));
  const revokedRefs = new Set(revoked.map((g) => `RequestGroup/${g.id}`));
  const items = (
    await Promise.all(
      revoked.flatMap((g) =>
        (g.action ?? []).map(async (a) => {
          const [type, id] = (a.resource?.reference ?? '').split('/');
          return type === 'MedicationRequest' && id
            ? ((await medplum.readResource('MedicationRequest', id).catch(absent)) as MedicationRequest | undefined)
            : undefined;
        }),
      ),
    )
  ).filter((m): m is MedicationRequest => m?.status === 'active' && m.intent === 'proposal');
  const kindOf = (task: Task) => task.code?.coding?.find((c) => c.system === SYSTEMS.taskKind)?.code;
  const withdrawnTasks = tasks.filter((task) =>
    kindOf(task) === 'treatment-offer'
      ? revokedRefs.has(task.focus?.reference ?? '')
      : older(task.reasonReference?.reference),
  );
  const put = <T extends RequestGroup | MedicationRequest | Task>(resource: T, change: Partial<T>): BundleEntry => ({
    resource: { ...resource, ...change } as T,
    request: {
      method: 'PUT',
      url: `${resource.resourceType}/${resource.id}`,
      ifMatch: `W/"${resource.meta?.versionId}"`,
    },
  });
  return [
    ...revoked.map((g) => put<RequestGroup>(g, { status: 'revoked' })),
    ...items.map((m) => put<MedicationRequest>(m, { status: 'cancelled' })),
    ...withdrawnTasks.map((task) =>
      put<Task>(task, {
        status: 'cancelled',
        businessStatus: {
          coding: [{ system: SYSTEMS.taskKind, code: 'condition-revised' }],
          text: 'condition-revised',
        },
        statusReason: {
          text:
            kindOf(task) === 'treatment-offer'
              ? 'Your care team revised the diagnosis this offer was made for; a new offer will follow if treatment still applies.'
              : 'The condition was revised; this work was for its earlier version.',
        },
      }),
    ),
  ];
}
