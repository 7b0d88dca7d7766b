import { performance } from 'node:perf_hooks';
import type {
  Bundle,
  CareTeam,
  Location,
  Patient,
  Practitioner,
  PractitionerRole,
  Schedule,
  Slot,
} from '@medplum/fhirtypes';
import { workingSlots } from '../../bots/lib/slots';
import { SYSTEMS, TIMEZONE_EXTENSION } from '../../contracts/systems';
import type { DemoActor } from '../support/backend';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { freshPatient } from '../support/patients';
import { type Percentiles, percentiles } from './embedded-store';

export interface SchedulingBenchResult {
  slots: number;
  practitioners: number;
  rounds: { patients: number; slotsView: Percentiles; daysView: Percentiles; profile: Percentiles }[];
  book: Percentiles;
  reschedule: Percentiles;
  samples: number;
}

const PRACTITIONERS = 20;
const DAYS = 14;

/**
 * Issue 16 on the embedded Medplum, in one process (the gateway calling it in memory), sequential:
 * `GET /v1/availability` for a visit team of 20 practitioners licensed in California with 30-minute
 * slots every day 8:00-18:30 for two weeks (about 6,000 free slots), the slots view (first page of 50)
 * and the days view, each followed by a profile read; with 100 and then 10,000 patients in the store.
 * Then booking and rescheduling, each call a distinct visit.
 */
export async function runSchedulingBench(options: {
  iterations: number;
  bookings: number;
}): Promise<SchedulingBenchResult> {
  const gw = await startTestGateway();
  try {
    const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
    const { team, slots } = await seedTeam(gw);
    const start = new Date(Date.now() + 86_400_000);
    const window = {
      careTeam: `CareTeam/${team}`,
      start: start.toISOString(),
      end: new Date(start.getTime() + DAYS * 86_400_000).toISOString(),
    };
    const rounds: SchedulingBenchResult['rounds'] = [];
    for (const patients of [100, 10_000]) {
      await seedPatients(gw, patients);
      rounds.push({ patients, ...(await measureAvailability(gw, patient, window, options.iterations)) });
    }
    const { book, reschedule, samples } = await measureBooking(gw, team, options.bookings);
    return { slots, practitioners: PRACTITIONERS, rounds, book, reschedule, samples };
  } finally {
    gw.close();
  }
}

