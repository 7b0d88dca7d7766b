// The victim: their seeded record, what an attacker may not touch of it, and the scene every attacker file starts from.
import type { ClientApplication, Consent, Extension, Meta, Reference, Resource } from '@medplum/fhirtypes';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import type { ProvisionDefinition } from '../../src/provision/definition';
import { type Actor, executeBot, PLATFORM_TYPES, patientActor, policyTypes } from './attack';
import { universalAgreements } from './attack-proof';
import { minimalResource, PLANTED } from './attack-resources';
import { compartmentOf, inOwnRecord, storedResources } from './attack-store';
import type { TestBackend } from './backend';
import type { TestGateway } from './gateway';

export interface Owner {
  key: string;
  /** `Patient/<id>`. */
  patient: string;
  organization: string;
  practitioner: string;
  /** `CareTeam/<id>`: the tenant's intake queue, provisioned (src/provision/definition.ts tenantResources). */
  queue?: string;
}

export function ownerOf(backend: TestBackend, key: string): Owner {
  const actor = backend.patients[key];
  const organization = actor.patient.managingOrganization?.reference as string;
  const queue = storedResources(backend, 'CareTeam').find((team) =>
    team.meta?.tag?.some((t) => t.system === SYSTEMS.provisioning && t.code === `queue-${actor.tenant}-intake-review`),
  );
  return {
    key,
    patient: `Patient/${actor.patient.id}`,
    organization,
    practitioner: `Practitioner/${backend.clinicians[actor.tenant].practitioner.id}`,
    ...(queue ? { queue: `CareTeam/${queue.id}` } : {}),
  };
}

/** Marks seeded data, so a response that carries any of it is caught even when ids are hidden. */
const SECRET_URL = 'https://patient-care.example/test/StructureDefinition/secret';

export const secretOf = (type: string, owner: string): string => `secret ${type} of ${owner}`;

/**
 * One clinician-written resource of each type for the owner: in their compartment when FHIR puts the
 * type there, else an unpublished item of their tenant. Platform types are not made up (the store's
 * own instances are attacked instead); Patient is the owner themselves.
 */
export async function seedRecord(backend: TestBackend, owner: Owner, types: string[]): Promise<Resource[]> {
  const seeded: Resource[] = [];
  for (const type of types) {
    const marker = { url: SECRET_URL, valueString: secretOf(type, owner.key) };
    if (type === 'Binary') {
      // A patient's upload (POST /v1/documents): the secret travels in its bytes.
      const data = Buffer.from(marker.valueString).toString('base64');
      const upload = {
        ...minimalResource(type, { ...owner, project: `Project/${backend.project.id}` }, marker),
        contentType: 'text/plain',
        data,
      };
      seeded.push(await backend.systemRepo.createResource({ ...upload, meta: { project: backend.project.id } }));
      continue;
    }
    if (PLATFORM_TYPES.includes(type) || type === 'Patient') {
      continue;
    }
    const resource = minimalResource(type, { ...owner, project: `Project/${backend.project.id}` }, marker);
    const meta: Meta = {
      project: backend.project.id,
      author: { reference: owner.practitioner },
      accounts: [{ reference: owner.organization }],
    };
    seeded.push(await backend.systemRepo.createResource({ ...resource, meta }));
  }
  return seeded;
}

/**
 * What the attacker may not touch, of one type, most telling first: the victim's record, then the
 * victim's tenant, then the platform's own (bots, policies, their code), never the attacker's own
 * record or (for a clinician) their own tenant.
 */
export function targetsOf(backend: TestBackend, type: string, attacker: Actor, victim: Owner, max = 6): Resource[] {
  const rank = (r: Resource): number => {
    const compartment = compartmentOf(r);
    if (compartment.includes(victim.patient) || `${r.resourceType}/${r.id}` === victim.patient) {
      return 0;
    }
    if (compartment.includes(victim.organization) || `${r.resourceType}/${r.id}` === victim.organization) {
      return 1;
    }
    return r.meta?.accounts?.length ? 3 : 2;
  };
  return storedResources(backend, type)
    .filter((r) => {
      // Not the attacker's (their record, shared or not), and not what an earlier attack planted.
      if (attacker.patientId && (compartmentOf(r).includes(attacker.profile) || r.id === attacker.patientId)) {
        return false;
      }
      if ((r as { extension?: Extension[] }).extension?.some((e) => e.url === PLANTED.url)) {
        return false;
      }
      if (type === 'ProjectMembership' && (r as { profile?: Reference }).profile?.reference === attacker.profile) {
        return false;
      }
      const ownTenant =
        compartmentOf(r).includes(attacker.organization) || `${r.resourceType}/${r.id}` === attacker.organization;
      return !(attacker.kind === 'clinician' && ownTenant);
    })
    .filter((r) => rank(r) < 3)
    .sort((a, b) => rank(a) - rank(b))
    .slice(0, max);
}

