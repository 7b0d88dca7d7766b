/**
 * Identifier systems and extension URLs of this platform. One place, shared by the gateway, the
 * bots and provisioning, so that a bot and the data it looks for can never disagree on a name.
 */
const BASE = 'https://patient-care.example';

export const SYSTEMS = {
  /** Bot identifiers: `Bot/$execute?identifier=<bots>|<name>`. */
  bots: `${BASE}/bots`,
  /** Everything provisioning owns carries `<provisioning>|<key>`, how a re-run finds it again. */
  provisioning: `${BASE}/provisioning`,
  tenant: `${BASE}/tenant`,
  demoPatient: `${BASE}/demo-patient`,
  /** The demo clinician of a tenant: `<demoClinician>|<tenant key>`. */
  demoClinician: `${BASE}/demo-clinician`,
  /** A person of a clinic file (clinician or visit practitioner): `<clinicStaff>|<tenant key>/<person key>`. */
  clinicStaff: `${BASE}/clinic-staff`,
  /** An agreement's canonical url (DocumentReference.identifier). */
  agreement: `${BASE}/agreement`,
  /** One published version, `url|version` (DocumentReference.masterIdentifier). */
  agreementVersion: `${BASE}/agreement-version`,
  /** Agreement category codes: terms, privacy, sms, voice, state-specific, program. */
  agreementCategory: `${BASE}/agreement-category`,
  /** One acceptance: `Patient/<id>|<url>|<version>` (Consent.identifier), the idempotency key. */
  agreementAcceptance: `${BASE}/agreement-acceptance`,
  /** Tags the platform's machine clients (ClientApplication meta.tag), e.g. `<integration>|sms`. */
  integration: `${BASE}/integration`,
  /** A tenant's backend (a machine client of its own server): `<tenantBackend>|<tenant key>/<backend key>`. */
  tenantBackend: `${BASE}/tenant-backend`,
  /** Communication categories of the platform, e.g. `inbound-sms`. */
  communicationCategory: `${BASE}/communication-category`,
  /** Phone numbers as logical references (Communication.sender.identifier), E.164. */
  phone: 'urn:ietf:rfc:3966',
  /**
   * The journey join key (JOURNEY section 0): every resource of one journey carries the tag
   * `<episode>|EpisodeOfCare/<id>`, so `?_tag=` finds them on any type.
   */
  episode: `${BASE}/episode`,
  /**
   * A patient's `Idempotency-Key` record (a Basic of hers, code `request`): identifier
   * `<idempotency>|<sha-256 of the key>` (src/edge/idempotency.ts).
   */
  idempotency: `${BASE}/idempotency`,
  /**
   * A webhook delivery that failed and waits for its next try (a Basic, code `<webhookDelivery>|pending`,
   * `|failed` once its tries are spent, `|delivered` for a while once a later try delivered it): identifier
   * `<webhookDelivery>|<event id>` (bots/webhooks.ts); its tenant's delivery log (docs/webhooks.md).
   */
  webhookDelivery: `${BASE}/webhook-delivery`,
  /** The EpisodeOfCare's own idempotency key: `Patient/<id>;<plan url>` (EpisodeOfCare.identifier). */
  episodeKey: `${BASE}/episode-key`,
  /** Patient-facing tasks carry `<taskAudience>|patient` (spec: "tagged patient"); others are clinicians'. */
  taskAudience: `${BASE}/task-audience`,
  /** A patient's open request for review: `Patient/<id>;<kind>;<item>` (the proposal's and its review task's identifier). */
  patientRequest: `${BASE}/patient-request`,
  /** The selection task that answers an intake review: `Task/<review id>` (its idempotency key). */
  eligibilityKey: `${BASE}/eligibility-key`,
  /** The rules of treatment options, by code (DetectedIssue.code: the rule that fired). */
  eligibilityRule: `${BASE}/eligibility-rule`,
  /** A consent bundle's group (RequestGroup and MedicationRequest groupIdentifier): `Task/<selection id>`. */
  offer: `${BASE}/offer`,
  /** Names a tenant's condition catalog ValueSet (`<conditionCatalog>|conditions`). */
  conditionCatalog: `${BASE}/condition-catalog`,
  /** The platform's software devices (Device.identifier), e.g. `<device>|eligibility-engine`. */
  device: `${BASE}/device`,
  /** The kind of visit a Slot, Schedule or Appointment is for (`<visitType>|video-visit`), VISIT_TYPES. */
  visitType: `${BASE}/visit-type`,
  /** A materialised Slot's key: `<slotKey>|Schedule/<id>;<start>` (one Slot per schedule and start). */
  slotKey: `${BASE}/slot-key`,
  /** A tenant's visit team (CareTeam.category `<careTeam>|visits`): the practitioners patients book. */
  careTeam: `${BASE}/care-team`,
  /** Why an Appointment was cancelled, when the platform cancels it to reschedule (`<cancelReason>|rescheduled`). */
  cancelReason: `${BASE}/cancelation-reason`,
  /** A tenant's clinician work queues (CareTeam.category), e.g. `<careQueue>|intake-review`. */
  careQueue: `${BASE}/care-queue`,
  /** Subdivision codes such as US-CA (ISO 3166-2). */
  jurisdiction: 'urn:iso:std:iso:3166:-2',
  /** Country codes such as US (ISO 3166-1 alpha-2), as Patient.address.country holds them. */
  country: 'urn:iso:std:iso:3166',
  /** What a PlanDefinition is (PlanDefinition.type): one of PLAN_TYPES. */
  planType: `${BASE}/plan-type`,
  /** The kind of a patient task (Task.code) and of the plan action that issues it: questionnaire, measurement. */
  taskKind: `${BASE}/task-kind`,
  /** The questionnaires of clinician work (`<workForm>/assign-condition`, `<workForm>/select-treatment`). */
  workForm: `${BASE}/work-form`,
  /** The copy of an upload a clinician sees (Media or DocumentReference identifier): `<evidence>|Binary/<id>`. */
  evidence: `${BASE}/evidence`,
  /** A treatment option as a choice (Coding): its code is the option's canonical `url|version`. */
  treatmentOption: `${BASE}/treatment-option`,
  /** How a reading was taken: `patient-reported` (she measured it and reported it), on Observation.method. */
  readingMethod: `${BASE}/reading-method`,
  /**
   * The queue a clinician task waits in, on its `performerType` (code `CareTeam/<id>`, display the queue's
   * name): unowned until a clinician takes it, so the Provider app takes it by picking her as assignee.
   */
  queue: `${BASE}/queue`,
  /**
   * The kinds of clinician work a queue receives (a CareTeam category: codes are Task kinds, `*` the
   * kinds no queue of its tenant names): how bots route work (bots/lib/queues.ts tenantQueue).
   */
  queueWork: `${BASE}/queue-work`,
  /** A vital-sign panel made from readings stored before panels (src/provision/migrations.ts): `Observation/<systolic>`. */
  migratedReading: `${BASE}/migrated-reading`,
} as const;

