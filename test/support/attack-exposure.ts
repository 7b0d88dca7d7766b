// What a response exposes: the resources in it, and why the attacker must not see each.
import type { Reference, Resource } from '@medplum/fhirtypes';
import type { Actor } from './attack';
import { stringsIn } from './attack-proof';
import { patientsOf, storedResources } from './attack-store';
import type { TestBackend } from './backend';

/** Every resource (type and id) anywhere in a response body: entries, includes, contained, outcomes aside. */
export function resourcesIn(body: unknown, found: { type: string; id: string }[] = []): { type: string; id: string }[] {
  if (Array.isArray(body)) {
    for (const item of body) {
      resourcesIn(item, found);
    }
  } else if (body && typeof body === 'object') {
    const { resourceType, id } = body as { resourceType?: unknown; id?: unknown };
    if (
      typeof resourceType === 'string' &&
      typeof id === 'string' &&
      !['Bundle', 'OperationOutcome'].includes(resourceType)
    ) {
      found.push({ type: resourceType, id });
    }
    for (const value of Object.values(body)) {
      resourcesIn(value, found);
    }
  }
  return found;
}

/** The tenant of each patient, for judging what a clinician may see. */
export function patientTenants(backend: TestBackend): Map<string, string> {
  return new Map(
    storedResources(backend, 'Patient').map((p) => [
      `Patient/${p.id}`,
      (p as { managingOrganization?: Reference }).managingOrganization?.reference ?? '',
    ]),
  );
}

export type ExposureKind = 'another patient' | 'another tenant' | 'unpublished';

export interface Exposure {
  kind: ExposureKind;
  why: string;
}

/**
 * Why the attacker must not see this stored resource, or undefined when they may: another patient's
 * record (for a clinician: a patient of another tenant), another tenant's data, or (patients) an item of
 * their own tenant that was never published to patients.
 */
export function exposureOf(
  resource: Resource,
  attacker: Actor,
  tenants: Map<string, string>,
  unpublished: Set<string>,
): Exposure | undefined {
  const label = `${resource.resourceType}/${resource.id}`;
  const patients = patientsOf(resource);
  if (attacker.kind === 'patient' && patients.includes(attacker.profile)) {
    // In the attacker's own record (shared or not): theirs to see, as Medplum's compartments have it.
    return undefined;
  }
  for (const patient of patients) {
    if (attacker.kind === 'patient') {
      return { kind: 'another patient', why: `${label} is in the record of ${patient}` };
    }
    if (attacker.kind === 'clinician' && tenants.get(patient) !== attacker.organization) {
      return { kind: 'another tenant', why: `${label} is in the record of ${patient}, of another tenant` };
    }
  }
  const foreign = (resource.meta?.accounts ?? []).find((a) => a.reference !== attacker.organization);
  if (foreign) {
    return { kind: 'another tenant', why: `${label} is data of ${foreign.reference}` };
  }
  if (attacker.kind === 'patient' && unpublished.has(label)) {
    return { kind: 'unpublished', why: `${label} is an unpublished item of the tenant` };
  }
  return undefined;
}

/** The secrets a response repeats that the caller did not send itself (an echo of the input is no leak). */
export function leaked(text: string, secrets: string[], input: unknown): string[] {
  const sent = [...stringsIn(input)].join('\n');
  return secrets.filter((s) => text.includes(s) && !sent.includes(s));
}
