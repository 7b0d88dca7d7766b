import type { Organization, Practitioner } from '@medplum/fhirtypes';
import { EXTENSIONS, type FulfilmentMethod, SYSTEMS, TENANT_PARAMETER } from '../../contracts/systems';
import type { MemberResource } from './apply';
import { type KeyedResource, keyRef, type ProvisionDefinition } from './shape';

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

/** A work queue of a tenant (a CareTeam): which kinds of clinician work it receives. */
export interface QueueSpec {
  key: string;
  name: string;
  /** Kinds of work (Task.code under SYSTEMS.taskKind) routed to it. */
  work: readonly string[];
  /** Receives the kinds no queue of the tenant names. */
  default?: boolean;
}

export interface TenantSpec {
  key: string;
  name: string;
  /** A fixed client id for its patient app (Medplum picks one otherwise). */
  appId?: string;
  /** Where its patient app may return after sign-in (the ClientApplication's `redirectUris`). */
  redirectUris?: readonly string[];
  queues: readonly QueueSpec[];
  /** People who sign in, each with the queues (keys) she works. */
  staff: readonly { entry: KeyedResource; queues: readonly string[] }[];
  /** The endpoint its patients' events are delivered to, when it takes webhooks. */
  webhook?: string;
  /** The event types its endpoint takes (none: every type). */
  webhookEvents?: readonly string[];
}

/** A tenant's backend: a machine client of its own server that reads its patients' records (docs/clinic.md). */
export interface BackendSpec {
  key: string;
  name: string;
}

/** A tenant backend's provisioning key. */
export const backendKey = (tenant: string, backend: string): string => `backend-${tenant}-${backend}`;

/**
 * A tenant's backends: each a ClientApplication (client credentials) tagged with its tenant and key, signing
 * in with the `tenant-backend` policy and its tenant as the `organization` parameter.
 */
export function tenantBackends(
  tenant: string,
  backends: readonly BackendSpec[],
): { resources: KeyedResource[]; integrations: ProvisionDefinition['integrations'] } {
  return {
    resources: backends.map((b) => ({
      key: backendKey(tenant, b.key),
      resource: {
        resourceType: 'ClientApplication',
        name: b.name,
        description: `Backend of tenant ${tenant}: reads its patients' records (what its webhooks name), nothing of another tenant.`,
        meta: { tag: [{ system: SYSTEMS.tenantBackend, code: `${tenant}/${b.key}` }] },
      },
    })),
    integrations: backends.map((b) => ({
      key: backendKey(tenant, b.key),
      access: [
        {
          policy: keyRef('policy-tenant-backend'),
          parameter: [{ name: TENANT_PARAMETER, valueReference: keyRef(`org-${tenant}`) }],
        },
      ],
    })),
  };
}

/** A queue's provisioning key. */
export const queueKey = (tenant: string, queue: string): string => `queue-${tenant}-${queue}`;

/**
 * A tenant: its Organization, its staff (people who sign in: applied after the Organization they belong
 * to and before the queues they are members of), its work queues (CareTeams: `participant` are the
 * queue's members, JOURNEY F; the kinds of work routed to each on a `queueWork` category, `*` for the
 * default), its patient app (whose extension names the tenant), and the endpoint its patients' events
 * are delivered to, when it takes webhooks.
 */
export function tenantSpecResources(spec: TenantSpec): KeyedResource[] {
  const { key, name } = spec;
  const org = keyRef<Organization>(`org-${key}`);
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
          ...(spec.webhook ? [{ url: EXTENSIONS.webhookEndpoint, valueUrl: spec.webhook }] : []),
          ...(spec.webhook
            ? (spec.webhookEvents ?? []).map((type) => ({ url: EXTENSIONS.webhookEvents, valueCode: type }))
            : []),
        ],
      },
    },
    // Each member of staff works her queues: their participant, and her `queues` policy parameter.
    ...spec.staff.map(({ entry, queues }) =>
      'member' in entry
        ? {
            ...entry,
            member: {
              ...(entry as MemberResource).member,
              queues: [...((entry as MemberResource).member.queues ?? []), ...queues.map((q) => queueKey(key, q))],
            },
          }
        : entry,
    ),
    ...spec.queues.map((queue) => {
      const members = spec.staff.filter((s) => s.queues.includes(queue.key));
      const routed = [...queue.work, ...(queue.default ? ['*'] : [])];
      return {
        key: queueKey(key, queue.key),
        resource: {
          resourceType: 'CareTeam',
          meta: { accounts: [org] },
          status: 'active',
          name: queue.name,
          category: [
            { coding: [{ system: SYSTEMS.careQueue, code: queue.key }] },
            ...(routed.length > 0 ? [{ coding: routed.map((code) => ({ system: SYSTEMS.queueWork, code })) }] : []),
          ],
          managingOrganization: [org],
          ...(members.length > 0
            ? { participant: members.map(({ entry }) => ({ member: keyRef<Practitioner>(entry.key) })) }
            : {}),
        },
        // Nobody works it any more: nobody is listed as its member either.
        ...(members.length === 0 ? { absent: ['participant'] } : {}),
      } satisfies KeyedResource;
    }),
    {
      key: `app-${key}`,
      presetId: spec.appId,
      resource: {
        resourceType: 'ClientApplication',
        name: `${name} patient app`,
        description: `Patient app of ${name}; patients who register through it belong to ${name}.`,
        ...(spec.redirectUris?.length ? { redirectUris: [...spec.redirectUris] } : {}),
        extension: [{ url: EXTENSIONS.tenantOrganization, valueReference: org }],
      },
    },
  ];
}

/**
 * A tenant with one queue, `intake-review`, that receives all its clinicians' work and that all its
 * staff work (the demo's tenants).
 */
export function tenantResources(
  key: string,
  name: string,
  appId?: string,
  staff: KeyedResource[] = [],
  webhook?: string,
): KeyedResource[] {
  return tenantSpecResources({
    key,
    name,
    appId,
    webhook,
    queues: [{ key: 'intake-review', name: `${name} intake review`, work: [], default: true }],
    staff: staff.map((entry) => ({ entry, queues: ['intake-review'] })),
  });
}
