import type { z } from '@hono/zod-openapi';
import type { Bundle, OperationOutcome, Patient, QuestionnaireResponse, Resource } from '@medplum/fhirtypes';
import { AccessLogQuerySchema, AccessLogSchema, accessLogRoute } from '../../contracts/access-log';
import {
  AcceptanceRequestSchema,
  AcceptancesSchema,
  acceptancesRoute,
  RequirementsQuerySchema,
  RequirementsSchema,
  requirementsRoute,
  WithdrawalRequestSchema,
  WithdrawnSchema,
  withdrawalsRoute,
} from '../../contracts/agreements';
import {
  AppointmentSchema,
  BookRequestSchema,
  bookRoute,
  cancelRoute,
  EncounterAnswerSchema,
  EncounterRequestSchema,
  encounterRoute,
  getAppointmentRoute,
  RescheduleRequestSchema,
  rescheduleRoute,
  segmentsRoute,
} from '../../contracts/appointments';
import { AssessmentSchema, StartAssessmentRequestSchema, startAssessmentRoute } from '../../contracts/assessments';
import { DocumentAttachmentSchema, readDocumentRoute, uploadDocumentRoute } from '../../contracts/documents';
import {
  activateEnrollmentRoute,
  EnrollmentSchema,
  EnrollRequestSchema,
  enrollRoute,
  unenrollRoute,
} from '../../contracts/enrollments';
import { ErrorEnvelopeSchema } from '../../contracts/errors';
import { EVENT_TYPES as CONTRACT_EVENT_TYPES } from '../../contracts/event-types';
import {
  EventsQuerySchema,
  EventsSchema,
  EventTicketSchema,
  eventsRoute,
  eventTicketRoute,
} from '../../contracts/events';
import {
  createQuestionnaireResponseRoute,
  readPatientRoute,
  readQuestionnaireResponseRoute,
  readRoute,
  searchQuestionnaireResponsesRoute,
  searchRoute,
  updatePatientRoute,
  updateQuestionnaireResponseRoute,
} from '../../contracts/fhir';
import {
  listThreadsRoute,
  MessageSchema,
  MessageThreadPageSchema,
  MessageThreadSchema,
  MessageThreadsSchema,
  readThreadRoute,
  SendMessageRequestSchema,
  StartThreadRequestSchema,
  sendMessageRoute,
  startThreadRoute,
} from '../../contracts/messages';
import { decideOrderRoute, OrderDecisionsRequestSchema, OrderDecisionsSchema } from '../../contracts/orders';
import { ConfigSchema, configRoute, homeRoute, PatientHomeSchema, profileRoute } from '../../contracts/patient';
import { ProtocolsSchema, protocolsRoute } from '../../contracts/protocols';
import { createRequestRoute, PatientRequestAnswerSchema, PatientRequestSchema } from '../../contracts/requests';
import { AvailabilityQuerySchema, AvailabilitySchema, availabilityRoute } from '../../contracts/scheduling';
import {
  CompletedTaskSchema,
  CompleteTaskRequestSchema,
  completeTaskRoute,
  listTasksRoute,
  PatientTasksSchema,
} from '../../contracts/tasks';
import { base64url } from '../shared/base64url';
import { msBeforeNext } from '../shared/rate-limit';

/** Her events' types, as the stream names them (`source.addEventListener(type, ...)` for each one wanted). */
export const EVENT_TYPES: readonly EventType[] = eventTypes();
/** One of her events' types (`task.ready`, `offer.ready`, `message.received`...). */
export type EventType = ReturnType<typeof eventTypes>[number];
function eventTypes() {
  // A copy: the package's declarations spell the types out instead of importing the contracts.
  return [...CONTRACT_EVENT_TYPES];
}

/** How many times a POST is sent again, with its Idempotency-Key, when no answer came back. */
const RETRIES = 2;

/** A failure answered by the API: the error envelope, with its HTTP status. */
export class PatientCareApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'PatientCareApiError';
  }
}

