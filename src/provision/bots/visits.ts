import {
  FULFILMENT_ONLY,
  RECONCILER,
  SLOT_FILED_ONLY,
  SLOT_STATUS_ONLY,
  VISIT_PLANS_ONLY,
  VISIT_STATUS_ONLY,
} from '../policies/bots';
import { agreementReads } from '../policies/patient';
import type { PlatformBot } from '../shape';

/** The bots of her visits: free slots, availability, booking and running a visit, and its end. */

export const materializeSlots: PlatformBot = {
  access: {
    key: 'bot-materialize-slots',
    policy: {
      name: 'Bot: free slots',
      // It reads the Schedules and their actors' working hours and creates free Slots; of a Slot once
      // made it changes only whether it is offered (free or withdrawn), never a booked one (booking is
      // another bot's).
      resource: [
        // The active Schedules it makes Slots for.
        { resourceType: 'Schedule', interaction: ['read', 'search'] },
        // Their practitioners' roles: the working hours the Slots follow.
        { resourceType: 'PractitionerRole', interaction: ['read'] },
        // It files the Slots made before they carried their tenant (their accounts), and withdraws or
        // offers again the free ones her hours no longer make or make again.
        {
          resourceType: 'Slot',
          interaction: ['create', 'read', 'search', 'update'],
          writeConstraint: [SLOT_FILED_ONLY],
        },
      ],
    },
  },
  bot: {
    key: 'materialize-slots',
    description:
      'Hourly (and once after provisioning): the free Slots of every active Schedule for the next three weeks, at most 350 a run (its FHIR quota), soonest first.',
    accessPolicy: 'bot-materialize-slots',
    cronString: '0 * * * *',
    runAfterProvisioning: true,
  },
};

export const availability: PlatformBot = {
  access: {
    key: 'bot-availability',
    policy: {
      name: 'Bot: availability',
      // Read only: her Patient (tenant, state), her tenant's visit teams and practitioners' roles, their
      // licences (jurisdiction Locations), Schedules and free Slots. It checks the tenant itself.
      resource: [
        // Her tenant and her state, which decide whose Slots she may book.
        { resourceType: 'Patient', interaction: ['read'] },
        // The visit team, its practitioners' roles and licences, their Schedules and free Slots.
        ...['CareTeam', 'PractitionerRole', 'Location', 'Schedule', 'Slot'].map((resourceType) => ({
          resourceType,
          interaction: ['read' as const, 'search' as const],
        })),
      ],
    },
  },
  bot: {
    key: 'availability',
    patient: true,
    description: 'GET /v1/availability: free visit slots of licensed practitioners, or per-day counts.',
    accessPolicy: 'bot-availability',
  },
};

/** What the appointments bot writes of a visit note: a new, empty draft for a segment's practitioner. */
export const EMPTY_NOTE_ONLY = {
  language: 'text/fhirpath' as const,
  expression:
    "%before.exists().not() and %after.status = 'in-progress' and %after.note.empty() and " +
    "%after.encounter.exists() and %after.assessor.reference.startsWith('Practitioner/')",
};

export const appointments: PlatformBot = {
  access: {
    key: 'bot-appointments',
    policy: {
      name: 'Bot: visits',
      // It books, moves and cancels a patient's visits and starts their segments: it writes Appointments,
      // their Encounters, her schedule-visit tasks, and a Slot's status (nothing else of it).
      resource: [
        // The agreements gate, as every workflow of hers.
        ...agreementReads(),
        // Her schedule-visit task completed by a booking; the care team's review of an asynchronous visit.
        { resourceType: 'Task', interaction: ['read', 'search', 'create', 'update'] },
        // The visit's request, and the Slot's Schedule, practitioner role and licence, checked before booking.
        ...['ServiceRequest', 'Schedule', 'PractitionerRole', 'Location'].map((resourceType) => ({
          resourceType,
          interaction: ['read' as const, 'search' as const],
        })),
        // The Slot booked (busy) or freed: its status, nothing else of it.
        { resourceType: 'Slot', interaction: ['read', 'search', 'update'], writeConstraint: [SLOT_STATUS_ONLY] },
        // Her tenant's queue, for the care team's review of an asynchronous visit.
        { resourceType: 'CareTeam', interaction: ['read', 'search'] },
        // Her visit and its segments: booked, moved, cancelled, started.
        ...['Appointment', 'Encounter'].map((resourceType) => ({
          resourceType,
          interaction: ['create' as const, 'read' as const, 'search' as const, 'update' as const],
        })),
        // Each live segment's note for its practitioner to write (an empty draft): created, never changed.
        {
          resourceType: 'ClinicalImpression',
          interaction: ['create', 'read'],
          writeConstraint: [EMPTY_NOTE_ONLY],
        },
      ],
    },
  },
  bot: {
    key: 'appointments',
    patient: true,
    description: 'POST /v1/appointments, /reschedule, /cancel, /encounter: a patient books and runs her visits.',
    accessPolicy: 'bot-appointments',
  },
};

