import type { MedplumClient } from '@medplum/core';
import type { ObservationDefinition, Reference } from '@medplum/fhirtypes';
import { type AgreementCatalog, freshCatalog } from '../../bots/lib/agreements';
import { readVersioned } from '../../bots/lib/journey';
/**
 * Short-lived copies of catalog reads the gateway computes answers from: what the patients of
 * one tenant may read of the published catalog is the same for all of them (their policy's catalog
 * entries: the platform's and their own tenant's, src/provision/definition.ts `catalogReads`), so one
 * patient's read serves her tenant's next calls for `ttlMs`. Keys must name everything that decides what
 * the read returns (the tenant); values are published content, never a patient's record. A copy is at
 * most `ttlMs` old: a newly published version is asked for within that time, while the workflow bots'
 * own gate always reads fresh (a call made in between gets their 409 with what is missing). The reads it
 * serves write nothing: the requirements check, the gate of a resume answered as it is
 * (src/medplum/finished-work.ts), and availability's visit directory (a team's roles, licences and
 * Schedules in her tenant: bots/lib/scheduling.ts `visitDirectory`; booking checks them again itself).
 */
export interface CatalogCache {
  get<T>(key: string, load: () => Promise<T>): Promise<T>;
}

interface Entry {
  expires: number;
  value: Promise<unknown>;
}

export function createCatalogCache({
  ttlMs,
  maxEntries = 1_000,
  clock = () => new Date(),
}: {
  ttlMs: number;
  maxEntries?: number;
  clock?: () => Date;
}): CatalogCache {
  const entries = new Map<string, Entry>();
  return {
    get<T>(key: string, load: () => Promise<T>): Promise<T> {
      const now = clock().getTime();
      const hit = entries.get(key);
      if (hit && hit.expires > now) {
        return hit.value as Promise<T>;
      }
      if (ttlMs <= 0) {
        return load();
      }
      entries.delete(key);
      // Concurrent calls share one read; a failed read is not kept.
      const value = load();
      value.catch(() => {
        if (entries.get(key)?.value === value) {
          entries.delete(key);
        }
      });
      entries.set(key, { expires: now + ttlMs, value });
      while (entries.size > maxEntries) {
        entries.delete(entries.keys().next().value as string);
      }
      return value;
    },
  };
}

/**
 * Her tenant's part of the agreement catalog (bots/lib/agreements.ts `patientAgreements`) read through
 * the cache with her own client: what her tenant publishes is the same for all its patients (the published
 * agreements, a service, what a plan attaches), so one read of each serves her tenant's calls for a few
 * seconds. The reads the gateway computes use it; the bots' gate, before every write, reads fresh.
 */
export function cachedAgreementCatalog(
  catalog: CatalogCache,
  medplum: MedplumClient,
): (organization: string | undefined) => AgreementCatalog {
  const fresh = freshCatalog(medplum);
  return (organization) => {
    const tenant = organization ?? 'none';
    return {
      published: () => catalog.get(`agreements ${tenant}`, fresh.published),
      service: (reference) => catalog.get(`service ${tenant} ${reference}`, () => fresh.service(reference)),
      attached: (canonical) => catalog.get(`attached ${tenant} ${canonical}`, () => fresh.attached(canonical)),
    };
  };
}

/**
 * The versioned ObservationDefinitions her tasks pin, kept as read: a version never changes. Keyed by her,
 * so that a copy serves only the patient whose policy let it be read.
 */
export function cachedDefinitions(
  catalog: CatalogCache,
  medplum: MedplumClient,
  patientId: string,
): (reference: Reference<ObservationDefinition>) => Promise<ObservationDefinition> {
  return (reference) =>
    catalog.get(`definition Patient/${patientId} ${reference.reference}`, () => readVersioned(medplum, reference));
}
