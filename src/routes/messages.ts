import type { MedplumClient } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import { absent } from '../../bots/lib/absent';
import { isHerThread, isMessageOf, messageView, threadView } from '../../bots/lib/messages';
import {
  listThreadsRoute,
  MAX_THREAD_MESSAGES,
  MAX_THREADS,
  MessageSchema,
  MessageThreadPageSchema,
  MessageThreadSchema,
  MessageThreadsSchema,
  readThreadRoute,
  sendMessageRoute,
  startThreadRoute,
} from '../../contracts/messages';
import { SYSTEMS } from '../../contracts/systems';
import type { App } from '../app-env';
import { notFound } from '../errors';
import { callBot } from '../medplum/bots';
import { medplumOf } from '../medplum/client';

/** The latest sent message of a thread she may read (her policy: to her or from her). */
const MESSAGE_ORDER = { _sort: '-sent', 'sent:missing': 'false' };

async function lastMessage(medplum: MedplumClient, threadId: string): Promise<Communication | undefined> {
  const found = await medplum.searchResources('Communication', {
    'part-of': `Communication/${threadId}`,
    ...MESSAGE_ORDER,
    _count: '1',
  });
  return found.find((m) => isMessageOf(m, threadId));
}

/**
 * Her threads with her care team (contracts/messages.ts), read with her own token: her policy lets her
 * read the Communications about her that name her as recipient or sender, never a clinician's internal
 * comment on her chart. Sending is the send-message bot's (it checks the thread is hers).
 */
export function registerMessageRoutes(app: App): void {
  app.openapi(listThreadsRoute, async (c) => {
    const medplum = medplumOf(c);
    const patientId = c.get('session').patientId;
    const her = `Patient/${patientId}`;
    const headers = (
      await medplum.searchResources('Communication', {
        subject: her,
        recipient: her,
        'part-of:missing': 'true',
        status: 'in-progress,completed',
        _sort: '-_lastUpdated',
        _count: String(MAX_THREADS),
      })
    ).filter((header): header is Communication & { id: string } => !!header.id && isHerThread(header, patientId));
    // A thread opened with no message yet is not listed (nor does Medplum's Provider app list one).
    const threads = (
      await Promise.all(
        headers.map(async (header) => {
          const last = await lastMessage(medplum, header.id);
          return last ? [threadView(header, patientId, last)] : [];
        }),
      )
    ).flat();
    return c.json(MessageThreadsSchema.parse({ threads }), 200);
  });

  app.openapi(readThreadRoute, async (c) => {
    const medplum = medplumOf(c);
    const patientId = c.get('session').patientId;
    const { id } = c.req.valid('param');
    // A thread she may not read (another patient's, an internal one) is not found, as one that is not.
    const header = await medplum.readResource('Communication', id).catch(absent);
    if (!header?.id || !isHerThread(header, patientId)) {
      throw notFound('No thread of yours has this id');
    }
    const found = await medplum.searchResources('Communication', {
      'part-of': `Communication/${id}`,
      ...MESSAGE_ORDER,
      _count: String(MAX_THREAD_MESSAGES),
    });
    const messages = found
      .filter((m) => isMessageOf(m, id))
      .reverse()
      .flatMap((m) => messageView(m, patientId) ?? []);
    return c.json(
      MessageThreadPageSchema.parse({
        thread: threadView(header as Communication & { id: string }, patientId, found[0]),
        messages,
      }),
      200,
    );
  });

  app.openapi(startThreadRoute, async (c) => {
    const body = c.req.valid('json');
    const result = await callBot(medplumOf(c), { system: SYSTEMS.bots, value: 'send-message' }, body);
    return c.json(MessageThreadSchema.parse(result), 201);
  });

  app.openapi(sendMessageRoute, async (c) => {
    const { id } = c.req.valid('param');
    const body = c.req.valid('json');
    const result = await callBot(
      medplumOf(c),
      { system: SYSTEMS.bots, value: 'send-message' },
      { thread: id, ...body },
    );
    return c.json(MessageSchema.parse(result), 201);
  });
}
