import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, DEFAULT_LIMITS } from '../../src/app';
import { nodeAssetLoader } from '../../src/docs-assets-node';
import { scaled } from '../support/slowness';

const CHROMIUM = '/usr/bin/chromium';
const app = createApp({
  medplum: { baseUrl: 'http://medplum.test/' },
  issuer: 'http://medplum.test/',
  projectId: 'p',
  limits: DEFAULT_LIMITS,
  assets: nodeAssetLoader(),
});
let server: ReturnType<typeof serve>;
let origin: string;

beforeAll(async () => {
  server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
  await new Promise((resolve) => server.once('listening', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe('GET / renders the API reference in a real browser, with no internet', () => {
  it('shows the operations and the host it was served from', async () => {
    expect(existsSync(CHROMIUM), 'Debian chromium is installed by .ci/run and the README').toBe(true);
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    try {
      const page = await browser.newPage();
      const external: string[] = [];
      page.on('request', (request) => {
        if (!request.url().startsWith(origin)) {
          external.push(request.url());
        }
      });
      await page.goto(`${origin}/`);
      await page.waitForSelector('.opblock', { timeout: scaled(20_000) });
      expect(await page.textContent('#served-from')).toBe(new URL(origin).host);
      const text = (await page.textContent('body')) ?? '';
      expect(text).toContain('/v1/patient/profile');
      expect(text).toContain('/v1/fhir/{type}');
      expect(await page.locator('.opblock').count()).toBeGreaterThanOrEqual(10);
      expect(external).toEqual([]);
    } finally {
      await browser.close();
    }
  });
});
