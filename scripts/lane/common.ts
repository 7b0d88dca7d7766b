import { MedplumClient } from '@medplum/core';
import type { AuditEvent, Bundle, Condition, Resource, Task, TaskOutput } from '@medplum/fhirtypes';
import { DEMO_PASSWORD } from '../../src/provision/demo';
import { type createPatientCareClient, PatientCareApiError } from '../../src/sdk';
import type { JourneyProgress } from '../demo';
import type { GatewayInstance, MadeCall } from './gateways';
import type { OrderProbe } from './orders';

/** What every family of checks in the lane shares: the table's rows, calls to Medplum and how an answer is described, the people. */

export type Result = 'ok' | 'held' | 'FAILED' | 'not reached' | 'pending';

export interface Row {
  step: string;
  result: Result;
  detail: string;
}

export const rows: Row[] = [];

export const row = (step: string, result: Result, detail: string): void => {
  rows.push({ step, result, detail });
  console.error(`${result.padEnd(11)} ${step}${detail ? ` — ${detail}` : ''}`);
};

export const PUBLIC_URL = 'http://localhost:8080';

export const DAY = 86_400_000;

export const message = (err: unknown): string => {
  if (err instanceof PatientCareApiError) {
    const details = err.details ? ` ${JSON.stringify(err.details).slice(0, 200)}` : '';
    return `${err.status} ${err.code}: ${err.message}${details}`;
  }
  return err instanceof Error ? err.message : String(err);
};

export interface Answer {
  status: number;
  text: string;
  body: unknown;
  contentType: string;
  bytes: number;
}

export async function answerOf(response: Response): Promise<Answer> {
  const raw = new Uint8Array(await response.arrayBuffer());
  const text = new TextDecoder().decode(raw);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return {
    status: response.status,
    text,
    body,
    contentType: response.headers.get('content-type') ?? '',
    bytes: raw.byteLength,
  };
}

/**
 * One HTTP call to Medplum with a token. The admin's own look-ups wait out the FHIR quota (429).
 * `extended`: Medplum's extended mode (`X-Medplum: extended`, what MedplumClient, and so Medplum's app
 * and the bots, always send): a resource then shows `meta.author`, the writer Medplum stamped.
 */
export async function medplumCall(
  baseUrl: string,
  token: string,
  method: string,
  path: string,
  options: { body?: unknown; waitOutQuota?: boolean; extended?: boolean } = {},
): Promise<Answer> {
  for (let attempt = 0; ; attempt++) {
    const response = await fetch(new URL(path, baseUrl), {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        accept: 'application/fhir+json, application/json',
        ...(options.body === undefined ? {} : { 'content-type': 'application/fhir+json' }),
        ...(options.extended ? { 'x-medplum': 'extended' } : {}),
      },
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });
    const answer = await answerOf(response);
    if (answer.status !== 429 || !options.waitOutQuota || attempt >= 3) {
      return answer;
    }
    const wait = /"msBeforeNext"\s*:\s*(\d+)/.exec(answer.text.replaceAll('\\"', '"'))?.[1];
    const ms = Math.min(Number(wait ?? 20_000) + 500, 65_000);
    console.error(`            (the admin's FHIR quota is spent: waiting ${(ms / 1000).toFixed(0)} s)`);
    await new Promise((resolve) => setTimeout(resolve, ms));
  }
}

export const entriesOf = (body: unknown): Resource[] =>
  ((body as Bundle | undefined)?.entry ?? []).map((e) => e.resource).filter((r): r is Resource => Boolean(r));

/** What came back, in a few words: status, and what the body is. */
export function describe(answer: Answer): string {
  const body = answer.body as (Resource & { issue?: { details?: { text?: string } }[] }) | undefined;
  if (answer.status >= 400) {
    const text = body?.issue?.[0]?.details?.text ?? (body as { error?: { code?: string } })?.error?.code;
    return `${answer.status}${text ? ` (${String(text).slice(0, 80)})` : ''}`;
  }
  if (body?.resourceType === 'Bundle') {
    return `${answer.status}, a Bundle of ${entriesOf(body).length}`;
  }
  if (body?.resourceType) {
    return `${answer.status}, ${body.resourceType}/${body.id ?? ''}`;
  }
  return `${answer.status}, ${answer.contentType.split(';')[0] || 'a body'} of ${answer.bytes} bytes`;
}

export const REFUSED = [403, 404];

/** A write Medplum must not take: a writeConstraint refuses it (403), or validation (400). */
export const REJECTED = [400, 403];

export interface Person {
  who: string;
  token: string;
  profile: string;
}

/** Sessions by Medplum and email: each person signs in once (Medplum 5.1 takes 5 sign-ins a minute per address). */
const sessions = new Map<string, Promise<Omit<Person, 'who'>>>();

/** Signs a demo person in through Medplum's own login (email and password, then the code), once a run. */
export async function signIn(
  baseUrl: string,
  projectId: string,
  who: string,
  email: string,
  password = DEMO_PASSWORD,
): Promise<Person> {
  const key = `${baseUrl} ${email}`;
  let session = sessions.get(key);
  if (!session) {
    session = newSession(baseUrl, projectId, email, password);
    session.catch(() => sessions.delete(key));
    sessions.set(key, session);
  }
  return { ...(await session), who };
}

