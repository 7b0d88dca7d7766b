import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clinicJsonSchema } from '../../contracts/clinic';
import { loadClinic, publishedVersionChanged } from '../../src/provision/clinic';
import { EXAMPLE, EXAMPLE_ENV } from '../support/clinic';
import { scaled } from '../support/slowness';

/**
 * The clinic file (issue 49 items 1, 2): every kind of mistake an operator makes is refused, naming its
 * place in the file (`clinic.yaml:<line>:<column> <path>`), before anything is asked of Medplum. The
 * example of docs/clinic.md is the file edited here; its provisioning is test/provision/clinic.test.ts.
 */
/** A copy of the example (its documents beside it) with its text edited; the path of its clinic.yaml. */
function edited(edit: (text: string) => string): string {
  const dir = mkdtempSync(join(tmpdir(), 'clinic-'));
  cpSync(EXAMPLE, dir, { recursive: true });
  const file = join(dir, 'clinic.yaml');
  const text = readFileSync(file, 'utf8');
  const changed = edit(text);
  if (changed === text && edit !== same) {
    throw new Error('the edit changed nothing');
  }
  writeFileSync(file, changed);
  return file;
}

/** No edit: the example as it is (a mistake in the environment instead). */
const same = (text: string): string => text;

const replace = (from: string | RegExp, to: string) => (text: string) => text.replace(from, to);

/** The line (1-based) of the first occurrence of a text in the example. */
const lineOf = (needle: string): number => {
  const lines = readFileSync(join(EXAMPLE, 'clinic.yaml'), 'utf8').split('\n');
  const index = lines.findIndex((l) => l.includes(needle));
  if (index < 0) {
    throw new Error(`${needle} is not in the example`);
  }
  return index + 1;
};

const SECOND_TENANT = `
  - key: riverside
    name: Riverside Clinic
    patientApp: {}
    states: [WA]
    queues: [{ key: all, name: Riverside queue, default: true }]
    clinicians:
      - key: okafor
        name: { given: Grace, family: Okafor }
        email: GRACE.OKAFOR@lakeside-health.example
        queues: [all]
`;