/** The kinds of plan the catalog fronts (PlanDefinition.type under SYSTEMS.planType). */
export const PLAN_TYPES = ['assessment', 'program', 'clinical-protocol'] as const;
export type PlanType = (typeof PLAN_TYPES)[number];

/**
 * The endpoint that starts each kind of offering (JOURNEY A). Clinical protocols are requested, never
 * self-enrolled. Here, not beside the catalog's contract, because bots use it and must not bundle zod.
 */
export const START_ENDPOINT = {
  assessment: 'POST /v1/assessments',
  program: 'POST /v1/enrollments',
  'clinical-protocol': 'POST /v1/requests',
} as const satisfies Record<PlanType, string>;

/** The one path that answers an order-decisions task ("Exactly one path", JOURNEY C). */
export const ORDER_DECISIONS_ENDPOINT = 'POST /v1/orders/{id}/decisions';
/** The one path that answers a schedule-visit task: booking the visit. */
export const BOOKING_ENDPOINT = 'POST /v1/appointments';

export const EXTENSIONS = {
  /** On an Idempotency-Key record: the sha-256 of the request it was first used with (method, path, query, type, body). */
  idempotencyRequest: `${BASE}/fhir/StructureDefinition/idempotency-request`,
  /** On an Idempotency-Key record: who made it (a random token of the gateway call that holds it). */
  idempotencyHolder: `${BASE}/fhir/StructureDefinition/idempotency-holder`,
  /** On an Idempotency-Key record: the first answer, `{status, contentType, body}` as JSON. */
  idempotencyAnswer: `${BASE}/fhir/StructureDefinition/idempotency-answer`,
  /**
   * On an Appointment: when the platform found every segment finished and fulfilled the visit (valueInstant;
   * the visit-completion bot). Its version is the platform's decision (a clinician's mark is not).
   */
  visitFulfilled: `${BASE}/fhir/StructureDefinition/visit-fulfilled`,
  /** On a tenant Organization: the https URL its patients' events are delivered to (valueUrl; contracts/webhooks.ts). */
  webhookEndpoint: `${BASE}/fhir/StructureDefinition/webhook-endpoint`,
  /** The event types a tenant's endpoint takes (one `valueCode` each); none: every type. */
  webhookEvents: `${BASE}/fhir/StructureDefinition/webhook-events`,
  /**
   * On a pending webhook delivery (Basic): complex, `tenant` (valueReference), `payload` (valueString, the
   * body sent), `attempts` (valueInteger), `next` (valueInstant: not tried again before), `last` (valueString:
   * how the last try ended, a status code or `unreachable`, never the receiver's answer).
   */
  webhookDelivery: `${BASE}/fhir/StructureDefinition/webhook-delivery`,
  /** On a patient ClientApplication: the tenant Organization whose app it is. */
  tenantOrganization: `${BASE}/fhir/StructureDefinition/tenant-organization`,
  /** On a Bot: sha256 of the deployed bundle, so provisioning redeploys only what changed. */
  botBundleSha256: `${BASE}/fhir/StructureDefinition/bot-bundle-sha256`,
  /** On a scheduled Bot: the cron string provisioning has made Medplum schedule (see src/provision/apply.ts). */
  cronScheduled: `${BASE}/fhir/StructureDefinition/cron-scheduled`,
  /** On an agreement DocumentReference: where it applies (valueCodeableConcept, ISO 3166-2). */
  agreementJurisdiction: `${BASE}/fhir/StructureDefinition/agreement-jurisdiction`,
  /** On an agreement DocumentReference: true when the platform requires it (valueBoolean). */
  agreementRequired: `${BASE}/fhir/StructureDefinition/agreement-required`,
  /** On an agreement DocumentReference: what stops working if it is withdrawn (valueString). */
  agreementWithdrawalConsequence: `${BASE}/fhir/StructureDefinition/agreement-withdrawal-consequence`,
  /**
   * On an ObservationDefinition.qualifiedInterval: the country where it applies (valueCodeableConcept,
   * SYSTEMS.country); an interval without it applies wherever no country-specific one does.
   */
  intervalJurisdiction: `${BASE}/fhir/StructureDefinition/jurisdiction`,
  /** On an Observation whose reading was entered in another unit: what the patient entered (valueQuantity). */
  enteredQuantity: `${BASE}/fhir/StructureDefinition/entered-quantity`,
  /** On an EpisodeOfCare: the plan it instantiates, pinned when it was started (valueCanonical `url|version`). */
  episodePlan: `${BASE}/fhir/StructureDefinition/episode-plan`,
  /**
   * On an EpisodeOfCare: its revision (valueInteger), bumped under If-Match by every workflow that
   * advances the journey, so two concurrent steps cannot both miss each other (JOURNEY section 0).
   */
  journeyRevision: `${BASE}/fhir/StructureDefinition/journey-revision`,
  /** On a completed Task: the fingerprint of the payload that completed it (a repeat replays, another conflicts). */
  completionDigest: `${BASE}/fhir/StructureDefinition/completion-digest`,
  /**
   * On a treatment option (ActivityDefinition): one eligibility rule (complex: `code`, `kind`
   * contraindication | interaction | prerequisite, `description`, `expression` a text/fhirpath Expression
   * over the patient's record that is true when the rule fires).
   */
  eligibilityRule: `${BASE}/fhir/StructureDefinition/eligibility-rule`,
  /** On a protocol's option action and a selection task's input: the guideline's first choice (a label, valueBoolean). */
  guidelinePreferred: `${BASE}/fhir/StructureDefinition/guideline-preferred`,
  /** On a selection task's input: whether the option is eligible for the patient (valueBoolean; advisory). */
  eligible: `${BASE}/fhir/StructureDefinition/eligible`,
  /**
   * On a started visit segment (Encounter): where the patient was when it began, as her record's address
   * said (valueCodeableConcept, ISO 3166-2: the jurisdiction the practitioner's licence was checked for).
   */
  patientJurisdiction: `${BASE}/fhir/StructureDefinition/patient-jurisdiction`,
  /** On a HealthcareService: the PlanDefinition it fronts (valueCanonical `url|version`). */
  frontsPlan: `${BASE}/fhir/StructureDefinition/fronts-plan`,
  /** On an SMS/voice Consent: the channel it covers (valueContactPoint, E.164). */
  consentChannel: `${BASE}/fhir/StructureDefinition/consent-channel`,
  /**
   * On a tenant Organization: which fulfilment methods it offers for one kind of order item in one
   * country (complex: `country` ISO 3166-1 code, `kind` MedicationRequest | ServiceRequest, `method`
   * repeated, FULFILMENT_METHODS). A country or kind it does not list has no method: nothing can be placed.
   */
  fulfilmentPolicy: `${BASE}/fhir/StructureDefinition/fulfilment-policy`,
  /** On a placed order item (MedicationRequest, ServiceRequest): how the patient chose to receive it (valueCode). */
  fulfilmentMethod: `${BASE}/fhir/StructureDefinition/fulfilment-method`,
  /** On an Appointment: how the visit happens, `sync` (live) or `async` (store-and-forward) (valueCode). */
  visitModality: `${BASE}/fhir/StructureDefinition/visit-modality`,
  /** On an Encounter (a visit segment): its position in the visit, from 1 (valueInteger). */
  segmentPosition: `${BASE}/fhir/StructureDefinition/segment-position`,
  /** On a rescheduled visit's new Appointment: the one it replaces (R5's cross-version extension). */
  appointmentReplaces: 'http://hl7.org/fhir/5.0/StructureDefinition/extension-Appointment.replaces',
  /** On a Consent: the server-stamped clickwrap proof (complex extension). */
  clickwrapProof: `${BASE}/fhir/StructureDefinition/clickwrap-proof`,
} as const;

