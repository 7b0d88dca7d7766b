import { MedplumClient } from '@medplum/core';
import type { Bundle, Questionnaire, QuestionnaireItem, QuestionnaireResponseItem } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formReference } from '../../contracts/work-forms';
import type { Clinician } from '../../src/clinician';
import { DEMO_TENANTS } from '../../src/provision/demo';
import { demoClinician } from '../support/clinicians';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { scaled } from '../support/slowness';

/**
 * Issue 28's first hour: a patient registered exactly as the README says (from `/v1/config` and the app's
 * own client id, which the README's table gives) goes through the whole journey using only what the API
 * returned: no id, name, code or linkId of the demo's. Her clinician answers the forms her tasks carry.
 */
let gw: TestGateway;
let clinician: Clinician;
beforeAll(async () => {
  gw = await startTestGateway({}, { allSlots: true });
  clinician = await demoClinician(gw.backend, 'northwind');
}, scaled(120_000));
afterAll(() => gw?.close());

interface TaskView {
  task: string;
  kind: string;
  status: string;
  questionnaire?: string;
  measurements?: { code: string; units: string[] }[];
  items?: { item: string; allowed: string[] }[];
  careTeam?: string;
  offer?: string;
  complete: string;
}

/** An answer of the item's type (her answers: what a form would collect). */
function answerTo(item: QuestionnaireItem): QuestionnaireResponseItem | undefined {
  const values: Record<string, Record<string, unknown> | undefined> = {
    boolean: { valueBoolean: true },
    string: { valueString: 'as I remember it' },
    text: { valueString: 'as I remember it' },
    decimal: { valueDecimal: 1 },
    integer: { valueInteger: 1 },
    date: { valueDate: '2026-01-01' },
    choice: item.answerOption?.[0] as Record<string, unknown> | undefined,
  };
  const value = values[item.type];
  return value ? { linkId: item.linkId, answer: [value] } : undefined;
}

