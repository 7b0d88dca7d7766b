import type { MedplumClient, WithId } from '@medplum/core';
import type { Patient, Practitioner, ProjectMembership } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import { type LaunchedMedplum, launchEmbeddedMedplum } from '../../src/embedded/launch';
import type { EmbeddedMedplumOptions } from '../../src/embedded/server';
import { DEMO_PATIENTS, DEMO_TENANTS, demoDefinition } from '../../src/provision/demo';

export interface DemoActor {
  key: string;
  tenant: string;
  patient: WithId<Patient>;
  membership: WithId<ProjectMembership>;
  /** A MedplumClient signed in as this patient (a real token from the embedded backend). */
  medplum: MedplumClient;
  token: string;
}

/** A demo clinician (one per tenant), signed in as Medplum's app would be. */
export interface DemoClinician {
  tenant: string;
  practitioner: WithId<Practitioner>;
  membership: WithId<ProjectMembership>;
  medplum: MedplumClient;
  token: string;
}

export interface TestBackend extends LaunchedMedplum {
  patients: Record<string, DemoActor>;
  /** By tenant key: northwind, southridge. */
  clinicians: Record<string, DemoClinician>;
  /** A fresh client for any membership (practitioner, bot, client application...). */
  login(membership: ProjectMembership): Promise<{ medplum: MedplumClient; token: string }>;
}

export type TestBackendOptions = Partial<EmbeddedMedplumOptions> & {
  runBots?: boolean;
  /**
   * Every free Slot of the horizon at once, as the hourly runs of materialize-slots make them over some
   * hours: the bot is run until nothing is missing, under a quota raised for it (one run makes at most
   * SLOTS_PER_RUN, within a minute's quota on Medplum).
   */
  allSlots?: boolean;
};

/**
 * The shared fixture: an in-memory embedded Medplum provisioned with the platform definition and
 * the demo tenants (northwind: alice, bob; southridge: carol, dave). Real storage, real policies,
 * real bot bundles.
 */
export async function startTestBackend(options: TestBackendOptions = {}): Promise<TestBackend> {
  // Provisioning's one-off bot runs (the next weeks' free Slots) only where a test asks for them.
  const { allSlots, ...launchOptions } = options;
  const backend = await launchEmbeddedMedplum({
    dbPath: ':memory:',
    definition: demoDefinition(),
    runBots: allSlots ?? false,
    ...(allSlots ? { fhirQuota: 1_000_000 } : {}),
    ...launchOptions,
  });
  for (let run = 0; allSlots && run < 20; run++) {
    const result = (await backend.admin.executeBot(
      { system: SYSTEMS.bots, value: 'materialize-slots' },
      {},
      'application/json',
    )) as { remaining?: number };
    if (!result.remaining) {
      break;
    }
  }
  const login = async (membership: ProjectMembership) => {
    const medplum = await backend.clientFor(membership);
    return { medplum, token: medplum.getAccessToken() as string };
  };
  const patients: Record<string, DemoActor> = {};
  for (const demo of DEMO_PATIENTS) {
    const patient = (await backend.systemRepo.searchOne<Patient>({
      resourceType: 'Patient',
      filters: [{ code: 'identifier', operator: 'eq', value: `${SYSTEMS.demoPatient}|${demo.key}` }],
    })) as WithId<Patient>;
    const membership = (await backend.systemRepo.searchOne<ProjectMembership>({
      resourceType: 'ProjectMembership',
      filters: [{ code: 'profile', operator: 'eq', value: `Patient/${patient.id}` }],
    })) as WithId<ProjectMembership>;
    patients[demo.key] = { key: demo.key, tenant: demo.tenant, patient, membership, ...(await login(membership)) };
  }
  const clinicians: Record<string, DemoClinician> = {};
  for (const tenant of DEMO_TENANTS) {
    const practitioner = (await backend.systemRepo.searchOne<Practitioner>({
      resourceType: 'Practitioner',
      filters: [{ code: 'identifier', operator: 'eq', value: `${SYSTEMS.demoClinician}|${tenant.key}` }],
    })) as WithId<Practitioner>;
    const membership = (await backend.systemRepo.searchOne<ProjectMembership>({
      resourceType: 'ProjectMembership',
      filters: [{ code: 'profile', operator: 'eq', value: `Practitioner/${practitioner.id}` }],
    })) as WithId<ProjectMembership>;
    clinicians[tenant.key] = { tenant: tenant.key, practitioner, membership, ...(await login(membership)) };
  }
  return { ...backend, patients, clinicians, login };
}
