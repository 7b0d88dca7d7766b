import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { serve } from '@hono/node-server';
import type { WithId } from '@medplum/core';
import type { QuestionnaireResponse, Task } from '@medplum/fhirtypes';
import { type Browser, chromium, type Locator, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answersTo, OPTION_ITEM, responseReference } from '../../contracts/work-forms';
import { type Clinician, signInClinician } from '../../src/clinician';
import { DEMO_PASSWORD, demoEmail } from '../../src/provision/demo';
import { type ServedConsole, serveConsole } from '../console/serve';
import type { DemoActor } from '../support/backend';
import { demoClinician } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { redSquarePng } from '../support/png';
import { scaled } from '../support/slowness';
import {
  assignedCondition,
  LISINOPRIL,
  offerOf,
  openOffers,
  reviewedIntake,
  selectionsOf,
  spironolactoneOrder,
} from '../support/spine';

/**
 * Her day in a real browser: the demo clinician signs in through `@medplum/react`'s SignInForm, works her
 * queue (a SearchControl over Task), reads what the patient sent (her answers with their questions, her
 * photo) and answers each task's stored form in a QuestionnaireForm, in Debian's Chromium, on a page of its own origin calling the embedded Medplum over
 * HTTP through CORS, as Medplum's app calls Medplum's API. What she did is then read on the server.
 */
const CHROMIUM = '/usr/bin/chromium';
/** Where a failure leaves its screenshot and the page's console (ignored by git). */
const ARTIFACTS = fileURLToPath(new URL('../../test-artifacts', import.meta.url));
/** The descriptions her queue shows for the two kinds of work (bots/complete-task.ts, bots/eligibility.ts). */
const REVIEW = 'Review the completed intake';
const SELECTION = 'Select a treatment for Essential (primary) hypertension';
/** The console's note that a task whose description starts with `what` is completed. */
const completed = (what: string) => new RegExp(`^${what.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}.* \\(completed\\)$`);
const MITIGATION = 'Spironolactone stopped today; potassium checked weekly for the first month';
/** Her message to the patient in the app's chat, and the patient's answer through the gateway. */
const QUESTION = 'Do you get the headaches in the morning or later in the day?';
const ANSWER = 'Mostly in the morning, before breakfast.';

let gw: TestGateway;
let medplumUrl: string;
let closeMedplum: () => void;
let served: ServedConsole;
let clinician: Clinician;
let colleague: Clinician;
let browser: Browser;

beforeAll(async () => {
  served = await serveConsole();
  // The port is known only once listening, and the backend needs its base URL: bind the handler late.
  let handler: (request: Request) => Response | Promise<Response> = () => new Response(null, { status: 503 });
  const server = serve({ fetch: (request) => handler(request), port: 0, hostname: '127.0.0.1' });
  await new Promise((resolve) => server.once('listening', resolve));
  closeMedplum = () => server.close();
  medplumUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  gw = await startTestGateway({}, { baseUrl: medplumUrl, corsOrigins: [{ origin: served.origin }] });
  handler = (request) => gw.backend.app.fetch(request);
  // Her own sign-in on the server's side: only to find the review in her queue and to name her in the checks.
  clinician = await demoClinician(gw.backend, 'northwind');
  // Her colleague of the intake queue (the demo's second clinician), on the server's side.
  colleague = await signInClinician({
    baseUrl: gw.backend.baseUrl,
    fetch: gw.backend.fetch,
    email: demoEmail('colleague', 'northwind'),
    password: DEMO_PASSWORD,
    projectId: gw.backend.project.id,
  });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
  });
});
afterAll(async () => {
  await browser?.close();
  served?.close();
  closeMedplum?.();
  gw?.close();
});

const onSpironolactone = (patient: DemoActor) => spironolactoneOrder(gw, patient);

/** The work eligibility issued from a review (keyed by it). */
const selectionOf = async (review: Task) => (await selectionsOf(gw, review))[0];

