import {
  array,
  boolean,
  coerce,
  enum as enumOf,
  literal,
  number,
  object,
  record,
  string,
  union,
  unknown,
  ZodType,
} from 'zod';

/**
 * `@hono/zod-openapi` as a bot bundle would take it (test/bench/bot-start.ts aliases it here for the zod
 * variant of the bench): zod's own constructors, by name, so that esbuild leaves out what the contracts
 * never call (`z` as a namespace keeps all of zod, its 40 locales included: 750 KB); the OpenAPI metadata,
 * which validation never reads, is dropped; a route is its definition.
 */
// Assigned, not defined: zod copies a prototype's enumerable members onto each instance it makes.
Object.assign(ZodType.prototype, {
  openapi(this: ZodType): ZodType {
    return this;
  },
});

export const z = { array, boolean, coerce, enum: enumOf, literal, number, object, record, string, union, unknown };

export const createRoute = <R>(route: R): R => route;