export interface ClientOptions {
  /** The environment's host, e.g. https://api.example.com */
  baseUrl: string;
  /**
   * The patient's access token (not needed for `config.get`), or the hook that gives it before each call:
   * a function returning a fresh one (after `refreshSignIn`, or `MedplumClient`'s own refresh) is how an app
   * keeps a long session without making a new client.
   */
  accessToken?: string | (() => string | undefined | Promise<string | undefined>);
  /**
   * The Idempotency-Key its POSTs carry (your own: a retry of yours from a queue or after a restart sends
   * the same key, and gets the first answer again). Without it each POST gets a new key of its own.
   * Make one client per operation you retry this way.
   */
  idempotencyKey?: string;
  fetch?: typeof fetch;
}

interface Route {
  method: string;
  path: string;
}

type Query = Record<string, string | number | undefined>;

/** What a call sends: path parameters, query, a JSON body or raw bytes, extra headers. */
interface CallInput {
  params?: Record<string, string>;
  query?: Query;
  body?: unknown;
  /** A body sent as it is (an upload's bytes) with its media type, instead of JSON. */
  raw?: { data: BodyInit; contentType: string };
  headers?: Record<string, string>;
}

/**
 * A method taking the input of a contract schema. Its parameter type is inferred, not written as
 * `z.input<typeof Schema>`, so that the published declarations (packages/sdk) spell the type out and
 * need neither the contracts nor @hono/zod-openapi.
 */
const takes =
  <S extends z.ZodType>(_schema: S) =>
  <M extends (input: z.input<S>) => unknown>(method: M) =>
    method;

/** `takes` for a method on one resource: its id first (the path's `{id}`), then the contract's input. */
const takesForId =
  <S extends z.ZodType>(_schema: S) =>
  <M extends (id: string, input: z.input<S>) => unknown>(method: M) =>
    method;

/**
 * The typed client of the Patient Care API. Its tree mirrors the paths (spec rule 6) and each method
 * is named by its route's operationId, built from the same contracts as the server: `patient.profile()`
 * is `GET /v1/patient/profile`. Responses are checked against the contract schemas.
 */
