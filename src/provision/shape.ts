import type { AccessPolicy, Project, ProjectMembership, Reference, Resource } from '@medplum/fhirtypes';

/**
 * A declarative description of everything a Medplum project needs for this platform. Applied
 * idempotently by `applyDefinition` to any Medplum (embedded or real). Resources refer to each
 * other with `{ reference: 'key:<key>' }`, resolved to real ids as they are applied in order.
 */
export interface ProvisionDefinition {
  project: {
    features: NonNullable<Project['features']>;
    /** Key of the AccessPolicy every self-registered patient gets. */
    defaultPatientAccessPolicy: string;
  };
  accessPolicies: AccessPolicyDefinition[];
  bots: BotDefinition[];
  subscriptions: SubscriptionDefinition[];
  /** Organizations, client applications, catalog: created or updated in this order. */
  resources: KeyedResource[];
  /** Machine clients of the platform (provisioned ClientApplications) and the policy each signs in with. */
  integrations: {
    key: string;
    /** The one policy it signs in with, or `access` (policies with parameters, by key references). */
    accessPolicy?: string;
    access?: NonNullable<ProjectMembership['access']>;
  }[];
  /**
   * The people a clinic file provisions (Practitioners identified under `system`, values `<tenant>/<key>`):
   * one found in the Project whose value is not in `keep` has left the clinic, and is retired (her access
   * revoked, her open work returned to its queue, her calendar closed; her records kept).
   */
  staff?: { system: string; keep: string[] };
  /**
   * The tenant backends a clinic file provisions (ClientApplications tagged under `system`, codes
   * `<tenant>/<key>`): one found whose code is not in `keep` was removed from the file, and is retired (its
   * membership deleted: its credentials no longer sign in).
   */
  backends?: { system: string; keep: string[] };
}

/** An access policy of the project, by key (bots, memberships and integrations name it so). */
export interface AccessPolicyDefinition {
  key: string;
  policy: Omit<AccessPolicy, 'resourceType'>;
}

/** A bot as the platform provisions it: what it may do (its own access policy) and the bot itself. */
export interface PlatformBot {
  access: AccessPolicyDefinition;
  bot: BotDefinition;
}

export interface BotDefinition {
  /** Also the bundle name (`dist/bots/<key>.js`) and the identifier value under SYSTEMS.bots. */
  key: string;
  description: string;
  accessPolicy: string;
  /** Project-admin membership: needed only by bots that must touch ProjectMembership (Medplum rule). */
  admin?: boolean;
  /** A cron bot: Medplum runs it on this schedule (Bot.cronString, UTC). */
  cronString?: string;
  /** Run once by provisioning after everything is applied (what a cron bot must have made before its first run). */
  runAfterProvisioning?: boolean;
  /**
   * Patients may run it with `$execute` (it is tagged for them and readable by them). Every other bot
   * (subscription and cron bots) is unreadable to patients, so Medplum refuses their `$execute`.
   */
  patient?: boolean;
}

export interface SubscriptionDefinition {
  key: string;
  bot: string;
  criteria: string;
  interaction: 'create' | 'update' | 'delete';
  reason: string;
}

/** Some of a resource's fields (a plain object: a Partial of the whole Resource union is too costly to type). */
export type ResourceFields = Readonly<Record<string, unknown>>;

export interface KeyedResource {
  key: string;
  resource: Resource;
  /** Published once, never changed (agreement versions): a change must be a new key and version. */
  writeOnce?: boolean;
  /**
   * A version superseded by a newer one under another key: where it was published, its status becomes
   * `retired` (nothing else of it changes; what pinned it keeps reading it); where it never was, nothing.
   */
  retire?: boolean;
  /**
   * Fields written only when the resource is created: what its owner edits afterwards (a patient's
   * demographics), which a later run must not overwrite. What `resource` sets stays the definition's.
   */
  seed?: ResourceFields;
  /** Fields it must not have (a queue nobody is a member of any more: its `participant`), removed where present. */
  absent?: string[];
  /**
   * The id a Medplum super admin gives the resource before provisioning, so that it is known in advance
   * (a demo patient app's client id, printed in the README). Only a super admin may choose an id
   * (Medplum's `canSetId`): the embedded Medplum's bootstrap does; on a real Medplum, provisioning
   * creates it with an id of Medplum's choosing unless an operator made it first with this tag.
   */
  presetId?: string;
}

/** A reference to the resource provisioned under `key`, resolved when it is applied. */
export function keyRef<T extends Resource>(key: string): Reference<T> {
  return { reference: `key:${key}` } as Reference<T>;
}
