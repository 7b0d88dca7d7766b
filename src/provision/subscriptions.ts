import { SYSTEMS } from '../../contracts/systems';
import { WORK_FORMS } from '../../contracts/work-forms';
import type { SubscriptionDefinition } from './shape';

/** What wakes the subscription bots: each a change Medplum delivers to one bot, and why. */
export const platformSubscriptions: SubscriptionDefinition[] = [
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
];
