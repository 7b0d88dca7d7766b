import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { basename, dirname, extname, isAbsolute, relative, resolve } from 'node:path';
import type { Organization, PractitionerRole } from '@medplum/fhirtypes';
import { isNode, LineCounter, parseDocument } from 'yaml';
import { isTimeZone } from '../../bots/lib/slots';
import {
  type Clinic,
  type ClinicAgreement,
  ClinicSchema,
  type ClinicTenant,
  type ClinicVisitPractitioner,
  US_STATES,
  type UsState,
} from '../../contracts/clinic';
import { CLINICIAN_WORK_KINDS, SYSTEMS, TENANT_PARAMETER } from '../../contracts/systems';
import { WEBHOOK_SECRET_PATTERN, webhookSecrets } from '../../contracts/webhook-rules';
import { type AgreementText, agreementDocument } from './agreements';
import type { MemberResource } from './apply';
import { conditionCatalog, platformCatalogResources, programResources, stateJurisdictions } from './catalog';
import { type KeyedResource, keyRef, type ProvisionDefinition, platformDefinition } from './definition';
import { visitPractitionerResources, visitTeamResource } from './schedules';
import { tenantBackends, tenantSpecResources } from './tenants';

/**
 * The clinic file (docs/clinic.md): read, checked against its contract (contracts/clinic.ts) and across
 * itself, with every problem named by its place (`file:line:column` and its path in the file); then made
 * into the definition provisioning applies. Nothing here reads or writes Medplum.
 */

export interface ClinicProblem {
  /** `clinic.yaml:12:7 tenants[0].clinicians[1].email` */
  place: string;
  message: string;
}

/** A clinic ready to provision: the file's content, its documents and the secrets it names, read. */
export interface LoadedClinic {
  clinic: Clinic;
  /** Each agreement version's text, by the document path the file gives. */
  documents: Map<string, AgreementText>;
  /** Each webhook tenant's signing secret, by tenant key. */
  webhookSecrets: Record<string, string>;
  /** First passwords of the people that name one, by the variable's name. */
  passwords: Record<string, string>;
}

type Path = (string | number)[];
interface Found {
  path: Path;
  message: string;
}

const DOCUMENT_TYPES: Record<string, string> = {
  '.html': 'text/html',
  '.htm': 'text/html',
  '.md': 'text/markdown',
  '.txt': 'text/plain',
  '.pdf': 'application/pdf',
};
const DOCUMENT_MAX_BYTES = 1_000_000;

/** Reads and checks a clinic file. `env` gives the secrets and passwords the file names. */
export function loadClinic(
  file: string,
  env: Record<string, string | undefined>,
): { ok: true; loaded: LoadedClinic } | { ok: false; problems: ClinicProblem[] } {
  const name = basename(file);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    return {
      ok: false,
      problems: [{ place: file, message: `cannot be read (${(err as NodeJS.ErrnoException).code})` }],
    };
  }
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    return {
      ok: false,
      problems: doc.errors.map((e) => {
        const { line, col } = lines.linePos(e.pos[0]);
        return { place: `${name}:${line}:${col}`, message: e.message.split('\n')[0] as string };
      }),
    };
  }
  const placeOf = (path: Path): string => {
    // The deepest node of the path that is in the file (a missing field: the object that lacks it).
    for (let n = path.length; n >= 0; n--) {
      const node = doc.getIn(path.slice(0, n), true);
      if (isNode(node) && node.range) {
        const { line, col } = lines.linePos(node.range[0]);
        return `${name}:${line}:${col} ${pathText(path)}`.trimEnd();
      }
    }
    return `${name} ${pathText(path)}`.trimEnd();
  };
  const parsed = ClinicSchema.safeParse(doc.toJS());
  if (!parsed.success) {
    return {
      ok: false,
      problems: parsed.error.issues.map((issue) => {
        const path = issue.path as Path;
        if (issue.code === 'unrecognized_keys') {
          return {
            place: placeOf([...path, issue.keys[0] as string]),
            message: `unknown field ${issue.keys.join(', ')}`,
          };
        }
        if (issue.code === 'invalid_type' && issue.input === undefined) {
          return { place: placeOf(path), message: 'missing' };
        }
        return { place: placeOf(path), message: issue.message };
      }),
    };
  }
  const clinic = parsed.data;
  const documents = new Map<string, AgreementText>();
  const found = [
    ...crossChecks(clinic),
    ...documentChecks(clinic, dirname(resolve(file)), documents),
    ...environmentChecks(clinic, env),
  ];
  if (found.length > 0) {
    return { ok: false, problems: found.map((f) => ({ place: placeOf(f.path), message: f.message })) };
  }
  const webhookSecretsByTenant = Object.fromEntries(
    clinic.tenants.flatMap((t) => (t.webhook ? [[t.key, env[t.webhook.secretEnv] as string]] : [])),
  );
  const passwords = Object.fromEntries(
    clinic.tenants
      .flatMap((t) => [...t.clinicians, ...t.visitPractitioners])
      .flatMap((p) => (p.passwordEnv ? [[p.passwordEnv, env[p.passwordEnv] as string]] : [])),
  );
  return { ok: true, loaded: { clinic, documents, webhookSecrets: webhookSecretsByTenant, passwords } };
}

