import type { DocumentReference, Organization } from '@medplum/fhirtypes';
import type { AgreementCategory } from '../../bots/lib/agreement-rules';
import { CATALOG, EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import type { KeyedResource } from './definition';
import { keyRef } from './definition';

export interface AgreementSpec {
  key: string;
  url: string;
  version: string;
  category: AgreementCategory;
  title: string;
  /** ISO 3166-2, e.g. US-CA. */
  jurisdiction?: string;
  required: boolean;
  /** Tenant key; absent for the platform baseline. */
  tenant?: string;
  /** Publication day (YYYY-MM-DD) or instant; stored as the instant DocumentReference.date requires. */
  published: string;
  withdrawalConsequence?: string;
  /** Its text, stored with the version (a clinic file's document): fixed once published, its hash provable. */
  text?: AgreementText;
}

/** An agreement version's text as FHIR's Attachment holds it (base64 data, SHA-1 hash in base64, size). */
export interface AgreementText {
  contentType: string;
  data: string;
  hash: string;
  size: number;
}

/** Publishes a catalog item to every tenant's patients (the patient policy grants exactly this tag). */
export const PLATFORM_CATALOG_TAG = { system: CATALOG.system, code: CATALOG.platform };
/** Publishes a catalog item to the patients of the tenant whose account it carries. */
export const TENANT_CATALOG_TAG = { system: CATALOG.system, code: CATALOG.tenant };

/**
 * One published agreement version as a write-once DocumentReference (how it is encoded is documented
 * in the README): pinned `url|version` in masterIdentifier, the agreement url in identifier, the
 * category, where it applies, whether it is required and what withdrawing it costs as data, and the
 * text only linked through content.attachment.url.
 */
export function agreementDocument(spec: AgreementSpec): KeyedResource {
  const extension: NonNullable<DocumentReference['extension']> = [
    { url: EXTENSIONS.agreementRequired, valueBoolean: spec.required },
  ];
  if (spec.jurisdiction) {
    extension.push({
      url: EXTENSIONS.agreementJurisdiction,
      valueCodeableConcept: { coding: [{ system: SYSTEMS.jurisdiction, code: spec.jurisdiction }] },
    });
  }
  if (spec.withdrawalConsequence) {
    extension.push({ url: EXTENSIONS.agreementWithdrawalConsequence, valueString: spec.withdrawalConsequence });
  }
  const resource: DocumentReference = {
    resourceType: 'DocumentReference',
    meta: spec.tenant
      ? { accounts: [keyRef<Organization>(`org-${spec.tenant}`)], tag: [TENANT_CATALOG_TAG] }
      : { tag: [PLATFORM_CATALOG_TAG] },
    masterIdentifier: { system: SYSTEMS.agreementVersion, value: `${spec.url}|${spec.version}` },
    identifier: [{ system: SYSTEMS.agreement, value: spec.url }],
    status: 'current',
    docStatus: 'final',
    type: { text: 'Agreement' },
    category: [{ coding: [{ system: SYSTEMS.agreementCategory, code: spec.category }] }],
    date: asInstant(spec.published),
    description: spec.title,
    custodian: spec.tenant ? keyRef<Organization>(`org-${spec.tenant}`) : undefined,
    extension,
    content: [
      {
        attachment: {
          contentType: spec.text?.contentType ?? 'text/html',
          url: `${spec.url}/${spec.version}${spec.text ? extensionOf(spec.text.contentType) : '.html'}`,
          title: spec.title,
          ...(spec.text ? { data: spec.text.data, hash: spec.text.hash, size: spec.text.size } : {}),
        },
      },
    ],
  };
  return { key: spec.key, resource, writeOnce: true };
}

const extensionOf = (contentType: string): string =>
  ({ 'text/html': '.html', 'text/markdown': '.md', 'text/plain': '.txt', 'application/pdf': '.pdf' })[contentType] ??
  '';

/** DocumentReference.date is a FHIR `instant`: a publication day is its first moment, UTC. */
function asInstant(published: string): string {
  return /^\d{4}-\d{2}-\d{2}$/.test(published) ? `${published}T00:00:00.000Z` : published;
}

const BASE = 'https://patient-care.example/agreements';

/** The demo catalog of agreements: baseline, a tenant's own set, regional and optional agreements. */
export const DEMO_AGREEMENTS: AgreementSpec[] = [
  {
    key: 'agreement-terms-v1',
    url: `${BASE}/terms`,
    version: '2026-01',
    category: 'terms',
    title: 'Terms of use',
    required: true,
    published: '2026-01-01',
    withdrawalConsequence:
      'Without the terms of use the platform cannot provide any service: assessments, visits and treatment stop.',
  },
  {
    key: 'agreement-privacy-v1',
    url: `${BASE}/privacy`,
    version: '2026-01',
    category: 'privacy',
    title: 'Privacy notice',
    required: true,
    published: '2026-01-01',
    withdrawalConsequence: 'Without the privacy notice no health data can be processed: all services stop.',
  },
  {
    key: 'agreement-privacy-ca-v1',
    url: `${BASE}/privacy-california`,
    version: '2026-02',
    category: 'privacy',
    title: 'California privacy notice (CCPA/CMIA)',
    jurisdiction: 'US-CA',
    required: true,
    published: '2026-02-01',
    withdrawalConsequence: 'Without the California privacy notice no health data can be processed: all services stop.',
  },
  {
    key: 'agreement-telehealth-tx-v1',
    url: `${BASE}/telehealth-texas`,
    version: '2026-01',
    category: 'state-specific',
    title: 'Texas telehealth consent',
    jurisdiction: 'US-TX',
    required: true,
    published: '2026-01-15',
    withdrawalConsequence: 'Texas law requires this consent for telehealth: visits stop.',
  },
  {
    key: 'agreement-sms-v1',
    url: `${BASE}/sms`,
    version: '2026-01',
    category: 'sms',
    title: 'Text message reminders',
    required: false,
    published: '2026-01-01',
  },
  {
    key: 'agreement-voice-v1',
    url: `${BASE}/voice`,
    version: '2026-01',
    category: 'voice',
    title: 'Voice calls',
    required: false,
    published: '2026-01-01',
  },
  {
    key: 'agreement-northwind-terms-v1',
    url: `${BASE}/northwind/terms`,
    version: '3',
    category: 'terms',
    title: 'Northwind Health terms',
    tenant: 'northwind',
    required: true,
    published: '2026-01-10',
    withdrawalConsequence: 'Northwind Health cannot provide care without its terms.',
  },
  {
    key: 'agreement-northwind-privacy-v1',
    url: `${BASE}/northwind/privacy`,
    version: '3',
    category: 'privacy',
    title: 'Northwind Health privacy notice',
    tenant: 'northwind',
    required: true,
    published: '2026-01-10',
    withdrawalConsequence: 'Northwind Health cannot process health data without its privacy notice.',
  },
  {
    key: 'agreement-weight-program-v1',
    url: `${BASE}/weight-program`,
    version: '1',
    category: 'program',
    title: 'Weight-management assessment consent',
    required: false,
    published: '2026-01-20',
    withdrawalConsequence: 'The weight-management assessment cannot continue.',
  },
];
