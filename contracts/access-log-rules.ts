/** Her access log's rules (contracts/access-log.ts), zod-free: the access-log bot reads them. */

export const MAX_ACCESS_LOG_ENTRIES = 100;
export const DEFAULT_ACCESS_LOG_ENTRIES = 50;

/**
 * Reads of her log a patient may make in a minute (each page one): the log's bot reads with the quota it
 * shares with every patient, so one account's flood must stop at her own budget (a page a second for half
 * a minute is far more than an app needs). Counted from Medplum's record of the bot's runs for her.
 */
export const ACCESS_LOG_READS_PER_MINUTE = 30;

/** What an entry says was done: Medplum's REST interaction, as a patient reads it. */
export const ACCESS_ACTIONS = ['viewed', 'created', 'changed', 'deleted'] as const;

/** Who did it, as she is shown them. */
export const ACCESSOR_KINDS = ['you', 'clinician', 'platform', 'application'] as const;

/** What the log can show and what it cannot: said with every answer, for her app to show her. */
export const ACCESS_LOG_SCOPE =
  'Who opened one of your records or changed it, as the platform records it: each time a record of yours was read by itself, its history looked at, or it was created, changed or deleted. Lists and searches that show your records (a care team’s task list, the tabs of your chart) are not recorded one by one, so they are not here; opening your chart is.';

/**
 * The types of her records whose AuditEvents her log reads (each by a chained search through its `patient`
 * parameter), besides her Patient itself: what the platform and her care team keep of hers.
 */
export const ACCESS_LOG_RECORD_TYPES = [
  'Observation',
  'Condition',
  'Task',
  'Appointment',
  'Encounter',
  'QuestionnaireResponse',
  'CarePlan',
  'DocumentReference',
  'MedicationRequest',
  'ServiceRequest',
  'Consent',
  'EpisodeOfCare',
  'RequestGroup',
  'DetectedIssue',
  'Communication',
] as const;