const pathText = (path: Path): string =>
  path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? p : `.${p}`)).join('');

/** What the contract cannot say alone: uniqueness, references within the file, hours that overlap. */
function crossChecks(clinic: Clinic): Found[] {
  const found: Found[] = [];
  const firstOf = new Map<string, Path>();
  /** The second time a value is seen in a scope: a problem naming the first. */
  const once = (scope: string, value: string, path: Path, what: string) => {
    const seen = firstOf.get(`${scope}\u0000${value}`);
    if (seen) {
      found.push({ path, message: `${what} ${JSON.stringify(value)} again (first at ${pathText(seen)})` });
    } else {
      firstOf.set(`${scope}\u0000${value}`, path);
    }
  };
  const urls = (agreements: ClinicAgreement[], at: Path) => {
    agreements.forEach((a, i) => {
      once(`agreement-key ${pathText(at)}`, a.key, [...at, i, 'key'], 'agreement key');
      once('agreement-url', a.url, [...at, i, 'url'], 'agreement url');
      a.versions.forEach((v, j) => {
        once(`version ${pathText(at)} ${i}`, v.version, [...at, i, 'versions', j, 'version'], 'version');
      });
    });
  };
  urls(clinic.agreements, ['agreements']);
  // Who each e-mail is: one person, in one tenant.
  const people = new Map<string, { tenant: string; path: Path }>();
  clinic.tenants.forEach((tenant, t) => {
    const at: Path = ['tenants', t];
    once('tenant', tenant.key, [...at, 'key'], 'tenant key');
    urls(tenant.agreements, [...at, 'agreements']);
    tenant.agreements.forEach((a, i) => {
      if (a.state && !tenant.states.includes(a.state)) {
        found.push({
          path: [...at, 'agreements', i, 'state'],
          message: `${a.state} is not one of this tenant's states`,
        });
      }
    });
    const queues = new Set<string>();
    tenant.queues.forEach((q, i) => {
      once(`queue ${t}`, q.key, [...at, 'queues', i, 'key'], 'queue key');
      queues.add(q.key);
      q.work.forEach((kind, k) => {
        once(`work ${t}`, kind, [...at, 'queues', i, 'work', k], 'work kind');
      });
    });
    const defaults = tenant.queues.flatMap((q, i) => (q.default ? [i] : []));
    for (const i of defaults.slice(1)) {
      found.push({ path: [...at, 'queues', i, 'default'], message: 'a second default queue (one per tenant)' });
    }
    if (defaults.length === 0) {
      const routed = new Set(tenant.queues.flatMap((q) => q.work));
      const unrouted = CLINICIAN_WORK_KINDS.filter((k) => !routed.has(k));
      if (unrouted.length > 0) {
        found.push({
          path: [...at, 'queues'],
          message: `no queue receives ${unrouted.join(', ')}: name them in a queue's work, or make one queue default`,
        });
      }
    }
    const person = (email: string, path: Path) => {
      const key = email.toLowerCase();
      const seen = people.get(key);
      if (!seen) {
        people.set(key, { tenant: tenant.key, path });
      } else if (seen.tenant === tenant.key) {
        found.push({ path, message: `duplicate e-mail ${email} (also ${pathText(seen.path)})` });
      } else {
        found.push({
          path,
          message: `${email} is also in tenant ${seen.tenant} (${pathText(seen.path)}): a person works in one tenant`,
        });
      }
    };
    tenant.backends.forEach((b, i) => {
      once(`backend ${t}`, b.key, [...at, 'backends', i, 'key'], 'backend key');
    });
    tenant.clinicians.forEach((c, i) => {
      const cp: Path = [...at, 'clinicians', i];
      once(`person ${t}`, c.key, [...cp, 'key'], 'person key');
      person(c.email, [...cp, 'email']);
      c.queues.forEach((q, k) => {
        if (!queues.has(q)) {
          found.push({ path: [...cp, 'queues', k], message: `no queue ${JSON.stringify(q)} in this tenant` });
        }
      });
    });
    tenant.queues.forEach((q, i) => {
      if (!tenant.clinicians.some((c) => c.queues.includes(q.key))) {
        found.push({
          path: [...at, 'queues', i],
          message: `no clinician works queue ${JSON.stringify(q.key)}: its work would wait for nobody (name it in a clinician's queues)`,
        });
      }
    });
    tenant.visitPractitioners.forEach((p, i) => {
      const pp: Path = [...at, 'visitPractitioners', i];
      once(`person ${t}`, p.key, [...pp, 'key'], 'person key');
      person(p.email, [...pp, 'email']);
      p.licensedIn.forEach((s, k) => {
        if (!tenant.states.includes(s)) {
          found.push({ path: [...pp, 'licensedIn', k], message: `${s} is not one of this tenant's states` });
        }
      });
      if (!isTimeZone(p.timeZone) || !p.timeZone.includes('/')) {
        found.push({ path: [...pp, 'timeZone'], message: `not a time zone (an IANA name such as America/Chicago)` });
      }
      found.push(...hoursProblems(p, pp));
    });
  });
  return found;
}

