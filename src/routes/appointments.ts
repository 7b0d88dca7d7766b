import {
  AppointmentSchema,
  bookRoute,
  cancelRoute,
  EncounterAnswerSchema,
  encounterRoute,
  rescheduleRoute,
  SegmentSchema,
  segmentsRoute,
} from '../../contracts/appointments';
import { EXTENSIONS, SYSTEMS } from '../../contracts/systems';
import type { App } from '../app-env';
import { callBot } from '../medplum/bots';

const appointments = { system: SYSTEMS.bots, value: 'appointments' };

/** What the bot answers, without its `created` flag (which only picks 201 or 200). */
const split = (result: unknown) => {
  const { created, ...answer } = result as { created?: unknown };
  return { created: created === true, answer };
};

export function registerAppointmentRoutes(app: App): void {
  app.openapi(bookRoute, async (c) => {
    const { created, answer } = split(
      await callBot(c.get('medplum'), appointments, { operation: 'book', ...c.req.valid('json') }),
    );
    return c.json(AppointmentSchema.parse(answer), created ? 201 : 200);
  });
  app.openapi(rescheduleRoute, async (c) => {
    const { id } = c.req.valid('param');
    const { created, answer } = split(
      await callBot(c.get('medplum'), appointments, {
        operation: 'reschedule',
        appointment: id,
        ...c.req.valid('json'),
      }),
    );
    return c.json(AppointmentSchema.parse(answer), created ? 201 : 200);
  });
  app.openapi(cancelRoute, async (c) => {
    const { id } = c.req.valid('param');
    const { answer } = split(await callBot(c.get('medplum'), appointments, { operation: 'cancel', appointment: id }));
    return c.json(AppointmentSchema.parse(answer), 200);
  });
  app.openapi(encounterRoute, async (c) => {
    const { id } = c.req.valid('param');
    const body = (c.req.valid('json') as { segment?: string } | undefined) ?? {};
    const result = await callBot(c.get('medplum'), appointments, { operation: 'encounter', appointment: id, ...body });
    return c.json(EncounterAnswerSchema.parse(result), 200);
  });
  // Read with her own token: Appointments and Encounters are in her compartment (no bot needed).
  app.openapi(segmentsRoute, async (c) => {
    const { id } = c.req.valid('param');
    const medplum = c.get('medplum');
    const appointment = await medplum.readResource('Appointment', id);
    const encounters = await medplum.searchResources('Encounter', {
      appointment: `Appointment/${appointment.id}`,
      _count: '100',
    });
    const position = (e: (typeof encounters)[number]) =>
      e.extension?.find((x) => x.url === EXTENSIONS.segmentPosition)?.valueInteger ?? Number.MAX_SAFE_INTEGER;
    const segments = [...encounters]
      .sort((a, b) => position(a) - position(b))
      .map((e) =>
        SegmentSchema.parse({
          encounter: `Encounter/${e.id}`,
          position: position(e),
          purpose: e.type?.[0]?.text ?? 'Visit',
          status: e.status,
        }),
      );
    return c.json({ appointment: `Appointment/${appointment.id}`, segments }, 200);
  });
}
