/** The example clinic of docs/clinic.md (clinics/example) and the environment it names. */
export const EXAMPLE = 'clinics/example';

const SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
/** The first passwords and the webhook secret the example names. */
export const EXAMPLE_ENV = {
  LAKESIDE_OKAFOR_PASSWORD: 'okafor-first-password',
  LAKESIDE_LINDQVIST_PASSWORD: 'lindqvist-first-password',
  LAKESIDE_MOREAU_PASSWORD: 'moreau-first-password',
  LAKESIDE_WEBHOOK_SECRET: SECRET,
};
