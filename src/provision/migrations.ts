import type { MedplumClient } from '@medplum/core';
import type { Observation, ObservationComponent } from '@medplum/fhirtypes';
import { PATIENT_REPORTED, VITAL_SIGN_PANELS } from '../../bots/lib/measurements';
import { SYSTEMS } from '../../contracts/systems';

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
