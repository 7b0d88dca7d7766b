import assert from 'node:assert/strict';
import type { Attachment, Consent } from '@medplum/fhirtypes';
import type { DemoActor, TestBackend } from './backend';
import type { TestGateway } from './gateway';

/**
 * Every version of every record except the audit trail (AuditEvents, Logins): "nothing written" means
 * this is equal before and after.
 */
export function storeSnapshot(backend: TestBackend) {
  return {
    counts: backend.db.reader
      .prepare("SELECT type, count(*) AS n FROM resource WHERE type NOT IN ('AuditEvent', 'Login') GROUP BY type")
      .all(),
    versions: backend.db.reader
      .prepare("SELECT count(*) AS n, max(seq) AS s FROM history WHERE type NOT IN ('AuditEvent', 'Login')")
      .get(),
  };
}

export interface StartedAssessment {
  episodeOfCare: string;
  assessment: string;
  tasks: {
    task: string;
    kind: string;
    status: string;
    questionnaire?: string;
    measurements?: { code: string; units: string[] }[];
  }[];
}

/**
 * What a patient app does to start an assessment of her catalog (the offering whose canonical contains
 * `path`): accept what the requirements check asks for, then `POST /v1/assessments` (201).
 */
export async function startAssessment(gw: TestGateway, patient: DemoActor, path: string): Promise<StartedAssessment> {
  const { protocols } = (await gw.call('GET', '/v1/protocols', { token: patient.token })).body as {
    protocols: { healthcareService: string; assessment?: string }[];
  };
  const offering = protocols.find((p) => p.assessment?.includes(path));
  assert.ok(offering, `${path} is in the catalog`);
  const context = `healthcareService=${encodeURIComponent(offering?.healthcareService as string)}`;
  const { unmet } = (await gw.call('GET', `/v1/agreements/requirements?${context}`, { token: patient.token })).body as {
    unmet: unknown[];
  };
  if (unmet.length > 0) {
    await gw.call('POST', '/v1/agreements/acceptances', { token: patient.token, body: { agreements: unmet } });
  }
  const started = await gw.call('POST', '/v1/assessments', {
    token: patient.token,
    body: { healthcareService: offering?.healthcareService },
  });
  assert.equal(started.status, 201, started.text);
  return started.body as StartedAssessment;
}

/** One answer of a patient's questionnaire: a yes/no, or a file she uploaded (POST /v1/documents). */
type Answer = { linkId: string; valueBoolean: boolean } | { linkId: string; valueAttachment: Attachment };

/**
 * Completes every task of a started assessment as a patient app does: a questionnaire with her
 * completed answers (what the test passes: the questionnaire's required items), a measurement task with one reading per
 * measurement (the value the test gives for its code, in the task's first unit). Each must answer 200.
 */
export async function completeTasks(
  gw: TestGateway,
  patient: DemoActor,
  tasks: StartedAssessment['tasks'],
  readings: Record<string, number>,
  answer: Answer | Answer[] = {
    linkId: 'previous-programs',
    valueBoolean: false,
  },
): Promise<void> {
  const given = Array.isArray(answer) ? answer : [answer];
  for (const task of tasks) {
    let body: unknown = {
      measurements: (task.measurements ?? []).map((m) => ({ code: m.code, value: readings[m.code], unit: m.units[0] })),
    };
    if (task.kind === 'questionnaire') {
      const answers = await gw.call('POST', '/v1/fhir/QuestionnaireResponse', {
        token: patient.token,
        body: {
          resourceType: 'QuestionnaireResponse',
          status: 'completed',
          questionnaire: task.questionnaire,
          item: given.map(({ linkId, ...value }) => ({ linkId, answer: [value] })),
        },
      });
      body = { questionnaireResponse: `QuestionnaireResponse/${(answers.body as { id: string }).id}` };
    }
    const done = await gw.call('POST', `/v1/${task.task.replace('Task/', 'tasks/')}/complete`, {
      token: patient.token,
      body,
    });
    assert.equal(done.status, 200, `${task.kind} ${done.text}`);
  }
}

/**
 * What a patient app does to withdraw one of her accepted agreements (the first with a policy), with
 * the consequence acknowledged: afterwards the agreements gate refuses what it guards. Must answer 200.
 */
export async function withdrawAnAgreement(gw: TestGateway, patient: DemoActor): Promise<void> {
  const consents = await gw.backend.systemRepo.searchResources<Consent>({
    resourceType: 'Consent',
    filters: [{ code: 'patient', operator: 'eq', value: `Patient/${patient.patient.id}` }],
  });
  const accepted = consents.find((c) => c.status === 'active' && c.policy?.[0]?.uri);
  assert.ok(accepted, 'she has an accepted agreement');
  const withdrawn = await gw.call('POST', '/v1/agreements/withdrawals', {
    token: patient.token,
    body: { agreementUrl: accepted.policy?.[0]?.uri?.split('|')[0], acknowledgeConsequence: true },
  });
  assert.equal(withdrawn.status, 200, withdrawn.text);
}
