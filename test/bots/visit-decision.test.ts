import type { Appointment, Encounter, ServiceRequest } from '@medplum/fhirtypes';
import { describe, expect, it } from 'vitest';
import { visitState } from '../../bots/visit-completion';
import { EXTENSIONS } from '../../contracts/systems';

/**
 * The visit-completion decision (bots/visit-completion.ts `visitState`, JOURNEY H, issue 50 item 2),
 * without a Medplum: a visit is complete when its practitioner (or a bot) finished every segment the
 * platform made for it, whatever the Provider app marked. The bot over a real store, its races and the
 * attacks: test/scheduling/visit-completion.test.ts. Pure, for `npm run mutation`.
 */
const HER = 'Patient/her';
const DR = 'Practitioner/dr';
const REQUEST = 'ServiceRequest/r';
const appointment: Appointment = {
  resourceType: 'Appointment',
  status: 'fulfilled',
  basedOn: [{ reference: REQUEST }],
  participant: [
    { actor: { reference: HER }, status: 'accepted' },
    { actor: { reference: DR }, status: 'accepted' },
  ],
};
const request: ServiceRequest = {
  resourceType: 'ServiceRequest',
  status: 'active',
  intent: 'plan',
  subject: { reference: HER },
};
const segment = (position: number, status: Encounter['status'], author = DR, over: Partial<Encounter> = {}) =>
  ({
    resourceType: 'Encounter',
    id: `e${position}`,
    status,
    class: { code: 'VR' },
    subject: { reference: HER },
    basedOn: [{ reference: REQUEST }],
    meta: { author: { reference: author } },
    extension: [{ url: EXTENSIONS.segmentPosition, valueInteger: position }],
    ...over,
  }) as Encounter & { id: string };

describe('a visit’s decision', () => {
  it('complete when every segment is finished by its practitioner or a bot, its request active', () => {
    expect(visitState(appointment, request, [segment(1, 'finished'), segment(2, 'finished')])).toEqual({
      complete: true,
    });
    expect(visitState(appointment, request, [segment(1, 'finished', 'Bot/review')])).toEqual({ complete: true });
    expect(visitState(appointment, request, [segment(2, 'finished', 'Bot/b'), segment(1, 'finished')])).toEqual({
      complete: true,
    });
  });

  it('not complete: a segment still to come (arrived once one started, else booked), finished by someone else, no segments, a request not active', () => {
    expect(visitState(appointment, request, [segment(1, 'finished'), segment(2, 'planned')])).toEqual({
      complete: false,
      status: 'arrived',
    });
    expect(visitState(appointment, request, [segment(1, 'in-progress'), segment(2, 'planned')])).toEqual({
      complete: false,
      status: 'arrived',
    });
    expect(visitState(appointment, request, [segment(1, 'planned'), segment(2, 'cancelled')])).toEqual({
      complete: false,
      status: 'booked',
    });
    expect(visitState(appointment, request, [segment(1, 'finished', 'Practitioner/other')])).toEqual({
      complete: false,
      status: 'arrived',
    });
    expect(visitState(appointment, request, [segment(1, 'finished', HER)])).toEqual({
      complete: false,
      status: 'arrived',
    });
    expect(visitState(appointment, request, [])).toEqual({ complete: false, status: 'booked' });
    for (const status of ['completed', 'draft', 'revoked'] as const) {
      expect(visitState(appointment, { ...request, status }, [segment(1, 'finished')]).complete, status).toBe(false);
    }
    // A visit with no practitioner: only a bot's finish counts.
    const alone = { ...appointment, participant: [{ actor: { reference: HER }, status: 'accepted' as const }] };
    expect(visitState(alone, request, [segment(1, 'finished')]).complete).toBe(false);
    expect(visitState(alone, request, [segment(1, 'finished', 'Bot/b')]).complete).toBe(true);
  });

  it('only the segments the platform made for this visit count: hers, of its request, at a position 1 to 100', () => {
    const finished = segment(1, 'finished');
    const strays = [
      segment(2, 'planned', DR, { subject: { reference: 'Patient/other' } }),
      segment(3, 'planned', DR, { basedOn: [{ reference: 'ServiceRequest/other' }] }),
      segment(0, 'planned'),
      segment(101, 'planned'),
      segment(2, 'planned', DR, { extension: [] }),
      segment(2, 'planned', DR, { extension: [{ url: EXTENSIONS.segmentPosition, valueInteger: 1.5 }] }),
    ];
    expect(visitState(appointment, request, [finished, ...strays])).toEqual({ complete: true });
    for (const stray of strays) {
      // Alone, a stray is no segment: nothing to finish.
      expect(visitState(appointment, request, [stray])).toEqual({ complete: false, status: 'booked' });
    }
    expect(visitState(appointment, request, [segment(100, 'finished')])).toEqual({ complete: true });
  });
});
