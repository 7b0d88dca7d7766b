/**
 * Identifier systems and extension URLs of this platform. One place, shared by the gateway, the
 * bots and provisioning, so that a bot and the data it looks for can never disagree on a name.
 */
const BASE = 'https://patient-care.example';

export const SYSTEMS = {
  /** Bot identifiers: `Bot/$execute?identifier=<bots>|<name>`. */
  bots: `${BASE}/bots`,
  /** Everything provisioning owns carries `<provisioning>|<key>`, how a re-run finds it again. */
  provisioning: `${BASE}/provisioning`,
  tenant: `${BASE}/tenant`,
  demoPatient: `${BASE}/demo-patient`,
} as const;

export const EXTENSIONS = {
  /** On a patient ClientApplication: the tenant Organization whose app it is. */
  tenantOrganization: `${BASE}/fhir/StructureDefinition/tenant-organization`,
  /** On a Bot: sha256 of the deployed bundle, so provisioning redeploys only what changed. */
  botBundleSha256: `${BASE}/fhir/StructureDefinition/bot-bundle-sha256`,
} as const;

/** The access-policy parameter that carries a member's tenant Organization (`%organization`). */
export const TENANT_PARAMETER = 'organization';
