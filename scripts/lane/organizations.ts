// The tenants' Organizations: the clinician reads her own tenant's, not the other's, and renames neither.
import type { Resource } from '@medplum/fhirtypes';
import type { AttackKit } from './attack-kit';
import { type AttackContext, type Person, row } from './common';

/** Her tenant's Organization read (control), the other tenant's read, her own renamed (refused, read back). */
export async function tenantOrganizations(
  ctx: AttackContext,
  kit: AttackKit,
  northwindRef: string | undefined,
): Promise<void> {
  const { people, direct, attack, control, byTag } = kit;
  const clinician = people.get('northwind-clinician');
  // Her own tenant's Organization (a patient's managingOrganization, which Medplum's app reads): the
  // clinician policy's read-only `Organization?_id=%organization.id`; the other tenant's stays out of reach.
  const southridgeOrg = await byTag('Organization', 'org-southridge');
  const southridgeRef = southridgeOrg?.id ? `Organization/${southridgeOrg.id}` : undefined;
  await control(
    "the Northwind clinician reads her own tenant's Organization (Northwind)",
    clinician,
    northwindRef,
    () => direct(clinician as Person, 'GET', northwindRef as string),
    { missing: 'no Organization tagged org-northwind' },
  );
  await attack(
    'the Northwind clinician reads the Southridge Organization',
    { attacker: 'northwind-clinician', target: southridgeRef, missing: 'no Organization tagged org-southridge' },
    (a, t) => direct(a, 'GET', t),
  );
  const orgBefore = northwindRef ? ((await ctx.adminGet(`fhir/R4/${northwindRef}`)).body as Resource) : undefined;
  const orgName = (org: Resource | undefined) => (org as { name?: string } | undefined)?.name;
  await attack(
    "the Northwind clinician renames her own tenant's Organization (PUT, name changed)",
    {
      attacker: 'northwind-clinician',
      target: orgBefore?.id ? northwindRef : undefined,
      missing: 'the admin could not read the Northwind Organization',
    },
    (a, t) => direct(a, 'PUT', t, { ...orgBefore, name: `${orgName(orgBefore)} (renamed by the lane)` }),
    'rejected',
  );
  if (northwindRef && orgBefore?.id) {
    const orgAfter = (await ctx.adminGet(`fhir/R4/${northwindRef}`)).body as Resource | undefined;
    const same = orgAfter?.meta?.versionId === orgBefore.meta?.versionId && orgName(orgAfter) === orgName(orgBefore);
    row(
      'the refused rename changed nothing (the Northwind Organization, read back by the admin)',
      same ? 'ok' : 'FAILED',
      `${northwindRef}: name "${orgName(orgAfter)}", version ${orgAfter?.meta?.versionId}${same ? ' as before' : ` (expected "${orgName(orgBefore)}", version ${orgBefore.meta?.versionId})`}`,
    );
  }
}
