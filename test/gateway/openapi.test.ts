import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PlanDefinition } from '@medplum/fhirtypes';
import { compileErrors, validate } from '@readme/openapi-parser';
import { describe, expect, it } from 'vitest';
import { ERROR_STATUS } from '../../contracts/errors';
import { createApp, DEFAULT_LIMITS } from '../../src/app';
import { demoCatalog } from '../../src/provision/catalog';
import { openApiDocument } from '../../src/routes/docs';

/** The document exactly as GET /v1/openapi.json serves it (no backend needed to generate it). */
function generatedDocument() {
  const app = createApp({
    medplum: { baseUrl: 'http://medplum.test/' },
    issuer: 'http://medplum.test/',
    projectId: 'p',
    limits: DEFAULT_LIMITS,
  });
  return openApiDocument(app);
}

describe('the OpenAPI document', () => {
  it('the record plane documents `{type}` as exactly the types it accepts, and its paging as integers (issue 28)', () => {
    const search = generatedDocument().paths?.['/v1/fhir/{type}']?.get;
    const schemaOf = (name: string) =>
      ((search?.parameters ?? []) as { name: string; schema: { type?: unknown; enum?: string[] } }[]).find(
        (p) => p.name === name,
      )?.schema;
    expect(schemaOf('type')?.enum).toContain('Observation');
    expect(schemaOf('type')?.enum).not.toContain('Observations');
    expect(schemaOf('_count')?.type).toBe('integer');
    expect(schemaOf('_offset')?.type).toBe('integer');
  });

  it('every documented error has a realistic example of its own status (issue 28: all were the same 404)', () => {
    const seen = new Set<string>();
    for (const [path, operations] of Object.entries(generatedDocument().paths ?? {})) {
      for (const [method, operation] of Object.entries(operations ?? {})) {
        const responses = (
          operation as { responses?: Record<string, { content?: Record<string, { example?: unknown }> }> }
        ).responses;
        for (const [status, response] of Object.entries(responses ?? {})) {
          if (Number(status) < 400) {
            continue;
          }
          const example = response.content?.['application/json']?.example as
            | { error: { code: keyof typeof ERROR_STATUS; details: { requestId?: string } } }
            | undefined;
          expect(example, `${method} ${path} ${status}`).toBeDefined();
          expect(ERROR_STATUS[example?.error.code as keyof typeof ERROR_STATUS], `${method} ${path} ${status}`).toBe(
            Number(status),
          );
          expect(example?.error.details.requestId).toBeDefined();
          seen.add(JSON.stringify(example));
        }
      }
    }
    expect(seen.size).toBeGreaterThanOrEqual(14);
  });

  it('the reference page’s icon is no 404', async () => {
    const app = createApp({
      medplum: { baseUrl: 'http://medplum.test/' },
      issuer: 'http://medplum.test/',
      projectId: 'p',
      limits: DEFAULT_LIMITS,
    });
    expect((await app.request('/favicon.ico')).status).toBe(204);
  });

  it('is OpenAPI 3.1 and valid under a 3.1 validator', async () => {
    const doc = generatedDocument();
    expect(doc.openapi).toBe('3.1.0');
    const result = await validate(structuredClone(doc) as never);
    expect(result.valid, result.valid ? '' : compileErrors(result)).toBe(true);
  });

  it('is clean under Redocly lint (recommended rules, redocly.yaml)', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'pc-openapi-')), 'openapi.json');
    writeFileSync(file, JSON.stringify(generatedDocument()));
    const run = spawnSync(join('node_modules', '.bin', 'redocly'), ['lint', file, '--format=stylish'], {
      encoding: 'utf8',
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    });
    const output = `${run.stdout}${run.stderr}`;
    expect(run.status, output).toBe(0);
    expect(output).toContain('Your API description is valid');
    expect(output).not.toMatch(/\b(warning|error)s?\b/);
  });

  it('every operation has an operationId, a summary and declares its error responses with the envelope', () => {
    const doc = generatedDocument();
    for (const [path, item] of Object.entries(doc.paths ?? {})) {
      for (const [method, op] of Object.entries(
        item as Record<
          string,
          {
            operationId?: string;
            summary?: string;
            responses: Record<string, { content?: Record<string, { schema: { $ref?: string } }> }>;
          }
        >,
      )) {
        expect(op.operationId, `${method} ${path}`).toMatch(/^[a-z]+\.[a-zA-Z]+$/);
        expect(op.summary, `${method} ${path}`).toBeTruthy();
        expect(Object.keys(op.responses), `${method} ${path}`).toContain('500');
        for (const [status, response] of Object.entries(op.responses)) {
          if (Number(status) >= 400) {
            expect(response.content?.['application/json']?.schema.$ref, `${method} ${path} ${status}`).toBe(
              '#/components/schemas/Error',
            );
          }
        }
      }
    }
    const errorSchema = doc.components?.schemas?.Error as {
      properties: {
        error: {
          required: string[];
          properties: { code: { enum: string[] }; details: { required: string[] } };
        };
      };
    };
    const codes = errorSchema.properties.error.properties.code.enum;
    expect(codes.sort()).toEqual(Object.keys(ERROR_STATUS).sort());
    // DESIGN section 4's envelope is {code, message, details}, and every details names its request.
    expect(errorSchema.properties.error.required.sort()).toEqual(['code', 'details', 'message']);
    expect(errorSchema.properties.error.properties.details.required).toEqual(['requestId']);
  });

  it('the protocol example of GET /v1/agreements/requirements is an assessment canonical the demo publishes', () => {
    const doc = generatedDocument();
    const parameters = (doc.paths?.['/v1/agreements/requirements']?.get?.parameters ?? []) as {
      name: string;
      schema: { example?: string };
    }[];
    const example = parameters.find((p) => p.name === 'protocol')?.schema.example;
    const published = demoCatalog()
      .map(({ resource }) => resource)
      .filter((r): r is PlanDefinition => r.resourceType === 'PlanDefinition')
      .map((plan) => `${plan.url}|${plan.version}`);
    expect(published).toContain(example);
  });
});