const minutesOf = (time: string): number => Number(time.slice(0, 2)) * 60 + Number(time.slice(3, 5));

/** Each span of hours runs forward, no two of a day overlap; a day away ends on or after it starts. */
function hoursProblems(p: ClinicVisitPractitioner, at: Path): Found[] {
  const found: Found[] = [];
  const spans = p.hours.map((h, i) => ({
    i,
    days: h.days,
    start: 'allDay' in h ? 0 : minutesOf(h.start),
    end: 'allDay' in h ? 24 * 60 : minutesOf(h.end),
  }));
  for (const span of spans) {
    if (span.end <= span.start) {
      found.push({ path: [...at, 'hours', span.i, 'end'], message: 'ends before it starts' });
    }
  }
  for (const a of spans) {
    for (const b of spans.filter((s) => s.i > a.i)) {
      const days = a.days.filter((d) => b.days.includes(d));
      if (days.length > 0 && a.start < b.end && b.start < a.end) {
        found.push({ path: [...at, 'hours', b.i], message: `overlaps hours[${a.i}] on ${days.join(', ')}` });
      }
    }
    const twice = a.days.find((d, k) => a.days.indexOf(d) !== k);
    if (twice) {
      found.push({ path: [...at, 'hours', a.i, 'days'], message: `${twice} twice` });
    }
  }
  p.away.forEach((a, i) => {
    if (a.to && a.to < a.from) {
      found.push({ path: [...at, 'away', i, 'to'], message: 'before its from' });
    }
  });
  return found;
}

/** Each agreement version's document: a file beside the clinic file, of a kind patients can read. */
function documentChecks(clinic: Clinic, dir: string, documents: Map<string, AgreementText>): Found[] {
  const found: Found[] = [];
  const check = (agreements: ClinicAgreement[], at: Path) => {
    agreements.forEach((a, i) => {
      a.versions.forEach((v, j) => {
        const path: Path = [...at, i, 'versions', j, 'document'];
        const full = resolve(dir, v.document);
        const inside = relative(dir, full);
        const type = DOCUMENT_TYPES[extname(full).toLowerCase()];
        if (isAbsolute(v.document) || inside.startsWith('..')) {
          found.push({ path, message: 'a path beside the clinic file (relative, inside its folder)' });
          return;
        }
        if (!type) {
          found.push({ path, message: `not a document patients can read (${Object.keys(DOCUMENT_TYPES).join(' ')})` });
          return;
        }
        let size: number;
        try {
          size = statSync(full).size;
        } catch {
          found.push({ path, message: `no such file: ${v.document}` });
          return;
        }
        if (size === 0 || size > DOCUMENT_MAX_BYTES) {
          found.push({ path, message: `${size === 0 ? 'empty' : 'larger than 1 MB'}: ${v.document}` });
          return;
        }
        const bytes = readFileSync(full);
        documents.set(v.document, {
          contentType: type,
          data: bytes.toString('base64'),
          // FHIR's Attachment.hash: SHA-1 of the bytes, base64.
          hash: createHash('sha1').update(bytes).digest('base64'),
          size: bytes.byteLength,
        });
      });
    });
  };
  check(clinic.agreements, ['agreements']);
  clinic.tenants.forEach((t, i) => {
    check(t.agreements, ['tenants', i, 'agreements']);
  });
  return found;
}

