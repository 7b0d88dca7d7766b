import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEventTickets, TICKET_SECONDS } from '../../src/edge/event-ticket';
import type { DemoActor } from '../support/backend';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { type StartedAssessment, startAssessment } from '../support/journey';
import { freshPatient } from '../support/patients';
import { scaled } from '../support/slowness';

/**
 * Her events in a browser (issue 51 item 2): a web page's native `EventSource` cannot send `Authorization`,
 * so it opens her stream with a one-minute ticket (`POST /v1/events/tickets`) that holds her token sealed:
 * the URL shows nothing of it, it opens her feed and nothing else, and it expires. Walked in Chromium.
 */
const KEY = 'k'.repeat(64);
let gw: TestGateway;
let server: Server;
let origin: string;
let alice: DemoActor;
let started: StartedAssessment;

const ticketFor = async (token: string) => {
  const answer = await gw.call('POST', '/v1/events/tickets', { token });
  expect(answer.status, answer.text).toBe(201);
  return answer.body as { ticket: string; expiresAt: string; url: string };
};

beforeAll(async () => {
  gw = await startTestGateway();
  alice = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
  started = await startAssessment(gw, alice, 'assessments/weight-intake');
  server = serve({ fetch: gw.app.fetch, port: 0, hostname: '127.0.0.1' }) as Server;
  await new Promise((resolve) => server.once('listening', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => {
  server?.close();
  gw?.close();
});

describe('a ticket for her event stream', () => {
  it('is sealed: it holds her token but shows nothing of it, opens only while fresh, and only with the key that made it', async () => {
    let now = new Date('2026-12-03T10:00:00Z');
    const tickets = createEventTickets(KEY, () => now);
    const { ticket, expiresAt } = await tickets.seal('her.access.token');
    expect(ticket).toMatch(/^et1\.[A-Za-z0-9_-]+$/);
    expect(ticket).not.toContain('her');
    expect(Buffer.from(ticket.slice(4), 'base64url').toString('latin1')).not.toContain('access');
    expect(expiresAt).toBe('2026-12-03T10:01:00.000Z');
    expect(await tickets.open(ticket)).toBe('her.access.token');
    // Altered anywhere, or of another key, or spent its minute: no token.
    const flipped = `${ticket.slice(0, -2)}${ticket.at(-2) === 'A' ? 'B' : 'A'}${ticket.at(-1)}`;
    expect(await tickets.open(flipped)).toBeUndefined();
    expect(await createEventTickets('x'.repeat(64), () => now).open(ticket)).toBeUndefined();
    expect(await tickets.open('et1.')).toBeUndefined();
    expect(await tickets.open(`et1.${'A'.repeat(9000)}`)).toBeUndefined();
    now = new Date(now.getTime() + TICKET_SECONDS * 1000);
    expect(await tickets.open(ticket)).toBeUndefined();
  });

  it('opens her feed through the gateway, never another route, and is never made from a ticket', async () => {
    const { ticket, url } = await ticketFor(alice.token);
    expect(url).toBe(`/v1/events?ticket=${ticket}`);
    expect(ticket).not.toContain(alice.token.split('.')[1] as string);
    const feed = await fetch(`${origin}/v1/events?ticket=${encodeURIComponent(ticket)}&limit=100`);
    expect(feed.status).toBe(200);
    const subjects = ((await feed.json()) as { events: { type: string; subject: string }[] }).events
      .filter((e) => e.type === 'task.ready')
      .map((e) => e.subject);
    expect(subjects.sort()).toEqual(started.tasks.map((t) => t.task).sort());
    // Elsewhere the ticket is no credential; a ticket cannot make another; a bad one is a 401.
    const other = await fetch(`${origin}/v1/patient/profile?ticket=${encodeURIComponent(ticket)}`);
    expect(other.status).toBe(401);
    const again = await fetch(`${origin}/v1/events/tickets?ticket=${encodeURIComponent(ticket)}`, { method: 'POST' });
    expect(again.status).toBe(401);
    const bad = await fetch(`${origin}/v1/events?ticket=et1.AAAA`);
    expect(bad.status).toBe(401);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/ticket is not valid/);
  });

  it("in Chromium: a page's native EventSource opens her stream with the ticket and receives her events by name", async () => {
    const { url } = await ticketFor(alice.token);
    const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
    try {
      const page = await browser.newPage();
      await page.goto(`${origin}/v1/config`);
      const got = await page.evaluate(
        ({ path, wait }) =>
          new Promise<{ named: string[]; unnamed: number }>((resolve, reject) => {
            const source = new EventSource(path);
            const named: string[] = [];
            let unnamed = 0;
            source.onmessage = () => {
              unnamed++;
            };
            source.addEventListener('task.ready', (event) => {
              named.push(JSON.parse((event as MessageEvent).data).subject);
              if (named.length >= 2) {
                source.close();
                resolve({ named, unnamed });
              }
            });
            source.onerror = () => {
              if (source.readyState === EventSource.CLOSED) {
                reject(new Error('the stream was refused'));
              }
            };
            setTimeout(() => {
              source.close();
              resolve({ named, unnamed });
            }, wait);
          }),
        { path: url, wait: scaled(20_000) },
      );
      expect(got.named.sort()).toEqual(started.tasks.map((t) => t.task).sort());
      expect(got.unnamed).toBe(0);
    } finally {
      await browser.close();
    }
  });
});