/**
 * The eligibility engine's version: the provisioned Device (`SYSTEMS.device|eligibility-engine`) carries
 * it, and every finding names that Device as its author. Rules themselves are versioned with the options.
 */
export const ELIGIBILITY_ENGINE_VERSION = '1';

/**
 * The project Medplum keeps FHIR's own definitions in (StructureDefinitions, SearchParameters, ValueSets,
 * CodeSystems): a fixed id, `v5('R4', nullUuid)` (packages/server/src/constants.ts r4ProjectId). A policy
 * names it to grant FHIR's terminology and nothing of any tenant's (the embedded Medplum serves the same
 * definitions under it: src/embedded/definitions.ts).
 */
export const MEDPLUM_R4_PROJECT = '161452d9-43b7-5c29-aa7b-c85680fa45c6';

/** The access-policy parameter that carries a member's tenant Organization (`%organization`). */
export const TENANT_PARAMETER = 'organization';

/**
 * The clinician access-policy parameter that lists the queues (CareTeam references) she works, as a
 * FHIRPath collection of string literals (`'CareTeam/a' | 'CareTeam/b'`, or `{}` for none): Medplum
 * substitutes it into the policy's write constraints (`%queues`), so only a queue's members claim,
 * release or edit its work. Every clinician membership carries it.
 */