// ------------------------------------------------------------------ the scene every attacker file starts from

export interface Scene {
  victim: Actor;
  owner: Owner;
  /** One clinician-written resource of every seedable policy type, in the victim's record or tenant. */
  seeded: Resource[];
  /** `Type/id` of the victim's data by type (seeded, plus Patient, Consent, Communication...). */
  references: Record<string, string>;
  /** The victim's accepted agreements (`url|version`), SMS among them. */
  agreements: string[];
  /** The victim's acceptances (Consent ids): restored before each attack, so each finds them active. */
  consents: string[];
}

/** A PlanDefinition with an agreement attached, as `url|version` (what a CarePlan instantiates). */
function planWithAgreement(backend: TestBackend): string | undefined {
  const plan = storedResources(backend, 'PlanDefinition').find((p) =>
    (p as { relatedArtifact?: { label?: string }[] }).relatedArtifact?.some((a) => a.label === 'agreement'),
  ) as { url?: string; version?: string } | undefined;
  return plan?.url ? `${plan.url}|${plan.version}` : undefined;
}

/**
 * The victim's record, as a clinician and the platform would have written it: one resource of every
 * type the policies name (the CarePlan instantiating a plan with an agreement attached), and every
 * agreement that applies to everyone accepted through the gateway (SMS with the victim's number).
 */
export async function setUpScene(gw: TestGateway, victimKey: string, definition: ProvisionDefinition): Promise<Scene> {
  const backend = gw.backend;
  const owner = ownerOf(backend, victimKey);
  const victim = patientActor(backend, victimKey);
  const seeded = await seedRecord(backend, owner, policyTypes(definition));
  const carePlan = seeded.find((r) => r.resourceType === 'CarePlan');
  const plan = planWithAgreement(backend);
  if (carePlan && plan) {
    const updated = await backend.systemRepo.updateResource({ ...carePlan, instantiatesCanonical: [plan] });
    seeded.splice(seeded.indexOf(carePlan), 1, updated);
  }
  const agreements = await universalAgreements(backend);
  await acceptAs(gw, victim, agreements);
  const references: Record<string, string> = { Patient: owner.patient };
  for (const resource of [...seeded, ...storedResources(backend, 'Consent')]) {
    if (inOwnRecord(resource, victim.patientId) || resource.meta?.accounts?.[0]?.reference === owner.organization) {
      references[resource.resourceType] ??= `${resource.resourceType}/${resource.id}`;
    }
  }
  const consents = (storedResources(backend, 'Consent') as Consent[])
    .filter(
      (c) => inOwnRecord(c, victim.patientId) && c.identifier?.some((i) => i.system === SYSTEMS.agreementAcceptance),
    )
    .map((c) => c.id as string);
  return { victim, owner, seeded, references, agreements, consents };
}

/** Puts back what an earlier (successful) attack took from the victim: their acceptances active again. */
export async function restoreScene(backend: TestBackend, scene: Scene): Promise<void> {
  for (const id of scene.consents) {
    const consent = await backend.systemRepo.readResource<Consent>('Consent', id);
    if (consent.status !== 'active') {
      await backend.systemRepo.updateResource<Consent>({ ...consent, status: 'active' });
    }
  }
}

/**
 * The patient accepts agreements through the gateway, as the app does; should the gateway be unable
 * to (it is not what these suites test), by running the bot directly with nothing but the list.
 */
async function acceptAs(gw: TestGateway, patient: Actor, agreements: string[]): Promise<void> {
  const through = await gw.call('POST', '/v1/agreements/acceptances', {
    token: patient.token,
    body: { agreements },
    headers: { 'content-type': 'application/json' },
  });
  if (through.status === 200) {
    return;
  }
  const around = await executeBot(gw.backend, patient.token, 'accept-agreements', { value: { agreements } });
  if (around.status !== 200 || (around.body as { ok?: boolean }).ok !== true) {
    throw new Error(`${patient.label} could not accept ${agreements.join(', ')}: ${through.text} / ${around.text}`);
  }
}

/** Client ids of the tenant apps that are not the given tenant's. */
export function otherTenantApps(backend: TestBackend, organization: string): string[] {
  return (storedResources(backend, 'ClientApplication') as ClientApplication[])
    .filter((app) => {
      const tenant = app.extension?.find((e) => e.url === EXTENSIONS.tenantOrganization)?.valueReference?.reference;
      return tenant !== undefined && tenant !== organization;
    })
    .map((app) => app.id as string);
}

/** Strings of the victim's record: markers of the seeded data, the family name, the ids of their data. */
export function secretsOf(scene: Scene): string[] {
  return [
    ...scene.seeded.map((r) => secretOf(r.resourceType, scene.owner.key)),
    scene.victim.family ?? '',
    ...Object.values(scene.references).map((ref) => ref.split('/')[1]),
  ].filter(Boolean);
}