/** The secrets and passwords the file names: each set, and of its kind. */
function environmentChecks(clinic: Clinic, env: Record<string, string | undefined>): Found[] {
  const found: Found[] = [];
  clinic.tenants.forEach((tenant, t) => {
    if (tenant.webhook) {
      const secret = env[tenant.webhook.secretEnv];
      const path: Path = ['tenants', t, 'webhook', 'secretEnv'];
      if (!secret) {
        found.push({ path, message: `${tenant.webhook.secretEnv} is not set (the webhook's signing secret)` });
      } else if (!webhookSecrets(secret)) {
        found.push({
          path,
          message: `${tenant.webhook.secretEnv} is not a signing secret (${WEBHOOK_SECRET_PATTERN.source}, or two of them)`,
        });
      }
    }
    const people: [string, { passwordEnv?: string }[]][] = [
      ['clinicians', tenant.clinicians],
      ['visitPractitioners', tenant.visitPractitioners],
    ];
    for (const [list, persons] of people) {
      persons.forEach((p, i) => {
        if (p.passwordEnv && (env[p.passwordEnv] ?? '').length < 8) {
          found.push({
            path: ['tenants', t, list, i, 'passwordEnv'],
            message: `${p.passwordEnv} is not set to a password of at least 8 characters`,
          });
        }
      });
    }
  });
  return found;
}

/** Provisioning keys of a clinic's people (their tenant scopes them). */
export const clinicianKey = (tenant: string, person: string): string => `clinician-${tenant}-${person}`;
export const visitPractitionerKey = (tenant: string, person: string): string =>
  `visit-practitioner-${tenant}-${person}`;
const agreementKey = (scope: string, agreement: string, version: string): string =>
  `agreement-${scope}-${agreement}-${version}`;

/** What the clinic file describes, as the definition provisioning applies (with the platform's own). */
export function clinicDefinition(loaded: LoadedClinic): ProvisionDefinition {
  const { clinic } = loaded;
  const states = [...new Set(clinic.tenants.flatMap((t) => t.states))].sort() as UsState[];
  const staffKeys = clinic.tenants.flatMap((t) =>
    [...t.clinicians, ...t.visitPractitioners].map((p) => `${t.key}/${p.key}`),
  );
  const backends = clinic.tenants.map((t) => tenantBackends(t.key, t.backends));
  return {
    ...platformDefinition,
    resources: [
      ...platformDefinition.resources,
      ...backends.flatMap((b) => b.resources),
      ...stateJurisdictions(states),
      ...platformCatalogResources(),
      ...clinic.agreements.flatMap((a) => agreementVersions(a, undefined, loaded)),
      ...clinic.tenants.flatMap((t) => tenantOf(t, loaded)),
    ],
    integrations: [...platformDefinition.integrations, ...backends.flatMap((b) => b.integrations)],
    staff: { system: SYSTEMS.clinicStaff, keep: staffKeys },
    backends: {
      system: SYSTEMS.tenantBackend,
      keep: clinic.tenants.flatMap((t) => t.backends.map((b) => `${t.key}/${b.key}`)),
    },
  };
}

