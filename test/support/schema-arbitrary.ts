import fc from 'fast-check';

/** A JSON Schema as the OpenAPI 3.1 document writes them (the keywords this project's contracts produce). */
export interface Schema {
  $ref?: string;
  type?: string | string[];
  const?: unknown;
  enum?: unknown[];
  oneOf?: Schema[];
  anyOf?: Schema[];
  allOf?: Schema[];
  pattern?: string;
  format?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  items?: Schema;
  minItems?: number;
  maxItems?: number;
  properties?: Record<string, Schema>;
  required?: string[];
  example?: unknown;
}

/** Deeper than this, optional properties are left out and arrays kept empty where allowed. */
const MAX_DEPTH = 4;

/**
 * The project's own document-driven generator: a fast-check arbitrary of the values a schema admits,
 * written from the schema alone (`resolve` follows `$ref`s into the document's components). Documented
 * examples are among the values, so realistic requests are drawn as well as odd-but-valid ones.
 */
export function arbitraryOf(schema: Schema, resolve: (ref: string) => Schema, depth = 0): fc.Arbitrary<unknown> {
  if (schema.$ref) {
    return arbitraryOf(resolve(schema.$ref), resolve, depth);
  }
  const drawn = drawnFrom(schema, resolve, depth);
  return schema.example === undefined ? drawn : fc.oneof(fc.constant(schema.example), drawn);
}

function drawnFrom(schema: Schema, resolve: (ref: string) => Schema, depth: number): fc.Arbitrary<unknown> {
  if (schema.const !== undefined) {
    return fc.constant(schema.const);
  }
  if (schema.enum) {
    return fc.constantFrom(...schema.enum);
  }
  const branches = schema.oneOf ?? schema.anyOf;
  if (branches) {
    return fc.oneof(...branches.map((branch) => arbitraryOf(branch, resolve, depth)));
  }
  if (schema.allOf) {
    return arbitraryOf(Object.assign({}, ...schema.allOf.map((s) => (s.$ref ? resolve(s.$ref) : s))), resolve, depth);
  }
  if (Array.isArray(schema.type)) {
    return fc.oneof(...schema.type.map((type) => arbitraryOf({ ...schema, type, example: undefined }, resolve, depth)));
  }
  switch (schema.type) {
    case 'null':
      return fc.constant(null);
    case 'boolean':
      return fc.boolean();
    case 'integer':
      return fc.integer({ min: schema.minimum ?? -1_000, max: schema.maximum ?? 1_000 });
    case 'number':
      return fc.double({ min: schema.minimum ?? -1e6, max: schema.maximum ?? 1e6, noNaN: true });
    case 'string':
      return stringOf(schema);
    case 'array': {
      const minLength = schema.minItems ?? 0;
      const maxLength = Math.min(schema.maxItems ?? 3, depth >= MAX_DEPTH ? minLength : minLength + 3);
      return fc.array(arbitraryOf(schema.items ?? {}, resolve, depth + 1), { minLength, maxLength });
    }
    case 'object':
    case undefined: {
      if (!schema.properties) {
        return schema.type === 'object' ? fc.constant({}) : fc.jsonValue();
      }
      const required = new Set(schema.required ?? []);
      const keys = Object.keys(schema.properties).filter((key) => required.has(key) || depth < MAX_DEPTH);
      return fc.record(
        Object.fromEntries(keys.map((key) => [key, arbitraryOf(schema.properties?.[key] ?? {}, resolve, depth + 1)])),
        { requiredKeys: keys.filter((key) => required.has(key)) },
      );
    }
    default:
      throw new Error(`the generator does not know the schema type ${String(schema.type)}`);
  }
}

function stringOf(schema: Schema): fc.Arbitrary<string> {
  const minLength = schema.minLength ?? 0;
  // A pattern bounds its strings itself; a plain string is kept short unless the schema says otherwise.
  const maxLength = schema.maxLength ?? (schema.pattern ? Number.POSITIVE_INFINITY : 40);
  const fits = (s: string) => s.length >= minLength && s.length <= maxLength;
  if (schema.pattern) {
    // fast-check draws from a pattern without lookarounds; those are then checked on what it drew.
    const pattern = new RegExp(schema.pattern);
    const drawable = schema.pattern.replace(/\(\?<?[=!](?:[^()\\]|\\.)*\)/g, '');
    return fc.stringMatching(new RegExp(drawable)).filter((s) => fits(s) && pattern.test(s));
  }
  switch (schema.format) {
    case 'date-time':
      return fc
        .date({ min: new Date('2000-01-01'), max: new Date('2100-01-01'), noInvalidDate: true })
        .map((d) => d.toISOString());
    case 'date':
      return fc
        .date({ min: new Date('1900-01-01'), max: new Date('2100-01-01'), noInvalidDate: true })
        .map((d) => d.toISOString().slice(0, 10));
    case 'uri':
    case 'url':
      return fc.webUrl();
    case 'email':
      return fc.emailAddress();
    default:
      return fc.string({ minLength, maxLength: Math.min(maxLength, minLength + 40) });
  }
}
