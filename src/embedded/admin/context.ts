import type { WithId } from '@medplum/core';
import { badRequest, forbidden, OperationOutcomeError } from '@medplum/core';
import type { Project } from '@medplum/fhirtypes';
import type { Context } from 'hono';
import { authenticate } from '../auth/authenticate';
import type { CallerCache } from '../auth/cache';
import type { SigningKey } from '../auth/keys';
import type { CallerContext } from '../context';
import type { SqliteRepository } from '../store/repo';

export interface AdminDeps {
  systemRepo: SqliteRepository;
  key: SigningKey;
  issuer: string;
  now: () => Date;
  callers: CallerCache;
}

/** The verified project admin calling `/admin/projects/:projectId/...`, with its own repository. */
export interface ProjectAdmin {
  caller: CallerContext;
  project: WithId<Project>;
  /** The admin's own view (its access policy applies: `ProjectMembership.user` and `project` are read-only). */
  repo: SqliteRepository;
}

/**
 * Medplum's `authenticateRequest` then `verifyProjectAdmin` (packages/server/src/admin/utils.ts): any
 * member that is not `admin` is 403. Medplum then acts on the caller's own project whatever
 * `:projectId` says; we are stricter and refuse (403) a path naming another project.
 */
export async function projectAdmin(c: Context, deps: AdminDeps): Promise<ProjectAdmin> {
  const caller = await authenticate(deps, c.req.header('authorization'));
  if (!caller.membership.admin || caller.project.id !== c.req.param('projectId')) {
    throw new OperationOutcomeError(forbidden);
  }
  return { caller, project: caller.project as WithId<Project>, repo: deps.systemRepo.withCaller(caller) };
}

export async function jsonObject(c: Context): Promise<Record<string, unknown>> {
  const body = (await c.req.json().catch(() => undefined)) as unknown;
  if (!body || typeof body !== 'object' || Array.isArray(body)) {
    throw new OperationOutcomeError(badRequest('Request body must be a JSON object'));
  }
  return body as Record<string, unknown>;
}

/** express-validator's `notEmpty()` as Medplum's validators use it: 400 naming the field. */
export function requiredString(body: Record<string, unknown>, field: string, message: string): string {
  const value = body[field];
  if (typeof value !== 'string' || value.trim() === '') {
    throw new OperationOutcomeError(badRequest(message, field));
  }
  return value;
}

export function optionalString(body: Record<string, unknown>, field: string): string | undefined {
  const value = body[field];
  if (value === undefined) {
    return undefined;
  }
  if (typeof value !== 'string') {
    throw new OperationOutcomeError(badRequest(`${field} must be a string`, field));
  }
  return value;
}