export const visitReview: PlatformBot = {
  access: {
    key: 'bot-visit-review',
    policy: {
      name: 'Bot: an asynchronous visit reviewed',
      // Woken by the care team's completed review of an asynchronous visit: it reads the review and the
      // visit, and fulfils the visit (the Appointment and its segments), nothing else.
      resource: [
        // The completed review (history: completed by the clinician who owned it).
        { resourceType: 'Task', interaction: ['read', 'search', 'history'] },
        // The visit and its segments fulfilled: their status, nothing else of them.
        ...['Appointment', 'Encounter'].map((resourceType) => ({
          resourceType,
          interaction: ['read' as const, 'search' as const, 'update' as const],
          writeConstraint: [FULFILMENT_ONLY],
        })),
        // The reconciler, the one other caller it acts for (a lost delivery re-driven).
        RECONCILER,
      ],
    },
  },
  bot: {
    key: 'visit-review',
    description: 'Subscription: the care team completed the review of an asynchronous visit; the visit is fulfilled.',
    accessPolicy: 'bot-visit-review',
  },
};

export const visitCompletion: PlatformBot = {
  access: {
    key: 'bot-visit-completion',
    policy: {
      name: 'Bot: a visit completed',
      // Woken by a finished segment or a visit marked fulfilled: it reads the visit, its segments, its
      // request and plan (and the definitions a repeating visit is issued again from); it sets the
      // Appointment's status, completes the request, notes the outcome on the plan and issues the next
      // visit to book (a request, intent plan, and her schedule-visit task). Nothing else.
      resource: [
        // Her tenant, whose visit team the next visit is booked with.
        { resourceType: 'Patient', interaction: ['read'] },
        // The visit's segments, which decide its status.
        { resourceType: 'Encounter', interaction: ['read', 'search'] },
        // The visit's status as its segments say: booked, arrived or fulfilled.
        {
          resourceType: 'Appointment',
          interaction: ['read', 'search', 'update'],
          writeConstraint: [VISIT_STATUS_ONLY],
        },
        // The visit's request completed, the next one issued (intent plan).
        {
          resourceType: 'ServiceRequest',
          interaction: ['create', 'read', 'search', 'update'],
          writeConstraint: [VISIT_PLANS_ONLY],
        },
        // The plan's activity noted with the visit as its outcome.
        { resourceType: 'CarePlan', interaction: ['read', 'update'] },
        // The tasks that booked the visit, and her next schedule-visit task.
        { resourceType: 'Task', interaction: ['create', 'read', 'search'] },
        // Her tenant's visit team, named on the next task.
        { resourceType: 'CareTeam', interaction: ['read', 'search'] },
        // The definitions a repeating visit is issued again from.
        ...['PlanDefinition', 'ActivityDefinition', 'Questionnaire', 'ObservationDefinition'].map((resourceType) => ({
          resourceType,
          interaction: ['read' as const, 'search' as const, 'vread' as const],
        })),
      ],
    },
  },
  bot: {
    key: 'visit-completion',
    description:
      'Subscription: a visit segment finished (or a visit marked fulfilled); the visit is fulfilled once every segment is, and the plan issues the next.',
    accessPolicy: 'bot-visit-completion',
  },
};
