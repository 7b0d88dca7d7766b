import type { BotInput, BotName } from '../../contracts/bot-inputs';
import { fail } from './result';

/**
 * The subset of JSON Schema that `z.toJSONSchema` produces for contracts/bot-inputs.ts. The bot build
 * refuses a schema that uses anything else (scripts/bot-build.ts `assertSupportedSchema`), so this
 * checker can never silently accept what the contract refuses.
 */
export interface JsonSchema {
  type?: 'object' | 'array' | 'string' | 'boolean' | 'number' | 'integer' | 'null';
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  minItems?: number;
  maxItems?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  enum?: unknown[];
  const?: unknown;
  anyOf?: JsonSchema[];
  minimum?: number;
  maximum?: number;
}

export const SUPPORTED_SCHEMA_KEYWORDS = new Set([
  '$schema',
  'description',
  'type',
  'properties',
  'required',
  'additionalProperties',
  'items',
  'minItems',
  'maxItems',
  'minLength',
  'maxLength',
  'pattern',
  'enum',
  'const',
  'anyOf',
  'minimum',
  'maximum',
]);

/** Set at build time: every bot's input schema, from contracts/bot-inputs.ts. */
declare const BOT_INPUT_SCHEMAS: Record<BotName, JsonSchema>;

export interface InputIssue {
  path: string;
  message: string;
}

const MAX_ISSUES = 20;

/** Validates a bot's input against its contract: the value, or a 400 `invalid_request` with the issues. */
export function readInput<N extends BotName>(
  name: N,
  input: unknown,
): { ok: true; value: BotInput<N> } | ReturnType<typeof fail> {
  const issues = checkSchema(BOT_INPUT_SCHEMAS[name], input);
  if (issues.length > 0) {
    return fail(400, 'invalid_request', 'The input is not valid', { issues });
  }
  return { ok: true, value: input as BotInput<N> };
}

export function checkSchema(schema: JsonSchema, value: unknown): InputIssue[] {
  const issues: InputIssue[] = [];
  check(schema, value, '', issues);
  return issues.slice(0, MAX_ISSUES);
}

function check(schema: JsonSchema, value: unknown, path: string, issues: InputIssue[]): void {
  if (issues.length >= MAX_ISSUES) {
    return;
  }
  const add = (message: string) => issues.push({ path, message });
  if (schema.anyOf) {
    if (!schema.anyOf.some((option) => checkSchema(option, value).length === 0)) {
      add('matches none of the allowed forms');
    }
    return;
  }
  if ('const' in schema && value !== schema.const) {
    add(`must be ${JSON.stringify(schema.const)}`);
    return;
  }
  if (schema.enum && !schema.enum.includes(value)) {
    add(`must be one of ${schema.enum.map((v) => JSON.stringify(v)).join(', ')}`);
    return;
  }
  if (schema.type && !hasType(schema.type, value)) {
    add(`must be ${schema.type === 'array' || schema.type === 'object' ? 'an' : 'a'} ${schema.type}`);
    return;
  }
  if (typeof value === 'string') {
    if (schema.minLength !== undefined && value.length < schema.minLength) {
      add(`must have at least ${schema.minLength} characters`);
    } else if (schema.maxLength !== undefined && value.length > schema.maxLength) {
      add(`must have at most ${schema.maxLength} characters`);
    } else if (schema.pattern !== undefined && !new RegExp(schema.pattern).test(value)) {
      add('has the wrong format');
    }
  } else if (typeof value === 'number') {
    if (schema.minimum !== undefined && value < schema.minimum) {
      add(`must be at least ${schema.minimum}`);
    } else if (schema.maximum !== undefined && value > schema.maximum) {
      add(`must be at most ${schema.maximum}`);
    }
  } else if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) {
      add(`must have at least ${schema.minItems} items`);
    } else if (schema.maxItems !== undefined && value.length > schema.maxItems) {
      add(`must have at most ${schema.maxItems} items`);
    } else if (schema.items) {
      for (let i = 0; i < value.length; i++) {
        check(schema.items, value[i], join(path, String(i)), issues);
      }
    }
  } else if (isObject(value)) {
    checkObject(schema, value, path, issues);
  }
}

function checkObject(schema: JsonSchema, value: Record<string, unknown>, path: string, issues: InputIssue[]): void {
  for (const name of schema.required ?? []) {
    if (value[name] === undefined) {
      issues.push({ path: join(path, name), message: 'is required' });
    }
  }
  for (const [name, child] of Object.entries(value)) {
    const property = schema.properties && Object.hasOwn(schema.properties, name) ? schema.properties[name] : undefined;
    if (property) {
      if (child !== undefined) {
        check(property, child, join(path, name), issues);
      }
    } else if (schema.additionalProperties === false) {
      issues.push({ path: join(path, name), message: 'is not allowed' });
    } else if (typeof schema.additionalProperties === 'object') {
      check(schema.additionalProperties, child, join(path, name), issues);
    }
    if (issues.length >= MAX_ISSUES) {
      return;
    }
  }
}

function hasType(type: NonNullable<JsonSchema['type']>, value: unknown): boolean {
  switch (type) {
    case 'object':
      return isObject(value);
    case 'array':
      return Array.isArray(value);
    case 'integer':
      return Number.isInteger(value);
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'null':
      return value === null;
    default:
      return typeof value === type;
  }
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Paths echo the caller's own keys: bounded, so a hostile key cannot make the answer huge. */
const join = (path: string, name: string): string => (path ? `${path}.${name}` : name).slice(0, 200);
