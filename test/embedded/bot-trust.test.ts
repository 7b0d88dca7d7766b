import { createHmac } from 'node:crypto';
import { parseJWTPayload } from '@medplum/core';
import type { ProjectMembership } from '@medplum/fhirtypes';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EDGE_STATEMENT, SIGNING_KEYS } from '../../contracts/systems';
import { createEdgeSigner } from '../../src/edge/statement';
import { runBotBundle } from '../../src/embedded/bots/vm';
import { startTestBackend, type TestBackend } from '../support/backend';
import { buildFixtureBot } from '../support/bots';

/**
 * bots/lib/trust.ts, run as Medplum runs a bot (the real bundle in a vmcontext sandbox), with events a
 * caller could not make through Medplum's $execute: what the library believes when the requester and the
 * token disagree, when the token is forged, stale or missing, and when the edge statement is not the
 * gateway's. Medplum passes the caller's request headers to the bot (packages/server/src/bots/vmcontext.ts).
 */
let backend: TestBackend;
let code: string;
let botToken: string;

beforeAll(async () => {
  backend = await startTestBackend();
  code = await buildFixtureBot('trust-probe');
  const bot = await backend.admin.searchOne('Bot', {
    identifier: 'https://patient-care.example/bots|accept-agreements',
  });
  const membership = await backend.admin.searchOne('ProjectMembership', { profile: `Bot/${bot?.id}` });
  botToken = (await backend.login(membership as ProjectMembership)).token;
});
afterAll(() => backend?.close());

interface Probe {
  caller: { profile: string; loginId: string; clientId?: string } | null;
  edge: { ipAddress?: string; userAgent?: string } | null;
}

/** What the probe's runs fetched of Medplum's key set. */
const keySetFetches: string[] = [];

const probe = (
  requester: string,
  authorization: string | undefined,
  input: unknown = {},
  secret: string | null = backend.edgeStatementKey,
  /** The Project secret's copy of Medplum's signing keys (JSON text), if any. */
  heldKeys?: string,
) =>
  runBotBundle({
    code,
    baseUrl: backend.baseUrl,
    accessToken: botToken,
    fetch: (input, init) => {
      const url = String(input instanceof Request ? input.url : input);
      if (url.includes('.well-known/jwks.json')) {
        keySetFetches.push(url);
      }
      return backend.fetch(input, init);
    },
    timeoutMs: 10_000,
    event: {
      bot: { reference: 'Bot/probe' },
      requester: { reference: requester } as never,
      input,
      contentType: 'application/json',
      secrets: {
        ...(secret ? { [EDGE_STATEMENT.secretName]: { name: EDGE_STATEMENT.secretName, valueString: secret } } : {}),
        ...(heldKeys ? { [SIGNING_KEYS.secretName]: { name: SIGNING_KEYS.secretName, valueString: heldKeys } } : {}),
      },
      traceId: 'trace',
      headers: authorization ? { authorization } : {},
    },
  }) as Promise<Probe>;

const alice = () => backend.patients.alice;
const aliceProfile = () => `Patient/${alice().patient.id}`;
const claims = () => parseJWTPayload(alice().token) as { login_id: string; sub: string; profile: string };

describe('bots/lib/trust.ts: the caller', () => {
  it("is the requester confirmed by the caller's own token, with the token's session", async () => {
    const result = await probe(aliceProfile(), `Bearer ${alice().token}`);
    expect(result.caller).toEqual({ profile: aliceProfile(), loginId: claims().login_id });
  });

  it('is nobody when the token is of someone else, missing, forged, stale or without exp', async () => {
    const payload = { login_id: claims().login_id, profile: claims().profile, scope: 'openid', sub: claims().sub };
    const { privateKey } = await generateKeyPair('RS256');
    const forged = await new SignJWT({ ...payload, exp: Math.floor(Date.now() / 1000) + 600 })
      .setProtectedHeader({ alg: 'RS256', kid: backend.key.kid })
      .sign(privateKey);
    const noExp = await new SignJWT(payload)
      .setProtectedHeader({ alg: 'RS256', kid: backend.key.kid })
      .sign(backend.key.privateKey);
    const stale = await new SignJWT({ ...payload, exp: Math.floor(Date.now() / 1000) - 10 })
      .setProtectedHeader({ alg: 'RS256', kid: backend.key.kid })
      .sign(backend.key.privateKey);
    const header = (h: object) => Buffer.from(JSON.stringify(h)).toString('base64url');
    const body = Buffer.from(JSON.stringify({ ...payload, exp: 9_999_999_999 })).toString('base64url');
    const none = `${header({ alg: 'none' })}.${body}.`;
    const hmac = `${header({ alg: 'HS256', kid: backend.key.kid })}.${body}.${createHmac(
      'sha256',
      JSON.stringify(backend.key.publicJwk),
    )
      .update(`${header({ alg: 'HS256', kid: backend.key.kid })}.${body}`)
      .digest('base64url')}`;
    const cases: [string, string | undefined][] = [
      ["another patient's token", `Bearer ${backend.patients.bob.token}`],
      ['no Authorization header', undefined],
      ['signed with another key', `Bearer ${forged}`],
      ['without exp', `Bearer ${noExp}`],
      ['expired', `Bearer ${stale}`],
      ['alg none', `Bearer ${none}`],
      ['HS256 with the public key', `Bearer ${hmac}`],
      ['garbage', 'Bearer a.b.c'],
    ];
    for (const [name, authorization] of cases) {
      expect((await probe(aliceProfile(), authorization)).caller, name).toBeNull();
    }
  });
});

