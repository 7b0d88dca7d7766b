import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MedplumClient } from '@medplum/core';
import type { Patient } from '@medplum/fhirtypes';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_PASSWORD, DEMO_TENANTS, demoEmail } from '../../src/provision/demo';
import { type NpmStart, startNpmStart } from '../support/npm-start';
import { scaled } from '../support/slowness';

/**
 * Issue 13's first contact, as a new patient app meets the API: `npm start` on random ports, then
 * everything from `/v1/config` and a build-time client id, through Medplum's own sign-in and
 * registration, from Node and from a browser page on another origin.
 */
const CHROMIUM = '/usr/bin/chromium';
const [northwind, southridge] = DEMO_TENANTS;

/** A page server: the origin a browser app is served from. */
async function pageOrigin(): Promise<{ server: Server; origin: string }> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>patient app</title><p>app</p>');
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

let started: NpmStart;
let allowedPage: { server: Server; origin: string };
let otherPage: { server: Server; origin: string };
beforeAll(async () => {
  allowedPage = await pageOrigin();
  otherPage = await pageOrigin();
  started = await startNpmStart({ CORS_ORIGINS: allowedPage.origin });
}, scaled(90_000));
afterAll(async () => {
  await started?.stop();
  allowedPage?.server.close();
  otherPage?.server.close();
});

interface Config {
  projectId: string;
  medplumBaseUrl: string;
  registration: { steps: string[] };
  signIn: { steps: string[] };
}

const config = async (): Promise<Config> => (await fetch(`${started.gatewayUrl}/v1/config`)).json() as Promise<Config>;

const gateway = (token: string, path: string, method = 'GET') =>
  fetch(`${started.gatewayUrl}${path}`, { method, headers: { authorization: `Bearer ${token}` } });

describe('a new patient app against npm start', () => {
  it('learns a reachable Medplum from /v1/config, and the demo client ids and password are printed', async () => {
    const { medplumBaseUrl, projectId, registration, signIn } = await config();
    expect(medplumBaseUrl).toBe(started.medplumUrl);
    expect(registration.steps[0]).toMatch(/^POST \{medplumBaseUrl\}auth\/newuser /);
    expect(signIn.steps[0]).toMatch(/^POST \{medplumBaseUrl\}auth\/login /);
    const keys = await fetch(new URL('.well-known/jwks.json', medplumBaseUrl));
    expect(keys.status).toBe(200);
    expect(((await keys.json()) as { keys: unknown[] }).keys.length).toBeGreaterThan(0);
    const banner = started.stdout();
    expect(banner).toContain(projectId);
    for (const tenant of DEMO_TENANTS) {
      expect(banner).toContain(`${tenant.key} ${tenant.appId}`);
    }
    expect(banner).toContain(`password ${DEMO_PASSWORD}`);
  });

  it('registers a new patient with MedplumClient (startNewUser -> startNewPatient -> processCode), homes her, reads her profile', async () => {
    const { medplumBaseUrl, projectId } = await config();
    const medplum = new MedplumClient({ baseUrl: medplumBaseUrl, cacheTime: 0 });
    const user = await medplum.startNewUser({
      firstName: 'Nia',
      lastName: 'Newcomer',
      email: 'nia.newcomer@example.com',
      password: 'a long enough password',
      projectId,
      clientId: southridge.appId,
      recaptchaToken: '',
    });
    const patient = await medplum.startNewPatient({ login: user.login, projectId });
    await medplum.processCode(patient.code as string);
    const token = medplum.getAccessToken() as string;

    const home = await gateway(token, '/v1/patient/home', 'POST');
    expect(home.status).toBe(200);
    const homed = (await home.json()) as { organization: string; patient: string };
    // Southridge's, as Carol's (a demo patient of Southridge) is.
    const carol = (await (await gateway(started.tokens.carol, '/v1/patient/profile')).json()) as Patient;
    expect(homed.organization).toBe(carol.managingOrganization?.reference);

    const profile = await gateway(token, '/v1/patient/profile');
    expect(profile.status).toBe(200);
    const me = (await profile.json()) as Patient;
    expect(`Patient/${me.id}`).toBe(homed.patient);
    expect(me.name?.[0]).toMatchObject({ given: ['Nia'], family: 'Newcomer' });
  });

  it('signs in a demo patient and a demo clinician with the printed password, through Medplum login', async () => {
    const { medplumBaseUrl, projectId } = await config();
    const printed = JSON.parse(Buffer.from(started.token.split('.')[1], 'base64url').toString()) as {
      profile: string;
    };
    const alice = new MedplumClient({ baseUrl: medplumBaseUrl, cacheTime: 0 });
    const login = await alice.startLogin({
      email: demoEmail('alice', 'northwind'),
      password: DEMO_PASSWORD,
      projectId,
      clientId: northwind.appId,
    });
    await alice.processCode(login.code as string);
    const profile = await gateway(alice.getAccessToken() as string, '/v1/patient/profile');
    expect(profile.status).toBe(200);
    expect(`Patient/${((await profile.json()) as Patient).id}`).toBe(printed.profile);

    const wrong = new MedplumClient({ baseUrl: medplumBaseUrl, cacheTime: 0 });
    await expect(
      wrong.startLogin({ email: demoEmail('alice', 'northwind'), password: 'not her password', projectId }),
    ).rejects.toThrow();

    // A clinician signs in the same way (Medplum's app does), and the patient API refuses the token.
    const clinician = new MedplumClient({ baseUrl: medplumBaseUrl, cacheTime: 0 });
    const staff = await clinician.startLogin({
      email: demoEmail('clinician', 'northwind'),
      password: DEMO_PASSWORD,
      projectId,
    });
    await clinician.processCode(staff.code as string);
    expect(clinician.getProfile()?.resourceType).toBe('Practitioner');
    expect((await gateway(clinician.getAccessToken() as string, '/v1/patient/profile')).status).toBe(403);
  });
});

