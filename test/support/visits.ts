import assert from 'node:assert/strict';
import type { Slot } from '@medplum/fhirtypes';
import type { DemoActor } from './backend';
import type { TestGateway } from './gateway';
import { freshPatient } from './patients';

/**
 * The visit side of a journey as a patient app drives it (issue 16): enrolled in northwind's monitoring
 * program, activated, with a visit of the plan to book; and the free slots of a visit team.
 */
const PROGRAM = 'northwind/programs/blood-pressure-monitoring';

/** A new CA patient enrolled in the monitoring program, activated: her schedule-visit task of that kind. */
export async function withVisitToBook(
  gw: TestGateway,
  visitType = 'video-visit',
): Promise<{ patient: DemoActor; task: string; carePlan: string }> {
  const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
  const { protocols } = (await gw.call('GET', '/v1/protocols', { token: patient.token })).body as {
    protocols: { healthcareService: string; protocol?: string }[];
  };
  const service = protocols.find((p) => p.protocol?.includes(PROGRAM))?.healthcareService as string;
  const { unmet } = (
    await gw.call('GET', `/v1/agreements/requirements?healthcareService=${encodeURIComponent(service)}`, {
      token: patient.token,
    })
  ).body as { unmet: unknown[] };
  if (unmet.length) {
    await gw.call('POST', '/v1/agreements/acceptances', { token: patient.token, body: { agreements: unmet } });
  }
  const enrolled = await gw.call('POST', '/v1/enrollments', {
    token: patient.token,
    body: { healthcareService: service },
  });
  const { carePlan } = enrolled.body as { carePlan: string };
  const active = await gw.call('POST', `/v1/enrollments/${carePlan.split('/')[1]}/activate`, { token: patient.token });
  const task = (active.body as { tasks: { task: string; kind: string; visitType?: string }[] }).tasks.find(
    (t) => t.kind === 'schedule-visit' && t.visitType === visitType,
  );
  assert.ok(task, `a ${visitType} to book`);
  return { patient, task: task.task, carePlan };
}

/** Free slots of a visit team she can book, in start order, from tomorrow (the availability endpoint's first page). */
export async function freeSlots(gw: TestGateway, team: string, patient: DemoActor, count = 50): Promise<string[]> {
  const start = new Date(Date.now() + 86_400_000).toISOString();
  const end = new Date(Date.now() + 20 * 86_400_000).toISOString();
  const res = await gw.call(
    'GET',
    `/v1/availability?${new URLSearchParams({ careTeam: team, start, end, count: String(count) })}`,
    { token: patient.token },
  );
  return ((res.body as { slots: { slot: string }[] }).slots ?? []).map((s) => s.slot);
}

/** A visit booked on a slot made for it (a practitioner of her visit team's) starting `minutes` from now. */
export async function visitStartingIn(
  gw: TestGateway,
  team: string,
  minutes: number,
): Promise<{ patient: DemoActor; appointment: string; slot: string }> {
  const { patient, task } = await withVisitToBook(gw);
  const [anySlot] = await freeSlots(gw, team, patient);
  const template = await gw.backend.systemRepo.readReference<Slot>({ reference: anySlot });
  const start = new Date(Date.now() + minutes * 60_000);
  const own = await gw.backend.systemRepo.createResource<Slot>({
    resourceType: 'Slot',
    meta: { project: gw.backend.project.id },
    schedule: template.schedule as { reference: string },
    serviceType: template.serviceType,
    status: 'free',
    start: start.toISOString(),
    end: new Date(start.getTime() + 30 * 60_000).toISOString(),
  });
  const booked = await gw.call('POST', '/v1/appointments', {
    token: patient.token,
    body: { task, slot: `Slot/${own.id}` },
  });
  assert.equal(booked.status, 201, booked.text);
  return { patient, appointment: (booked.body as { appointment: string }).appointment, slot: `Slot/${own.id}` };
}
