import type { AccessPolicyResource } from '@medplum/fhirtypes';
import { READABLE_ANSWERS_ONLY, SLOT_STATUS_ONLY, VISIT_PLANS_ONLY } from '../policies/bots';
import { EVIDENCE_ONLY, WORK_FORM_CREATES } from '../policies/clinician';
import { PROPOSALS_ONLY } from '../policies/common';
import { agreementReads } from '../policies/patient';
import type { PlatformBot } from '../shape';

/** The bots of what she starts and does: an assessment, its tasks, a request for review, an enrollment. */

export const startAssessment: PlatformBot = {
  access: {
    key: 'bot-start-assessment',
    policy: {
      name: 'Bot: start an assessment',
      // It reads what the patient may start (it checks publication and tenant itself) and writes only
      // the journey it starts: the EpisodeOfCare and its tasks, never anything else.
      resource: [
        // The agreements gate: what she must have accepted before she starts.
        ...agreementReads(),
        // The plan's definitions, pinned by version, that her tasks are issued from.
        ...['ActivityDefinition', 'Questionnaire', 'ObservationDefinition', 'Location'].map((resourceType) => ({
          resourceType,
          interaction: ['read' as const, 'search' as const, 'vread' as const],
        })),
        // The journey's claim (a conditional create keyed by patient and plan) and its start.
        { resourceType: 'EpisodeOfCare', interaction: ['create', 'read', 'search', 'update'] },
        // Her intake tasks: issued, never changed here.
        { resourceType: 'Task', interaction: ['create', 'read', 'search'] },
      ],
    },
  },
  bot: {
    key: 'start-assessment',
    patient: true,
    description: 'POST /v1/assessments: starts or resumes an assessment (EpisodeOfCare and intake tasks).',
    accessPolicy: 'bot-start-assessment',
  },
};

export const completeTask: PlatformBot = {
  access: {
    key: 'bot-complete-task',
    policy: {
      name: 'Bot: complete a task',
      // It checks that the task, answers and uploads are the requester's own; it writes the task, the
      // Observations of readings, the episode's revision and the clinician's review tasks. An answer to
      // an offer: the treatment Consent and the CarePlan on acceptance, else the offer revoked (it never
      // places an order: offers and her counter stay proposals).
      resource: [
        // The agreements gate, as every workflow of hers.
        ...agreementReads(),
        // Her task completed, the next issued (reviews, orders, visits to book); history: an offer as a bot issued it.
        { resourceType: 'Task', interaction: ['read', 'search', 'create', 'update', 'history'] },
        // Her answers, checked to be her own and to fit the task's pinned Questionnaire; then made readable
        // (each question's text, her files as the checked uploads), nothing else of them changed.
        {
          resourceType: 'QuestionnaireResponse',
          interaction: ['read', 'update'],
          writeConstraint: [READABLE_ANSWERS_ONLY],
        },
        // The tenant's condition catalogs: the choices of the intake review's form.
        ...['ObservationDefinition', 'ActivityDefinition', 'Questionnaire', 'Condition', 'ValueSet'].map(
          (resourceType) => ({
            resourceType,
            interaction: ['read' as const, 'search' as const, 'vread' as const],
          }),
        ),
        // Her readings, recorded from a measurement task.
        { resourceType: 'Observation', interaction: ['create', 'read'] },
        // The intake review's form, stored with the review (contracts/work-forms.ts).
        WORK_FORM_CREATES,
        // Her uploads as her tenant's clinicians see them (bots/lib/evidence.ts): created once, never changed.
        ...['Media', 'DocumentReference'].map(
          (resourceType): AccessPolicyResource => ({
            resourceType,
            interaction: ['create'],
            writeConstraint: [EVIDENCE_ONLY],
          }),
        ),
        // Her tenant's fulfilment policy, for the order-decisions task it issues on acceptance.
        { resourceType: 'Organization', interaction: ['read'] },
        // The journey's revision, bumped under If-Match so two last tasks cannot both miss each other.
        { resourceType: 'EpisodeOfCare', interaction: ['read', 'update'] },
        // Her tenant's queue, which the review tasks it issues go to.
        { resourceType: 'CareTeam', interaction: ['read', 'search'] },
        // Her uploads, read and hashed to check they are hers and what the answers say they are.
        { resourceType: 'Binary', interaction: ['read'] },
        // Her consent to the offered treatment, on acceptance.
        { resourceType: 'Consent', interaction: ['create', 'read', 'search'] },
        // The care plan her acceptance starts.
        { resourceType: 'CarePlan', interaction: ['create', 'read', 'search'] },
        // The plan's visits, as requests of intent plan (no practitioner orders them).
        {
          resourceType: 'ServiceRequest',
          interaction: ['create', 'read', 'search'],
          writeConstraint: [VISIT_PLANS_ONLY],
        },
        // The offer revoked or her counter: proposals only, never an order.
        ...['RequestGroup', 'MedicationRequest'].map((resourceType) => ({
          resourceType,
          interaction: ['create' as const, 'read' as const, 'search' as const, 'update' as const],
          writeConstraint: [PROPOSALS_ONLY],
        })),
      ],
    },
  },
  bot: {
    key: 'complete-task',
    patient: true,
    description: 'POST /v1/tasks/{id}/complete: completes a questionnaire or measurement task, or answers an offer.',
    accessPolicy: 'bot-complete-task',
  },
};