/** The answers a completed task hands in. */
async function responseOf(task: Task): Promise<QuestionnaireResponse> {
  const [type, id] = (responseReference(task) ?? '').split('/');
  expect(type, `Task/${task.id} hands in a QuestionnaireResponse`).toBe('QuestionnaireResponse');
  return gw.backend.systemRepo.readResource<QuestionnaireResponse>('QuestionnaireResponse', id);
}

/** Her queue's row for a task of this description about this patient, refreshed until a bot has issued it. */
async function queueRow(tab: Page, patient: DemoActor, description: string): Promise<Locator> {
  const row = tab
    .getByRole('row')
    .filter({ hasText: description })
    .filter({ hasText: patient.patient.name?.[0]?.family as string });
  const until = Date.now() + scaled(20_000);
  for (;;) {
    try {
      await row.waitFor({ timeout: 1_000 });
      return row;
    } catch (err) {
      if (Date.now() > until) {
        throw err;
      }
      await tab.getByRole('button', { name: 'Refresh' }).click();
    }
  }
}

/** Opens a task from the queue (its description: the patient's cell links to her record), claims it, waits for its form. */
async function claimFromQueue(tab: Page, row: Locator, description: string, form: string): Promise<void> {
  await row.getByText(description).click();
  await tab.getByRole('button', { name: 'Claim' }).click();
  await tab.getByTestId('task-status').filter({ hasText: 'in-progress' }).waitFor();
  await tab.getByTestId('questionnaire-form').getByRole('heading', { name: form }).waitFor();
}

