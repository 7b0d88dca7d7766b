import { z } from 'zod';
import { AgreementCategorySchema } from './agreements';
import { CLINICIAN_WORK_KINDS } from './systems';
import { allowedWebhookEndpoint, WEBHOOK_EVENT_TYPES } from './webhook-rules';

/**
 * The clinic file (docs/clinic.md): everything about one operator's clinic, written by hand (YAML or
 * JSON), validated by this contract (and its JSON Schema, `clinics/clinic.schema.json`, generated from it
 * for editors), then provisioned by `npm run provision -- --clinic FILE`. Checks that span the file (a
 * queue a clinician names, overlapping hours, one e-mail per person) are in src/provision/clinic.ts.
 */

/** The US states and DC (ISO 3166-2 subdivision codes without `US-`) and their names. */
export const US_STATES = {
  AL: 'Alabama',
  AK: 'Alaska',
  AZ: 'Arizona',
  AR: 'Arkansas',
  CA: 'California',
  CO: 'Colorado',
  CT: 'Connecticut',
  DE: 'Delaware',
  DC: 'District of Columbia',
  FL: 'Florida',
  GA: 'Georgia',
  HI: 'Hawaii',
  ID: 'Idaho',
  IL: 'Illinois',
  IN: 'Indiana',
  IA: 'Iowa',
  KS: 'Kansas',
  KY: 'Kentucky',
  LA: 'Louisiana',
  ME: 'Maine',
  MD: 'Maryland',
  MA: 'Massachusetts',
  MI: 'Michigan',
  MN: 'Minnesota',
  MS: 'Mississippi',
  MO: 'Missouri',
  MT: 'Montana',
  NE: 'Nebraska',
  NV: 'Nevada',
  NH: 'New Hampshire',
  NJ: 'New Jersey',
  NM: 'New Mexico',
  NY: 'New York',
  NC: 'North Carolina',
  ND: 'North Dakota',
  OH: 'Ohio',
  OK: 'Oklahoma',
  OR: 'Oregon',
  PA: 'Pennsylvania',
  RI: 'Rhode Island',
  SC: 'South Carolina',
  SD: 'South Dakota',
  TN: 'Tennessee',
  TX: 'Texas',
  UT: 'Utah',
  VT: 'Vermont',
  VA: 'Virginia',
  WA: 'Washington',
  WV: 'West Virginia',
  WI: 'Wisconsin',
  WY: 'Wyoming',
} as const;

export type UsState = keyof typeof US_STATES;

/**
 * The platform's programs a tenant may offer (its catalog: src/provision/catalog.ts). `blood-pressure`:
 * the blood pressure check (an assessment), monitoring (a program) and hypertension treatment (a clinical
 * protocol, offered only in the tenant's states). The weight-management intake is the platform's own and
 * offered by every tenant.
 */
export const PROGRAMS = ['blood-pressure'] as const;
export type Program = (typeof PROGRAMS)[number];

const key = (what: string) =>
  z
    .string()
    .regex(
      /^[a-z][a-z0-9-]{0,39}$/,
      `${what}: lower-case letters, digits and hyphens, starting with a letter (at most 40)`,
    );

const envName = z
  .string()
  .regex(/^[A-Z][A-Z0-9_]{0,79}$/, 'the name of an environment variable (upper-case letters, digits, underscores)');

const https = z.url({ protocol: /^https$/, error: 'an https:// URL' }).max(500, 'at most 500 characters');

/** A URL a browser app runs at: https, or http on this machine (a developer's app). */
const appUrl = z
  .url({ protocol: /^https?$/, error: 'a URL' })
  .max(500)
  .refine((u) => u.startsWith('https://') || /^http:\/\/(localhost|127\.0\.0\.1)(:\d+)?(\/|$)/.test(u), {
    error: 'https, or http on localhost only',
  });

const state = z.enum(Object.keys(US_STATES) as [UsState, ...UsState[]], {
  error: (issue) => `not a US state code (two letters, e.g. CA): ${JSON.stringify(issue.input)}`,
});

const day = z.enum(['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun']);
const time = z.string().regex(/^(([01]\d|2[0-3]):[0-5]\d|24:00)$/, 'a wall-clock time HH:MM (00:00 to 24:00)');
const date = z.iso.date({ error: 'a date YYYY-MM-DD' });

const name = z
  .object({
    prefix: z.string().min(1).max(20).optional(),
    given: z.string().min(1).max(100),
    family: z.string().min(1).max(100),
  })
  .strict();

const person = {
  name,
  email: z.email({ error: 'an e-mail address' }).max(200),
  /**
   * Her first password, from this environment variable (a clinic that hands passwords out itself);
   * without it Medplum's invitation e-mail lets her set one (Medplum must be able to send e-mail).
   */
  passwordEnv: envName.optional(),
};