export const QUEUES_PARAMETER = 'queues';

/**
 * The kinds of clinician work the platform issues (Task.code under SYSTEMS.taskKind), each routed to the
 * queue of her tenant that receives it (SYSTEMS.queueWork; a clinic file's queues).
 */
export const CLINICIAN_WORK_KINDS = [
  'review-intake',
  'select-treatment',
  'review-reading',
  'review-response',
  'review-request',
  'review-unenrollment',
  'review-async-visit',
] as const;
export type ClinicianWorkKind = (typeof CLINICIAN_WORK_KINDS)[number];

/** The `queues` parameter's value for these CareTeam references. */
export const queuesValue = (queues: readonly string[]): string =>
  queues.length === 0 ? '{}' : queues.map((q) => `'${q.replaceAll("'", '')}'`).join(' | ');

/**
 * The clinician access-policy parameter that lists who works each of her queues, as a FHIRPath collection
 * of string literals `'CareTeam/<queue> Practitioner/<member>'` (or `{}`): a task of a queue she works is
 * handed only to a colleague of that queue (`%queueStaff`). Every clinician membership carries it;
 * provisioning derives it, with `queues`, from the one list of who works which queue.
 */
export const QUEUE_STAFF_PARAMETER = 'queueStaff';

/** The `queueStaff` parameter's value: each queue with each of its members. */
export const queueStaffValue = (staff: readonly { queue: string; member: string }[]): string =>
  queuesValue(staff.map(({ queue, member }) => `${queue} ${member}`));

