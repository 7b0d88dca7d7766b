import { getResourceTypes, getSearchParameters, MEDPLUM_VERSION, protectedResourceTypes } from '@medplum/core';
import type { CapabilityStatement, CapabilityStatementRestResource } from '@medplum/fhirtypes';

/** What the FHIR router serves for every resource type (Medplum's fhir-router routes). */
const INTERACTIONS: CapabilityStatementRestResource['interaction'] = [
  'read',
  'vread',
  'update',
  'patch',
  'delete',
  'history-instance',
  'history-type',
  'create',
  'search-type',
].map((code) => ({ code: code as NonNullable<CapabilityStatementRestResource['interaction']>[number]['code'] }));

let built: { baseUrl: string; statement: CapabilityStatement } | undefined;

/**
 * `GET fhir/R4/metadata`: this server's CapabilityStatement, served without a token as Medplum serves it
 * (packages/server/src/fhir/routes.ts, metadata.ts). Built once from the schema the server loaded: every
 * resource type with the router's interactions and its search parameters. It claims no implementation
 * guide (Medplum's names US Core and Bulk Data, which this embedded server does not implement), and its
 * security names the token endpoint. Access policies still decide what each caller may do.
 */
export function capabilityStatement(baseUrl: string): CapabilityStatement {
  if (built?.baseUrl === baseUrl) {
    return built.statement;
  }
  const statement: CapabilityStatement = {
    resourceType: 'CapabilityStatement',
    id: 'embedded-medplum',
    name: 'EmbeddedMedplumCapabilityStatement',
    title: 'Embedded Medplum-compatible server',
    status: 'active',
    date: new Date().toISOString(),
    kind: 'instance',
    software: { name: 'Embedded Medplum (Patient Care API)', version: MEDPLUM_VERSION },
    implementation: { description: 'Embedded Medplum-compatible FHIR server', url: `${baseUrl}fhir/R4` },
    fhirVersion: '4.0.1',
    format: ['json'],
    patchFormat: ['application/json-patch+json'],
    rest: [
      {
        mode: 'server',
        security: {
          cors: true,
          service: [
            { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/restful-security-service', code: 'OAuth' }] },
          ],
          extension: [
            {
              url: 'http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris',
              extension: [{ url: 'token', valueUri: `${baseUrl}oauth2/token` }],
            },
          ],
        },
        interaction: [{ code: 'transaction' }, { code: 'batch' }],
        resource: getResourceTypes()
          // Login, JsonWebKey... are the server's own: never served over FHIR to anyone but a super admin.
          .filter((type) => !protectedResourceTypes.includes(type))
          .sort()
          .map((type) => ({
            type,
            interaction: INTERACTIONS,
            searchParam: Object.values(getSearchParameters(type) ?? {}).map((param) => ({
              name: param.code as string,
              definition: param.url,
              type: param.type as NonNullable<CapabilityStatementRestResource['searchParam']>[number]['type'],
            })),
          })),
      },
    ],
  };
  built = { baseUrl, statement };
  return statement;
}
