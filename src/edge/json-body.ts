import type { MiddlewareHandler } from 'hono';
import type { AppEnv } from '../app-env';
import { ApiError } from '../errors';
import { MAX_JSON_DEPTH, nestedDeeperThan } from '../shared/json-depth';

const JSON_TYPE = /^application\/([\w.+-]+\+)?json$/;

/**
 * A JSON body checked before any route sees it: it must be UTF-8 (a stray byte is refused,
 * never stored as a replacement character), and nest at most MAX_JSON_DEPTH levels, so that nothing
 * downstream that walks it recursively (validation, serialising it for Medplum) can run out of stack: a
 * 400 naming what is wrong, not a 500. Malformed JSON is left to the route's validation (its 400). The
 * decoded text is what the route then reads (Hono keeps it), so the body is read once.
 */
export function guardJsonBody(skip: (path: string) => boolean): MiddlewareHandler<AppEnv> {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  return async (c, next) => {
    if (c.req.method === 'GET' || c.req.method === 'HEAD' || skip(c.req.path)) {
      return next();
    }
    const type = c.req.header('content-type')?.split(';')[0]?.trim().toLowerCase() ?? '';
    if (!JSON_TYPE.test(type)) {
      return next();
    }
    let text: string;
    try {
      text = decoder.decode(await c.req.arrayBuffer());
    } catch {
      throw new ApiError('invalid_request', 'The body is not valid UTF-8', {
        issues: [{ path: '', message: 'not valid UTF-8' }],
      });
    }
    (c.req.bodyCache as Record<string, unknown>).text = Promise.resolve(text);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return next();
    }
    if (nestedDeeperThan(parsed, MAX_JSON_DEPTH)) {
      throw new ApiError('invalid_request', `The body nests deeper than ${MAX_JSON_DEPTH} levels`, {
        issues: [{ path: '', message: `nested deeper than ${MAX_JSON_DEPTH} levels` }],
      });
    }
    return next();
  };
}
