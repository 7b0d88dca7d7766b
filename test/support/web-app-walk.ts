import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Communication, Task } from '@medplum/fhirtypes';
import type { Page } from 'playwright-core';
import type { Clinician } from '../../src/clinician';
import { eventually } from './npm-start';
import { redSquarePng } from './png';
import { scaled } from './slowness';

/**
 * The reference patient web app (web/) walked in Chromium as a patient would, wherever it is served
 * (`npm start`'s /app/ in test/gateway/web-app.test.ts; `npm run web-app` beside a gateway over a real
 * Medplum): she signs up, meets the agreements gate, answers the intake with a photo from the file picker
 * and sends her readings; her clinician (through Medplum, as the Provider app writes) assigns a condition
 * and selects a treatment; her offer arrives live by the page's EventSource; she accepts it, decides her
 * order, books her visit and answers her care team's message. Answers what went wrong on the page (script
 * errors, refused calls but the gate's 409) and the event types the page heard live.
 */
export async function walkWebApp(options: {
  page: Page;
  appUrl: string;
  clinician: Clinician;
  /** Keeps a screenshot of each screen in this folder. */
  shots?: string;
}): Promise<{ problems: string[]; heard: string[] }> {
  const { page, appUrl, clinician, shots } = options;
  const family = `Webapp${Date.now()}`;
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (message) => {
    // Chromium logs every answer above 399 as "Failed to load resource": the answers are judged below.
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) {
      problems.push(`console: ${message.text()}`);
    }
  });
  page.on('response', (response) => {
    // Refusals are problems, except the assessment's first start, which is the agreements gate's 409.
    if (response.status() >= 400 && !response.url().endsWith('/v1/assessments')) {
      problems.push(`${response.status()} ${response.request().method()} ${response.url()}`);
    }
  });
  const shot = async (name: string) => {
    if (shots) {
      await mkdir(shots, { recursive: true });
      await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
    }
  };
  /** Waits for the live list to show an event of this type (heard by the page's EventSource). */
  const heardLive = (type: string) =>
    page
      .locator(`#events li[data-type="${type}"]`)
      .first()
      .waitFor({ timeout: scaled(60_000) });
  /** Her work in the clinician's queue, once the platform has put it there. */
  const queued = async (patientId: string, code: string): Promise<Task & { id: string }> => {
    let found: Task | undefined;
    await eventually(async () => {
      found = (await clinician.queue()).find(
        (t) => t.for?.reference === `Patient/${patientId}` && t.code?.coding?.[0]?.code === code,
      );
      assert.ok(found, `${code} in the queue`);
    }, scaled(60_000));
    return found as Task & { id: string };
  };

  await page.goto(appUrl);
  await shot('1-sign-up');
  await page.fill('#firstName', 'Rosa');
  await page.fill('#lastName', family);
  await page.fill('#email', `rosa.${family.toLowerCase()}@example.com`);
  await page.fill('#password', 'a long enough password');
  await page.selectOption('#state', 'CA');
  await page.click('#sign-up button[type=submit]');
  await page.getByRole('heading', { name: `Hello, Rosa ${family}` }).waitFor({ timeout: scaled(30_000) });
  await page.locator('#live-state', { hasText: 'connected' }).waitFor({ timeout: scaled(20_000) });
  const patientId = (await clinician.medplum.searchOne('Patient', { family }, { cache: 'no-cache' }))?.id as string;
  assert.ok(patientId, 'her Patient, found by the clinician');
  await shot('2-home');

  // The blood-pressure check: the gate first (its 409), then the intake's tasks.
  await page
    .locator('#programs li', { hasText: /blood.pressure/i })
    .getByRole('button', { name: 'Start' })
    .click();
  await page.locator('#gate').waitFor({ timeout: scaled(20_000) });
  const boxes = page.locator('#gate input[type=checkbox]');
  assert.ok((await boxes.count()) > 0, 'agreements to accept');
  await shot('3-agreements-gate');
  for (const box of await boxes.all()) {
    await box.check();
  }
  await page.click('#gate button[type=submit]');
  await page.locator('#todo li[data-kind=questionnaire]').waitFor({ timeout: scaled(30_000) });

  await page.locator('#todo li[data-kind=questionnaire] a').click();
  await page.locator('#questionnaire').waitFor();
  await page.locator('#questionnaire input[type=radio][value=true]').first().check();
  for (const fieldset of await page.locator('#questionnaire fieldset').all()) {
    if (!(await fieldset.locator('input:checked').count())) {
      await fieldset.locator('input[value=false]').check();
    }
  }
  await page.setInputFiles('#questionnaire input[type=file]', {
    name: 'reading.png',
    mimeType: 'image/png',
    buffer: Buffer.from(redSquarePng(16)),
  });
  await page.locator('#questionnaire img.preview').waitFor();
  await shot('4-intake-with-photo');
  await page.click('#questionnaire button[type=submit]');
  await page.locator('#todo li[data-kind=measurement]').waitFor({ timeout: scaled(30_000) });
  await page.locator('#todo li[data-kind=measurement] a').click();
  await page.fill('#value-0', '152');
  await page.fill('#value-1', '96');
  await shot('5-readings');
  await page.click('#measurement button[type=submit]');
  await page.locator('#todo').waitFor();

  // Her photo went up as her document, and her answers name it.
  const responses = await clinician.medplum.searchResources(
    'QuestionnaireResponse',
    { subject: `Patient/${patientId}` },
    { cache: 'no-cache' },
  );
  const photo = responses
    .flatMap((r) => r.item ?? [])
    .flatMap((i) => i.answer ?? [])
    .find((a) => a.valueAttachment)?.valueAttachment;
  assert.equal(photo?.contentType, 'image/png');

  // Her clinician reviews the intake and selects a treatment, as Medplum's Provider app writes it.
  const review = await queued(patientId, 'review-intake');
  await clinician.assignCondition(review.id, 'I10');
  const selection = await queued(patientId, 'select-treatment');
  const amlodipine = selection.input?.find((i) => i.valueCanonical?.includes('amlodipine'))?.valueCanonical;
  await clinician.select(selection.id, amlodipine as string);

  // Her offer arrives live: the EventSource hears it, the home screen draws it.
  await heardLive('offer.ready');
  await page.locator('#todo li[data-kind=treatment-offer]').waitFor({ timeout: scaled(20_000) });
  await shot('6-offer-heard-live');
  await page.locator('#todo li[data-kind=treatment-offer] a').click();
  await page.locator('#offer').waitFor();
  await shot('7-offer');
  await page.getByRole('button', { name: 'Accept' }).click();

  await page.locator('#todo li[data-kind=order-decisions]').waitFor({ timeout: scaled(30_000) });
  await page.locator('#todo li[data-kind=order-decisions] a').click();
  await page.locator('#order').waitFor();
  await shot('8-order');
  await page.click('#order button[type=submit]');

  await page
    .locator('#todo li[data-kind=schedule-visit]')
    .first()
    .waitFor({ timeout: scaled(30_000) });
  await page.locator('#todo li[data-kind=schedule-visit] a').first().click();
  await page
    .locator('#book button')
    .first()
    .waitFor({ timeout: scaled(20_000) });
  await shot('9-booking');
  await page.locator('#book button').first().click();
  await page.locator('#visits li', { hasText: 'booked' }).waitFor({ timeout: scaled(30_000) });
  await heardLive('visit.booked');
  await shot('10-visit-booked');

  // Her care team writes; she hears it live, reads it and answers through the gateway.
  const me = { reference: clinician.profile.reference as string, display: clinician.profile.display };
  const header = await clinician.medplum.createResource<Communication>({
    resourceType: 'Communication',
    status: 'in-progress',
    subject: { reference: `Patient/${patientId}` },
    sender: me,
    recipient: [{ reference: `Patient/${patientId}` }, me],
    topic: { text: 'Your blood pressure' },
  });
  const write = (text: string) =>
    clinician.medplum.createResource<Communication>({
      resourceType: 'Communication',
      status: 'in-progress',
      sender: me,
      recipient: [{ reference: `Patient/${patientId}` }],
      sent: new Date().toISOString(),
      payload: [{ contentString: text }],
      partOf: [{ reference: `Communication/${header.id}` }],
      subject: { reference: `Patient/${patientId}` },
    });
  await write('How have your mornings been since you started amlodipine?');
  await heardLive('message.received');
  await page.click('#nav a[href="#/messages"]');
  await page.locator('#threads li', { hasText: 'Your blood pressure' }).getByRole('link').click();
  await page.locator('#thread .message', { hasText: 'since you started amlodipine' }).waitFor();
  await page.fill('#reply-text', 'Better: 128/82 this morning.');
  // A second message arrives while she types: the thread shows it in place, and her answer stays.
  await write('And any dizziness when you stand up?');
  await page.locator('#thread .message', { hasText: 'dizziness' }).waitFor({ timeout: scaled(20_000) });
  assert.equal(await page.inputValue('#reply-text'), 'Better: 128/82 this morning.');
  await page.click('#reply button[type=submit]');
  await page.locator('#thread .message.mine', { hasText: '128/82' }).waitFor({ timeout: scaled(20_000) });
  await shot('11-messages');
  const answers = await clinician.medplum.searchResources(
    'Communication',
    { 'part-of': `Communication/${header.id}`, sender: `Patient/${patientId}` },
    { cache: 'no-cache' },
  );
  assert.deepEqual(
    answers.map((a) => a.payload?.[0]?.contentString),
    ['Better: 128/82 this morning.'],
  );

  const heard = await page
    .locator('#events li')
    .evaluateAll((items) => items.map((i) => i.getAttribute('data-type') ?? ''));
  return { problems, heard };
}
