import type { TestGateway } from './gateway';

export interface Operation {
  method: string;
  template: string;
  operationId: string;
  secured: boolean;
  hasBody: boolean;
  /** The request body example the document gives (the guards start from valid input). */
  example?: Record<string, unknown>;
  /** `?…` of the required query parameters, each its documented example ('' when there are none). */
  requiredQuery: string;
}

/** Every operation of the OpenAPI document: the guards iterate these, so new routes are covered. */
export function operationsOf(gw: TestGateway): Operation[] {
  const operations: Operation[] = [];
  for (const [template, item] of Object.entries(gw.doc.paths ?? {})) {
    for (const [method, op] of Object.entries(item as Record<string, RawOperation>)) {
      operations.push({
        method: method.toUpperCase(),
        template,
        operationId: op.operationId ?? `${method} ${template}`,
        secured: Boolean(op.security?.length),
        hasBody: Boolean(op.requestBody),
        example: op.requestBody ? exampleOf(gw, op) : undefined,
        requiredQuery: requiredQueryOf(op),
      });
    }
  }
  return operations;
}

/** A concrete path for an operation, with ids of the given patient's own resources. */
export function concretePath(template: string, values: { type?: string; id: string }): string {
  return template.replace('{type}', values.type ?? 'Patient').replace('{id}', values.id);
}

interface RawOperation {
  operationId?: string;
  security?: unknown[];
  parameters?: { name: string; in: string; required?: boolean; schema?: { example?: unknown }; example?: unknown }[];
  requestBody?: { content: Record<string, { schema: { $ref?: string; example?: Record<string, unknown> } }> };
}

function requiredQueryOf(op: RawOperation): string {
  const query = new URLSearchParams();
  for (const p of op.parameters ?? []) {
    if (p.in === 'query' && p.required) {
      query.set(p.name, String(p.example ?? p.schema?.example ?? ''));
    }
  }
  return query.size > 0 ? `?${query}` : '';
}

function exampleOf(gw: TestGateway, op: RawOperation): Record<string, unknown> | undefined {
  const [media] = Object.values(op.requestBody?.content ?? {});
  const schema = media?.schema;
  if (schema?.$ref) {
    const name = schema.$ref.split('/').pop() as string;
    return (gw.doc.components?.schemas?.[name] as { example?: Record<string, unknown> } | undefined)?.example;
  }
  return schema?.example;
}

/** The documented example with the caller's own ids filled in. */
export function bodyFor(op: Operation, ownId: string): Record<string, unknown> | undefined {
  if (!op.example) {
    return undefined;
  }
  return 'id' in op.example || op.method === 'PUT' ? { ...op.example, id: ownId } : { ...op.example };
}