export function createPatientCareClient(options: ClientOptions) {
  const fetchImpl = options.fetch ?? fetch;
  const base = options.baseUrl.replace(/\/$/, '');

  async function call(route: Route, input: CallInput = {}) {
    const response = await send(route, input);
    const body = (await response.json()) as unknown;
    if (!response.ok) {
      throw apiError(response.status, body);
    }
    return body;
  }

  /** A call whose success is bytes (a document), not JSON. */
  async function callForBytes(route: Route, params: Record<string, string>) {
    const response = await send(route, { params, headers: { accept: '*/*' } });
    if (!response.ok) {
      throw apiError(response.status, await response.json().catch(() => undefined));
    }
    return {
      contentType: response.headers.get('content-type') ?? 'application/octet-stream',
      data: new Uint8Array(await response.arrayBuffer()),
    };
  }

  function apiError(status: number, body: unknown): PatientCareApiError {
    const envelope = ErrorEnvelopeSchema.safeParse(body);
    if (envelope.success) {
      const { code, message, details } = envelope.data.error;
      return new PatientCareApiError(status, code, message, details);
    }
    return new PatientCareApiError(status, 'internal', 'Unexpected error response');
  }

  /**
   * A POST carries an `Idempotency-Key` (a new one per call, unless the caller gave one), and the SDK's
   * own retries reuse it: a call that did not answer (the network failed) or answered that the service
   * was momentarily unable (502, 503, 504) is sent again, at most twice, and whatever the first attempt
   * did is done once. Other methods are sent once.
   */
  async function send(route: Route, input: CallInput): Promise<Response> {
    if (route.method.toUpperCase() !== 'POST') {
      return sendOnce(route, input);
    }
    const headers = { 'idempotency-key': options.idempotencyKey ?? crypto.randomUUID(), ...input.headers };
    for (let attempt = 0; ; attempt++) {
      let response: Response | undefined;
      try {
        response = await sendOnce(route, { ...input, headers });
      } catch (err) {
        if (attempt >= RETRIES) {
          throw err;
        }
      }
      if (response && (attempt >= RETRIES || ![502, 503, 504].includes(response.status))) {
        return response;
      }
      const wait = Math.min(Number(response?.headers.get('retry-after') ?? '1') || 1, 5);
      await response?.arrayBuffer().catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, wait * 1000));
    }
  }

  async function sendOnce(route: Route, input: CallInput): Promise<Response> {
    const path = route.path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(input.params?.[name] ?? ''));
    const search = new URLSearchParams();
    for (const [key, value] of Object.entries(input.query ?? {})) {
      if (value !== undefined) {
        search.set(key, String(value));
      }
    }
    const headers: Record<string, string> = { accept: 'application/json, application/fhir+json', ...input.headers };
    const token = typeof options.accessToken === 'function' ? await options.accessToken() : options.accessToken;
    if (token) {
      headers.authorization = `Bearer ${token}`;
    }
    if (input.body !== undefined) {
      headers['content-type'] = 'application/json';
    }
    if (input.raw) {
      headers['content-type'] = input.raw.contentType;
    }
    // Not `search.size`: browsers before 2023 lack it, and the query would be dropped.
    const queryString = search.toString();
    return fetchImpl(`${base}${path}${queryString ? `?${queryString}` : ''}`, {
      method: route.method.toUpperCase(),
      headers,
      body: input.raw ? input.raw.data : input.body === undefined ? undefined : JSON.stringify(input.body),
    });
  }

  const idOf = (reference: string) => reference.replace(/^Appointment\//, '');
  const ifMatch = (versionId?: string) => (versionId ? { 'if-match': `W/"${versionId}"` } : undefined);

  return {
    config: {
      get: async () => ConfigSchema.parse(await call(configRoute)),
    },
    patient: {
      profile: async () => (await call(profileRoute)) as Patient,
      home: async () => PatientHomeSchema.parse(await call(homeRoute)),
      /** Who opened or changed her records, newest first (`before`: the `next` of the page before). */
      accessLog: takes(AccessLogQuerySchema)(async (query = {}) =>
        AccessLogSchema.parse(await call(accessLogRoute, { query })),
      ),
    },
    protocols: {
      list: async () => ProtocolsSchema.parse(await call(protocolsRoute)),
    },
    documents: {
      /**
       * Uploads a file: a Blob or File (its type and name are used unless given), or bytes with their
       * `contentType`. Answers the attachment to put as it is in a `valueAttachment` answer.
       */
      upload: async (
        file: Blob | ArrayBuffer | Uint8Array<ArrayBuffer>,
        options: { contentType?: string; filename?: string } = {},
      ) => {
        const blob = typeof Blob !== 'undefined' && file instanceof Blob ? file : undefined;
        const contentType = options.contentType ?? blob?.type ?? 'application/octet-stream';
        const filename = options.filename ?? (blob && 'name' in blob ? String(blob.name) : undefined);
        return DocumentAttachmentSchema.parse(
          await call(uploadDocumentRoute, { query: { filename }, raw: { data: file, contentType } }),
        );
      },
      /** One of her uploads, by its id or its attachment's `Binary/<id>`: the bytes and their type. */
      read: async (document: string) => callForBytes(readDocumentRoute, { id: document.replace(/^Binary\//, '') }),
    },
    assessments: {
      /** Starts or resumes the assessment an offering of `protocols.list()` fronts (the same answer when resumed). */
      start: takes(StartAssessmentRequestSchema)(async (request) =>
        AssessmentSchema.parse(await call(startAssessmentRoute, { body: request })),
      ),
    },
    requests: {
      /** Proposes a medication, protocol or treatment option for review (the open one again when it exists). */
      create: takes(PatientRequestSchema)(async (request) =>
        PatientRequestAnswerSchema.parse(await call(createRequestRoute, { body: request })),
      ),
    },
    messages: {
      /** Her threads with her care team, the most recently active first, each with its last message. */
      list: async () => MessageThreadsSchema.parse(await call(listThreadsRoute)),
      /** One thread (`Communication/<id>` or its id) and its latest messages, oldest first. */
      read: async (thread: string) =>
        MessageThreadPageSchema.parse(
          await call(readThreadRoute, { params: { id: thread.replace(/^Communication\//, '') } }),
        ),
      /** Writes to her care team (`{text, topic?}`): a new thread; sent with an Idempotency-Key. */
      start: takes(StartThreadRequestSchema)(async (request) =>
        MessageThreadSchema.parse(await call(startThreadRoute, { body: request })),
      ),
      /** Answers in a thread (`{text}`); sent with an Idempotency-Key, so a retry never sends it twice. */
      send: takesForId(SendMessageRequestSchema)(async (thread, request) =>
        MessageSchema.parse(
          await call(sendMessageRoute, { params: { id: thread.replace(/^Communication\//, '') }, body: request }),
        ),
      ),
    },
    tasks: {
      /** Her open tasks, each with its kind, what it needs and the call that completes it (`complete`). */
      list: async () => PatientTasksSchema.parse(await call(listTasksRoute)),
      /**
       * Completes a task: `{questionnaireResponse}`, `{measurements: [...]}` or, for an offer, `{decision}`, as its kind asks. The task
       * as an answer names it (`Task/<id>`) or its id alone.
       */
      complete: takesForId(CompleteTaskRequestSchema)(async (task, request) =>
        CompletedTaskSchema.parse(
          await call(completeTaskRoute, { params: { id: task.replace(/^Task\//, '') }, body: request }),
        ),
      ),
    },
    appointments: {
      /** Books a plan's visit (`{task, slot}`: her schedule-visit task and a free slot). */
      book: takes(BookRequestSchema)(async (request) =>
        AppointmentSchema.parse(await call(bookRoute, { body: request })),
      ),
      /** Moves a booked visit to another free slot (a new Appointment replaces it). */
      reschedule: takesForId(RescheduleRequestSchema)(async (appointment, request) =>
        AppointmentSchema.parse(await call(rescheduleRoute, { params: { id: idOf(appointment) }, body: request })),
      ),
      cancel: async (appointment: string) =>
        AppointmentSchema.parse(await call(cancelRoute, { params: { id: idOf(appointment) } })),
      /** Her visit: booked, arrived, fulfilled (every segment finished) or cancelled, with its segments. */
      get: async (appointment: string) =>
        AppointmentSchema.parse(await call(getAppointmentRoute, { params: { id: idOf(appointment) } })),
      segments: async (appointment: string) =>
        (await call(segmentsRoute, { params: { id: idOf(appointment) } })) as {
          appointment: string;
          segments: { encounter: string; position: number; purpose: string; status: string }[];
        },
      /** Starts (or resumes) a segment: the one named, or the next unfinished one. */
      encounter: takesForId(EncounterRequestSchema)(async (appointment, request = {}) =>
        EncounterAnswerSchema.parse(await call(encounterRoute, { params: { id: idOf(appointment) }, body: request })),
      ),
    },
    availability: {
      /** Free slots of a visit team or practitioner in a window (`view: 'slots'`), or per-day counts (`view: 'days'`). */
      get: takes(AvailabilityQuerySchema)(async (query) =>
        AvailabilitySchema.parse(await call(availabilityRoute, { query })),
      ),
    },
    enrollments: {
      /** Enrolls in a program of `protocols.list()` (its draft plan; the same one again when it exists). */
      create: takes(EnrollRequestSchema)(async (request) =>
        EnrollmentSchema.parse(await call(enrollRoute, { body: request })),
      ),
      /** Activates a draft enrollment (`CarePlan/<id>` or its id): its first tasks are issued. */
      activate: async (carePlan: string) =>
        EnrollmentSchema.parse(
          await call(activateEnrollmentRoute, { params: { id: carePlan.replace(/^CarePlan\//, '') } }),
        ),
      /** Unenrolls: the plan is revoked and its open tasks cancelled. */
      delete: async (carePlan: string) =>
        EnrollmentSchema.parse(await call(unenrollRoute, { params: { id: carePlan.replace(/^CarePlan\//, '') } })),
    },
    events: {
      /**
       * A one-minute ticket for her stream in a browser: `new EventSource(gateway + ticket.url)`, then
       * `addEventListener(type, ...)` for each event type it wants (the document lists them; events are named, so
       * `onmessage` gets none).
       */
      ticket: async () => EventTicketSchema.parse(await call(eventTicketRoute, {})),
      /** Her events after a cursor (`next` of the page before), oldest first; `wait` seconds for one when none yet. */
      list: takes(EventsQuerySchema)(async (query = {}) => EventsSchema.parse(await call(eventsRoute, { query }))),
      /**
       * Her events as they happen, from `after` (or her first): waiting calls of `list` (`wait` 25 s), one
       * after another, until `signal` is aborted. Each event says where to resume after it (`resumeAfter`,
       * for `after`); keep the ids you have handled: delivery is at least once.
       */
      stream: async function* (options: { after?: string; signal?: AbortSignal } = {}) {
        let after = options.after;
        while (!options.signal?.aborted) {
          const page = EventsSchema.parse(
            await call(eventsRoute, { query: { ...(after ? { after } : {}), wait: '25' } }),
          );
          // Where to resume after each event: the page's end after its last, else the page's start (what
          // follows it comes again, never lost).
          for (const [i, event] of page.events.entries()) {
            yield { ...event, resumeAfter: i === page.events.length - 1 ? page.next : after };
          }
          after = page.next;
        }
      },
    },
    orders: {
      /**
       * Places an accepted treatment's order: every item accepted with a fulfilment method, or declined.
       * The order as an answer names it (`RequestGroup/<id>`, a task's `offer`) or its id alone.
       */
      decide: takesForId(OrderDecisionsRequestSchema)(async (order, request) =>
        OrderDecisionsSchema.parse(
          await call(decideOrderRoute, { params: { id: order.replace(/^RequestGroup\//, '') }, body: request }),
        ),
      ),
    },
    agreements: {
      requirements: takes(RequirementsQuerySchema)(async (context = {}) =>
        RequirementsSchema.parse(await call(requirementsRoute, { query: context })),
      ),
      /** Takes the `unmet` entries of `requirements()` as they are, `url|version` strings, or coordinates. */
      accept: takes(AcceptanceRequestSchema.shape.agreements)(async (agreements) =>
        AcceptancesSchema.parse(await call(acceptancesRoute, { body: { agreements } })),
      ),
      withdraw: takes(WithdrawalRequestSchema)(async (request) =>
        WithdrawnSchema.parse(await call(withdrawalsRoute, { body: request })),
      ),
    },
    fhir: {
      search: async <T extends Resource = Resource>(type: T['resourceType'], query: Query = {}) =>
        (await call(searchRoute, { params: { type }, query })) as Bundle<T>,
      read: async <T extends Resource = Resource>(type: T['resourceType'], id: string) =>
        (await call(readRoute, { params: { type, id } })) as T,
      readPatient: async (id: string) => (await call(readPatientRoute, { params: { id } })) as Patient,
      updatePatient: async (patient: Patient & { id: string }) =>
        (await call(updatePatientRoute, {
          params: { id: patient.id },
          body: patient,
          headers: ifMatch(patient.meta?.versionId),
        })) as Patient,
      createQuestionnaireResponse: async (answers: QuestionnaireResponse) =>
        (await call(createQuestionnaireResponseRoute, { body: answers })) as QuestionnaireResponse,
      searchQuestionnaireResponses: async (query: Query = {}) =>
        (await call(searchQuestionnaireResponsesRoute, { query })) as Bundle<QuestionnaireResponse>,
      readQuestionnaireResponse: async (id: string) =>
        (await call(readQuestionnaireResponseRoute, { params: { id } })) as QuestionnaireResponse,
      updateQuestionnaireResponse: async (answers: QuestionnaireResponse & { id: string }) =>
        (await call(updateQuestionnaireResponseRoute, {
          params: { id: answers.id },
          body: answers,
          headers: ifMatch(answers.meta?.versionId),
        })) as QuestionnaireResponse,
    },
  };
}

export type PatientCareClient = ReturnType<typeof createPatientCareClient>;

// ------------------------------------------------------------------ signing in at Medplum

/**
 * Medplum's sign-in limit, as a patient app meets it. Medplum (since 5.1) lets each client address make 5
 * sign-ins a minute (`POST auth/login`, `auth/newuser`, `auth/newproject`; packages/server/src/ratelimit.ts)
 * and answers the sixth `429` with the `tooManyRequests` OperationOutcome, its `issue[0].diagnostics` a
 * JSON object whose `_msBeforeNext` says when the window ends (milliseconds), and the header
 * `RateLimit: "requests";r=0;t=<seconds>`.
 * These helpers read that answer; they never guess a wait Medplum did not give.
 */

const SIGN_IN_PATHS = ['auth/login', 'auth/newuser', 'auth/newproject'];

/** Whether a request goes to one of Medplum's sign-in paths that the 5-a-minute limit counts. */
export function isLimitedSignIn(url: string): boolean {
  const { pathname } = new URL(url);
  return SIGN_IN_PATHS.some((path) => pathname.endsWith(`/${path}`));
}

/**
 * Milliseconds until Medplum takes another sign-in from this address, from a `429` it answered: the
 * OperationOutcome's `msBeforeNext` (or its `rate-limit-reset` extension, in seconds), else the `RateLimit`
 * header's `t`. Undefined when the answer is not a 429 or says nothing about when.
 */
export async function signInRetryAfterMs(response: Response): Promise<number | undefined> {
  if (response.status !== 429) {
    return undefined;
  }
  let fromBody: number | undefined;
  try {
    fromBody = msBeforeNext(JSON.parse(await response.clone().text()) as OperationOutcome);
  } catch {
    // not an OperationOutcome
  }
  if (fromBody !== undefined) {
    return fromBody;
  }
  const seconds = /(?:^|[;,\s])t=(\d+)/.exec(response.headers.get('ratelimit') ?? '')?.[1];
  return seconds === undefined ? undefined : Number(seconds) * 1000;
}

export interface SignInWaitOptions {
  /** The longest single wait accepted (default 65 s: Medplum's window is a minute); beyond it the 429 is returned. */
  maxWaitMs?: number;
  /** Told before each wait (a spinner's text: "try again in N s"). */
  onWait?: (ms: number) => void;
}

/**
 * A fetch for `@medplum/core`'s MedplumClient (its `fetch` option) that, when Medplum refuses a sign-in with
 * its sign-in limit, waits as long as Medplum says and asks again; any other answer passes through as it
 * came. For scripts and servers that sign several people in from one address; an app in a patient's hands
 * would rather show `signInRetryAfterMs` to her.
 */
export function waitingOnSignInLimit(fetchImpl: typeof fetch, options: SignInWaitOptions = {}): typeof fetch {
  const maxWaitMs = options.maxWaitMs ?? 65_000;
  return (async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = input instanceof Request ? input.url : String(input);
    if (!isLimitedSignIn(url) || input instanceof Request) {
      return fetchImpl(input, init);
    }
    for (;;) {
      const response = await fetchImpl(input, init);
      const wait = await signInRetryAfterMs(response);
      if (wait === undefined || wait > maxWaitMs) {
        return response;
      }
      options.onWait?.(wait);
      await new Promise((resolve) => setTimeout(resolve, wait + 250));
    }
  }) as typeof fetch;
}

/**
 * Signing in at Medplum without `@medplum/core` (issue 51): PKCE with S256 on every runtime that has Web
 * Crypto (browsers, Node 22.18 and later, Workers), and never `plain` (a runtime without it is refused, loudly).
 */
export interface MedplumSignIn {
  /** `config.get()`'s `medplumBaseUrl` and `projectId`. */
  medplumBaseUrl: string;
  projectId: string;
  /** The tenant's patient app (its ClientApplication id). */
  clientId: string;
  fetch?: typeof fetch;
}

export interface Tokens {
  accessToken: string;
  refreshToken?: string;
  /** When the access token expires (ISO 8601). */
  expiresAt: string;
}

/** A PKCE pair, S256 (RFC 7636): the verifier stays with the app, the challenge goes to Medplum. */
export async function pkce(): Promise<{ verifier: string; challenge: string; method: 'S256' }> {
  if (!globalThis.crypto?.subtle || !globalThis.crypto.getRandomValues) {
    throw new Error('Web Crypto is not available: PKCE S256 cannot be computed (never falls back to plain)');
  }
  const verifier = base64url(crypto.getRandomValues(new Uint8Array(32)));
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
  return { verifier, challenge: base64url(new Uint8Array(digest)), method: 'S256' };
}

/** A patient signs in with her e-mail and password (Medplum's `/auth/login`, then the code for tokens). */
export async function signIn(at: MedplumSignIn, credentials: { email: string; password: string }): Promise<Tokens> {
  const { verifier, challenge } = await pkce();
  const login = await medplumPost(at, 'auth/login', {
    ...credentials,
    projectId: at.projectId,
    clientId: at.clientId,
    // A refresh token comes only with `offline_access` (Medplum's tryLogin).
    scope: 'openid offline_access',
    codeChallenge: challenge,
    codeChallengeMethod: 'S256',
  });
  return exchange(at, login.code, verifier);
}

/**
 * A new patient registers through her tenant's app (`/auth/newuser`, `/auth/newpatient`, the code for
 * tokens); then the app calls `patient.home()` once, which puts her in that app's tenant.
 */
export async function register(
  at: MedplumSignIn,
  person: { firstName: string; lastName: string; email: string; password: string },
): Promise<Tokens> {
  const { verifier, challenge } = await pkce();
  const user = await medplumPost(at, 'auth/newuser', {
    ...person,
    projectId: at.projectId,
    clientId: at.clientId,
    scope: 'openid offline_access',
    codeChallenge: challenge,
    codeChallengeMethod: 'S256',
  });
  const patient = await medplumPost(at, 'auth/newpatient', { login: user.login, projectId: at.projectId });
  return exchange(at, patient.code, verifier);
}

/** New tokens from her refresh token (the `accessToken` hook's usual source). */
export async function refreshSignIn(at: MedplumSignIn, refreshToken: string): Promise<Tokens> {
  return tokens(at, { grant_type: 'refresh_token', refresh_token: refreshToken, client_id: at.clientId });
}

async function exchange(at: MedplumSignIn, code: unknown, verifier: string): Promise<Tokens> {
  if (typeof code !== 'string') {
    throw new Error('Medplum answered no code (an account with several profiles is not a patient app sign-in)');
  }
  return tokens(at, { grant_type: 'authorization_code', code, code_verifier: verifier, client_id: at.clientId });
}

async function tokens(at: MedplumSignIn, form: Record<string, string>): Promise<Tokens> {
  const { response, body } = await medplumCall(at, 'oauth2/token', {
    contentType: 'application/x-www-form-urlencoded',
    body: new URLSearchParams(form).toString(),
  });
  if (!response.ok || typeof body.access_token !== 'string') {
    throw new Error(
      `Medplum refused the token request (${response.status}): ${String(body.error_description ?? body.error ?? '')}`,
    );
  }
  const seconds = typeof body.expires_in === 'number' ? body.expires_in : 3600;
  return {
    accessToken: body.access_token,
    refreshToken: typeof body.refresh_token === 'string' ? body.refresh_token : undefined,
    expiresAt: new Date(Date.now() + seconds * 1000).toISOString(),
  };
}

async function medplumPost(at: MedplumSignIn, path: string, json: unknown): Promise<Record<string, unknown>> {
  const { response, body } = await medplumCall(at, path, {
    contentType: 'application/json',
    body: JSON.stringify(json),
  });
  if (!response.ok) {
    const issue = (body as { issue?: { details?: { text?: string } }[] }).issue?.[0]?.details?.text;
    throw new Error(`Medplum refused ${path} (${response.status})${issue ? `: ${issue}` : ''}`);
  }
  return body;
}

/** A POST to Medplum's auth API and its JSON answer (an empty object when it is not JSON). */
async function medplumCall(
  at: MedplumSignIn,
  path: string,
  send: { contentType: string; body: string },
): Promise<{ response: Response; body: Record<string, unknown> }> {
  const response = await (at.fetch ?? fetch)(medplumUrl(at, path), {
    method: 'POST',
    headers: { 'content-type': send.contentType },
    body: send.body,
  });
  return { response, body: (await response.json().catch(() => ({}))) as Record<string, unknown> };
}

const medplumUrl = (at: MedplumSignIn, path: string): string => `${at.medplumBaseUrl.replace(/\/?$/, '/')}${path}`;
