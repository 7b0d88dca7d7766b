import { PLACEMENT_ONLY, RECONCILER } from '../policies/bots';
import { WORK_FORM_CREATES } from '../policies/clinician';
import { PROPOSALS_ONLY } from '../policies/common';
import { agreementReads } from '../policies/patient';
import type { PlatformBot } from '../shape';

/** The bots of the clinical spine after intake: eligibility, the offer, and the order she places. */

export const eligibility: PlatformBot = {
  access: {
    key: 'bot-eligibility',
    policy: {
      name: 'Bot: treatment eligibility',
      // Woken by a completed intake review: it reads her answers, the patient's record and the catalog,
      // and writes the Condition she assigned, the clinician's selection task with its advisory findings
      // and their provenance.
      resource: [
        // The review and her answers, her record the rules read (readings, medications, allergies), the
        // catalog's protocols and options, the engine Device that signs the findings, her tenant's queue.
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
        // The selection task claimed and made ready; history: only a review a bot issued starts anything.
        { resourceType: 'Task', interaction: ['create', 'update', 'read', 'search', 'history'] },
        // The Condition the clinician assigned, recorded with her as asserter.
        { resourceType: 'Condition', interaction: ['create', 'read', 'search', 'vread'] },
        // Each rule that fires, as an advisory finding.
        { resourceType: 'DetectedIssue', interaction: ['create', 'read'] },
        // The machine provenance of the findings.
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
        // The reconciler, the one other caller it acts for (a lost delivery re-driven).
        RECONCILER,
      ],
    },
  },
  bot: {
    key: 'eligibility',
    description: 'A completed intake review: eligibility of each treatment option, offered for selection.',
    accessPolicy: 'bot-eligibility',
  },
};

export const composeOffer: PlatformBot = {
  access: {
    key: 'bot-compose-offer',
    policy: {
      name: 'Bot: compose the consent bundle',
      // Woken by a completed selection: it reads the pinned definitions and the findings, and writes the
      // offer (proposals only), its provenance and the patient's offer task.
      resource: [
        // The selected protocol and option as pinned, the Condition, the clinician's answers and form.
        ...['PlanDefinition', 'ActivityDefinition', 'Condition', 'QuestionnaireResponse', 'Questionnaire'].map(
          (resourceType) => ({
            resourceType,
            interaction: ['read' as const, 'search' as const, 'vread' as const],
          }),
        ),
        // A finding's history says who recorded each mitigation (bots/lib/queues.ts ownMitigations).
        { resourceType: 'DetectedIssue', interaction: ['read', 'search', 'vread', 'history'] },
        // Her offer task issued, the selection's checked (history: a selection as a bot issued it).
        { resourceType: 'Task', interaction: ['create', 'update', 'read', 'search', 'history'] },
        // The offer itself: proposals only, never an order.
        ...['RequestGroup', 'MedicationRequest'].map((resourceType) => ({
          resourceType,
          interaction: ['create' as const, 'read' as const, 'search' as const],
          writeConstraint: [PROPOSALS_ONLY],
        })),
        // Who selected what, from which findings.
        { resourceType: 'Provenance', interaction: ['create', 'read'] },
        // The reconciler, the one other caller it acts for (a lost delivery re-driven).
        RECONCILER,
      ],
    },
  },
  bot: {
    key: 'compose-offer',
    description: 'A completed selection: the pinned consent bundle offered to the patient as a task.',
    accessPolicy: 'bot-compose-offer',
  },
};

export const decideOrder: PlatformBot = {
  access: {
    key: 'bot-decide-order',
    policy: {
      name: 'Bot: order decisions',
      // It checks the order is the requester's and accepted; it places the items she accepts (intent
      // proposal -> order, requester and subject unchanged) and cancels those she declines. It never
      // creates a request.
      resource: [
        // The agreements gate, and her consent to the treatment the order comes from.
        ...agreementReads(),
        // Her order-decisions task completed (history: as a bot issued it).
        { resourceType: 'Task', interaction: ['read', 'search', 'update', 'history'] },
        // Her tenant's fulfilment policy for what she orders.
        { resourceType: 'Organization', interaction: ['read'] },
        // The accepted proposal placed in place, or cancelled: nothing created, who and for whom unchanged.
        ...['RequestGroup', 'MedicationRequest', 'ServiceRequest'].map((resourceType) => ({
          resourceType,
          interaction: ['read' as const, 'search' as const, 'update' as const],
          writeConstraint: [PLACEMENT_ONLY],
        })),
      ],
    },
  },
  bot: {
    key: 'decide-order',
    patient: true,
    description: 'POST /v1/orders/{id}/decisions: places the items of an accepted treatment with their fulfilment.',
    accessPolicy: 'bot-decide-order',
  },
};
