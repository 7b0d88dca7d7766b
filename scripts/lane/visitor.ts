import type { Patient } from '@medplum/fhirtypes';
import { createPatientCareClient } from '../../src/sdk';
import {
  type Answer,
  type AttackContext,
  answerOf,
  errorOf,
  gatewayDescribe,
  type Person,
  PUBLIC_URL,
  register,
} from './common';

/** A new patient of the lane's own (the visit families'): her identity, her schedule-visit task, her plan. */
export interface NewVisitor {
  person: Person;
  patient: string;
  task: string;
  /** Her visit team (a live visit's task names it; '' when it names none). */
  careTeam: string;
  carePlan: string;
}

/**
 * What the visit families do as a new patient: calls through the in-process gateway with her token, her
 * moves (her record's address), what her plan asks where she lives accepted, and a new Northwind patient
 * enrolled in the monitoring program and activated (registered through Northwind's app, homed in Fresno, CA).
 */
export function visitorKit(ctx: AttackContext) {
  const call = async (person: Person, method: string, path: string, body?: unknown): Promise<Answer> =>
    answerOf(
      await ctx.gatewayFetch(`${PUBLIC_URL}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${person.token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
    );
  const said = (answer: Answer) =>
    answer.status < 300 ? gatewayDescribe(answer) : `${gatewayDescribe(answer)} ${JSON.stringify(errorOf(answer))}`;
  const FRESNO = { line: ['36 Licence Lane'], city: 'Fresno', state: 'CA', postalCode: '93701', country: 'US' };
  const ALBANY = { line: ['36 Licence Lane'], city: 'Albany', state: 'NY', postalCode: '12207', country: 'US' };

  /** She moves: her record's address, as her app writes it (`PUT /v1/fhir/Patient/{id}` through the gateway). */
  const moveTo = async (v: Pick<NewVisitor, 'person' | 'patient'>, address: typeof FRESNO): Promise<string> => {
    const path = `/v1/fhir/${v.patient}`;
    const read = await call(v.person, 'GET', path);
    if (read.status !== 200) {
      throw new Error(`her GET ${path}: ${said(read)}`);
    }
    const written = await call(v.person, 'PUT', path, { ...(read.body as Patient), address: [address] });
    if (written.status !== 200) {
      throw new Error(`her PUT ${path} (${address.state}): ${said(written)}`);
    }
    return `PUT ${path} (${address.city}, ${address.state}): 200`;
  };
  /** What her plan asks of her where she lives now (a state may ask an agreement of its own), accepted. */
  const acceptWhatIsAsked = async (v: NewVisitor): Promise<string> => {
    const asked = await call(v.person, 'GET', `/v1/agreements/requirements?carePlan=${encodeURIComponent(v.carePlan)}`);
    if (asked.status !== 200) {
      throw new Error(`GET /v1/agreements/requirements?carePlan=: ${said(asked)}`);
    }
    const unmet = (asked.body as { unmet?: { url: string; version: string }[] }).unmet ?? [];
    if (unmet.length === 0) {
      return 'her plan asks nothing more there';
    }
    const accepted = await call(v.person, 'POST', '/v1/agreements/acceptances', { agreements: unmet });
    if (accepted.status >= 300) {
      throw new Error(`POST /v1/agreements/acceptances: ${said(accepted)}`);
    }
    return `asked ${unmet.map((a) => `${a.url}|${a.version}`).join(', ')}: accepted (${accepted.status})`;
  };
  /**
   * A new Northwind patient in Fresno, CA, enrolled in the monitoring program and activated: her
   * schedule-visit task of `visitType` (a live one names her visit team).
   */
  const newVisitor = async (
    who: string,
    visitType: 'video-visit' | 'async-review' = 'video-visit',
  ): Promise<NewVisitor> => {
    const person = { ...(await register(ctx.baseUrl, ctx.projectId, ctx.appIdOf('northwind'))), who };
    const api = createPatientCareClient({ baseUrl: PUBLIC_URL, accessToken: person.token, fetch: ctx.gatewayFetch });
    const { patient } = await api.patient.home();
    await moveTo({ person, patient }, FRESNO);
    const { protocols } = await api.protocols.list();
    const program = protocols.find(
      (p) => p.type === 'program' && p.protocol.includes('programs/blood-pressure-monitoring'),
    );
    if (!program) {
      throw new Error('no blood-pressure monitoring program among her offerings');
    }
    const { unmet } = await api.agreements.requirements({ healthcareService: program.healthcareService });
    if (unmet.length > 0) {
      await api.agreements.accept(unmet);
    }
    const { carePlan } = await api.enrollments.create({ healthcareService: program.healthcareService });
    const active = await api.enrollments.activate(carePlan);
    const task = active.tasks?.find((t) => t.kind === 'schedule-visit' && t.visitType === visitType);
    if (!task || (visitType === 'video-visit' && !task.careTeam)) {
      throw new Error(
        `activation issued no ${visitType} schedule-visit task${visitType === 'video-visit' ? ' naming a visit team' : ''} (tasks: ${(active.tasks ?? []).map((t) => `${t.kind}${t.visitType ? ` ${t.visitType}` : ''}`).join(', ') || 'none'})`,
      );
    }
    return { person, patient, task: task.task, careTeam: task.careTeam ?? '', carePlan };
  };
  return { call, said, moveTo, acceptWhatIsAsked, newVisitor, FRESNO, ALBANY };
}