/** Tags that publish catalog items to patients (the patient policy grants exactly these). */
export const CATALOG = {
  system: `${BASE}/catalog`,
  /** Published to the patients of the tenant whose account the item carries. */
  tenant: 'public',
  /** Published to every tenant's patients; written only by provisioning (project admins). */
  platform: 'platform',
} as const;

/** Bots a patient may run with `$execute` carry `<botAudience>|patient`; no other bot is readable by patients. */
export const BOT_AUDIENCE = { system: `${BASE}/bot-audience`, patient: 'patient' } as const;

/**
 * The gateway's signed statement of what only the edge can see (client address, user agent), and the
 * name of the Project secret holding its HMAC key (a bot reads it from `event.secrets`).
 */
export const EDGE_STATEMENT = { secretName: 'edge-statement-key', maxAgeSeconds: 60 } as const;

/**
 * How a gateway learns that its EDGE_STATEMENT_KEY is the Project's without either leaving its place: both
 * sides compute the key's id, HMAC-SHA256(key, `context`) in hex (a fingerprint that reveals nothing of the
 * key), and the `bot` (run by the platform's gateway client alone) answers the Project's.
 */
export const EDGE_KEY_CHECK = {
  bot: 'edge-key-check',
  context: 'patient-care: the id of an edge-statement key',
  /** The tag (under SYSTEMS.integration) of the gateway's own machine client. */
  integration: 'gateway',
} as const;

/**
 * The Project secret holding a copy of Medplum's public signing keys (its `.well-known/jwks.json`), which
 * provisioning writes so that a bot verifies its caller's token without fetching them on every run; a key
 * it does not hold (Medplum rotated) is fetched then (bots/lib/trust.ts).
 */
export const SIGNING_KEYS = { secretName: 'medplum-signing-keys' } as const;

/**
 * The Project secret naming Medplum's `storageBaseUrl` (where it serves presigned attachment URLs), for a
 * Medplum whose storage is not at the default `<baseUrl>storage/`; unset, the bots assume the default.
 */
export const STORAGE_BASE_SECRET = 'storage-base-url';

/** The kinds of patient task (Task.code under SYSTEMS.taskKind); here, without zod, for the bots too. */
export const TASK_KINDS = [
  'questionnaire',
  'measurement',
  'treatment-offer',
  'order-decisions',
  'schedule-visit',
] as const;
export type TaskKind = (typeof TASK_KINDS)[number];

/** How an order item can reach the patient (JOURNEY G); a tenant's policy allows some per country and kind. */
export const FULFILMENT_METHODS = ['pickup', 'delivery', 'in-clinic', 'at-home-kit'] as const;
export type FulfilmentMethod = (typeof FULFILMENT_METHODS)[number];

/** The IANA time zone of a Schedule (its actor's working hours are in it): HL7's standard extension. */
export const TIMEZONE_EXTENSION = 'http://hl7.org/fhir/StructureDefinition/timezone';

/**
 * The kinds of visit (SYSTEMS.visitType): a live video visit books a Slot of its length; an asynchronous
 * review (store-and-forward) takes no Slot.
 */
export const VISIT_TYPES = {
  'video-visit': { modality: 'sync', minutes: 30, display: 'Video visit' },
  /** Store-and-forward: no slot; the care team reviews within its window (72 hours) from booking. */
  'async-review': { modality: 'async', minutes: 0, display: 'Asynchronous review', reviewHours: 72 },
} as const;
export type VisitType = keyof typeof VISIT_TYPES;
