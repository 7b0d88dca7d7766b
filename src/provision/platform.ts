import { ELIGIBILITY_ENGINE_VERSION, SYSTEMS, TENANT_PARAMETER } from '../../contracts/systems';
import { acceptAgreements, readDocument, withdrawAgreement } from './bots/agreements';
import { accessLog, withOwnAuditTrail } from './bots/audit';
import { edgeKeyCheck, gatewayIntegration, gatewayIntegrationAccess } from './bots/gateway';
import { patientHome, reconcile, smsIntegrationAccess, smsOptOut } from './bots/housekeeping';
import { completeTask, enrollment, requestReview, startAssessment } from './bots/intake';
import { sendMessage } from './bots/messages';
import { composeOffer, decideOrder, eligibility } from './bots/spine';
import { appointments, availability, materializeSlots, visitCompletion, visitReview } from './bots/visits';
import { webhookReplay, webhooks, webhookTest } from './bots/webhooks';
import { tenantBackendPolicy } from './policies/backend';
import { clinicianPolicy } from './policies/clinician';
import { patientPolicy } from './policies/patient';
import type { ProvisionDefinition } from './shape';
import { platformSubscriptions } from './subscriptions';

/**
 * The platform's project: its access policies (the patient's and the clinician's in policies/, each bot's
 * with the bot in bots/, one file per family), its bots, what wakes them (subscriptions.ts; a tenant's
 * webhooks, bots/webhooks.ts, from its Organization), and the
 * resources every tenant shares. Tenants are tenants.ts; demo data is demo.ts. The order here is the
 * order provisioning applies them.
 */
export const platformDefinition: ProvisionDefinition = {
  project: {
    // WebSocket subscriptions: Medplum's Provider app's live chat and counters (docs/messages.md).
    features: ['bots', 'transaction-bundles', 'cron', 'websocket-subscriptions'],
    defaultPatientAccessPolicy: 'patient',
  },
  // Each bot keeps its own audit trail of what it reads and changes (bots/audit.ts), as members do.
  accessPolicies: [
    { key: 'patient', policy: { name: 'Patient (default)', resource: patientPolicy() } },
    {
      key: 'clinician',
      policy: {
        name: 'Clinician',
        // What she creates about nobody (the Provider app's answers to a work form name no patient) is
        // filed in her tenant: Medplum stamps the policy's compartment as the account of what a member
        // creates (packages/server/src/fhir/repo.ts getAccounts), beside the accounts of the patients it names.
        compartment: { reference: `%${TENANT_PARAMETER}` },
        resource: clinicianPolicy(),
      },
    },
    // A tenant's backend reads its tenant's patients' records (a clinic's `backends`), nothing else.
    { key: 'tenant-backend', policy: { name: 'Tenant backend (reads its tenant)', resource: tenantBackendPolicy() } },
    readDocument.access,
    acceptAgreements.access,
    smsOptOut.access,
    reconcile.access,
    withdrawAgreement.access,
    patientHome.access,
    startAssessment.access,
    completeTask.access,
    requestReview.access,
    sendMessage.access,
    eligibility.access,
    composeOffer.access,
    enrollment.access,
    materializeSlots.access,
    availability.access,
    appointments.access,
    visitReview.access,
    visitCompletion.access,
    decideOrder.access,
    webhooks.access,
    webhookTest.access,
    webhookReplay.access,
    accessLog.access,
    smsIntegrationAccess,
    edgeKeyCheck.access,
    gatewayIntegrationAccess,
  ].map((policy) => (policy.key.startsWith('bot-') ? withOwnAuditTrail(policy) : policy)),
  bots: [
    acceptAgreements.bot,
    readDocument.bot,
    withdrawAgreement.bot,
    startAssessment.bot,
    completeTask.bot,
    requestReview.bot,
    sendMessage.bot,
    enrollment.bot,
    visitReview.bot,
    visitCompletion.bot,
    appointments.bot,
    availability.bot,
    decideOrder.bot,
    eligibility.bot,
    composeOffer.bot,
    smsOptOut.bot,
    reconcile.bot,
    materializeSlots.bot,
    patientHome.bot,
    webhooks.bot,
    webhookTest.bot,
    webhookReplay.bot,
    accessLog.bot,
    edgeKeyCheck.bot,
  ],
  subscriptions: platformSubscriptions,
  resources: [
    {
      key: 'device-eligibility-engine',
      resource: {
        resourceType: 'Device',
        identifier: [{ system: SYSTEMS.device, value: 'eligibility-engine' }],
        status: 'active',
        deviceName: [{ name: 'Patient Care eligibility engine', type: 'user-friendly-name' }],
        version: [{ value: ELIGIBILITY_ENGINE_VERSION }],
      },
    },
    {
      key: 'integration-sms',
      resource: {
        resourceType: 'ClientApplication',
        name: 'SMS integration',
        description: 'Writes inbound SMS as Communications (category inbound-sms); its STOP replies opt patients out.',
        meta: { tag: [{ system: SYSTEMS.integration, code: 'sms' }] },
      },
    },
    gatewayIntegration,
  ],
  integrations: [
    { key: 'integration-sms', accessPolicy: 'integration-sms' },
    { key: 'integration-gateway', accessPolicy: 'integration-gateway' },
  ],
};