/** What the page runs: Medplum's login (PKCE S256), the token, then the profile through the gateway. */
async function signInFromPage(args: {
  gateway: string;
  email: string;
  password: string;
  clientId: string;
}): Promise<{ ok: true; family: string } | { ok: false; step: string; error: string }> {
  let step = 'config';
  try {
    const config = (await (await fetch(`${args.gateway}/v1/config`)).json()) as Config;
    const bytes = crypto.getRandomValues(new Uint8Array(32));
    const verifier = btoa(String.fromCharCode(...bytes)).replace(
      /[+/=]/g,
      (c) => ({ '+': '-', '/': '_', '=': '' })[c] as string,
    );
    const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier)));
    const challenge = btoa(String.fromCharCode(...digest)).replace(
      /[+/=]/g,
      (c) => ({ '+': '-', '/': '_', '=': '' })[c] as string,
    );
    step = 'login';
    const login = await fetch(`${config.medplumBaseUrl}auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        email: args.email,
        password: args.password,
        projectId: config.projectId,
        clientId: args.clientId,
        codeChallenge: challenge,
        codeChallengeMethod: 'S256',
      }),
    });
    const { code } = (await login.json()) as { code: string };
    step = 'token';
    const tokens = await fetch(`${config.medplumBaseUrl}oauth2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier }),
    });
    const { access_token } = (await tokens.json()) as { access_token: string };
    step = 'profile';
    const profile = await fetch(`${args.gateway}/v1/patient/profile`, {
      headers: { authorization: `Bearer ${access_token}` },
    });
    const patient = (await profile.json()) as Patient;
    return { ok: true, family: patient.name?.[0]?.family as string };
  } catch (err) {
    return { ok: false, step, error: String(err) };
  }
}

describe('a browser patient app on another origin (Debian chromium)', () => {
  it('signs in and reads the profile through CORS from an allowed origin; another origin is refused', {
    timeout: scaled(60_000),
  }, async () => {
    expect(existsSync(CHROMIUM), 'Debian chromium is installed by .ci/run and the README').toBe(true);
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
    });
    try {
      const args = {
        gateway: started.gatewayUrl,
        email: demoEmail('carol', 'southridge'),
        password: DEMO_PASSWORD,
        clientId: southridge.appId,
      };
      const page = await browser.newPage();
      await page.goto(allowedPage.origin);
      expect(await page.evaluate(signInFromPage, args)).toEqual({ ok: true, family: 'Silva' });

      const other = await browser.newPage();
      await other.goto(otherPage.origin);
      const refused = await other.evaluate(signInFromPage, args);
      // Even the public config is unreadable there: the answer carries no Access-Control-Allow-Origin.
      expect(refused).toMatchObject({ ok: false, step: 'config', error: expect.stringContaining('Failed to fetch') });
      // And a call with a valid token, preflighted for its Authorization header, is refused before it is made.
      const direct = await other.evaluate(
        async ({ gateway, token }) => {
          try {
            await fetch(`${gateway}/v1/patient/profile`, { headers: { authorization: `Bearer ${token}` } });
            return 'read';
          } catch (err) {
            return String(err);
          }
        },
        { gateway: started.gatewayUrl, token: started.token },
      );
      expect(direct).toContain('Failed to fetch');
    } finally {
      await browser.close();
    }
  });
});

