import type { AccessPolicyResource } from '@medplum/fhirtypes';
import { CATALOG, SYSTEMS, TENANT_PARAMETER } from '../../../contracts/systems';

/** What the access policies share: FHIRPath helpers, the published catalog's reads, and the constraints more than one role's policy holds. */

/** FHIRPath: each of these fields unchanged by the write (equal, or absent before and after). */
export const unchanged = (fields: readonly string[]): string =>
  fields
    .map((field) => `((%after.${field} = %before.${field}) or (%after.${field}.empty() and %before.${field}.empty()))`)
    .join(' and ');

export const inTenant = (type: string): string => `${type}?_compartment=%${TENANT_PARAMETER}`;

export const ownCompartment = (type: string): string => `${type}?_compartment=%patient`;

/** `%after` and `%before` hold the same values of `path` under `system`, both ways. */
export function unchangedCodes(path: string, system: string, field: 'code' | 'value'): string {
  const values = (side: string) => `%${side}.${path}.where(system = '${system}').${field}`;
  return (
    `${values('after')}.all(${values('before')} contains $this) and ` +
    `${values('before')}.all(${values('after')} contains $this)`
  );
}

/**
 * The catalog: definitions a patient may read only when published (a catalog tag that provisioning
 * alone writes), to their tenant or to every tenant. Agreement documents are DocumentReferences, so
 * DocumentReference is here too: a patient never reads a tenant's documents just for being in it.
 * Location: the jurisdictions an offering is restricted to (HealthcareService.coverageArea), never a
 * tenant's sites or anyone's address.
 */
export const CATALOG_TYPES = [
  'HealthcareService',
  'PlanDefinition',
  'ActivityDefinition',
  'Questionnaire',
  'ObservationDefinition',
  'Location',
  'ValueSet',
  'DocumentReference',
] as const;

/** Published catalog entries: the tenant's own (its account and the tenant tag) and the platform's. */
export function catalogReads(type: string): AccessPolicyResource[] {
  return [
    { resourceType: type, criteria: `${inTenant(type)}&_tag=${CATALOG.system}|${CATALOG.tenant}`, readonly: true },
    { resourceType: type, criteria: `${type}?_tag=${CATALOG.system}|${CATALOG.platform}`, readonly: true },
  ];
}

/**
 * Catalog and provisioning tags are provisioning's alone, for patients and clinicians in every write:
 * - nobody publishes (a catalog tag would send their document to patients), and nobody changes what
 *   is published: a resource that carries a catalog tag is not theirs to update (else a clinician
 *   could strip the tag off a tenant's agreement and so unpublish it, or rewrite its text);
 * - nobody adds a provisioning key (provisioning would adopt that resource as the one it manages).
 * On create `%before` is empty (Medplum binds it so, packages/server/src/fhir/repo.ts).
 */
export const SERVER_OWNED_TAGS = {
  language: 'text/fhirpath' as const,
  expression:
    `%after.meta.tag.where(system = '${CATALOG.system}').empty() and ` +
    `%before.meta.tag.where(system = '${CATALOG.system}').empty() and ` +
    `%after.meta.tag.where(system = '${SYSTEMS.provisioning}')` +
    `.all(%before.meta.tag.where(system = '${SYSTEMS.provisioning}').code contains $this.code)`,
};

/**
 * The journey's keys are the workflow bots' alone (JOURNEY section 0): the EpisodeOfCare's idempotency
 * key (start-assessment resumes the episode it finds under it) and the tags every bot reads a journey by
 * (the episode join tag, the patient-task tag). A patient or clinician who could add one would put their
 * own episode or task into a patient's journey, from another tenant too (the bots read project-wide);
 * one who could strip or change one would fork it. A write must keep them exactly as they were (on
 * create: none); an update that keeps them (a clinician claiming or pausing a task) is untouched.
 */
export const JOURNEY_KEYS = {
  language: 'text/fhirpath' as const,
  expression: [
    unchangedCodes('meta.tag', SYSTEMS.episode, 'code'),
    unchangedCodes('meta.tag', SYSTEMS.taskAudience, 'code'),
    unchangedCodes('identifier', SYSTEMS.episodeKey, 'value'),
    unchangedCodes('identifier', SYSTEMS.eligibilityKey, 'value'),
  ].join(' and '),
};

/**
 * A write stays in the writer's tenant: every account it carries is theirs. For a clinician, the criteria
 * alone pass a resource that names a patient of theirs AND one of another tenant (its accounts are then
 * both tenants', and one of them matches). For a patient: Medplum keeps the accounts a non-admin SENDS
 * whenever it derives none itself (packages/server/src/fhir/repo.ts: the result's meta starts as the
 * one sent, getAccounts overrides it only with something), so a patient not yet homed (no tenant, no
 * `%organization` parameter: nothing can equal it) could otherwise choose her tenant, and an upload (no
 * patient to derive from) could be filed in any tenant.
 */
export const ONLY_OWN_TENANT = {
  language: 'text/fhirpath' as const,
  expression:
    `%after.meta.accounts.all(reference = '%${TENANT_PARAMETER}') and ` +
    `%after.meta.account.all(reference = '%${TENANT_PARAMETER}')`,
};

/** A bot that reads a ClientApplication (its tenant extension, its integration tag) never sees its secrets. */
export const CLIENT_SECRETS = ['secret', 'retiringSecret'];

/** The tag of the client provisioning runs as (it tags itself), by which clinicians read it (`MACHINE_CLIENTS`). */
export const PROVISIONING_CLIENT_TAG = { system: SYSTEMS.integration, code: 'provisioning' };

/**
 * The platform's machine clients whose names clinicians see as authors (Medplum's apps read `meta.author`;
 * one she may not read shows as "[Forbidden]"): the provisioning client and the SMS integration. Never a
 * tenant's patient app (tenant-specific), never a secret or an identity provider's settings.
 */
export const MACHINE_CLIENTS = {
  criteria: `ClientApplication?_tag=${SYSTEMS.integration}|${PROVISIONING_CLIENT_TAG.code},${SYSTEMS.integration}|sms`,
  hiddenFields: [...CLIENT_SECRETS, 'identityProvider'],
};

/**
 * A Consent's proof and what it pins are immutable: an update may only change `status` (and only to
 * `inactive`). Enforced as an AccessPolicy writeConstraint, so it holds for every bot client too.
 */
export const CONSENT_ONLY_STATUS_CHANGES = {
  language: 'text/fhirpath' as const,
  expression:
    "%after.status = 'inactive' and %after.extension = %before.extension and %after.policy = %before.policy and " +
    '%after.patient = %before.patient and %after.dateTime = %before.dateTime and %after.identifier = %before.identifier and ' +
    '%after.category = %before.category and ' +
    // Elements an acceptance may lack: unchanged means equal, or absent before and after.
    unchanged([
      'scope',
      'provision',
      'sourceAttachment',
      'sourceReference',
      'organization',
      'performer',
      'verification',
      'policyRule',
    ]),
};

/** A request written as a proposal, never an order: placing orders is the order-decisions bot's alone. */
export const PROPOSALS_ONLY = { language: 'text/fhirpath' as const, expression: "%after.intent = 'proposal'" };
