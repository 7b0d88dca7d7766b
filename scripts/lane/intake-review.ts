// A form case's patient: she registers, completes the intake, and the review it issues carries a stored form.
import { MedplumClient } from '@medplum/core';
import type { Questionnaire, Resource, Task } from '@medplum/fhirtypes';
import { queueOfTask } from '../../bots/lib/queues';
import { SYSTEMS } from '../../contracts/systems';
import { CONDITION_ITEM, FORM_INPUT, formReference, WORK_FORMS } from '../../contracts/work-forms';
import { createPatientCareClient } from '../../src/sdk';
import { answerBloodPressureIntake } from '../intake';
import {
  type Answer,
  type AttackContext,
  adminRead,
  describe,
  entriesOf,
  medplumCall,
  message,
  type Person,
  PUBLIC_URL,
  pause,
  row,
  SUBSCRIPTION_WAIT_MS,
  sameSet,
} from './common';

/** A task's stored form (contracts/work-forms.ts: `focus` and first input -> `Questionnaire/<id>`), as one reads it. */
export interface StoredForm {
  /** `Questionnaire/<id>` (formReference), undefined when the task points at no stored form. */
  reference?: string;
  /** What the read answered. */
  answer?: Answer;
  form?: Questionnaire & { id: string };
}

/**
 * The stored form a task points at, read with `token` (a person's, or the admin's) in extended mode, so
 * that `meta.author` (the Bot that stored it) shows. Clinician work carries no contained form since 65cd263.
 */
export async function readForm(baseUrl: string, token: string, task: Task | undefined): Promise<StoredForm> {
  const reference = task ? formReference(task) : undefined;
  if (!reference) {
    return {};
  }
  const answer = await medplumCall(baseUrl, token, 'GET', `fhir/R4/${reference}`, {
    waitOutQuota: true,
    extended: true,
  });
  return {
    reference,
    answer,
    form: answer.status === 200 ? (answer.body as Questionnaire & { id: string }) : undefined,
  };
}

/** A stored form in a few words: its reference, url|version, writer and accounts. */
export const formSaid = (stored: StoredForm): string =>
  !stored.reference
    ? 'no stored form (focus and first input naming the same Questionnaire/<id>)'
    : !stored.form
      ? `${stored.reference}: ${stored.answer ? describe(stored.answer) : 'not read'}`
      : `${stored.reference} ${stored.form.url}|${stored.form.version}, written by ${stored.form.meta?.author?.reference ?? 'nobody'}, accounts ${stored.form.meta?.accounts?.map((a) => a.reference).join(', ') || 'none'}`;

/** A new Northwind patient (signed in) and her intake review as the complete-task bot issued it, with its stored form. */
export interface IntakeReview {
  patient: Person;
  review: Task & { id: string };
  /** The review's stored form, as the admin read it (the Questionnaire `focus` and the first input name). */
  form: Questionnaire & { id: string };
  /** The patient's tenant (her Patient's `meta.accounts`, as the admin reads them). */
  tenant: string[];
}

/**
 * A new patient registers through Northwind's app and completes the blood-pressure intake through the
 * gateway (the journey's steps 1 to 5, without the upload): the complete-task bot issues her intake
 * review in the Northwind intake queue, and stores its form (contracts/work-forms.ts: a Questionnaire of
 * her tenant, written by the Bot, that the review's `focus` and first input name). One row says what was
 * issued; undefined when it was not as it must be.
 */
