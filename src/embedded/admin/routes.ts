import { allOk } from '@medplum/core';
import type { Context } from 'hono';
import { Hono } from 'hono';
import { thrownResponse } from '../fhir-http';
import { createBot } from './bot';
import { createClient } from './client';
import { type AdminDeps, jsonObject, type ProjectAdmin, projectAdmin } from './context';
import { inviteUser } from './invite';
import { deleteMember, readMember, updateMember } from './members';

/**
 * The project-admin API of Medplum that provisioning uses (packages/server/src/admin/routes.ts mounts
 * packages/server/src/admin/project.ts at `/admin/projects/`): the only way a project admin creates
 * bot, client and user memberships, since `ProjectMembership.user` is read-only to them over FHIR.
 */
export function createAdminRoutes(deps: AdminDeps): Hono {
  const app = new Hono();
  const handle =
    (status: 200 | 201, work: (admin: ProjectAdmin, c: Context) => Promise<unknown>) =>
    async (c: Context): Promise<Response> => {
      try {
        const admin = await projectAdmin(c, deps);
        return c.json(await work(admin, c), status);
      } catch (err) {
        return thrownResponse(err);
      }
    };
  app.post(
    '/admin/projects/:projectId/bot',
    handle(201, async (admin, c) => createBot(admin, deps, await jsonObject(c))),
  );
  app.post(
    '/admin/projects/:projectId/client',
    handle(201, async (admin, c) => createClient(admin, deps, await jsonObject(c))),
  );
  app.post(
    '/admin/projects/:projectId/invite',
    handle(200, async (admin, c) => inviteUser(admin, deps, await jsonObject(c))),
  );
  app.get(
    '/admin/projects/:projectId/members/:membershipId',
    handle(200, (admin, c) => readMember(admin, c.req.param('membershipId') ?? '')),
  );
  app.post(
    '/admin/projects/:projectId/members/:membershipId',
    handle(200, async (admin, c) => updateMember(admin, c.req.param('membershipId') ?? '', await jsonObject(c))),
  );
  app.delete(
    '/admin/projects/:projectId/members/:membershipId',
    handle(200, async (admin, c) => {
      await deleteMember(admin, deps.systemRepo, c.req.param('membershipId') ?? '');
      return allOk;
    }),
  );
  return app;
}
