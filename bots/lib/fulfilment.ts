import type { MedplumClient } from '@medplum/core';
import type { MedicationRequest, Organization, Patient, ServiceRequest } from '@medplum/fhirtypes';
import { EXTENSIONS, type FulfilmentMethod } from '../../contracts/systems';
import { absent } from './absent';
import { whereaboutsOf } from './catalog';

/** An item of an order: a proposal the patient decides on. */
export type OrderItem = (MedicationRequest | ServiceRequest) & { id: string };

/**
 * The methods her tenant allows for each item, by the item's kind and her country (the tenant
 * Organization's `fulfilment-policy`). No address, no policy entry: none.
 */
export async function allowedMethods(
  medplum: MedplumClient,
  patient: Patient,
  items: OrderItem[],
): Promise<Record<string, FulfilmentMethod[]>> {
  const organization = patient.managingOrganization?.reference;
  const tenant = organization
    ? ((await medplum.readReference({ reference: organization }).catch(absent)) as Organization | undefined)
    : undefined;
  const { country } = whereaboutsOf(patient);
  const methods = (kind: string): FulfilmentMethod[] =>
    (tenant?.extension ?? [])
      .filter((e) => e.url === EXTENSIONS.fulfilmentPolicy)
      .filter((e) => {
        const part = (name: string) => e.extension?.find((p) => p.url === name)?.valueCode;
        return country !== undefined && part('country') === country && part('kind') === kind;
      })
      .flatMap((e) =>
        (e.extension ?? []).filter((p) => p.url === 'method').map((p) => p.valueCode as FulfilmentMethod),
      );
  return Object.fromEntries(items.map((i) => [`${i.resourceType}/${i.id}`, methods(i.resourceType)]));
}