export const ClinicAgreementSchema = z
  .object({
    key: key('an agreement key'),
    /** The agreement's identity across versions; each version's text is published at `<url>/<version>.html`. */
    url: https,
    category: z.enum(AgreementCategorySchema.options),
    title: z.string().min(1).max(200),
    required: z.boolean(),
    /** Only for patients living in this state. */
    state: state.optional(),
    /** What withdrawing it costs her, in words she reads before she withdraws. */
    withdrawalConsequence: z.string().min(1).max(500).optional(),
    /**
     * Its versions, each a file beside this one (HTML, Markdown, text or PDF) stored with it, never
     * changed once published: a new text is a new version. The latest published counts.
     */
    versions: z
      .array(
        z
          .object({
            version: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'a version: letters, digits, dot, hyphen, underscore'),
            published: date,
            document: z.string().min(1).max(300),
          })
          .strict(),
      )
      .min(1),
  })
  .strict();

export const ClinicQueueSchema = z
  .object({
    key: key('a queue key'),
    name: z.string().min(1).max(100),
    /** The kinds of work it receives. */
    work: z.array(z.enum(CLINICIAN_WORK_KINDS)).default([]),
    /** Receives every kind of work no queue of its tenant names (at most one per tenant). */
    default: z.boolean().default(false),
  })
  .strict();

export const ClinicClinicianSchema = z
  .object({
    key: key('a clinician key'),
    ...person,
    /** The queues (keys) whose work she takes, releases and hands over. */
    queues: z.array(key('a queue key')).min(1),
  })
  .strict();

export const ClinicHoursSchema = z.union([
  z.object({ days: z.array(day).min(1), start: time, end: time }).strict(),
  z.object({ days: z.array(day).min(1), allDay: z.literal(true) }).strict(),
]);

export const ClinicVisitPractitionerSchema = z
  .object({
    key: key('a practitioner key'),
    ...person,
    /** Where she may see patients (her licences): a subset of her tenant's states. */
    licensedIn: z.array(state).min(1),
    /** Her hours are wall-clock times here (an IANA zone, e.g. America/Los_Angeles). */
    timeZone: z.string().min(1).max(60),
    hours: z.array(ClinicHoursSchema).min(1),
    /** Days she does not work (holidays, leave): whole local days, `from` to `to` inclusive. */
    away: z
      .array(z.object({ from: date, to: date.optional(), reason: z.string().min(1).max(200) }).strict())
      .default([]),
  })
  .strict();

export const ClinicTenantSchema = z
  .object({
    key: key('a tenant key'),
    name: z.string().min(1).max(100),
    patientApp: z
      .object({
        redirectUris: z.array(appUrl).default([]),
        corsOrigins: z.array(appUrl).default([]),
      })
      .strict(),
    /** The states it serves: where its clinicians may treat and its protocols are offered. */
    states: z.array(state).min(1),
    programs: z
      .array(z.enum(PROGRAMS, { error: `not one of the platform's programs (${PROGRAMS.join(', ')})` }))
      .default([]),
    agreements: z.array(ClinicAgreementSchema).default([]),
    queues: z.array(ClinicQueueSchema).min(1),
    clinicians: z.array(ClinicClinicianSchema).default([]),
    visitPractitioners: z.array(ClinicVisitPractitionerSchema).default([]),
    /**
     * Its own servers that read its patients' records (what its webhooks name): each a client (client
     * credentials) provisioning makes, reading this tenant only; its id and secret go to `--out`.
     */
    backends: z.array(z.object({ key: key('a backend key'), name: z.string().min(1).max(100) }).strict()).default([]),
    /** Where its patients' events are delivered, signed with the secret in `secretEnv`. */
    webhook: z
      .object({
        url: z.string().refine(allowedWebhookEndpoint, {
          error: 'an https:// URL without credentials (http only to this machine)',
        }),
        secretEnv: envName,
        /** The event types it takes; without it, every type (the OpenAPI document's `webhooks`). */
        events: z.array(z.enum(WEBHOOK_EVENT_TYPES)).min(1).optional(),
      })
      .strict()
      .optional(),
  })
  .strict();

export const ClinicSchema = z
  .object({
    /** The file format's version. */
    clinic: z.literal(1),
    /** Agreements of every tenant's patients (a tenant's own required ones replace these). */
    agreements: z.array(ClinicAgreementSchema).default([]),
    tenants: z.array(ClinicTenantSchema).min(1),
  })
  .strict();

export type Clinic = z.output<typeof ClinicSchema>;
export type ClinicTenant = z.output<typeof ClinicTenantSchema>;
export type ClinicAgreement = z.output<typeof ClinicAgreementSchema>;
export type ClinicVisitPractitioner = z.output<typeof ClinicVisitPractitionerSchema>;
export type ClinicClinician = z.output<typeof ClinicClinicianSchema>;

/** The JSON Schema of the clinic file, for editors (what a person writes: defaults are optional). */
export function clinicJsonSchema(): Record<string, unknown> {
  return {
    ...z.toJSONSchema(ClinicSchema, { io: 'input', target: 'draft-2020-12' }),
    $id: 'https://patient-care.example/schemas/clinic.schema.json',
    title: 'A clinic of the Patient Care API (docs/clinic.md)',
  };
}
