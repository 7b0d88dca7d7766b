import type { Practitioner } from '@medplum/fhirtypes';
import { EXTENSIONS, type FulfilmentMethod, SYSTEMS } from '../../contracts/systems';
import type { MemberResource } from './apply';
import { type KeyedResource, keyRef } from './shape';

/** A tenant's resources: its Organization, staff, work queues, patient app and fulfilment policy. */

/**
 * How a tenant's patients may receive what they are prescribed, by country and kind of item (JOURNEY G):
 * medicines delivered or picked up in the US, picked up in Canada; tests in a clinic, or a home kit in
 * the US. A country not listed has no method: an order there cannot be placed (422 `invalid_fulfilment`).
 */
export const FULFILMENT_POLICY: { country: string; kind: string; methods: FulfilmentMethod[] }[] = [
  { country: 'US', kind: 'MedicationRequest', methods: ['delivery', 'pickup'] },
  { country: 'US', kind: 'ServiceRequest', methods: ['in-clinic', 'at-home-kit'] },
  { country: 'CA', kind: 'MedicationRequest', methods: ['pickup'] },
  { country: 'CA', kind: 'ServiceRequest', methods: ['in-clinic'] },
];

/**
 * A tenant: its Organization, its staff (people who sign in: applied after the Organization they belong
 * to and before the queues they are members of), its work queues (CareTeams: `participant` are the
 * queue's members, JOURNEY F), its patient app (whose extension names the tenant), and the endpoint its
 * patients' events are delivered to, when it takes webhooks.
 */
export function tenantResources(
  key: string,
  name: string,
  appId?: string,
  staff: KeyedResource[] = [],
  webhook?: string,
): KeyedResource[] {
  return [
    {
      key: `org-${key}`,
      resource: {
        resourceType: 'Organization',
        name,
        identifier: [{ system: SYSTEMS.tenant, value: key }],
        active: true,
        extension: [
          ...FULFILMENT_POLICY.map(({ country, kind, methods }) => ({
            url: EXTENSIONS.fulfilmentPolicy,
            extension: [
              { url: 'country', valueCode: country },
              { url: 'kind', valueCode: kind },
              ...methods.map((method) => ({ url: 'method', valueCode: method })),
            ],
          })),
          // Where its patients' events go (contracts/webhooks.ts); its signing secret is given to provisioning.
          ...(webhook ? [{ url: EXTENSIONS.webhookEndpoint, valueUrl: webhook }] : []),
        ],
      },
    },
    // Each member of staff works the queue: its participant, and its `queues` policy parameter.
    ...staff.map((member) =>
      'member' in member
        ? {
            ...member,
            member: {
              ...(member as MemberResource).member,
              queues: [...((member as MemberResource).member.queues ?? []), `queue-${key}-intake-review`],
            },
          }
        : member,
    ),
    {
      key: `queue-${key}-intake-review`,
      resource: {
        resourceType: 'CareTeam',
        meta: { accounts: [keyRef(`org-${key}`)] },
        status: 'active',
        name: `${name} intake review`,
        category: [{ coding: [{ system: SYSTEMS.careQueue, code: 'intake-review' }] }],
        managingOrganization: [keyRef(`org-${key}`)],
        ...(staff.length > 0
          ? { participant: staff.map((member) => ({ member: keyRef<Practitioner>(member.key) })) }
          : {}),
      },
    },
    {
      key: `app-${key}`,
      presetId: appId,
      resource: {
        resourceType: 'ClientApplication',
        name: `${name} patient app`,
        description: `Patient app of ${name}; patients who register through it belong to ${name}.`,
        extension: [{ url: EXTENSIONS.tenantOrganization, valueReference: keyRef(`org-${key}`) }],
      },
    },
  ];
}
