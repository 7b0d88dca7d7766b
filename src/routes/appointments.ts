import { appointmentView, ownAppointment, segmentsOf, segmentView } from '../../bots/lib/visits';
import {
  AppointmentSchema,
  bookRoute,
  cancelRoute,
  EncounterAnswerSchema,
  encounterRoute,
  getAppointmentRoute,
  rescheduleRoute,
  SegmentSchema,
  segmentsRoute,
} from '../../contracts/appointments';
import { SYSTEMS } from '../../contracts/systems';
import type { App } from '../app-env';
import { notFound } from '../errors';
import { callBot } from '../medplum/bots';
import { medplumOf } from '../medplum/client';
import { repeatedBooking, repeatedCancel, repeatedReschedule, resumedSegment } from '../medplum/finished-work';

const appointments = { system: SYSTEMS.bots, value: 'appointments' };

/** What the bot answers, without its `created` flag (which only picks 201 or 200). */
const split = (result: unknown) => {
  const { created, ...answer } = result as { created?: unknown };
  return { created: created === true, answer };
};

export function registerAppointmentRoutes(app: App): void {
  // A repeat of finished visit work (the same booking, reschedule or cancellation; a segment already
  // started) is answered from her own reads, as the bot answers it.
  app.openapi(bookRoute, async (c) => {
    const body = c.req.valid('json');
    const repeat = await repeatedBooking(medplumOf(c), c.get('session').patientId, body);
    if (repeat) {
      return c.json(AppointmentSchema.parse(repeat), 200);
    }
    const { created, answer } = split(await callBot(medplumOf(c), appointments, { operation: 'book', ...body }));
    return c.json(AppointmentSchema.parse(answer), created ? 201 : 200);
  });
  app.openapi(rescheduleRoute, async (c) => {
    const { id } = c.req.valid('param');
    const body = c.req.valid('json');
    const repeat = await repeatedReschedule(medplumOf(c), c.get('session').patientId, id, body.slot);
    if (repeat) {
      return c.json(AppointmentSchema.parse(repeat), 200);
    }
    const { created, answer } = split(
      await callBot(medplumOf(c), appointments, { operation: 'reschedule', appointment: id, ...body }),
    );
    return c.json(AppointmentSchema.parse(answer), created ? 201 : 200);
  });
  app.openapi(cancelRoute, async (c) => {
    const { id } = c.req.valid('param');
    const repeat = await repeatedCancel(medplumOf(c), c.get('session').patientId, id);
    if (repeat) {
      return c.json(AppointmentSchema.parse(repeat), 200);
    }
    const { answer } = split(await callBot(medplumOf(c), appointments, { operation: 'cancel', appointment: id }));
    return c.json(AppointmentSchema.parse(answer), 200);
  });
  app.openapi(encounterRoute, async (c) => {
    const { id } = c.req.valid('param');
    const body = (c.req.valid('json') as { segment?: string } | undefined) ?? {};
    const repeat = await resumedSegment(medplumOf(c), c.get('session').patientId, id, body.segment);
    if (repeat) {
      return c.json(EncounterAnswerSchema.parse(repeat), 200);
    }
    const result = await callBot(medplumOf(c), appointments, { operation: 'encounter', appointment: id, ...body });
    return c.json(EncounterAnswerSchema.parse(result), 200);
  });
  // Read with her own token (no bot): the visit as the workflow answers it (bots/lib/visits.ts).
  app.openapi(getAppointmentRoute, async (c) => {
    const { id } = c.req.valid('param');
    const medplum = medplumOf(c);
    const appointment = await ownAppointment(medplum, id, c.get('session').patientId);
    if (!appointment) {
      throw notFound('No such appointment of yours');
    }
    return c.json(AppointmentSchema.parse(await appointmentView(medplum, appointment, false)), 200);
  });
  // Read with her own token: Appointments and Encounters are in her compartment (no bot needed). The
  // platform's segments only, as the workflow answers them (bots/lib/visits.ts).
  app.openapi(segmentsRoute, async (c) => {
    const { id } = c.req.valid('param');
    const medplum = medplumOf(c);
    const appointment = await medplum.readResource('Appointment', id);
    const segments = (await segmentsOf(medplum, appointment)).map((e) => SegmentSchema.parse(segmentView(e)));
    return c.json({ appointment: `Appointment/${appointment.id}`, segments }, 200);
  });
}
