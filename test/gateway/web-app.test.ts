import type { Browser } from 'playwright-core';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Clinician, signInClinician } from '../../src/clinician';
import { DEMO_PASSWORD, demoEmail } from '../../src/provision/demo';
import { type NpmStart, startNpmStart } from '../support/npm-start';
import { scaled } from '../support/slowness';
import { walkWebApp } from '../support/web-app-walk';

/**
 * The reference patient web app (web/, issue 51 item 7) walked in Chromium as a patient would, on what
 * `npm start` serves at /app/ (test/support/web-app-walk.ts: sign-up, the gate, the intake with a photo,
 * readings, her offer heard live, her order, booking, messages). No script error, no refused call, no
 * CSP violation on the page. `WEB_APP_SHOTS=<dir>` keeps a screenshot of each screen (docs/images/web-app/).
 */
let started: NpmStart;
let browser: Browser;
let clinician: Clinician;

beforeAll(async () => {
  started = await startNpmStart();
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
  const { projectId } = (await (await fetch(`${started.gatewayUrl}/v1/config`)).json()) as { projectId: string };
  clinician = await signInClinician({
    baseUrl: started.medplumUrl,
    email: demoEmail('clinician', 'northwind'),
    password: DEMO_PASSWORD,
    projectId,
  });
}, scaled(120_000));

afterAll(async () => {
  await browser?.close();
  await started?.stop();
});

describe('the reference web app, in Chromium, on npm start', () => {
  it(
    'walks her journey: sign-up, gate, intake with a photo, her offer live, order, booking, messages',
    async () => {
      const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
      const { problems, heard } = await walkWebApp({
        page,
        appUrl: `${started.gatewayUrl}/app/`,
        clinician,
        shots: process.env.WEB_APP_SHOTS,
      });
      // Everything she saw came live through one stream, with no refused call or script error on the way.
      expect(heard).toEqual(expect.arrayContaining(['task.ready', 'offer.ready', 'visit.booked', 'message.received']));
      expect(problems).toEqual([]);
    },
    scaled(300_000),
  );

  it('serves the page under its own rules: its files only, nothing inline or framed', async () => {
    const answer = await fetch(`${started.gatewayUrl}/app/`);
    expect(answer.status).toBe(200);
    const policy = answer.headers.get('content-security-policy') ?? '';
    expect(policy).toContain("script-src 'self'");
    expect(policy).toContain("frame-ancestors 'none'");
    expect(policy).toContain(`connect-src 'self' ${new URL(started.medplumUrl).origin}`);
    expect((await fetch(`${started.gatewayUrl}/app/nothing.js`)).status).toBe(404);
    expect((await fetch(`${started.gatewayUrl}/app/..%2Fpackage.json`)).status).toBe(404);
    const config = (await (await fetch(`${started.gatewayUrl}/app/config.json`)).json()) as Record<string, string>;
    expect(config).toEqual({ api: '', clientId: expect.any(String), tenant: 'Northwind Health' });
  });
});