describe('the demo clinician’s day in Chromium, through @medplum/react', () => {
  it('signs in, claims the review, messages the patient (who answers through the gateway), answers the review, hands the selection over and back and answers it with a mitigation: the offer is composed', {
    timeout: scaled(60_000),
  }, async () => {
    expect(existsSync(CHROMIUM), 'Debian chromium is installed by .ci/run and the README').toBe(true);
    const { patient, review } = await reviewedIntake(gw, clinician, redSquarePng());
    await onSpironolactone(patient);

    const tab = await browser.newPage();
    // Each step answers in well under a second; a missing element should fail the test, not its timeout.
    tab.setDefaultTimeout(scaled(20_000));
    const log: string[] = [];
    tab.on('console', (message) => log.push(`${message.type()}: ${message.text()}`));
    tab.on('pageerror', (err) => log.push(`pageerror: ${err.message}`));
    try {
      await tab.goto(served.url(medplumUrl, gw.backend.project.id));

      // SignInForm: the email, then the password (auth/method, auth/login, oauth2/token, auth/me).
      await tab.getByLabel('Email').fill(demoEmail('clinician', 'northwind'));
      await tab.getByRole('button', { name: 'Continue' }).click();
      await tab.getByLabel(/^Password/).fill(DEMO_PASSWORD);
      await tab.getByRole('button', { name: 'Sign In' }).click();

      // The review: open the queue, claim it, assign the condition.
      await tab.getByRole('button', { name: 'Open the queue' }).click();
      await claimFromQueue(tab, await queueRow(tab, patient, REVIEW), REVIEW, 'Assign a condition');
      // What she sent, before deciding: her answers with their questions (stored with them: her app sent none,
      // and the page reads no Questionnaire), her photo as an image that loads, her blood pressure in Vitals.
      await tab.getByText('Has a clinician ever told you that you have high blood pressure?').waitFor();
      // (@medplum/react's PatientSummary Vitals: BP Sys and BP Dias, from the panel's components.)
      const summary = tab.getByTestId('patient-summary');
      await summary.getByText('BP Sys').waitFor();
      await summary.getByText('150 mm[Hg]').waitFor();
      await summary.getByText('95 mm[Hg]').waitFor();
      const photo = tab.getByTestId('attachment-image');
      await photo.waitFor();
      expect(await photo.evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth)).toBe(8);
      // Messages both ways (issue 48 item 8): she writes to the patient in Medplum's chat (ThreadChat, as the
      // Provider app's Messages); the patient reads it and answers through the gateway; her answer shows.
      await tab.getByRole('button', { name: 'Message the patient' }).click();
      const chat = tab.getByTestId('thread');
      // Sent with Enter (the chat's form): its send button moves while the chat redraws its connection state.
      await chat.locator('input[name="message"]').fill(QUESTION);
      await chat.locator('input[name="message"]').press('Enter');
      await chat.getByText(QUESTION).waitFor();
      const inbox = await gw.call('GET', '/v1/messages', { token: patient.token });
      const thread = (inbox.body as { threads: { thread: string; lastMessage?: { text: string; fromMe: boolean } }[] })
        .threads[0];
      expect(thread?.lastMessage).toMatchObject({ text: QUESTION, fromMe: false });
      const reply = await gw.call('POST', `/v1/messages/${thread.thread.replace('Communication/', '')}`, {
        token: patient.token,
        body: { text: ANSWER },
        headers: { 'idempotency-key': `browser-${review.id}` },
      });
      expect(reply.status).toBe(201);
      await chat.getByRole('button', { name: 'Reload' }).click();
      await tab.getByTestId('thread').getByText(ANSWER).waitFor();

      await tab.getByLabel('Essential (primary) hypertension').check();
      await tab.getByRole('button', { name: 'Complete' }).click();
      await tab.getByText(completed(REVIEW)).waitFor();

      // The selection: she takes it and hands it to her colleague of the queue, who hands it back (issue 48).
      await claimFromQueue(tab, await queueRow(tab, patient, SELECTION), SELECTION, 'Select a treatment option');
      await tab.getByRole('button', { name: /^Hand over to Dr\. Jordan Kim/ }).click();
      await tab.getByTestId('task-owner').filter({ hasText: 'Jordan Kim' }).waitFor();
      const handed = (await selectionOf(review)) as WithId<Task>;
      expect([handed.status, handed.owner?.reference]).toEqual(['in-progress', colleague.profile.reference]);
      await colleague.handOver(handed.id, clinician.profile);
      await tab.getByRole('button', { name: 'Open the queue' }).click();
      await tab.getByRole('button', { name: SELECTION }).click();
      await tab.getByTestId('questionnaire-form').getByRole('heading', { name: 'Select a treatment option' }).waitFor();
      // The selection eligibility issues: lisinopril, ineligible, chosen with a mitigation of its finding.
      await tab.getByLabel(/^Lisinopril.*not eligible: 1 finding to mitigate/).check();
      await tab.getByLabel(/^If you choose Lisinopril.*: your mitigation of /).fill(MITIGATION);
      await tab.getByRole('button', { name: 'Complete' }).click();
      await tab.getByText(completed(SELECTION)).waitFor();

      // What she did, as the server holds it.
      await gw.backend.subscriptions.idle();
      const her = clinician.profile.reference;
      const reviewed = await gw.backend.systemRepo.readResource<Task>('Task', review.id);
      expect(reviewed.status).toBe('completed');
      expect((await responseOf(reviewed)).meta?.author?.reference).toBe(her);

      const condition = await assignedCondition(gw, review);
      expect(condition).toMatchObject({
        code: { coding: [expect.objectContaining({ code: 'I10' })] },
        asserter: { reference: her },
      });

      const selection = (await selectionOf(review)) as WithId<Task>;
      expect(selection).toMatchObject({ status: 'completed', owner: { reference: her } });
      const chosen = await responseOf(selection);
      expect(chosen.meta?.author?.reference).toBe(her);
      expect(answersTo(chosen, OPTION_ITEM).map((a) => a.valueCoding?.code)).toEqual([LISINOPRIL]);
      expect(chosen.item?.flatMap((i) => i.answer ?? []).map((a) => a.valueString)).toContain(MITIGATION);

      const [offer] = await openOffers(gw, patient);
      expect(offer, 'the treatment offer was composed').toBeDefined();
      const { group } = await offerOf(gw, offer);
      expect(group.instantiatesCanonical).toContain(LISINOPRIL);
    } catch (err) {
      await mkdir(ARTIFACTS, { recursive: true });
      const name = join(ARTIFACTS, `clinician-browser-${Date.now()}`);
      await tab.screenshot({ path: `${name}.png`, fullPage: true }).catch(() => undefined);
      await writeFile(`${name}.log`, log.join('\n'));
      throw err;
    } finally {
      await tab.close();
    }
  });
});