/** Each kind of bad file: the edit, the environment, where it must be named and what must be said. */
const BAD: {
  kind: string;
  edit: (text: string) => string;
  env?: Record<string, string>;
  place: RegExp;
  says: RegExp;
}[] = [
  {
    kind: 'a missing field',
    edit: replace('    name: Lakeside Family Health\n', ''),
    place: new RegExp(`^clinic\\.yaml:${lineOf('- key: lakeside')}:5 tenants\\[0\\]\\.name$`),
    says: /missing/,
  },
  {
    kind: 'an unknown program',
    edit: replace('programs: [blood-pressure]', 'programs: [blood-pressure, diabetes]'),
    place: new RegExp(`^clinic\\.yaml:${lineOf('programs:')}:\\d+ tenants\\[0\\]\\.programs\\[1\\]$`),
    says: /not one of the platform's programs \(blood-pressure\)/,
  },
  {
    kind: 'an unknown state',
    edit: replace('states: [WA, OR]', 'states: [WA, XX]'),
    place: new RegExp(`^clinic\\.yaml:${lineOf('states: [WA, OR]')}:\\d+ tenants\\[0\\]\\.states\\[1\\]$`),
    says: /not a US state code .*"XX"/,
  },
  {
    kind: 'overlapping hours',
    edit: replace('start: "13:00", end: "17:00"', 'start: "11:30", end: "17:00"'),
    place: new RegExp(
      `^clinic\\.yaml:${lineOf('start: "13:00"')}:\\d+ tenants\\[0\\]\\.visitPractitioners\\[0\\]\\.hours\\[1\\]$`,
    ),
    says: /overlaps hours\[0\] on mon, tue, wed, thu$/,
  },
  {
    kind: 'a bad time zone',
    edit: replace('timeZone: America/Los_Angeles', 'timeZone: America/Lakeside'),
    place: new RegExp(
      `^clinic\\.yaml:${lineOf('timeZone:')}:\\d+ tenants\\[0\\]\\.visitPractitioners\\[0\\]\\.timeZone$`,
    ),
    says: /not a time zone/,
  },
  {
    kind: 'a clinician in two tenants',
    edit: (text) => `${text}${SECOND_TENANT}`,
    place: /^clinic\.yaml:\d+:\d+ tenants\[1\]\.clinicians\[0\]\.email$/,
    says: /GRACE\.OKAFOR@lakeside-health\.example is also in tenant lakeside \(tenants\[0\]\.clinicians\[0\]\.email\): a person works in one tenant/,
  },
  {
    kind: 'a duplicate e-mail',
    edit: replace('email: erik.lindqvist@lakeside-health.example', 'email: grace.okafor@lakeside-health.example'),
    place: new RegExp(`^clinic\\.yaml:${lineOf('erik.lindqvist@')}:\\d+ tenants\\[0\\]\\.clinicians\\[1\\]\\.email$`),
    says: /duplicate e-mail .*\(also tenants\[0\]\.clinicians\[0\]\.email\)/,
  },
  {
    kind: 'an http webhook',
    edit: replace('url: https://hooks.', 'url: http://hooks.'),
    place: new RegExp(`^clinic\\.yaml:${lineOf('https://hooks.')}:\\d+ tenants\\[0\\]\\.webhook\\.url$`),
    says: /https:\/\/ URL/,
  },
  {
    kind: 'a missing secret',
    edit: replace('secretEnv: LAKESIDE_WEBHOOK_SECRET', 'secretEnv: LAKESIDE_HOOK_SECRET'),
    place: new RegExp(`^clinic\\.yaml:${lineOf('secretEnv:')}:\\d+ tenants\\[0\\]\\.webhook\\.secretEnv$`),
    says: /LAKESIDE_HOOK_SECRET is not set/,
  },
  {
    kind: 'a secret that is not one',
    edit: same,
    env: { LAKESIDE_WEBHOOK_SECRET: 'hunter2' },
    place: new RegExp(`^clinic\\.yaml:${lineOf('secretEnv:')}:\\d+ tenants\\[0\\]\\.webhook\\.secretEnv$`),
    says: /not a signing secret/,
  },
  {
    kind: 'a missing agreement document',
    edit: replace('document: agreements/privacy-2026-12.html', 'document: agreements/privacy-2026-11.html'),
    place: new RegExp(
      `^clinic\\.yaml:${lineOf('privacy-2026-12.html')}:\\d+ tenants\\[0\\]\\.agreements\\[1\\]\\.versions\\[0\\]\\.document$`,
    ),
    says: /no such file: agreements\/privacy-2026-11\.html/,
  },
  {
    kind: 'a document outside the folder',
    edit: replace('document: agreements/terms-2026-12.html', 'document: ../../etc/passwd.txt'),
    place: /tenants\[0\]\.agreements\[0\]\.versions\[0\]\.document$/,
    says: /a path beside the clinic file/,
  },
  {
    kind: 'a queue that does not exist',
    edit: replace('queues: [treatment]', 'queues: [surgery]'),
    place: new RegExp(
      `^clinic\\.yaml:${lineOf('queues: [treatment]')}:\\d+ tenants\\[0\\]\\.clinicians\\[1\\]\\.queues\\[0\\]$`,
    ),
    says: /no queue "surgery" in this tenant/,
  },
  {
    kind: 'a misspelt field',
    edit: replace('licensedIn: [WA, OR]', 'licencedIn: [WA, OR]'),
    place: /tenants\[0\]\.visitPractitioners\[0\]\.licencedIn$/,
    says: /unknown field licencedIn/,
  },
  {
    kind: 'a licence outside the tenant',
    edit: replace('licensedIn: [WA, OR]', 'licensedIn: [WA, CA]'),
    place: /tenants\[0\]\.visitPractitioners\[0\]\.licensedIn\[1\]$/,
    says: /CA is not one of this tenant's states/,
  },
  {
    kind: 'a second default queue',
    edit: replace('name: Lakeside treatment\n', 'name: Lakeside treatment\n        default: true\n'),
    place: /tenants\[0\]\.queues\[1\]\.default$/,
    says: /a second default queue/,
  },
  {
    kind: 'work no queue receives',
    edit: replace('        default: true\n', ''),
    place: new RegExp(`^clinic\\.yaml:${lineOf('queues:') + 1}:\\d+ tenants\\[0\\]\\.queues$`),
    says: /no queue receives review-intake, review-request, review-unenrollment, review-async-visit/,
  },
  {
    kind: 'a queue nobody works',
    edit: replace('queues: [treatment]', 'queues: [intake]'),
    place: new RegExp(`^clinic\\.yaml:${lineOf('- key: treatment')}:\\d+ tenants\\[0\\]\\.queues\\[1\\]$`),
    says: /no clinician works queue "treatment": its work would wait for nobody/,
  },
  {
    kind: 'a day that does not exist',
    edit: replace('from: 2026-12-25', 'from: 2026-02-30'),
    place: /tenants\[0\]\.visitPractitioners\[0\]\.away\[0\]\.from$/,
    says: /a date YYYY-MM-DD/,
  },
  {
    kind: 'a password not given',
    edit: same,
    env: { LAKESIDE_MOREAU_PASSWORD: '' },
    place: /tenants\[0\]\.visitPractitioners\[0\]\.passwordEnv$/,
    says: /LAKESIDE_MOREAU_PASSWORD is not set to a password of at least 8 characters/,
  },
  {
    kind: 'not YAML',
    edit: replace('    states: [WA, OR]', '    states: [WA, OR\n'),
    place: /^clinic\.yaml:\d+:\d+$/,
    says: /.+/,
  },
];

