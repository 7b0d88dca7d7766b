import type { AccessPolicyResource } from '@medplum/fhirtypes';
import { ELIGIBILITY_ENGINE_VERSION, SYSTEMS, TENANT_PARAMETER } from '../../contracts/systems';
import { WORK_FORMS } from '../../contracts/work-forms';
import {
  BOT_CODE,
  FULFILMENT_ONLY,
  INBOUND_SMS,
  MARKED_OVERDUE_ONLY,
  PLACEMENT_ONLY,
  RECONCILER,
  REDRIVEN_BOTS,
  SLOT_FILED_ONLY,
  SLOT_STATUS_ONLY,
  smsOptOutAccess,
  VISIT_PLANS_ONLY,
  VISIT_STATUS_ONLY,
} from './policies/bots';
import { clinicianPolicy, EVIDENCE_ONLY, WORK_FORM_CREATES } from './policies/clinician';
import { CLIENT_SECRETS, CONSENT_ONLY_STATUS_CHANGES, PROPOSALS_ONLY } from './policies/common';
import { agreementReads, patientPolicy } from './policies/patient';
import type { ProvisionDefinition } from './shape';

/** The platform's project: access policies, bots, tenants and their apps. Demo data lives in demo.ts. */
export const platformDefinition: ProvisionDefinition = {
  project: {
    features: ['bots', 'transaction-bundles', 'cron'],
    defaultPatientAccessPolicy: 'patient',
  },
  accessPolicies: [
    { key: 'patient', policy: { name: 'Patient (default)', resource: patientPolicy() } },
    {
      key: 'clinician',
      policy: {
        name: 'Clinician',
        // What she creates about nobody (the Provider app's answers to a work form name no patient) is
        // filed in her tenant: Medplum stamps the policy's compartment as the account of what a member
        // creates (packages/server/src/fhir/repo.ts getAccounts), beside the accounts of the patients it names.
        compartment: { reference: `%${TENANT_PARAMETER}` },
        resource: clinicianPolicy(),
      },
    },
    {
      key: 'bot-read-document',
      // Any Binary by id (it checks the security context is the requester before handing anything over),
      // and the Patients that are their contexts (a Medplum that checks securityContext reads it too).
      policy: {
        name: 'Bot: read a document',
        resource: [
          { resourceType: 'Binary', interaction: ['read'] },
          { resourceType: 'Patient', interaction: ['read'] },
        ],
      },
    },
    {
      key: 'bot-accept-agreements',
      policy: {
        name: 'Bot: accept agreements',
        // Create only: an acceptance, once written, is never changed by this bot.
        resource: [...agreementReads(), { resourceType: 'Consent', interaction: ['create', 'read', 'search'] }],
      },
    },
    { key: 'bot-sms-opt-out', policy: { name: 'Bot: SMS opt-out', resource: smsOptOutAccess() } },
    {
      key: 'bot-reconcile',
      policy: {
        name: 'Bot: reconciler',
        // SMS opt-outs as the opt-out bot applies them; the spine's lost deliveries: it finds the work
        // left undone and executes the bot that lost it (it writes nothing of the spine itself).
        resource: [
          ...smsOptOutAccess(),
          { resourceType: 'Task', interaction: ['read', 'search'] },
          // An asynchronous review past due: marked urgent and overdue, nothing else of it.
          {
            resourceType: 'Task',
            criteria: `Task?code=${SYSTEMS.taskKind}|review-async-visit`,
            interaction: ['read', 'search', 'update'],
            writeConstraint: [MARKED_OVERDUE_ONLY],
          },
          // Patients' Idempotency-Key records past their 24 hours: deleted (nothing else of theirs).
          {
            resourceType: 'Basic',
            criteria: `Basic?code=${SYSTEMS.idempotency}|request`,
            interaction: ['read', 'search', 'delete'],
          },
          // Visits whose end was lost: it finds them (their segments and requests) and executes visit-completion.
          ...['Appointment', 'Encounter', 'ServiceRequest'].map((resourceType) => ({
            resourceType,
            interaction: ['read' as const, 'search' as const],
          })),
          { resourceType: 'Bot', criteria: REDRIVEN_BOTS, interaction: ['read', 'search'], hiddenFields: BOT_CODE },
        ],
      },
    },
    {
      key: 'bot-withdraw-agreement',
      policy: {
        name: 'Bot: withdraw agreement',
        resource: [
          ...agreementReads(),
          {
            resourceType: 'Consent',
            interaction: ['read', 'search', 'update'],
            writeConstraint: [CONSENT_ONLY_STATUS_CHANGES],
          },
        ],
      },
    },
    {
      key: 'bot-patient-home',
      policy: {
        name: 'Bot: patient-home',
        resource: [
          { resourceType: 'Patient', interaction: ['read', 'search', 'update'] },
          { resourceType: 'ClientApplication', interaction: ['read'], hiddenFields: CLIENT_SECRETS },
          { resourceType: 'Organization', interaction: ['read', 'search'] },
        ],
      },
    },
    {
      key: 'bot-start-assessment',
      policy: {
        name: 'Bot: start an assessment',
        // It reads what the patient may start (it checks publication and tenant itself) and writes only
        // the journey it starts: the EpisodeOfCare and its tasks, never anything else.
        resource: [
          ...agreementReads(),
          ...['ActivityDefinition', 'Questionnaire', 'ObservationDefinition', 'Location'].map((resourceType) => ({
            resourceType,
            interaction: ['read' as const, 'search' as const, 'vread' as const],
          })),
          { resourceType: 'EpisodeOfCare', interaction: ['create', 'read', 'search', 'update'] },
          { resourceType: 'Task', interaction: ['create', 'read', 'search'] },
        ],
      },
    },
    {
      key: 'bot-complete-task',
      policy: {
        name: 'Bot: complete a task',
        // It checks that the task, answers and uploads are the requester's own; it writes the task, the
        // Observations of readings, the episode's revision and the clinician's review tasks. An answer to
        // an offer: the treatment Consent and the CarePlan on acceptance, else the offer revoked (it never
        // places an order: offers and her counter stay proposals).
        resource: [
          ...agreementReads(),
          { resourceType: 'Task', interaction: ['read', 'search', 'create', 'update', 'history'] },
          { resourceType: 'QuestionnaireResponse', interaction: ['read'] },
          // The tenant's condition catalogs: the choices of the intake review's form.
          ...['ObservationDefinition', 'ActivityDefinition', 'Questionnaire', 'Condition', 'ValueSet'].map(
            (resourceType) => ({
              resourceType,
              interaction: ['read' as const, 'search' as const, 'vread' as const],
            }),
          ),
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
          { resourceType: 'EpisodeOfCare', interaction: ['read', 'update'] },
          { resourceType: 'CareTeam', interaction: ['read', 'search'] },
          { resourceType: 'Binary', interaction: ['read'] },
          { resourceType: 'Consent', interaction: ['create', 'read', 'search'] },
          { resourceType: 'CarePlan', interaction: ['create', 'read', 'search'] },
          {
            resourceType: 'ServiceRequest',
            interaction: ['create', 'read', 'search'],
            writeConstraint: [VISIT_PLANS_ONLY],
          },
          ...['RequestGroup', 'MedicationRequest'].map((resourceType) => ({
            resourceType,
            interaction: ['create' as const, 'read' as const, 'search' as const, 'update' as const],
            writeConstraint: [PROPOSALS_ONLY],
          })),
        ],
      },
    },
    {
      key: 'bot-request-review',
      policy: {
        name: 'Bot: a patient request for review',
        // It reads what the patient may ask for (it checks publication and tenant itself) and writes only
        // her proposal and the review task for the queue.
        resource: [
          { resourceType: 'Patient', interaction: ['read'] },
          ...['PlanDefinition', 'ActivityDefinition', 'HealthcareService', 'Location', 'CareTeam'].map(
            (resourceType) => ({ resourceType, interaction: ['read' as const, 'search' as const] }),
          ),
          ...['MedicationRequest', 'ServiceRequest'].map((resourceType) => ({
            resourceType,
            interaction: ['create' as const, 'read' as const, 'search' as const],
            writeConstraint: [PROPOSALS_ONLY],
          })),
          { resourceType: 'Task', interaction: ['create', 'read', 'search'] },
        ],
      },
    },
    {
      key: 'bot-eligibility',
      policy: {
        name: 'Bot: treatment eligibility',
        // Woken by a completed intake review: it reads her answers, the patient's record and the catalog,
        // and writes the Condition she assigned, the clinician's selection task with its advisory findings
        // and their provenance.
        resource: [
          ...[
            'Task',
            'QuestionnaireResponse',
            'Patient',
            'Observation',
            'MedicationRequest',
            'AllergyIntolerance',
            'PlanDefinition',
            'ActivityDefinition',
            'ValueSet',
            'Device',
            'CareTeam',
          ].map((resourceType) => ({
            resourceType,
            interaction: ['read' as const, 'search' as const, 'vread' as const],
          })),
          { resourceType: 'Task', interaction: ['create', 'update', 'read', 'search', 'history'] },
          { resourceType: 'Condition', interaction: ['create', 'read', 'search', 'vread'] },
          { resourceType: 'DetectedIssue', interaction: ['create', 'read'] },
          { resourceType: 'Provenance', interaction: ['create', 'read'] },
          // The review's form (read), and the selection's (stored with it).
          { resourceType: 'Questionnaire', interaction: ['read'] },
          WORK_FORM_CREATES,
          // A clinical revision of the Condition withdraws what was offered for its older version (revoked,
          // cancelled: bots/lib/conditions.ts), never more.
          {
            resourceType: 'RequestGroup',
            interaction: ['read', 'search', 'update'],
            writeConstraint: [
              { language: 'text/fhirpath', expression: "%after.status = 'revoked' and %after.intent = 'proposal'" },
            ],
          },
          {
            resourceType: 'MedicationRequest',
            interaction: ['read', 'search', 'update'],
            writeConstraint: [
              { language: 'text/fhirpath', expression: "%after.status = 'cancelled' and %after.intent = 'proposal'" },
            ],
          },
          RECONCILER,
        ],
      },
    },
    {
      key: 'bot-compose-offer',
      policy: {
        name: 'Bot: compose the consent bundle',
        // Woken by a completed selection: it reads the pinned definitions and the findings, and writes the
        // offer (proposals only), its provenance and the patient's offer task.
        resource: [
          ...['PlanDefinition', 'ActivityDefinition', 'Condition', 'QuestionnaireResponse', 'Questionnaire'].map(
            (resourceType) => ({
              resourceType,
              interaction: ['read' as const, 'search' as const, 'vread' as const],
            }),
          ),
          // A finding's history says who recorded each mitigation (bots/lib/queues.ts ownMitigations).
          { resourceType: 'DetectedIssue', interaction: ['read', 'search', 'vread', 'history'] },
          { resourceType: 'Task', interaction: ['create', 'update', 'read', 'search', 'history'] },
          ...['RequestGroup', 'MedicationRequest'].map((resourceType) => ({
            resourceType,
            interaction: ['create' as const, 'read' as const, 'search' as const],
            writeConstraint: [PROPOSALS_ONLY],
          })),
          { resourceType: 'Provenance', interaction: ['create', 'read'] },
          RECONCILER,
        ],
      },
    },
    {
      key: 'bot-enrollment',
      policy: {
        name: 'Bot: enrollment',
        // It reads what the patient may enroll in (it checks publication and tenant itself), and writes
        // only her journey: the episode, the plan, its tasks; unenrolling, a review task for her team.
        resource: [
          ...agreementReads(),
          ...['ActivityDefinition', 'Questionnaire', 'ObservationDefinition', 'Location'].map((resourceType) => ({
            resourceType,
            interaction: ['read' as const, 'search' as const, 'vread' as const],
          })),
          { resourceType: 'EpisodeOfCare', interaction: ['create', 'read', 'search', 'update'] },
          { resourceType: 'CarePlan', interaction: ['create', 'read', 'search', 'update'] },
          { resourceType: 'Task', interaction: ['create', 'read', 'search', 'update'] },
          {
            resourceType: 'ServiceRequest',
            interaction: ['create', 'read', 'search', 'update'],
            writeConstraint: [VISIT_PLANS_ONLY],
          },
          { resourceType: 'MedicationRequest', interaction: ['read'] },
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
    {
      key: 'bot-materialize-slots',
      policy: {
        name: 'Bot: free slots',
        // It reads the Schedules and their actors' working hours and creates free Slots; it never
        // changes a Slot once made (booking is another bot's).
        resource: [
          { resourceType: 'Schedule', interaction: ['read', 'search'] },
          { resourceType: 'PractitionerRole', interaction: ['read'] },
          // It files the Slots made before they carried their tenant: their accounts, nothing else.
          {
            resourceType: 'Slot',
            interaction: ['create', 'read', 'search', 'update'],
            writeConstraint: [SLOT_FILED_ONLY],
          },
        ],
      },
    },
    {
      key: 'bot-availability',
      policy: {
        name: 'Bot: availability',
        // Read only: her Patient (tenant, state), her tenant's visit teams and practitioners' roles, their
        // licences (jurisdiction Locations), Schedules and free Slots. It checks the tenant itself.
        resource: [
          { resourceType: 'Patient', interaction: ['read'] },
          ...['CareTeam', 'PractitionerRole', 'Location', 'Schedule', 'Slot'].map((resourceType) => ({
            resourceType,
            interaction: ['read' as const, 'search' as const],
          })),
        ],
      },
    },
    {
      key: 'bot-appointments',
      policy: {
        name: 'Bot: visits',
        // It books, moves and cancels a patient's visits and starts their segments: it writes Appointments,
        // their Encounters, her schedule-visit tasks, and a Slot's status (nothing else of it).
        resource: [
          ...agreementReads(),
          { resourceType: 'Task', interaction: ['read', 'search', 'create', 'update'] },
          ...['ServiceRequest', 'Schedule', 'PractitionerRole', 'Location'].map((resourceType) => ({
            resourceType,
            interaction: ['read' as const, 'search' as const],
          })),
          { resourceType: 'Slot', interaction: ['read', 'search', 'update'], writeConstraint: [SLOT_STATUS_ONLY] },
          // Her tenant's queue, for the care team's review of an asynchronous visit.
          { resourceType: 'CareTeam', interaction: ['read', 'search'] },
          ...['Appointment', 'Encounter'].map((resourceType) => ({
            resourceType,
            interaction: ['create' as const, 'read' as const, 'search' as const, 'update' as const],
          })),
        ],
      },
    },
    {
      key: 'bot-visit-review',
      policy: {
        name: 'Bot: an asynchronous visit reviewed',
        // Woken by the care team's completed review of an asynchronous visit: it reads the review and the
        // visit, and fulfils the visit (the Appointment and its segments), nothing else.
        resource: [
          { resourceType: 'Task', interaction: ['read', 'search', 'history'] },
          ...['Appointment', 'Encounter'].map((resourceType) => ({
            resourceType,
            interaction: ['read' as const, 'search' as const, 'update' as const],
            writeConstraint: [FULFILMENT_ONLY],
          })),
          RECONCILER,
        ],
      },
    },
    {
      key: 'bot-visit-completion',
      policy: {
        name: 'Bot: a visit completed',
        // Woken by a finished segment or a visit marked fulfilled: it reads the visit, its segments, its
        // request and plan (and the definitions a repeating visit is issued again from); it sets the
        // Appointment's status, completes the request, notes the outcome on the plan and issues the next
        // visit to book (a request, intent plan, and her schedule-visit task). Nothing else.
        resource: [
          { resourceType: 'Patient', interaction: ['read'] },
          { resourceType: 'Encounter', interaction: ['read', 'search'] },
          {
            resourceType: 'Appointment',
            interaction: ['read', 'search', 'update'],
            writeConstraint: [VISIT_STATUS_ONLY],
          },
          {
            resourceType: 'ServiceRequest',
            interaction: ['create', 'read', 'search', 'update'],
            writeConstraint: [VISIT_PLANS_ONLY],
          },
          { resourceType: 'CarePlan', interaction: ['read', 'update'] },
          { resourceType: 'Task', interaction: ['create', 'read', 'search'] },
          { resourceType: 'CareTeam', interaction: ['read', 'search'] },
          ...['PlanDefinition', 'ActivityDefinition', 'Questionnaire', 'ObservationDefinition'].map((resourceType) => ({
            resourceType,
            interaction: ['read' as const, 'search' as const, 'vread' as const],
          })),
        ],
      },
    },
    {
      key: 'bot-decide-order',
      policy: {
        name: 'Bot: order decisions',
        // It checks the order is the requester's and accepted; it places the items she accepts (intent
        // proposal -> order, requester and subject unchanged) and cancels those she declines. It never
        // creates a request.
        resource: [
          ...agreementReads(),
          { resourceType: 'Task', interaction: ['read', 'search', 'update', 'history'] },
          { resourceType: 'Organization', interaction: ['read'] },
          ...['RequestGroup', 'MedicationRequest', 'ServiceRequest'].map((resourceType) => ({
            resourceType,
            interaction: ['read' as const, 'search' as const, 'update' as const],
            writeConstraint: [PLACEMENT_ONLY],
          })),
        ],
      },
    },
    {
      key: 'integration-sms',
      policy: {
        name: 'SMS integration: writes inbound messages',
        resource: [{ resourceType: 'Communication', criteria: INBOUND_SMS, interaction: ['create', 'read'] }],
      },
    },
  ],
  bots: [
    {
      key: 'accept-agreements',
      patient: true,
      description: 'POST /v1/agreements/acceptances: one Consent per agreement with clickwrap proof.',
      accessPolicy: 'bot-accept-agreements',
    },
    {
      key: 'read-document',
      patient: true,
      description: 'GET /v1/documents/{id}: one of her own uploads.',
      accessPolicy: 'bot-read-document',
    },
    {
      key: 'withdraw-agreement',
      patient: true,
      description: 'POST /v1/agreements/withdrawals: the Consent becomes inactive.',
      accessPolicy: 'bot-withdraw-agreement',
    },
    {
      key: 'start-assessment',
      patient: true,
      description: 'POST /v1/assessments: starts or resumes an assessment (EpisodeOfCare and intake tasks).',
      accessPolicy: 'bot-start-assessment',
    },
    {
      key: 'complete-task',
      patient: true,
      description: 'POST /v1/tasks/{id}/complete: completes a questionnaire or measurement task, or answers an offer.',
      accessPolicy: 'bot-complete-task',
    },
    {
      key: 'request-review',
      patient: true,
      description: 'POST /v1/requests: a patient proposes a medication, protocol or treatment option for review.',
      accessPolicy: 'bot-request-review',
    },
    {
      key: 'enrollment',
      patient: true,
      description: 'POST /v1/enrollments, /activate, DELETE: a program enrollment (a CarePlan) and its tasks.',
      accessPolicy: 'bot-enrollment',
    },
    {
      key: 'visit-review',
      description: 'Subscription: the care team completed the review of an asynchronous visit; the visit is fulfilled.',
      accessPolicy: 'bot-visit-review',
    },
    {
      key: 'visit-completion',
      description:
        'Subscription: a visit segment finished (or a visit marked fulfilled); the visit is fulfilled once every segment is, and the plan issues the next.',
      accessPolicy: 'bot-visit-completion',
    },
    {
      key: 'appointments',
      patient: true,
      description: 'POST /v1/appointments, /reschedule, /cancel, /encounter: a patient books and runs her visits.',
      accessPolicy: 'bot-appointments',
    },
    {
      key: 'availability',
      patient: true,
      description: 'GET /v1/availability: free visit slots of licensed practitioners, or per-day counts.',
      accessPolicy: 'bot-availability',
    },
    {
      key: 'decide-order',
      patient: true,
      description: 'POST /v1/orders/{id}/decisions: places the items of an accepted treatment with their fulfilment.',
      accessPolicy: 'bot-decide-order',
    },
    {
      key: 'eligibility',
      description: 'A completed intake review: eligibility of each treatment option, offered for selection.',
      accessPolicy: 'bot-eligibility',
    },
    {
      key: 'compose-offer',
      description: 'A completed selection: the pinned consent bundle offered to the patient as a task.',
      accessPolicy: 'bot-compose-offer',
    },
    {
      key: 'sms-opt-out',
      description: 'Inbound SMS STOP: the matching SMS Consent becomes inactive.',
      accessPolicy: 'bot-sms-opt-out',
    },
    {
      key: 'reconcile',
      description:
        'Every 10 minutes: re-drives subscription work left undone (inbound SMS STOPs not yet applied, eligibility and offers of the clinical spine).',
      accessPolicy: 'bot-reconcile',
      cronString: '*/10 * * * *',
    },
    {
      key: 'materialize-slots',
      description:
        'Hourly (and once after provisioning): the free Slots of every active Schedule for the next three weeks, at most 350 a run (its FHIR quota), soonest first.',
      accessPolicy: 'bot-materialize-slots',
      cronString: '0 * * * *',
      runAfterProvisioning: true,
    },
    {
      key: 'patient-home',
      patient: true,
      description: 'Assigns a self-registered patient to the tenant of the app they registered with.',
      accessPolicy: 'bot-patient-home',
      admin: true,
    },
  ],
  subscriptions: [
    {
      key: 'review-intake-completed',
      bot: 'eligibility',
      criteria: `Task?code=${SYSTEMS.taskKind}|review-intake&status=completed`,
      interaction: 'update',
      reason: 'Eligibility after a clinician assigns a condition (JOURNEY D.1)',
    },
    {
      key: 'select-treatment-completed',
      bot: 'compose-offer',
      criteria: `Task?code=${SYSTEMS.taskKind}|select-treatment&status=completed`,
      interaction: 'update',
      reason: 'The consent bundle after a clinician selects a treatment (JOURNEY D.3)',
    },
    {
      key: 'review-response-completed',
      bot: 'compose-offer',
      criteria: `Task?code=${SYSTEMS.taskKind}|review-response&status=completed`,
      interaction: 'update',
      reason: 'A new consent bundle after a declined or countered offer is reviewed (JOURNEY D.4)',
    },
    {
      key: 'async-review-completed',
      bot: 'visit-review',
      criteria: `Task?code=${SYSTEMS.taskKind}|review-async-visit&status=completed`,
      interaction: 'update',
      reason: 'An asynchronous visit fulfilled when the care team completes its review (JOURNEY H)',
    },
    // Medplum's Provider app marks the Appointment fulfilled before it finishes the encounter, whatever
    // segments remain: both wake the bot that decides from the segments (bots/visit-completion.ts).
    {
      key: 'segment-finished',
      bot: 'visit-completion',
      criteria: 'Encounter?status=finished',
      interaction: 'update',
      reason: 'A visit fulfilled when its last segment is finished, and the next visit issued (JOURNEY H)',
    },
    {
      key: 'visit-marked-fulfilled',
      bot: 'visit-completion',
      criteria: 'Appointment?status=fulfilled',
      interaction: 'update',
      reason: 'A visit marked fulfilled with segments still to come goes back to what its segments say (JOURNEY H)',
    },
    {
      key: 'condition-revised',
      bot: 'eligibility',
      criteria: 'Condition',
      interaction: 'update',
      reason:
        'A clinical revision of a Condition the platform recorded withdraws older offers and re-runs eligibility (JOURNEY D.1)',
    },
    // The Provider app completes the task BEFORE her answers (contracts/work-forms.ts): their completion
    // wakes the same bots, which find the task they hand in.
    {
      key: 'review-intake-answers-completed',
      bot: 'eligibility',
      criteria: `QuestionnaireResponse?status=completed&questionnaire=${WORK_FORMS.assignCondition}`,
      interaction: 'update',
      reason: 'Eligibility when the answers to an intake review are completed after the review',
    },
    {
      key: 'selection-answers-completed',
      bot: 'compose-offer',
      criteria: `QuestionnaireResponse?status=completed&questionnaire=${WORK_FORMS.selectTreatment}`,
      interaction: 'update',
      reason: 'The consent bundle when the answers to a selection are completed after the selection',
    },
    {
      key: 'inbound-sms',
      bot: 'sms-opt-out',
      criteria: `Communication?category=${SYSTEMS.communicationCategory}|inbound-sms`,
      interaction: 'create',
      reason: 'SMS opt-out (STOP replies)',
    },
  ],
  resources: [
    {
      key: 'device-eligibility-engine',
      resource: {
        resourceType: 'Device',
        identifier: [{ system: SYSTEMS.device, value: 'eligibility-engine' }],
        status: 'active',
        deviceName: [{ name: 'Patient Care eligibility engine', type: 'user-friendly-name' }],
        version: [{ value: ELIGIBILITY_ENGINE_VERSION }],
      },
    },
    {
      key: 'integration-sms',
      resource: {
        resourceType: 'ClientApplication',
        name: 'SMS integration',
        description: 'Writes inbound SMS as Communications (category inbound-sms); its STOP replies opt patients out.',
        meta: { tag: [{ system: SYSTEMS.integration, code: 'sms' }] },
      },
    },
  ],
  integrations: [{ key: 'integration-sms', accessPolicy: 'integration-sms' }],
};
