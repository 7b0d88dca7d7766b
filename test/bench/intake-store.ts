import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { HealthcareService, Resource } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import type { DemoActor } from '../support/backend';
import { startTestGateway, type TestGateway } from '../support/gateway';
import { freshPatient } from '../support/patients';

/** The demo catalog's platform assessment (issue 14): a questionnaire task and a body-weight task. */
const WEIGHT_INTAKE = `${SYSTEMS.provisioning}|service-weight-intake`;

/** What a measurement completion sends: the weight task's one reading. */
export const WEIGHT_READING = JSON.stringify({
  measurements: [{ code: 'http://loinc.org|29463-7', value: 80, unit: 'kg' }],
});

/** A patient with a started weight-intake assessment, and her measurement task (`Task/<id>`). */
export interface StartedIntake {
  token: string;
  measurementTask: string;
}

export interface IntakeStore {
  healthcareService: string;
  /** Started, then completed her measurement task once: resumes and replays are hers. */
  resumer: StartedIntake;
  /** Started, measurement task ready: one first completion each. */
  ready: StartedIntake[];
  patients: number;
  resources: number;
  seedSeconds: number;
}

/**
 * Builds a store file for the intake bench, on the embedded Medplum as `npm start` provisions it, for
 * the Medplum at `baseUrl` that will serve it (tokens are minted for that issuer and live 1 h):
 * - the resumer and `ready` patients go through the gateway, as a patient app would (accept the
 *   assessment's agreements, start it; the resumer also completes her measurement);
 * - the rest, up to `patients` Patients in all, are copies of the resumer's whole record (episode,
 *   tasks, reading, consents, audit trail, each id replaced by a new one), inserted straight into the
 *   store as the store bench inserts its patients: ~12 s per 1,000, against ~3 min through the gateway.
 */
export async function buildIntakeStore(options: {
  dbPath: string;
  baseUrl: string;
  patients: number;
  ready: number;
}): Promise<IntakeStore> {
  const started = performance.now();
  const gw = await startTestGateway({}, { dbPath: options.dbPath, baseUrl: options.baseUrl });
  try {
    const service = await gw.backend.systemRepo.searchOne<HealthcareService>({
      resourceType: 'HealthcareService',
      filters: [{ code: '_tag', operator: 'eq', value: WEIGHT_INTAKE }],
    });
    if (!service) {
      throw new Error('the demo catalog has no weight-intake HealthcareService');
    }
    const healthcareService = `HealthcareService/${service.id}`;
    const first = await startIntake(gw, healthcareService);
    const resumer = first.intake;
    const completed = await gw.call('POST', `/v1/${resumer.measurementTask.replace('Task/', 'tasks/')}/complete`, {
      token: resumer.token,
      rawBody: WEIGHT_READING,
      headers: { 'content-type': 'application/json' },
    });
    if (completed.status !== 200) {
      throw new Error(`the resumer's measurement completion answered ${completed.status}: ${completed.text}`);
    }
    const ready: StartedIntake[] = [];
    for (let i = 0; i < options.ready; i++) {
      ready.push((await startIntake(gw, healthcareService)).intake);
    }
    const copies = options.patients - countOf(gw, 'Patient');
    await insertCopies(gw, first.patient.patient.id, copies);
    return {
      healthcareService,
      resumer,
      ready,
      patients: countOf(gw, 'Patient'),
      resources: countOf(gw),
      seedSeconds: (performance.now() - started) / 1000,
    };
  } finally {
    gw.close();
  }
}

const countOf = (gw: TestGateway, type?: string) =>
  (
    gw.backend.db.reader
      .prepare(type ? 'SELECT count(*) AS n FROM resource WHERE type = ?' : 'SELECT count(*) AS n FROM resource')
      .get(...(type ? [type] : [])) as { n: number }
  ).n;

/** A fresh northwind patient who accepts the assessment's agreements and starts it (201). */
async function startIntake(
  gw: TestGateway,
  healthcareService: string,
): Promise<{ patient: DemoActor; intake: StartedIntake }> {
  const patient = await freshPatient(gw.backend, { tenant: 'northwind', state: 'CA' });
  const token = patient.token;
  const query = `healthcareService=${encodeURIComponent(healthcareService)}`;
  const { unmet } = (await gw.call('GET', `/v1/agreements/requirements?${query}`, { token })).body as {
    unmet: unknown[];
  };
  if (unmet.length > 0) {
    const accepted = await gw.call('POST', '/v1/agreements/acceptances', { token, body: { agreements: unmet } });
    if (accepted.status !== 200) {
      throw new Error(`acceptance answered ${accepted.status}: ${accepted.text}`);
    }
  }
  const start = await gw.call('POST', '/v1/assessments', { token, body: { healthcareService } });
  if (start.status !== 201) {
    throw new Error(`POST /v1/assessments answered ${start.status}: ${start.text}`);
  }
  const { tasks } = start.body as { tasks: { task: string; kind: string }[] };
  const measurement = tasks.find((t) => t.kind === 'measurement');
  if (!measurement) {
    throw new Error('the weight intake issued no measurement task');
  }
  return { patient, intake: { token, measurementTask: measurement.task } };
}

/**
 * `copies` patients like `patientId`: every resource whose JSON names her (her Patient, episode,
 * tasks, readings, consents, audit events), each copy with new ids throughout. Her sign-in (User,
 * ProjectMembership, Login) is not copied: the copies are records, not callers.
 */
async function insertCopies(gw: TestGateway, patientId: string, copies: number): Promise<void> {
  const rows = gw.backend.db.reader
    .prepare(
      "SELECT id, content FROM resource WHERE content LIKE ? AND type NOT IN ('User', 'ProjectMembership', 'Login')",
    )
    .all(`%${patientId}%`) as { id: string; content: string }[];
  const ids = [...new Set([patientId, ...rows.map((r) => r.id)])];
  const idPattern = new RegExp(ids.map((id) => id.replace(/[^\w-]/g, '')).join('|'), 'g');
  const batch = 50;
  for (let start = 0; start < copies; start += batch) {
    await gw.backend.systemRepo.withTransaction(async (tx) => {
      for (let copy = start; copy < Math.min(start + batch, copies); copy++) {
        const renamed = new Map(ids.map((id) => [id, randomUUID()]));
        for (const row of rows) {
          const resource = JSON.parse(row.content.replace(idPattern, (id) => renamed.get(id) as string)) as Resource;
          await tx.createResource(resource, { assignedId: true });
        }
      }
    });
  }
}
