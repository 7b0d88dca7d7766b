import { z } from '@hono/zod-openapi';

export const BEARER = 'patientToken';
export const secured = [{ [BEARER]: [] }];

export const FHIR_JSON = 'application/fhir+json';

/** An open FHIR resource: the record plane passes FHIR through; only the fields we check are described. */
export const FhirResourceSchema = z
  .object({
    resourceType: z.string().openapi({ example: 'Observation' }),
    id: z.string().optional(),
    meta: z.record(z.string(), z.unknown()).optional(),
  })
  .catchall(z.unknown())
  .openapi('FhirResource', { description: 'A FHIR R4 resource (see hl7.org/fhir/R4).' });

export const ResourceTypeParam = z
  .string()
  .regex(/^[A-Z][A-Za-z]+$/)
  .openapi({ param: { name: 'type', in: 'path' }, example: 'Observation', description: 'A FHIR R4 resource type.' });

export const IdParam = z
  .string()
  .regex(/^[A-Za-z0-9\-.]{1,64}$/)
  .openapi({
    param: { name: 'id', in: 'path' },
    example: '0d2c8a57-5b0e-4b4c-9a45-5bfe8c1a5f3e',
    description: 'Resource id.',
  });

/**
 * The years a date or instant given to the API may name: 1900 to 2199 (the pattern says it, so the bots'
 * inputs, built from the same contracts, are bounded alike). A year outside it is a 400 naming the parameter,
 * never a calendar of centuries.
 */
export const YEAR_SPAN = { first: 1900, last: 2199 } as const;
const YEAR = '(19|20|21)\\d{2}';
const DAY = '(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])';
const TIME = 'T([01]\\d|2[0-3]):[0-5]\\d(:[0-5]\\d(\\.\\d{1,9})?)?(Z|[+-]([01]\\d|2[0-3]):[0-5]\\d)';
/** A date, `YYYY-MM-DD`, within YEAR_SPAN. */
export const DATE_PATTERN = new RegExp(`^${YEAR}-${DAY}$`);
/** An instant with its offset, `YYYY-MM-DDThh:mm[:ss[.fff]]±hh:mm|Z`, within YEAR_SPAN. */
export const INSTANT_PATTERN = new RegExp(`^${YEAR}-${DAY}${TIME}$`);
/** Whether a date or instant's calendar date exists (`2026-02-30` does not; JavaScript's Date would roll it over). */
export function onTheCalendar(value: string): boolean {
  const [year, month, day] = value.slice(0, 10).split('-').map(Number);
  const date = new Date(Date.UTC(year as number, (month as number) - 1, day as number));
  return date.getUTCMonth() === (month as number) - 1 && date.getUTCDate() === day;
}

/** A date or an instant, within YEAR_SPAN. */
export const DATE_OR_INSTANT_PATTERN = new RegExp(`^${YEAR}-${DAY}(${TIME})?$`);

/**
 * Text a FHIR `string` can hold (Medplum's validator refuses the rest), at most `max` characters:
 * something besides whitespace, and no control character but tab and line breaks.
 */
export const fhirText = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .regex(
      // biome-ignore lint/suspicious/noControlCharactersInRegex: naming the control characters refused is the point (no `u` flag: bots check this pattern as JSON Schema).
      /^(?=[\s\S]*\S)[^\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]*$/,
      'text, not only whitespace, without control characters',
    );
