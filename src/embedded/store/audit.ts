import { createReference } from '@medplum/core';
import type { AuditEvent, AuditEventAgent, Reference, Resource } from '@medplum/fhirtypes';
import type { SqliteRepository } from './repo';

/**
 * The REST interactions Medplum saves an AuditEvent for, with their action (packages/server/src/util/
 * auditevent.ts AuditEventActionLookup). vread and search are audited too, but only ever logged, never
 * saved, since they name no resource (Repository.logEvent saves only when given one).
 */
/** Medplum's agent type of an application (auditevent.ts `ApplicationAgentType`). */
const APPLICATION_AGENT = {
  system: 'http://dicom.nema.org/resources/ontology/DCM',
  code: '110150',
  display: 'Application',
};

const ACTIONS = { read: 'R', history: 'R', create: 'C', update: 'U', patch: 'U', delete: 'D' } as const;

export type AuditedInteraction = keyof typeof ACTIONS;

export interface RestAccess {
  interaction: AuditedInteraction;
  /** What was read or written, as the caller got it back (a delete: the resource as it was). */
  resource: Resource & { id: string };
  /** The caller's membership profile. */
  who: Reference;
  /** Where the caller signed in from (Login.remoteAddress), when known. */
  address?: string;
  /** The ClientApplication she signed in through (Login.client), when any. */
  client?: Reference;
  /** The server's base URL: the event's observer. */
  baseUrl: string;
  project: string;
  recorded: string;
}

/**
 * One successful REST interaction as Medplum 5.1 records it (packages/server/src/util/auditevent.ts
 * createAuditEvent): the caller as the requestor, and the ClientApplication she signed in through, when it is
 * not the caller herself, as a second agent, not a requestor, of the application type. Medplum also adds
 * tracing ids and the duration as extensions; this server has neither.
 */
export function restAuditEvent(access: RestAccess): AuditEvent {
  const { interaction } = access;
  return {
    resourceType: 'AuditEvent',
    meta: { project: access.project },
    type: {
      system: 'http://terminology.hl7.org/CodeSystem/audit-event-type',
      code: 'rest',
      display: 'Restful Operation',
    },
    subtype: [{ system: 'http://hl7.org/fhir/restful-interaction', code: interaction, display: interaction }],
    action: ACTIONS[interaction],
    recorded: access.recorded,
    source: { observer: { identifier: { value: access.baseUrl } } },
    agent: [
      {
        who: access.who as AuditEventAgent['who'],
        requestor: true,
        ...(access.address ? { network: { address: access.address, type: '2' as const } } : {}),
      },
      ...(access.client?.reference && access.client.reference !== access.who.reference
        ? [{ who: access.client as AuditEventAgent['who'], requestor: false, type: { coding: [APPLICATION_AGENT] } }]
        : []),
    ],
    outcome: '0',
    entity: [{ what: createReference(access.resource) }],
  };
}

/**
 * AuditEvents committed in groups: the events handed over in one turn of the event loop share one
 * transaction (one fsync on a file store) instead of one each; `write` settles once its event is
 * committed. Bot runs wait for it, as Medplum awaits createBotAuditEvent (packages/server/src/bots/
 * execute.ts), after the bot's own transaction, so a crash between the two loses that one AuditEvent,
 * never the bot's work; grouping widens that window by at most one turn of the loop. REST interactions
 * do not wait, as Medplum's save of theirs is not awaited (Repository.logEvent). A group that fails is
 * written entry by entry, so one bad event cannot take the others with it; an AuditEvent that cannot be
 * written never fails what it records.
 */
export class AuditWriter {
  private queue: { audit: AuditEvent; done: () => void }[] = [];

  constructor(private readonly systemRepo: Pick<SqliteRepository, 'withTransaction' | 'createResource'>) {}

  write(audit: AuditEvent): Promise<void> {
    return new Promise<void>((done) => {
      this.queue.push({ audit, done });
      if (this.queue.length === 1) {
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    const group = this.queue;
    this.queue = [];
    try {
      await this.systemRepo.withTransaction(async (tx) => {
        for (const { audit } of group) {
          await tx.createResource(audit);
        }
      });
    } catch {
      for (const { audit } of group) {
        await this.systemRepo.createResource(audit).catch(() => undefined);
      }
    }
    for (const { done } of group) {
      done();
    }
  }
}
