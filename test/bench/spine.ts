import { performance } from 'node:perf_hooks';
import type { Task } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import { OPTION_ITEM } from '../../contracts/work-forms';
import type { DemoActor } from '../support/backend';
import { demoClinician } from '../support/clinicians';
import { startTestGateway } from '../support/gateway';
import { AMLODIPINE, assigned, type Offered, offered } from '../support/spine';
import { type Percentiles, percentiles } from './embedded-store';

export interface SpineBenchResult {
  /** Selection written -> her offer task visible to her, per selection (ms). */
  offerVisible: Percentiles & { max: number; samples: number };
  accept: Percentiles;
  profile: Percentiles;
  /** accept p50 / profile p50. */
  ratioP50: number;
  accepts: number;
}

/**
 * Issue 15 on the embedded Medplum, in one process (the gateway calling it in memory, as the tests do):
 * 1. subscription latency: the clinician's selection (completing the claimed select-treatment task) to
 *    the patient's treatment-offer task visible to her through `GET /v1/fhir/Task`, polled every 2 ms;
 * 2. `POST /v1/tasks/{id}/complete` accepting an offer (each call a distinct offer: an accept happens
 *    once), sequential, each followed by a `GET /v1/patient/profile` of the same patient.
 */
export async function runSpineBench(options: { selections: number; accepts: number }): Promise<SpineBenchResult> {
  const gw = await startTestGateway();
  try {
    const clinician = await demoClinician(gw.backend, 'northwind');
    const request = (patient: DemoActor, method: string, path: string, body?: unknown) =>
      gw.app.request(path, {
        method,
        headers: {
          authorization: `Bearer ${patient.token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });

    const visible: number[] = [];
    for (let i = 0; i < options.selections; i++) {
      const { patient, selection } = await assigned(gw, clinician);
      await clinician.claim(selection.id);
      const start = performance.now();
      // Her submit: the answers to the selection's form, then the task completed with them.
      await clinician.answer(selection.id, [
        { linkId: OPTION_ITEM, answer: [{ valueCoding: { system: SYSTEMS.treatmentOption, code: AMLODIPINE } }] },
      ]);
      for (;;) {
        const found = await request(
          patient,
          'GET',
          `/v1/fhir/Task?code=${encodeURIComponent(`${SYSTEMS.taskKind}|treatment-offer`)}&status=ready`,
        );
        const bundle = (await found.json()) as { entry?: { resource: Task }[] };
        if ((bundle.entry ?? []).length > 0) {
          visible.push(performance.now() - start);
          break;
        }
        if (performance.now() - start > 10_000) {
          throw new Error('the offer did not appear within 10 s');
        }
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    }

    const prepared: Offered[] = [];
    for (let i = 0; i < options.accepts; i++) {
      prepared.push(await offered(gw, clinician));
    }
    await gw.backend.subscriptions.idle();
    const accept: number[] = [];
    const profile: number[] = [];
    for (const { patient, offer } of prepared) {
      let start = performance.now();
      const answered = await request(patient, 'POST', `/v1/tasks/${offer.id}/complete`, { decision: 'accept' });
      await answered.arrayBuffer();
      accept.push(performance.now() - start);
      if (answered.status !== 200) {
        throw new Error(`accept answered ${answered.status}`);
      }
      start = performance.now();
      const read = await request(patient, 'GET', '/v1/patient/profile');
      await read.arrayBuffer();
      profile.push(performance.now() - start);
    }
    const acceptP = percentiles(accept);
    const profileP = percentiles(profile);
    return {
      offerVisible: { ...percentiles(visible), max: Math.max(...visible), samples: visible.length },
      accept: acceptP,
      profile: profileP,
      ratioP50: acceptP.p50 / profileP.p50,
      accepts: accept.length,
    };
  } finally {
    gw.close();
  }
}