async function newSession(
  baseUrl: string,
  projectId: string,
  email: string,
  password: string,
): Promise<Omit<Person, 'who'>> {
  const client = new MedplumClient({ baseUrl, cacheTime: 0 });
  const login = await client.startLogin({ email, password, projectId });
  if (!login.code) {
    throw new Error(`${email}: Medplum asked for more than a password`);
  }
  await client.processCode(login.code);
  const profile = client.getProfile();
  return { token: client.getAccessToken() as string, profile: `${profile?.resourceType}/${profile?.id}` };
}

/** The password of the patients the lane registers. */
export const NEWCOMER_PASSWORD = 'a long enough lane password';

/** A new patient registered through a tenant's app (`auth/newuser` -> `auth/newpatient`), never homed. */
export async function register(
  baseUrl: string,
  projectId: string,
  clientId: string,
): Promise<Person & { email: string }> {
  const client = new MedplumClient({ baseUrl, cacheTime: 0 });
  const email = `newcomer.${Date.now()}.${Math.random().toString(36).slice(2, 8)}@example.com`;
  const user = await client.startNewUser({
    firstName: 'Nina',
    lastName: 'Newcomer',
    email,
    password: NEWCOMER_PASSWORD,
    projectId,
    clientId,
    recaptchaToken: '',
  });
  const registered = await client.startNewPatient({ login: user.login, projectId });
  await client.processCode(registered.code as string);
  const profile = client.getProfile();
  return {
    who: 'a new patient, not yet homed',
    email,
    token: client.getAccessToken() as string,
    profile: `${profile?.resourceType}/${profile?.id}`,
  };
}

export interface AttackContext {
  baseUrl: string;
  projectId: string;
  adminToken: string;
  adminGet: (path: string) => Promise<Answer>;
  gatewayFetch: typeof fetch;
  progress: JourneyProgress;
  edgeStatementKey: string;
  /** A demo tenant's patient app (found by provisioning key), to register a new patient through. */
  appIdOf: (tenantKey: string) => string;
  /** What she read of the journey's order just before it decided it (undefined: it decided none). */
  orderProbe?: OrderProbe;
  /** Makes workflow calls again through the gateway and compares them with the bots' own answers (`repeats`). */
  repeat: (made: MadeCall[]) => Promise<void>;
  /** The gateway instances behind `gatewayFetch` (its round robin), each to call directly (N gateways). */
  instances: GatewayInstance[];
}

export const ICD10CM = 'http://hl7.org/fhir/sid/icd-10-cm';

/** How a task output is named: `'questionnaire-response'` (its text) or `coding 'questionnaire-response'`. */
export const outputName = (output: TaskOutput): string =>
  output.type?.text !== undefined
    ? `'${output.type.text}'`
    : `coding '${output.type?.coding?.map((c) => c.code).join(', ')}'`;

/** How long the lane waits for what a Subscription does (Medplum delivers through a queue). */
export const SUBSCRIPTION_WAIT_MS = 30_000;

export const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The admin's read in extended mode: `meta.author` shown (who wrote each version, as the bots see it). */
export const adminRead = (ctx: AttackContext, path: string) =>
  medplumCall(ctx.baseUrl, ctx.adminToken, 'GET', path, { waitOutQuota: true, extended: true });

/** What eligibility did about one review, as the admin reads it. */
export interface Aftermath {
  runs: AuditEvent[];
  conditions: Condition[];
  selections: Task[];
  keyedCondition: Condition | undefined;
  keyedSelection: Task | undefined;
  seconds: number;
}

/** A gateway answer with the header a throttled one carries. */
export type GatewayAnswer = Answer & { retryAfter: string | null };

/** The envelope of a gateway error (`{error: {code, message, details}}`). */
export const errorOf = (answer: Answer): { code?: string; message?: string; details?: Record<string, unknown> } =>
  (answer.body as { error?: { code?: string; message?: string; details?: Record<string, unknown> } } | undefined)
    ?.error ?? {};

/** A gateway answer in a few words; a 5xx prominently, with the gateway's message (a search Medplum refused). */
export const gatewayDescribe = (answer: Answer): string =>
  answer.status >= 500
    ? `a ${answer.status} (SERVER ERROR): ${errorOf(answer).code ?? ''} ${errorOf(answer).message ?? answer.text.slice(0, 200)}`
    : describe(answer);

export const sameSet = (a: readonly string[], b: readonly string[]): boolean =>
  a.length === b.length && a.every((x) => b.includes(x)) && b.every((x) => a.includes(x));

/** The last line of a bot's output (an AuditEvent's outcomeDesc), where its error is. */
export const lastLine = (text: string | undefined): string =>
  (text ?? '').trim().split('\n').at(-1)?.slice(0, 200) ?? '';

export const RXNORM = 'http://www.nlm.nih.gov/research/umls/rxnorm';

/** A bot's refusal as data (`{ok: false, error}`). */
export interface BotError {
  status?: number;
  code?: string;
  message?: string;
  details?: Record<string, unknown>;
}

/**
 * What a patient app does to start an assessment of her catalog (the offering whose canonical contains
 * `path`) through the gateway: accept what its requirements ask, then start it. Its answer: her tasks.
 */
export async function startAssessmentThroughGateway(api: ReturnType<typeof createPatientCareClient>, path: string) {
  const { protocols } = await api.protocols.list();
  const offering = protocols.find((p) => p.type === 'assessment' && p.assessment.includes(path));
  if (!offering) {
    throw new Error(`no ${path} among her offerings`);
  }
  const { unmet } = await api.agreements.requirements({ healthcareService: offering.healthcareService });
  if (unmet.length > 0) {
    await api.agreements.accept(unmet);
  }
  return api.assessments.start({ healthcareService: offering.healthcareService });
}