describe('CORS headers (gateway and embedded Medplum)', () => {
  it('answers an allowed preflight before authentication with only what the document uses', async () => {
    const preflight = await fetch(`${started.gatewayUrl}/v1/patient/profile`, {
      method: 'OPTIONS',
      headers: {
        origin: allowedPage.origin,
        'access-control-request-method': 'GET',
        'access-control-request-headers': 'authorization',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe(allowedPage.origin);
    expect(preflight.headers.get('access-control-allow-headers')).toBe(
      'Authorization, Content-Type, Idempotency-Key, If-Match, Last-Event-ID, X-Request-Id',
    );
    // What the SDK sends with every POST, and what resumes her event stream, are allowed from a page.
    for (const [path, method, header] of [
      ['/v1/agreements/acceptances', 'POST', 'authorization, content-type, idempotency-key'],
      ['/v1/events', 'GET', 'authorization, last-event-id'],
    ]) {
      const asked = await fetch(`${started.gatewayUrl}${path}`, {
        method: 'OPTIONS',
        headers: {
          origin: allowedPage.origin,
          'access-control-request-method': method,
          'access-control-request-headers': header,
        },
      });
      expect(asked.status, `${method} ${path} with ${header}`).toBe(204);
    }
    expect(preflight.headers.get('access-control-allow-credentials')).toBeNull();
    const methods = preflight.headers.get('access-control-allow-methods')?.split(', ');
    expect(methods).toContain('GET');
    expect(methods).not.toContain('OPTIONS');

    const cookie = await fetch(`${started.gatewayUrl}/v1/patient/profile`, {
      method: 'OPTIONS',
      headers: {
        origin: allowedPage.origin,
        'access-control-request-method': 'GET',
        'access-control-request-headers': 'cookie-monster',
      },
    });
    expect(cookie.status).toBe(403);
    expect(await cookie.json()).toMatchObject({
      error: { code: 'forbidden', details: { reason: 'cors_request_not_allowed', headers: ['cookie-monster'] } },
    });

    const foreign = await fetch(`${started.gatewayUrl}/v1/patient/profile`, {
      method: 'OPTIONS',
      headers: { origin: otherPage.origin, 'access-control-request-method': 'GET' },
    });
    expect(foreign.status).toBe(403);
    expect(foreign.headers.get('access-control-allow-origin')).toBeNull();
    expect(await foreign.json()).toMatchObject({
      error: { code: 'forbidden', details: { reason: 'cors_origin_not_allowed' } },
    });

    const medplum = await fetch(new URL('auth/login', started.medplumUrl), {
      method: 'OPTIONS',
      headers: {
        origin: allowedPage.origin,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type',
      },
    });
    expect(medplum.status).toBe(204);
    expect(medplum.headers.get('access-control-allow-origin')).toBe(allowedPage.origin);
    const medplumForeign = await fetch(new URL('auth/login', started.medplumUrl), {
      method: 'OPTIONS',
      headers: { origin: otherPage.origin, 'access-control-request-method': 'POST' },
    });
    expect(medplumForeign.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('marks answers to an allowed origin readable, and others not', async () => {
    const allowed = await gateway(started.token, '/v1/patient/profile');
    expect(allowed.headers.get('access-control-allow-origin')).toBeNull();
    const fromPage = await fetch(`${started.gatewayUrl}/v1/patient/profile`, {
      headers: { origin: allowedPage.origin, authorization: `Bearer ${started.token}` },
    });
    expect(fromPage.status).toBe(200);
    expect(fromPage.headers.get('access-control-allow-origin')).toBe(allowedPage.origin);
    expect(fromPage.headers.get('access-control-expose-headers')).toContain('X-Request-Id');
    expect(fromPage.headers.get('vary')).toContain('Origin');
    const fromOther = await fetch(`${started.gatewayUrl}/v1/patient/profile`, {
      headers: { origin: otherPage.origin, authorization: `Bearer ${started.token}` },
    });
    expect(fromOther.headers.get('access-control-allow-origin')).toBeNull();
  });
});