export const requestReview: PlatformBot = {
  access: {
    key: 'bot-request-review',
    policy: {
      name: 'Bot: a patient request for review',
      // It reads what the patient may ask for (it checks publication and tenant itself) and writes only
      // her proposal and the review task for the queue.
      resource: [
        // Her tenant, which decides what she may ask for and whose queue reviews it.
        { resourceType: 'Patient', interaction: ['read'] },
        // The catalog she asks from, and her tenant's queue.
        ...['PlanDefinition', 'ActivityDefinition', 'HealthcareService', 'Location', 'CareTeam'].map(
          (resourceType) => ({ resourceType, interaction: ['read' as const, 'search' as const] }),
        ),
        // Her proposal: never an order.
        ...['MedicationRequest', 'ServiceRequest'].map((resourceType) => ({
          resourceType,
          interaction: ['create' as const, 'read' as const, 'search' as const],
          writeConstraint: [PROPOSALS_ONLY],
        })),
        // The review task for the queue.
        { resourceType: 'Task', interaction: ['create', 'read', 'search'] },
      ],
    },
  },
  bot: {
    key: 'request-review',
    patient: true,
    description: 'POST /v1/requests: a patient proposes a medication, protocol or treatment option for review.',
    accessPolicy: 'bot-request-review',
  },
};

export const enrollment: PlatformBot = {
  access: {
    key: 'bot-enrollment',
    policy: {
      name: 'Bot: enrollment',
      // It reads what the patient may enroll in (it checks publication and tenant itself), and writes
      // only her journey: the episode, the plan, its tasks; unenrolling, a review task for her team.
      resource: [
        // The agreements gate, and the program's published PlanDefinition.
        ...agreementReads(),
        // The program's definitions, pinned by version, that its tasks are issued from.
        ...['ActivityDefinition', 'Questionnaire', 'ObservationDefinition', 'Location'].map((resourceType) => ({
          resourceType,
          interaction: ['read' as const, 'search' as const, 'vread' as const],
        })),
        // Her enrollment's journey, claimed once per patient and program.
        { resourceType: 'EpisodeOfCare', interaction: ['create', 'read', 'search', 'update'] },
        // The program's CarePlan: draft, active, revoked.
        { resourceType: 'CarePlan', interaction: ['create', 'read', 'search', 'update'] },
        // Its tasks issued on activation, cancelled when she leaves.
        { resourceType: 'Task', interaction: ['create', 'read', 'search', 'update'] },
        // The program's visits, as requests of intent plan; ended when she leaves.
        {
          resourceType: 'ServiceRequest',
          interaction: ['create', 'read', 'search', 'update'],
          writeConstraint: [VISIT_PLANS_ONLY],
        },
        // Whether the plan holds an order she placed (leaving it then goes to her team's review).
        { resourceType: 'MedicationRequest', interaction: ['read'] },
        // Her tenant's queue, for the review task when she leaves.
        { resourceType: 'CareTeam', interaction: ['read', 'search'] },
        // Unenrolling cancels the plan's future visits: the Appointment, its segments, its Slot's status.
        ...['Appointment', 'Encounter'].map((resourceType) => ({
          resourceType,
          interaction: ['read' as const, 'search' as const, 'update' as const],
        })),
        { resourceType: 'Slot', interaction: ['read', 'update'], writeConstraint: [SLOT_STATUS_ONLY] },
      ],
    },
  },
  bot: {
    key: 'enrollment',
    patient: true,
    description: 'POST /v1/enrollments, /activate, DELETE: a program enrollment (a CarePlan) and its tasks.',
    accessPolicy: 'bot-enrollment',
  },
};