describe('a new patient, from the API alone', () => {
  it(
    'registers as the README says and goes from the catalog to a booked visit, every step from what the API returned',
    async () => {
      // Registration: /v1/config, then Medplum's own sign-up with the app's client id, then home and address.
      const config = (await gw.call('GET', '/v1/config')).body as {
        projectId: string;
        registration: { steps: string[] };
      };
      expect(config.registration.steps.at(-1)).toMatch(/address/);
      const medplum = new MedplumClient({ baseUrl: gw.backend.baseUrl, fetch: gw.backend.fetch, cacheTime: 0 });
      const user = await medplum.startNewUser({
        firstName: 'Ines',
        lastName: 'Firsthour',
        email: 'ines.firsthour@example.com',
        password: 'a long enough password',
        projectId: config.projectId,
        clientId: DEMO_TENANTS[0].appId,
        recaptchaToken: '',
      });
      const registered = await medplum.startNewPatient({ login: user.login, projectId: config.projectId });
      await medplum.processCode(registered.code as string);
      const token = medplum.getAccessToken() as string;
      const call = (method: string, path: string, body?: unknown) => gw.call(method, path, { token, body });
      expect((await call('POST', '/v1/patient/home')).status).toBe(200);
      const profile = (await call('GET', '/v1/patient/profile')).body as { id: string };
      const located = await call('PUT', `/v1/fhir/Patient/${profile.id}`, {
        ...profile,
        address: [{ country: 'US', state: 'CA' }],
      });
      expect(located.status, located.text).toBe(200);
      const accept = async (query: string) => {
        const { unmet } = (await call('GET', `/v1/agreements/requirements${query}`)).body as { unmet: unknown[] };
        if (unmet.length > 0) {
          expect((await call('POST', '/v1/agreements/acceptances', { agreements: unmet })).status).toBe(200);
        }
      };
      const open = async () => ((await call('GET', '/v1/tasks')).body as { tasks: TaskView[] }).tasks;

      // The catalog's first assessment: its agreements, then its tasks, each answered as its view says.
      const { protocols } = (await call('GET', '/v1/protocols')).body as {
        protocols: { type: string; healthcareService: string }[];
      };
      const offering = protocols.find((p) => p.type === 'assessment');
      expect(offering).toBeDefined();
      await accept(`?healthcareService=${encodeURIComponent(offering?.healthcareService as string)}`);
      const started = await call('POST', '/v1/assessments', { healthcareService: offering?.healthcareService });
      expect([200, 201], started.text).toContain(started.status);
      for (const task of await open()) {
        const id = task.task.split('/')[1];
        if (task.kind === 'questionnaire') {
          expect(task.complete).toContain('{questionnaireResponse}');
          const [url, version] = (task.questionnaire as string).split('|');
          const found = (await call('GET', `/v1/fhir/Questionnaire?${new URLSearchParams({ url, version })}`))
            .body as Bundle<Questionnaire>;
          const form = found.entry?.[0]?.resource as Questionnaire;
          const item = (form.item ?? []).filter((i) => i.required).flatMap((i) => answerTo(i) ?? []);
          const answers = await call('POST', '/v1/fhir/QuestionnaireResponse', {
            resourceType: 'QuestionnaireResponse',
            status: 'completed',
            questionnaire: task.questionnaire,
            item,
          });
          expect(answers.status, answers.text).toBe(201);
          const done = await call('POST', `/v1/tasks/${id}/complete`, {
            questionnaireResponse: `QuestionnaireResponse/${(answers.body as { id: string }).id}`,
          });
          expect(done.status, done.text).toBe(200);
        } else if (task.kind === 'measurement') {
          const measurements = (task.measurements ?? []).map((m) => ({ code: m.code, value: 150, unit: m.units[0] }));
          const done = await call('POST', `/v1/tasks/${id}/complete`, { measurements });
          expect(done.status, done.text).toBe(200);
        }
      }
      expect(await open()).toEqual([]);

      // Her clinician: the review and the selection, each answered with the choices its own form offers.
      await gw.backend.subscriptions.idle();
      // (Her readings may also have issued an urgent reading review, which carries no form: not this one.)
      const hers = (await clinician.queue()).filter((t) => t.for?.reference === `Patient/${profile.id}`);
      const review = hers.find((t) => formReference(t));
      expect(review).toBeDefined();
      const reviewForm = await clinician.form(review as never);
      const condition = reviewForm?.item?.[0].answerOption?.[0].valueCoding?.code as string;
      await clinician.assignCondition(review?.id as string, condition);
      await gw.backend.subscriptions.idle();
      const forms = await Promise.all(
        (await clinician.queue())
          .filter((t) => t.for?.reference === `Patient/${profile.id}`)
          .map(async (t) => ({ task: t, form: await clinician.form(t) })),
      );
      const chosen = forms.find(({ form }) => form?.item?.some((i) => i.linkId === 'option'));
      const selection = chosen?.task;
      expect(selection).toBeDefined();
      const eligible = chosen?.form?.item
        ?.find((i) => i.linkId === 'option')
        ?.answerOption?.map((o) => o.valueCoding)
        .find((c) => !/not eligible|not determined/.test(c?.display ?? ''));
      await clinician.select(selection?.id as string, eligible?.code as string);
      await gw.backend.subscriptions.idle();

      // Her offer, accepted; the order decided with a method her task allows; the visit booked with its team.
      const offer = (await open()).find((t) => t.complete.endsWith('{decision}'));
      expect(offer).toBeDefined();
      await accept(`?task=${encodeURIComponent(offer?.task as string)}`);
      const accepted = await call('POST', `/v1/tasks/${offer?.task.split('/')[1]}/complete`, { decision: 'accept' });
      expect(accepted.status, accepted.text).toBe(200);
      const order = (await open()).find((t) => (t.items ?? []).length > 0) as TaskView;
      expect(order).toBeDefined();
      const [, orderPath] = /^POST (\S+) /.exec(order.complete) ?? [];
      const decided = await call('POST', orderPath, {
        items: order.items?.map((i) => ({ item: i.item, decision: 'accept', fulfilment: i.allowed[0] })),
      });
      expect(decided.status, decided.text).toBe(200);
      const visit = (await open()).find((t) => t.careTeam) as TaskView;
      expect(visit).toBeDefined();
      const window = {
        start: new Date(Date.now() + 86_400_000).toISOString(),
        end: new Date(Date.now() + 15 * 86_400_000).toISOString(),
      };
      const free = (
        await call('GET', `/v1/availability?${new URLSearchParams({ careTeam: visit.careTeam as string, ...window })}`)
      ).body as { slots: { slot: string }[] };
      expect(free.slots.length).toBeGreaterThan(0);
      const booked = await call('POST', '/v1/appointments', { task: visit.task, slot: free.slots[0].slot });
      expect(booked.status, booked.text).toBe(201);
      expect(booked.body).toMatchObject({ status: 'booked' });
    },
    scaled(120_000),
  );
});
