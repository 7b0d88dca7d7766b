/**
 * The platform's definition, by concern: the shape of a definition (shape.ts), each role's access policy
 * (policies/: the patient's, the clinician's, the bots'), the bots and subscriptions with their access
 * (platform.ts), and a tenant's resources (tenants.ts). Applied by `applyDefinition` (apply.ts).
 */

export { platformDefinition } from './platform';
export { CATALOG_TYPES } from './policies/common';
export { agreementReads } from './policies/patient';
export * from './shape';
export { tenantResources } from './tenants';