describe("bots/lib/trust.ts: Medplum's signing keys", () => {
  const held = (keys: object[]) => JSON.stringify({ keys });

  it('come from the copy provisioning keeps, without a fetch; a key the copy lacks (rotated) is fetched then', async () => {
    // What provisioning wrote: Medplum's key set, as its Project secret.
    const project = await backend.systemRepo.readResource<{
      resourceType: 'Project';
      secret?: { name: string; valueString?: string }[];
    }>('Project', backend.project.id);
    const copy = project.secret?.find((s) => s.name === SIGNING_KEYS.secretName)?.valueString;
    const served = await (await backend.fetch(new URL('.well-known/jwks.json', backend.baseUrl))).json();
    expect(JSON.parse(copy as string)).toEqual({ keys: served.keys });

    keySetFetches.length = 0;
    const fromCopy = await probe(aliceProfile(), `Bearer ${alice().token}`, {}, null, copy);
    expect(fromCopy.caller).toEqual({ profile: aliceProfile(), loginId: claims().login_id });
    expect(keySetFetches).toEqual([]);

    // A copy without the token's key (another key only), a broken copy, no copy: the key set is fetched.
    const { publicKey } = await generateKeyPair('RS256', { extractable: true });
    const other = { ...(await exportJWK(publicKey)), kid: 'rotated-away', alg: 'RS256' };
    for (const stale of [held([other]), 'not json', undefined]) {
      keySetFetches.length = 0;
      const result = await probe(aliceProfile(), `Bearer ${alice().token}`, {}, null, stale);
      expect(result.caller, String(stale)).toEqual({ profile: aliceProfile(), loginId: claims().login_id });
      expect(keySetFetches, String(stale)).toHaveLength(1);
    }
  });

  it('admit no token the copy cannot verify: signed with a key of the same kid but not Medplum’s, or one it names but Medplum does not have', async () => {
    const copy = held([backend.key.publicJwk]);
    const payload = { login_id: claims().login_id, profile: claims().profile, scope: 'openid', sub: claims().sub };
    const { privateKey } = await generateKeyPair('RS256');
    const exp = Math.floor(Date.now() / 1000) + 600;
    const sameKid = await new SignJWT({ ...payload, exp })
      .setProtectedHeader({ alg: 'RS256', kid: backend.key.kid })
      .sign(privateKey);
    const unknownKid = await new SignJWT({ ...payload, exp })
      .setProtectedHeader({ alg: 'RS256', kid: 'attacker' })
      .sign(privateKey);
    // A copy an attacker could not write (Project secrets are a project admin's) but here naming her key:
    // still only Medplum's own keys admit anything, and the copy's key must verify the signature.
    for (const token of [sameKid, unknownKid]) {
      expect((await probe(aliceProfile(), `Bearer ${token}`, {}, null, copy)).caller).toBeNull();
    }
  });
});

describe('bots/lib/trust.ts: edge facts', () => {
  const sign = (
    facts: { sub: string; lid: string; ip?: string; ua?: string },
    key = backend.edgeStatementKey,
    at = new Date(),
  ) => createEdgeSigner(key, () => at)(facts);

  it("are the gateway's statement for this session", async () => {
    const edge = await sign({ sub: aliceProfile(), lid: claims().login_id, ip: '203.0.113.9', ua: 'app/1.0' });
    const result = await probe(aliceProfile(), `Bearer ${alice().token}`, { edge });
    expect(result.edge).toEqual({ ipAddress: '203.0.113.9', userAgent: 'app/1.0' });
  });

  it('are nothing when the statement is for another session, stale, signed with another key, or there is no key', async () => {
    const facts = { sub: aliceProfile(), lid: claims().login_id, ip: '203.0.113.9', ua: 'app/1.0' };
    const cases: [string, string, string | null][] = [
      ['another session', await sign({ ...facts, lid: 'another-login' }), backend.edgeStatementKey],
      [
        'another patient',
        await sign({ ...facts, sub: `Patient/${backend.patients.bob.patient.id}` }),
        backend.edgeStatementKey,
      ],
      ['stale', await sign(facts, backend.edgeStatementKey, new Date(Date.now() - 120_000)), backend.edgeStatementKey],
      ['another key', await sign(facts, 'not-the-project-secret'), backend.edgeStatementKey],
      ['no key in the secrets', await sign(facts), null],
    ];
    for (const [name, edge, secret] of cases) {
      expect((await probe(aliceProfile(), `Bearer ${alice().token}`, { edge }, secret)).edge, name).toEqual({});
    }
  });
});