describe('a clinic file with a mistake', () => {
  it.each(BAD.map((b) => [b.kind, b] as const))('%s: refused, naming its place', (_kind, bad) => {
    const file = edited(bad.edit);
    const result = loadClinic(file, { ...EXAMPLE_ENV, ...bad.env });
    expect(result.ok).toBe(false);
    if (result.ok) {
      return;
    }
    expect(
      result.problems.some((p) => bad.place.test(p.place) && bad.says.test(p.message)),
      JSON.stringify(result.problems),
    ).toBe(true);
  });

  it('a published version whose text changed is named as the file names it (the rehearsal’s refusal)', () => {
    const result = loadClinic(join(EXAMPLE, 'clinic.yaml'), EXAMPLE_ENV);
    if (!result.ok) {
      throw new Error(JSON.stringify(result.problems));
    }
    expect(
      publishedVersionChanged(
        result.loaded,
        'agreement-lakeside-privacy-2026-12 is published and write-once: publish a new version under a new key instead',
      ),
    ).toBe(
      'tenants[0].agreements[1].versions[0].document: version 2026-12 of privacy is published and its text (agreements/privacy-2026-12.html) changed since; a published text never changes: add a new version with the new text',
    );
    expect(publishedVersionChanged(result.loaded, 'bot-webhooks was not created')).toBeUndefined();
  });

  it('the example itself is a clinic, and its JSON Schema is the one generated from the contract', () => {
    const result = loadClinic(join(EXAMPLE, 'clinic.yaml'), EXAMPLE_ENV);
    expect(result.ok, JSON.stringify(!result.ok && result.problems)).toBe(true);
    const stored = JSON.parse(readFileSync('clinics/clinic.schema.json', 'utf8')) as unknown;
    expect(stored, 'regenerate it: npm run clinic:schema').toEqual(clinicJsonSchema());
  });
});

describe('npm run provision -- --clinic with a bad file', () => {
  // A Medplum that records every request: a refused file must not reach it at all.
  const requests: string[] = [];
  const server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    res.writeHead(500).end();
  });
  let baseUrl = '';
  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
  /** `npm run provision -- --clinic FILE` against the recording Medplum, with this environment only. */
  const provision = (file: string, env: Record<string, string>) =>
    spawnSync(process.execPath, ['--import', 'tsx', 'src/provision/cli.ts', '--clinic', file], {
      encoding: 'utf8',
      timeout: scaled(60_000),
      env: {
        PATH: process.env.PATH ?? '',
        MEDPLUM_BASE_URL: baseUrl,
        MEDPLUM_CLIENT_ID: 'c0ffee00-0000-4000-8000-000000000001',
        MEDPLUM_CLIENT_SECRET: 'secret',
        ...env,
      },
    });

  it.each(BAD.map((b) => [b.kind, b] as const))(
    '%s: exits 2 naming the place, and asks Medplum nothing',
    (_kind, bad) => {
      const run = provision(edited(bad.edit), { ...EXAMPLE_ENV, ...bad.env });
      expect(run.status, run.stderr).toBe(2);
      const lines = run.stderr.split('\n').map((line) => /^(.*?): (.*)$/.exec(line));
      expect(
        lines.some((m) => m && bad.place.test(m[1] as string) && bad.says.test(m[2] as string)),
        run.stderr,
      ).toBe(true);
      expect(run.stderr).toMatch(/: \d+ problems?; nothing was written\.$/m);
      expect(requests).toEqual([]);
    },
  );

  it('exits 2, prints every problem by its place, and asks Medplum nothing', () => {
    const file = edited((t) =>
      t.replace('states: [WA, OR]', 'states: [WA, XX]').replace('url: https://hooks.', 'url: http://hooks.'),
    );
    const run = provision(file, EXAMPLE_ENV);
    expect(run.status, run.stderr).toBe(2);
    expect(run.stderr).toMatch(/^clinic\.yaml:\d+:\d+ tenants\[0\]\.webhook\.url: an https:\/\/ URL/m);
    expect(run.stderr).toMatch(/^clinic\.yaml:\d+:\d+ tenants\[0\]\.states\[1\]: not a US state code/m);
    expect(run.stderr).toContain('2 problems; nothing was written.');
    expect(requests).toEqual([]);
  });
});
