import type { MedplumClient } from '@medplum/core';
import type { CareTeam, Observation, ObservationComponent, Task } from '@medplum/fhirtypes';
import { PATIENT_REPORTED, VITAL_SIGN_PANELS } from '../../bots/lib/measurements';
import { queueOfTask, queueType } from '../../bots/lib/queues';
import { purposeOf, visitNote } from '../../bots/lib/visits';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';

/**
 * What provisioning brings already-stored records to, once, as the platform now writes them (issue 48).
 *
 * Blood pressures recorded before the platform wrote vital-sign panels are two Observations, systolic and
 * diastolic, of one reading: for each such pair (the same patient, performer and time), a blood pressure
 * panel (LOINC 85354-9) with the two as its components, `derivedFrom` them, so that clinicians' tools (the
 * Provider app's Vitals) show it. The two stay as they were (what her task's output names, what she was
 * told); the panel is identified by the systolic reading it was made from, so a second run makes none.
 */
export async function migrateReadings(medplum: MedplumClient): Promise<{ panels: number }> {
  const [panel] = VITAL_SIGN_PANELS;
  const [systolicCode, diastolicCode] = panel.components;
  let panels = 0;
  const systolics = await all(medplum, { code: `http://loinc.org|${systolicCode}` });
  for (const systolic of systolics) {
    const subject = systolic.subject?.reference;
    const effective = systolic.effectiveDateTime;
    if (!subject || !effective || systolic.status === 'entered-in-error') {
      continue;
    }
    const identifier = { system: SYSTEMS.migratedReading, value: `Observation/${systolic.id}` };
    const made = `${identifier.system}|${identifier.value}`;
    if (await medplum.searchOne('Observation', { identifier: made }, { cache: 'no-cache' })) {
      continue;
    }
    const [diastolic] = (
      await all(medplum, {
        subject,
        code: `http://loinc.org|${diastolicCode}`,
      })
    ).filter(
      (d) =>
        d.effectiveDateTime === effective &&
        d.status !== 'entered-in-error' &&
        JSON.stringify(d.performer ?? []) === JSON.stringify(systolic.performer ?? []),
    );
    if (!diastolic) {
      continue;
    }
    const patientReported = (systolic.performer ?? []).some((p) => p.reference === subject);
    const component = (o: Observation): ObservationComponent => ({
      code: o.code,
      ...(o.valueQuantity ? { valueQuantity: o.valueQuantity } : {}),
      ...(o.interpretation ? { interpretation: o.interpretation } : {}),
      ...(o.extension ? { extension: o.extension } : {}),
    });
    await medplum.createResourceIfNoneExist<Observation>(
      {
        resourceType: 'Observation',
        meta: { profile: [...panel.profiles], ...(systolic.meta?.tag ? { tag: systolic.meta.tag } : {}) },
        identifier: [identifier],
        status: systolic.status,
        category: systolic.category,
        code: { coding: [{ ...panel.code }], text: panel.text },
        subject: systolic.subject,
        ...(systolic.performer ? { performer: systolic.performer } : {}),
        ...(patientReported ? { method: PATIENT_REPORTED } : {}),
        effectiveDateTime: effective,
        component: [component(systolic), component(diastolic)],
        derivedFrom: [{ reference: `Observation/${systolic.id}` }, { reference: `Observation/${diastolic.id}` }],
      },
      `identifier=${made}`,
    );
    panels++;
  }
  return { panels };
}

async function all(medplum: MedplumClient, query: Record<string, string>): Promise<Observation[]> {
  const found: Observation[] = [];
  for await (const page of medplum.searchResourcePages(
    'Observation',
    { ...query, _count: '100' },
    { cache: 'no-cache' },
  )) {
    found.push(...page);
  }
  return found;
}

/**
 * Queue work written before queues were named on the task (issue 48): a task a queue (a CareTeam) owned
 * now waits in it unowned, its queue on its `performerType`, so a clinician takes it by picking herself;
 * open work a clinician took from a queue names that queue too (so she may release or hand it over).
 */
export async function migrateQueueWork(medplum: MedplumClient): Promise<{ tasks: number }> {
  let tasks = 0;
  const teams = await medplum.searchResources(
    'CareTeam',
    { category: `${SYSTEMS.careQueue}|`, _count: '1000' },
    {
      cache: 'no-cache',
    },
  );
  const queues = teams.filter((t) => t.category?.some((c) => c.coding?.some((x) => x.system === SYSTEMS.careQueue)));
  for (const team of queues) {
    const queue = `CareTeam/${team.id}`;
    const owned = await medplum.searchResources('Task', { owner: queue, _count: '1000' }, { cache: 'no-cache' });
    const kinds = (team.category ?? []).flatMap((c) => c.coding ?? []).filter((c) => c.system === SYSTEMS.careQueue);
    const taken = (
      await Promise.all(
        kinds.map((kind) =>
          medplum.searchResources(
            'Task',
            { performer: `${kind.system}|${kind.code}`, status: 'ready,in-progress,on-hold', _count: '1000' },
            { cache: 'no-cache' },
          ),
        ),
      )
    )
      .flat()
      .filter((t) => !queueOfTask(t) && sameTenant(t, team));
    for (const task of [...owned, ...taken.filter((t) => t.owner?.reference !== queue)]) {
      const { owner, ...rest } = task;
      await medplum.updateResource({
        ...rest,
        ...(owner && owner.reference !== queue ? { owner } : {}),
        performerType: queueType(team),
      });
      tasks++;
    }
  }
  return { tasks };
}

const sameTenant = (task: Task, team: CareTeam): boolean =>
  (task.meta?.accounts ?? []).some((a) => team.managingOrganization?.some((o) => o.reference === a.reference));

/**
 * Visit notes (issue 48): each open live segment booked before the platform drafted its practitioner's
 * note gets one (bots/lib/visits.ts visitNote), so she can write and sign it on the visit's page. One per
 * segment: made only where none names the encounter (a conditional create, so a second run makes none).
 */
export async function migrateVisitNotes(medplum: MedplumClient): Promise<{ notes: number }> {
  const noted = new Set<string>();
  for await (const page of medplum.searchResourcePages(
    'ClinicalImpression',
    { 'encounter:missing': 'false', _count: '100', _elements: 'encounter' },
    { cache: 'no-cache' },
  )) {
    for (const note of page) {
      if (note.encounter?.reference) {
        noted.add(note.encounter.reference);
      }
    }
  }
  let notes = 0;
  for await (const page of medplum.searchResourcePages(
    'Encounter',
    { status: 'planned,arrived,in-progress', _count: '100' },
    { cache: 'no-cache' },
  )) {
    for (const segment of page) {
      const reference = `Encounter/${segment.id}`;
      const practitioner = segment.participant?.[0]?.individual?.reference;
      const her = segment.subject?.reference;
      const isSegment = segment.extension?.some((e) => e.url === EXTENSIONS.segmentPosition);
      if (noted.has(reference) || !isSegment || !practitioner?.startsWith('Practitioner/') || !her) {
        continue;
      }
      const tags = segment.meta?.tag?.filter((t) => t.system === SYSTEMS.episode);
      await medplum.createResourceIfNoneExist(
        visitNote(reference, her, practitioner, purposeOf(segment), tags),
        `encounter=${reference}`,
      );
      notes++;
    }
  }
  return { notes };
}
