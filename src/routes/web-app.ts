import type { App } from '../app-env';
import { ApiError } from '../errors';

/** What the reference web app is told at start (`/app/config.json`): where the API is, which patient app it is. */
export interface WebAppConfig {
  /** The gateway's base URL; empty: the origin the page was served from. */
  api: string;
  /** The patient app (a tenant's ClientApplication) she signs up and signs in through. */
  clientId: string;
  /** Its tenant's name, shown on the page. */
  tenant: string;
}

/** The built reference web app (src/web-app-node.ts): its few files by name. */
export interface WebApp {
  files: Record<string, { body: string; contentType: string }>;
}

/**
 * The page's own rules: its script and style from here only, calls to the gateway (here, or `apiOrigin`)
 * and Medplum (where she signs in), her photo's preview from a blob; nothing framed, nothing inline.
 */
export const webAppPolicy = (medplumOrigin: string, apiOrigin?: string) =>
  [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' blob: data:",
    `connect-src 'self' ${medplumOrigin}${apiOrigin ? ` ${new URL(apiOrigin).origin}` : ''}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');

/**
 * `/app/`: the reference patient web app (web/), served by `npm start`'s gateway beside the API. Not on a
 * gateway over a real Medplum (a clinic's patient app is its own; `npm run web-app` serves this one there).
 */
export function registerWebAppRoutes(app: App, webApp: WebApp, medplumOrigin: string): void {
  const policy = webAppPolicy(medplumOrigin);
  app.get('/app', (c) => c.redirect('/app/', 301));
  app.get('/app/:name{[a-z.]*}', (c) => {
    const file = webApp.files[c.req.param('name') || 'index.html'];
    if (!file) {
      throw new ApiError('not_found', 'No such file');
    }
    return c.body(file.body, 200, {
      'Content-Type': file.contentType,
      'Cache-Control': 'no-cache',
      'Content-Security-Policy': policy,
      'X-Content-Type-Options': 'nosniff',
      'Referrer-Policy': 'no-referrer',
    });
  });
}
