import type { AccessPolicy, Login, Project, ProjectMembership, Reference } from '@medplum/fhirtypes';

/**
 * Who is calling the embedded Medplum, resolved from a verified access token (or the system itself).
 * Mirrors Medplum's AuthState: the repository enforces `accessPolicy` for every non-admin caller.
 */
export interface CallerContext {
  project: Project;
  membership: ProjectMembership;
  login?: Login;
  /** The membership's profile, e.g. Patient/123, Practitioner/9, Bot/7, ClientApplication/5. */
  profile: Reference;
  /** The effective policy with parameters already substituted; undefined for project admins and the system. */
  accessPolicy?: AccessPolicy;
  /** True for the system itself (provisioning, internal bookkeeping): no policy, may set any meta. */
  system?: boolean;
  /**
   * The request said `X-Medplum: extended`: a project admin may then set `meta.accounts` (Medplum honours
   * accounts only in extended mode by an admin, packages/server/src/fhir/repo.ts; otherwise it ignores them).
   */
  extendedMode?: boolean;
}