export async function intakeReview(
  ctx: AttackContext,
  label: string,
  queueRef: string | undefined,
): Promise<IntakeReview | undefined> {
  const step = `precondition: a new patient (${label}) registers through Northwind's app and completes the blood-pressure intake through the gateway: the complete-task bot issues her intake review waiting unowned in the Northwind intake queue (performerType SYSTEMS.queue CareTeam/<id>, no owner), its form stored (focus and first input -> Questionnaire/<id> of url ${WORK_FORMS.assignCondition}, written by a Bot, meta.accounts the patient's tenant; reasonReference her EpisodeOfCare)`;
  try {
    const client = new MedplumClient({ baseUrl: ctx.baseUrl, cacheTime: 0 });
    const user = await client.startNewUser({
      firstName: 'Rhea',
      lastName: `Review (${label})`,
      email: `lane.form.${Date.now()}@example.com`,
      password: 'a long enough lane password',
      projectId: ctx.projectId,
      clientId: ctx.appIdOf('northwind'),
      recaptchaToken: '',
    });
    const registered = await client.startNewPatient({ login: user.login, projectId: ctx.projectId });
    await client.processCode(registered.code as string);
    const token = client.getAccessToken() as string;
    const api = createPatientCareClient({ baseUrl: PUBLIC_URL, accessToken: token, fetch: ctx.gatewayFetch });
    const home = await api.patient.home();
    const profile = await api.patient.profile();
    await api.fhir.updatePatient({
      ...(profile as typeof profile & { id: string }),
      address: [{ line: ['7 Form Lane'], city: 'Fresno', state: 'CA', postalCode: '93701', country: 'US' }],
    });
    const { protocols } = await api.protocols.list();
    const check = protocols.find((p) => 'assessment' in p && p.assessment?.includes('blood-pressure-check'));
    if (!check) {
      row(step, 'FAILED', `${home.patient}: the blood-pressure check is not in her catalog`);
      return undefined;
    }
    const { unmet } = await api.agreements.requirements({ healthcareService: check.healthcareService });
    await api.agreements.accept(unmet);
    const assessment = await api.assessments.start({ healthcareService: check.healthcareService });
    await answerBloodPressureIntake(api, assessment);
    const search = `fhir/R4/Task?code=${encodeURIComponent(`${SYSTEMS.taskKind}|review-intake`)}&patient=${home.patient}`;
    const start = Date.now();
    let review: Task | undefined;
    for (;;) {
      review = entriesOf((await adminRead(ctx, search)).body)[0] as Task | undefined;
      if (review || Date.now() - start > SUBSCRIPTION_WAIT_MS) {
        break;
      }
      await pause(1000);
    }
    if (!review?.id) {
      row(step, 'FAILED', `${home.patient}: no review-intake Task of hers within ${SUBSCRIPTION_WAIT_MS / 1000} s`);
      return undefined;
    }
    const stored = await readForm(ctx.baseUrl, ctx.adminToken, review);
    const form = stored.form;
    const first = review.input?.[0];
    const reference = first?.type?.text === FORM_INPUT ? first.valueReference?.reference : undefined;
    const choices = (form?.item?.find((i) => i.linkId === CONDITION_ITEM)?.answerOption ?? []).map(
      (o) => o.valueCoding?.code,
    );
    const author = review.meta?.author?.reference ?? '';
    const tenant = (
      ((await adminRead(ctx, `fhir/R4/${home.patient}`)).body as Resource | undefined)?.meta?.accounts ?? []
    )
      .map((a) => a.reference ?? '')
      .filter(Boolean);
    const formAccounts = (form?.meta?.accounts ?? []).map((a) => a.reference ?? '');
    const good =
      review.status === 'ready' &&
      Boolean(queueRef) &&
      queueOfTask(review) === queueRef &&
      !review.owner &&
      author.startsWith('Bot/') &&
      review.reasonReference?.reference?.startsWith('EpisodeOfCare/') === true &&
      form !== undefined &&
      form.url === WORK_FORMS.assignCondition &&
      form.meta?.author?.reference?.startsWith('Bot/') === true &&
      tenant.length > 0 &&
      sameSet(formAccounts, tenant) &&
      choices.includes('I10');
    row(
      step,
      good ? 'ok' : 'FAILED',
      `${home.patient} (tenant ${tenant.join(', ') || 'none'}); Task/${review.id} ${review.status}, queue ${queueOfTask(review) ?? 'none'}${queueOfTask(review) === queueRef ? ' (the Northwind intake queue)' : ` (NOT the Northwind intake queue ${queueRef})`}, owner ${review.owner?.reference ?? 'none'}, written by ${author || 'nobody'}, reasonReference ${review.reasonReference?.reference ?? 'none'}, focus ${review.focus?.reference ?? 'none'}, first input '${first?.type?.text ?? ''}' -> ${reference ?? 'none'}: ${form ? `a stored Questionnaire, ${formSaid(stored)}${sameSet(formAccounts, tenant) ? " (the patient's tenant)" : " (NOT the patient's tenant)"}, item '${CONDITION_ITEM}' of ${choices.length} choice(s): ${choices.join(', ')}` : formSaid(stored)}`,
    );
    return good && form
      ? {
          patient: { who: `the new patient (${label})`, token, profile: home.patient },
          review: review as Task & { id: string },
          form,
          tenant,
        }
      : undefined;
  } catch (err) {
    row(step, 'FAILED', message(err));
    return undefined;
  }
}
