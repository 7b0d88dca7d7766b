import type { DocumentReference } from '@medplum/fhirtypes';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';

export const AGREEMENT_CATEGORIES = ['terms', 'privacy', 'sms', 'voice', 'state-specific', 'program'] as const;
export type AgreementCategory = (typeof AGREEMENT_CATEGORIES)[number];

/** One published agreement version, read off its write-once DocumentReference. */
export interface AgreementVersion {
  url: string;
  version: string;
  category: AgreementCategory;
  /** Where the text lives (content.attachment.url): the text is never embedded. */
  sourceUrl: string;
  /** ISO 3166-2 code (US-CA) when it applies to one jurisdiction only. */
  jurisdiction?: string;
  required: boolean;
  /** The tenant that publishes it; absent for the platform baseline. */
  organization?: string;
  published: string;
  withdrawalConsequence?: string;
}

/** An `unmet` entry, as the spec defines it. */
export interface AgreementRequirement {
  url: string;
  version: string;
  sourceUrl: string;
  category: AgreementCategory;
}

export const coordinate = (a: { url: string; version: string }): string => `${a.url}|${a.version}`;

export function parseAgreement(doc: DocumentReference): AgreementVersion | undefined {
  const pinned = doc.masterIdentifier?.system === SYSTEMS.agreementVersion ? doc.masterIdentifier.value : undefined;
  const split = pinned?.lastIndexOf('|') ?? -1;
  const category = doc.category
    ?.flatMap((c) => c.coding ?? [])
    .find((c) => c.system === SYSTEMS.agreementCategory)?.code;
  const sourceUrl = doc.content?.[0]?.attachment?.url;
  if (
    !pinned ||
    split <= 0 ||
    !category ||
    !sourceUrl ||
    !(AGREEMENT_CATEGORIES as readonly string[]).includes(category)
  ) {
    return undefined;
  }
  const extension = (url: string) => doc.extension?.find((e) => e.url === url);
  return {
    url: pinned.slice(0, split),
    version: pinned.slice(split + 1),
    category: category as AgreementCategory,
    sourceUrl,
    jurisdiction: extension(EXTENSIONS.agreementJurisdiction)?.valueCodeableConcept?.coding?.find(
      (c) => c.system === SYSTEMS.jurisdiction,
    )?.code,
    required: extension(EXTENSIONS.agreementRequired)?.valueBoolean === true,
    organization: doc.custodian?.reference,
    published: doc.date ?? '',
    withdrawalConsequence: extension(EXTENSIONS.agreementWithdrawalConsequence)?.valueString,
  };
}

/** `CA` in the US -> `US-CA`: how Patient.address.state is compared with an agreement's jurisdiction. */
export function jurisdictionOf(country: string | undefined, state: string | undefined): string | undefined {
  return country && state ? `${country.toUpperCase()}-${state.toUpperCase()}` : undefined;
}

export interface RequirementInput {
  /** Every published agreement version the patient may see (platform and their tenant). */
  agreements: AgreementVersion[];
  organization: string | undefined;
  jurisdiction: string | undefined;
  /** Agreement urls attached to the care plan / assessment being entered. */
  attachedUrls: string[];
  /** `url|version` of every active acceptance. */
  accepted: ReadonlySet<string>;
}

/**
 * The spec's requirement resolution rules 1-4:
 * 1. union of the organization's always-required agreements (or the platform baseline when it sets
 *    none), the agreements attached to what is being entered, and jurisdiction-bound ones;
 * 2. filtered by the patient's jurisdiction;
 * 3. per category, a version for the patient's jurisdiction replaces the default: one per category;
 * 4. a jurisdiction may add its own state-specific agreement (its own category, so it survives 3).
 * Within an agreement url the latest published version counts, so a newer version is unmet again.
 */
export function resolveRequirements(input: RequirementInput): {
  required: AgreementVersion[];
  unmet: AgreementRequirement[];
} {
  const latest = latestVersions(input.agreements);
  const orgRequired = latest.filter((a) => a.required && a.organization && a.organization === input.organization);
  const baseline = orgRequired.length > 0 ? orgRequired : latest.filter((a) => a.required && !a.organization);
  const attached = latest.filter((a) => input.attachedUrls.includes(a.url));
  // Jurisdiction-bound required agreements come from the law of the place, so they apply whatever
  // set the organization chose (the platform's and the patient's own organization's).
  const regional = latest.filter(
    (a) => a.required && a.jurisdiction && (!a.organization || a.organization === input.organization),
  );
  const union = uniqueBy([...baseline, ...attached, ...regional], (a) => a.url);
  const applicable = union.filter((a) => !a.jurisdiction || a.jurisdiction === input.jurisdiction);

  const byCategory = new Map<AgreementCategory, AgreementVersion>();
  for (const agreement of applicable) {
    const current = byCategory.get(agreement.category);
    if (!current || (!current.jurisdiction && agreement.jurisdiction)) {
      byCategory.set(agreement.category, agreement);
    }
  }
  const required = [...byCategory.values()].sort(
    (a, b) => AGREEMENT_CATEGORIES.indexOf(a.category) - AGREEMENT_CATEGORIES.indexOf(b.category),
  );
  const unmet = required
    .filter((a) => !input.accepted.has(coordinate(a)))
    .map(({ url, version, sourceUrl, category }) => ({ url, version, sourceUrl, category }));
  return { required, unmet };
}

/** The latest published version of each agreement url. */
export function latestVersions(agreements: AgreementVersion[]): AgreementVersion[] {
  const latest = new Map<string, AgreementVersion>();
  for (const agreement of agreements) {
    const current = latest.get(agreement.url);
    if (
      !current ||
      agreement.published > current.published ||
      (agreement.published === current.published && agreement.version > current.version)
    ) {
      latest.set(agreement.url, agreement);
    }
  }
  return [...latest.values()];
}

function uniqueBy<T>(items: T[], key: (item: T) => string): T[] {
  const seen = new Set<string>();
  return items.filter((item) => {
    const k = key(item);
    if (seen.has(k)) {
      return false;
    }
    seen.add(k);
    return true;
  });
}