function tenantOf(tenant: ClinicTenant, loaded: LoadedClinic): KeyedResource[] {
  const org = keyRef<Organization>(`org-${tenant.key}`);
  const clinicians = tenant.clinicians.map((c) => {
    const key = clinicianKey(tenant.key, c.key);
    const entry: MemberResource = {
      key,
      resource: {
        resourceType: 'Practitioner',
        meta: { accounts: [org] },
        identifier: [{ system: SYSTEMS.clinicStaff, value: `${tenant.key}/${c.key}` }],
        name: [{ ...(c.name.prefix ? { prefix: [c.name.prefix] } : {}), given: [c.name.given], family: c.name.family }],
        telecom: [{ system: 'email', value: c.email }],
      },
      member: {
        externalId: key,
        email: c.email,
        password: c.passwordEnv ? loaded.passwords[c.passwordEnv] : undefined,
        membership: {
          access: [
            { policy: keyRef('policy-clinician'), parameter: [{ name: TENANT_PARAMETER, valueReference: org }] },
          ],
        },
      },
    };
    return { entry, queues: c.queues };
  });
  const practitioners = tenant.visitPractitioners.flatMap((p) =>
    visitPractitionerResources({
      keys: {
        practitioner: visitPractitionerKey(tenant.key, p.key),
        role: `visit-role-${tenant.key}-${p.key}`,
        schedule: `visit-schedule-${tenant.key}-${p.key}`,
      },
      identifier: { system: SYSTEMS.clinicStaff, value: `${tenant.key}/${p.key}` },
      tenant: tenant.key,
      name: p.name,
      email: p.email,
      password: p.passwordEnv ? loaded.passwords[p.passwordEnv] : undefined,
      licensedIn: p.licensedIn,
      timeZone: p.timeZone,
      hours: p.hours.map((h): NonNullable<PractitionerRole['availableTime']>[number] =>
        'allDay' in h
          ? { daysOfWeek: h.days, allDay: true }
          : { daysOfWeek: h.days, availableStartTime: `${h.start}:00`, availableEndTime: `${h.end}:00` },
      ),
      away: p.away,
    }),
  );
  return [
    ...tenantSpecResources({
      key: tenant.key,
      name: tenant.name,
      redirectUris: tenant.patientApp.redirectUris,
      webhook: tenant.webhook?.url,
      webhookEvents: tenant.webhook?.events,
      queues: tenant.queues,
      staff: clinicians,
    }),
    ...practitioners,
    visitTeamResource(
      tenant.key,
      `${tenant.name} visit team`,
      tenant.visitPractitioners.map((p) => visitPractitionerKey(tenant.key, p.key)),
    ),
    conditionCatalog(tenant.key),
    ...tenant.programs.flatMap((program) => programResources(tenant.key, program, tenant.states)),
    ...tenant.agreements.flatMap((a) => agreementVersions(a, tenant.key, loaded)),
  ];
}

/** Every version of an agreement, each write-once under its own key, its text stored with it. */
function agreementVersions(a: ClinicAgreement, tenant: string | undefined, loaded: LoadedClinic): KeyedResource[] {
  return a.versions.map((v) =>
    agreementDocument({
      key: agreementKey(tenant ?? 'platform', a.key, v.version),
      url: a.url,
      version: v.version,
      category: a.category,
      title: a.title,
      jurisdiction: a.state ? `US-${a.state}` : undefined,
      required: a.required,
      tenant,
      published: v.published,
      withdrawalConsequence: a.withdrawalConsequence,
      text: loaded.documents.get(v.document),
    }),
  );
}

/**
 * The rehearsal's refusal of a published version whose text changed (`<key> is published and write-once`),
 * said as the file says it: the version, its agreement and where its document is named.
 */
export function publishedVersionChanged(loaded: LoadedClinic, message: string): string | undefined {
  const key = /^(agreement-\S+) is published and write-once/.exec(message)?.[1];
  const scopes: [string, ClinicAgreement[], string][] = [
    ['platform', loaded.clinic.agreements, 'agreements'],
    ...loaded.clinic.tenants.map((t, i): [string, ClinicAgreement[], string] => [
      t.key,
      t.agreements,
      `tenants[${i}].agreements`,
    ]),
  ];
  for (const [scope, agreements, path] of scopes) {
    for (const [i, a] of agreements.entries()) {
      for (const [j, v] of a.versions.entries()) {
        if (agreementKey(scope, a.key, v.version) === key) {
          return `${path}[${i}].versions[${j}].document: version ${v.version} of ${a.key} is published and its text (${v.document}) changed since; a published text never changes: add a new version with the new text`;
        }
      }
    }
  }
  return undefined;
}

/** The CORS origins of every tenant's patient app (the gateway's CORS_ORIGINS). */
export const clinicOrigins = (clinic: Clinic): string[] => [
  ...new Set(clinic.tenants.flatMap((t) => t.patientApp.corsOrigins)),
];

/** The names of the states a clinic serves, for its summary. */
export const stateNames = (states: readonly UsState[]): string[] => states.map((s) => US_STATES[s]);