const request = (gw: TestGateway, patient: DemoActor, method: string, path: string, body?: unknown) =>
  gw.app.request(path, {
    method,
    headers: {
      authorization: `Bearer ${patient.token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

async function timed(work: () => Response | Promise<Response>): Promise<number> {
  const t0 = performance.now();
  const response = await work();
  await response.arrayBuffer();
  if (response.status >= 300) {
    throw new Error(`answered ${response.status}`);
  }
  return performance.now() - t0;
}

async function measureAvailability(
  gw: TestGateway,
  patient: DemoActor,
  window: Record<string, string>,
  iterations: number,
): Promise<{ slotsView: Percentiles; daysView: Percentiles; profile: Percentiles }> {
  const slots: number[] = [];
  const days: number[] = [];
  const profile: number[] = [];
  const slotsPath = `/v1/availability?${new URLSearchParams(window)}`;
  const daysPath = `/v1/availability?${new URLSearchParams({ ...window, view: 'days', timezone: 'America/Los_Angeles' })}`;
  // What is timed must be the real answer: a first page of 50 of the team's slots.
  const first = (await (await request(gw, patient, 'GET', slotsPath)).json()) as { slots?: unknown[] };
  if (first.slots?.length !== 50) {
    throw new Error(`availability answered ${first.slots?.length ?? 'no'} slots, not a page of 50`);
  }
  for (let i = 0; i < 3; i++) {
    await timed(() => request(gw, patient, 'GET', slotsPath));
    await timed(() => request(gw, patient, 'GET', daysPath));
  }
  for (let i = 0; i < iterations; i++) {
    slots.push(await timed(() => request(gw, patient, 'GET', slotsPath)));
    profile.push(await timed(() => request(gw, patient, 'GET', '/v1/patient/profile')));
    days.push(await timed(() => request(gw, patient, 'GET', daysPath)));
    profile.push(await timed(() => request(gw, patient, 'GET', '/v1/patient/profile')));
  }
  return { slotsView: percentiles(slots), daysView: percentiles(days), profile: percentiles(profile) };
}

/** Patients in the store besides the ones the demo has: plain Patients of both tenants. */
let seeded = 0;
async function seedPatients(gw: TestGateway, total: number): Promise<void> {
  while (seeded < total) {
    const batch = Math.min(500, total - seeded);
    const bundle: Bundle = {
      resourceType: 'Bundle',
      type: 'batch',
      entry: Array.from({ length: batch }, (_, i) => ({
        resource: {
          resourceType: 'Patient',
          name: [{ family: `Bench${seeded + i}` }],
          address: [{ state: 'CA', country: 'US' }],
        } as Patient,
        request: { method: 'POST' as const, url: 'Patient' },
      })),
    };
    await gw.backend.admin.executeBatch(bundle);
    seeded += batch;
  }
}

/** 20 practitioners of northwind licensed in CA, one Schedule each, their slots for two weeks; a team of them. */
async function seedTeam(gw: TestGateway): Promise<{ team: string; slots: number }> {
  const repo = gw.backend.systemRepo;
  const org = (await gw.backend.admin.searchOne('Organization', { identifier: `${SYSTEMS.tenant}|northwind` })) as {
    id: string;
  };
  const meta = { project: gw.backend.project.id, accounts: [{ reference: `Organization/${org.id}` }] };
  const california = (await gw.backend.admin.searchOne('Location', {
    identifier: `${SYSTEMS.jurisdiction}|US-CA`,
  })) as Location;
  const members: string[] = [];
  let count = 0;
  const from = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
  const hours = [
    {
      daysOfWeek: ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as (
        | 'mon'
        | 'tue'
        | 'wed'
        | 'thu'
        | 'fri'
        | 'sat'
        | 'sun'
      )[],
      availableStartTime: '08:00:00',
      availableEndTime: '18:30:00',
    },
  ];
  for (let i = 0; i < PRACTITIONERS; i++) {
    const practitioner = await repo.createResource<Practitioner>({
      resourceType: 'Practitioner',
      meta,
      name: [{ family: `Bench ${i}` }],
    });
    const role = await repo.createResource<PractitionerRole>({
      resourceType: 'PractitionerRole',
      meta,
      active: true,
      practitioner: { reference: `Practitioner/${practitioner.id}` },
      organization: { reference: `Organization/${org.id}` },
      location: [{ reference: `Location/${california.id}` }],
      availableTime: hours,
    });
    const schedule = await repo.createResource<Schedule>({
      resourceType: 'Schedule',
      meta,
      active: true,
      actor: [{ reference: `PractitionerRole/${role.id}` }],
      serviceType: [{ coding: [{ system: SYSTEMS.visitType, code: 'video-visit' }] }],
      extension: [{ url: TIMEZONE_EXTENSION, valueCode: 'America/Los_Angeles' }],
    });
    for (const { start, end } of workingSlots(hours, 'America/Los_Angeles', from, DAYS + 1, 30)) {
      await repo.createResource<Slot>({
        resourceType: 'Slot',
        // Filed in the tenant, as materialize-slots files them (availability reads them with her token).
        meta,
        schedule: { reference: `Schedule/${schedule.id}` },
        serviceType: schedule.serviceType,
        status: 'free',
        start,
        end,
      });
      count++;
    }
    members.push(`Practitioner/${practitioner.id}`);
  }
  const team = await repo.createResource<CareTeam>({
    resourceType: 'CareTeam',
    meta,
    status: 'active',
    category: [{ coding: [{ system: SYSTEMS.careTeam, code: 'visits' }] }],
    managingOrganization: [{ reference: `Organization/${org.id}` }],
    participant: members.map((reference) => ({ member: { reference } })),
  });
  return { team: team.id as string, slots: count };
}

/** Booking then rescheduling, each a distinct visit: patients enrolled in the monitoring program first. */
async function measureBooking(
  gw: TestGateway,
  team: string,
  amount: number,
): Promise<{ book: Percentiles; reschedule: Percentiles; samples: number }> {
  const prepared: { patient: DemoActor; task: string }[] = [];
  for (let i = 0; i < amount; i++) {
    prepared.push(await visitToBook(gw));
  }
  const first = prepared[0].patient;
  const start = new Date(Date.now() + 2 * 86_400_000).toISOString();
  const end = new Date(Date.now() + 12 * 86_400_000).toISOString();
  const listed = await request(
    gw,
    first,
    'GET',
    `/v1/availability?${new URLSearchParams({ careTeam: `CareTeam/${team}`, start, end, count: '200' })}`,
  );
  const slots = ((await listed.json()) as { slots: { slot: string }[] }).slots.map((s) => s.slot);
  const booked: { patient: DemoActor; appointment: string }[] = [];
  const book: number[] = [];
  for (const [i, { patient, task }] of prepared.entries()) {
    const t0 = performance.now();
    const response = await request(gw, patient, 'POST', '/v1/appointments', { task, slot: slots[i] });
    const body = (await response.json()) as { appointment: string };
    book.push(performance.now() - t0);
    if (response.status !== 201) {
      throw new Error(`booking answered ${response.status}`);
    }
    booked.push({ patient, appointment: body.appointment });
  }
  const reschedule: number[] = [];
  for (const [i, { patient, appointment }] of booked.entries()) {
    reschedule.push(
      await timed(() =>
        request(gw, patient, 'POST', `/v1/appointments/${appointment.split('/')[1]}/reschedule`, {
          slot: slots[amount + i],
        }),
      ),
    );
  }
  return { book: percentiles(book), reschedule: percentiles(reschedule), samples: amount };
}

async function visitToBook(gw: TestGateway): Promise<{ patient: DemoActor; task: string }> {
  const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
  const protocols = (await (await request(gw, patient, 'GET', '/v1/protocols')).json()) as {
    protocols: { healthcareService: string; protocol?: string }[];
  };
  const service = protocols.protocols.find((p) => p.protocol?.includes('programs/blood-pressure-monitoring'))
    ?.healthcareService as string;
  const requirements = (await (
    await request(gw, patient, 'GET', `/v1/agreements/requirements?healthcareService=${encodeURIComponent(service)}`)
  ).json()) as { unmet: unknown[] };
  if (requirements.unmet.length) {
    await request(gw, patient, 'POST', '/v1/agreements/acceptances', { agreements: requirements.unmet });
  }
  const enrolled = (await (
    await request(gw, patient, 'POST', '/v1/enrollments', { healthcareService: service })
  ).json()) as {
    carePlan: string;
  };
  const active = (await (
    await request(gw, patient, 'POST', `/v1/enrollments/${enrolled.carePlan.split('/')[1]}/activate`)
  ).json()) as { tasks: { task: string; kind: string }[] };
  return { patient, task: active.tasks.find((t) => t.kind === 'schedule-visit')?.task as string };
}
