import { createHmac } from 'node:crypto';
import { parseJWTPayload } from '@medplum/core';
import type { ProjectMembership } from '@medplum/fhirtypes';
import { generateKeyPair, SignJWT } from 'jose';
import { SYSTEMS } from '../../contracts/systems';
import { issueAccessToken } from '../../src/embedded/auth/tokens';
import type { TestBackend } from './backend';

const base64url = (value: string | Buffer) => Buffer.from(value).toString('base64url');

export interface BadToken {
  name: string;
  token: string | null;
  status: 401 | 403;
}

/**
 * Every way a bearer token can be wrong, each made the way an attacker or a confused client would:
 * the auth matrix runs all of them against every secured operation.
 */
export async function badTokens(backend: TestBackend): Promise<BadToken[]> {
  const claims = parseJWTPayload(backend.patients.dave.token) as { sub: string; login_id: string; profile: string };
  const subject = { userId: claims.sub, loginId: claims.login_id, profile: claims.profile, scope: 'openid' };
  const payload = {
    login_id: claims.login_id,
    profile: claims.profile,
    scope: 'openid',
    sub: claims.sub,
    iss: backend.baseUrl,
    exp: Math.floor(Date.now() / 1000) + 3600,
  };

  const expired = await issueAccessToken(backend.key, backend.baseUrl, subject, new Date(Date.now() - 2 * 3600_000));
  const wrongIssuer = await issueAccessToken(backend.key, 'https://evil.example/', subject, new Date());
  const algNone = `${base64url(JSON.stringify({ alg: 'none', typ: 'JWT' }))}.${base64url(JSON.stringify(payload))}.`;
  const hsHeader = base64url(JSON.stringify({ alg: 'HS256', typ: 'JWT', kid: backend.key.kid }));
  const hsBody = base64url(JSON.stringify(payload));
  const publicKeyAsSecret = JSON.stringify(backend.key.publicJwk);
  const hs256 = `${hsHeader}.${hsBody}.${createHmac('sha256', publicKeyAsSecret).update(`${hsHeader}.${hsBody}`).digest('base64url')}`;
  const { privateKey } = await generateKeyPair('RS256');
  const otherKey = await new SignJWT(payload)
    .setProtectedHeader({ alg: 'RS256', kid: backend.key.kid })
    .sign(privateKey);

  const revoked = await backend.login(backend.patients.dave.membership);
  await revoked.medplum.post('oauth2/logout', {});

  return [
    { name: 'no token', token: null, status: 401 },
    { name: 'garbage', token: 'garbage', status: 401 },
    { name: 'expired', token: expired, status: 401 },
    { name: 'wrong issuer', token: wrongIssuer, status: 401 },
    { name: 'alg none', token: algNone, status: 401 },
    { name: 'HS256 signed with the public key', token: hs256, status: 401 },
    { name: 'another key', token: otherKey, status: 401 },
    { name: 'revoked login', token: revoked.token, status: 401 },
    { name: 'practitioner', token: await practitionerToken(backend), status: 403 },
    { name: 'bot', token: await botToken(backend), status: 403 },
    { name: 'client application', token: backend.admin.getAccessToken() as string, status: 403 },
  ];
}

async function practitionerToken(backend: TestBackend): Promise<string> {
  // A member made the way a project admin can (packages/server/src/admin/invite.ts).
  const membership = (await backend.admin.post(`admin/projects/${backend.project.id}/invite`, {
    resourceType: 'Practitioner',
    firstName: 'Test',
    lastName: 'Clinician',
    externalId: `clinician-${crypto.randomUUID()}`,
    sendEmail: false,
  })) as ProjectMembership;
  return (await backend.login(membership)).token;
}

async function botToken(backend: TestBackend): Promise<string> {
  const bot = await backend.admin.searchOne('Bot', { identifier: `${SYSTEMS.bots}|patient-home` });
  const membership = await backend.admin.searchOne('ProjectMembership', { profile: `Bot/${bot?.id}` });
  return (await backend.login(membership as ProjectMembership)).token;
}
