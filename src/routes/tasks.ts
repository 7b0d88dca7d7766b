import { PATIENT_TASK_TAG, patientTaskView, taskKind } from '../../bots/lib/journey';
import { SYSTEMS } from '../../contracts/systems';
import { CompletedTaskSchema, completeTaskRoute, listTasksRoute, PatientTasksSchema } from '../../contracts/tasks';
import type { App } from '../app-env';
import { edgeStatement } from '../edge/request';
import type { EdgeSigner } from '../edge/statement';
import { callBot } from '../medplum/bots';
import { type CatalogCache, cachedDefinitions } from '../medplum/catalog-cache';
import { medplumOf } from '../medplum/client';
import { repeatedCompletion } from '../medplum/finished-work';

/** The most open tasks `GET /v1/tasks` lists (one search page). */
const MAX_OPEN_TASKS = 100;

export function registerTaskRoutes(app: App, edgeSigner: EdgeSigner | undefined, catalog: CatalogCache): void {
  // A read with her own token (her policy: her own compartment), in the view the workflows answer with.
  // A measurement task's definitions are versions, which never change: each is read with her token once
  // and kept for her next calls a little while (keyed by her, so nobody is served a read her policy did
  // not allow).
  app.openapi(listTasksRoute, async (c) => {
    const medplum = medplumOf(c);
    const her = `Patient/${c.get('session').patientId}`;
    const found = await medplum.searchResources('Task', {
      _tag: `${PATIENT_TASK_TAG.system}|${PATIENT_TASK_TAG.code}`,
      subject: her,
      status: 'ready,in-progress',
      _sort: '-_lastUpdated',
      _count: String(MAX_OPEN_TASKS),
    });
    const open = found.filter((task) => task.for?.reference === her && taskKind(task) !== undefined);
    const definitions = cachedDefinitions(catalog, medplum, c.get('session').patientId);
    const tasks = await Promise.all(open.map((task) => patientTaskView(medplum, task, definitions)));
    return c.json(PatientTasksSchema.parse({ tasks }), 200);
  });

  app.openapi(completeTaskRoute, async (c) => {
    const { id } = c.req.valid('param');
    const body = c.req.valid('json');
    // A repeat of this very completion is answered from her own read of the task.
    const repeat = await repeatedCompletion(medplumOf(c), c.get('session').patientId, id, body);
    if (repeat) {
      return c.json(CompletedTaskSchema.parse(repeat), 200);
    }
    // An answer to an offer is a consent: its proof names the session it came from.
    const edge = 'decision' in body ? await edgeStatement(c, edgeSigner) : undefined;
    const result = await callBot(
      medplumOf(c),
      { system: SYSTEMS.bots, value: 'complete-task' },
      { task: id, ...body, ...(edge ? { edge } : {}) },
    );
    return c.json(CompletedTaskSchema.parse(result), 200);
  });
}
