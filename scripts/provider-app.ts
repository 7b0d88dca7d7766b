import { spawn, spawnSync } from 'node:child_process';
import {
  cpSync,
  createReadStream,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:http';
import { dirname, extname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

/**
 * `npm run provider-app -- --source <medplum checkout> --medplum <base url> [--out <dir>] [--port <n>]
 * [--host 127.0.0.1] [--build-only]`: builds Medplum's Provider app (`examples/medplum-provider` of
 * Medplum's source, which Medplum does not publish) from the operator's checkout of Medplum's source, at
 * the release that checkout is at, with `--medplum` baked in as its server, and serves it as a single-page
 * app (docs/clinicians.md "Opening the Provider app").
 *
 * The checkout is only read: the app folder, and the source of each `@medplum/*` package it imports that
 * is not on the npm registry at the release, are copied into `--out` (default `.provider-app/` here,
 * git-ignored), where the app's `vite.config.ts` aliases those packages to the copies (as upstream's own
 * monorepo config aliases them to `packages/<name>/src`); everything else comes from npm: `@medplum/core`,
 * `@medplum/fhirtypes` (and `@medplum/react-hooks` when published) at the release, the app's other pinned
 * packages and what the copied sources import. No Google sign-in (`GOOGLE_CLIENT_ID` empty, `index.html`'s
 * `accounts.google.com` script dropped), no reCAPTCHA, no type check, no tests. A stamp in `--out` names the
 * build (release, the checkout's commit, the Medplum URL): a rerun with the same ones serves what is built.
 */

/** Bump when what this script does to the app changes: the next run rebuilds. */
const RECIPE = 1;
const APP = 'examples/medplum-provider';
const DEFAULT_PORT = 3001; // upstream's own port for this app (its vite.config.ts)
const DEFAULT_HOST = '127.0.0.1';
const DEFAULT_OUT = fileURLToPath(new URL('../.provider-app', import.meta.url));
const USAGE =
  'npm run provider-app -- --source <medplum checkout> --medplum <base url> [--out <dir>] [--port <n>] [--host 127.0.0.1] [--build-only]';

/** A bad invocation or a bad environment: one line saying what to do. */
export class UsageError extends Error {}

/** --help: the usage, on stdout, exit 0. */
class HelpRequested extends Error {}

export interface Options {
  /** The Medplum source checkout (absolute). */
  source: string;
  /** Medplum's base URL, with a trailing slash. */
  medplum: string;
  /** Where the app is copied, installed and built (absolute). */
  out: string;
  port: number;
  host: string;
  buildOnly: boolean;
}

/** The command line checked, the checkout looked at: throws a UsageError naming the first problem. */
export function parseOptions(argv: string[], cwd = process.cwd()): Options {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        source: { type: 'string' },
        medplum: { type: 'string' },
        out: { type: 'string' },
        port: { type: 'string' },
        host: { type: 'string' },
        'build-only': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    throw new UsageError(`${err instanceof Error ? err.message.split('\n')[0] : String(err)}; usage: ${USAGE}`);
  }
  if (values.help === true) {
    throw new HelpRequested(USAGE);
  }
  const source = typeof values.source === 'string' ? values.source : '';
  if (!source) {
    throw new UsageError(`no --source: name your checkout of Medplum's source (a work tree); usage: ${USAGE}`);
  }
  const sourceDir = resolve(cwd, source);
  if (!existsSync(join(sourceDir, APP, 'package.json'))) {
    throw new UsageError(
      `--source ${source} has no ${APP}/package.json: name the top folder of a checkout of Medplum's source (github.com/medplum/medplum) at your Medplum's release`,
    );
  }
  const medplum = typeof values.medplum === 'string' ? values.medplum : '';
  if (!medplum) {
    throw new UsageError(`no --medplum: name your Medplum's base URL, e.g. --medplum http://localhost:8103/`);
  }
  let url: URL;
  try {
    url = new URL(medplum);
  } catch {
    throw new UsageError(`--medplum ${medplum} is not a URL: give Medplum's base URL, e.g. https://api.example.com/`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UsageError(
      `--medplum ${medplum} is not an http(s) URL: give Medplum's base URL, e.g. https://api.example.com/`,
    );
  }
  if (url.search || url.hash || url.username || url.password) {
    throw new UsageError(`--medplum ${medplum}: give Medplum's base URL alone (no query, fragment or credentials)`);
  }
  if (!url.pathname.endsWith('/')) {
    url.pathname += '/';
  }
  const portText = typeof values.port === 'string' ? values.port : String(DEFAULT_PORT);
  const port = /^\d+$/.test(portText) ? Number(portText) : Number.NaN;
  if (!Number.isInteger(port) || port < 1 || port > 65_535) {
    throw new UsageError(`--port ${portText} is not a port: give a number from 1 to 65535`);
  }
  const host = typeof values.host === 'string' ? values.host : DEFAULT_HOST;
  if (!host) {
    throw new UsageError(`--host is empty: give the address to listen on, e.g. --host 127.0.0.1`);
  }
  const out = typeof values.out === 'string' && values.out ? resolve(cwd, values.out) : DEFAULT_OUT;
  if (out === sourceDir || out.startsWith(sourceDir + sep)) {
    throw new UsageError(`--out ${out} is inside the checkout, which this never writes to: pick a folder outside it`);
  }
  // A rebuild replaces what it made there (examples/, packages/): only in a folder it made, or an empty one.
  if (existsSync(out) && readdirSync(out).length > 0 && !existsSync(join(out, 'logs'))) {
    throw new UsageError(`--out ${out} is a folder this did not make: name a new or empty folder`);
  }
  return { source: sourceDir, medplum: url.href, out, port, host, buildOnly: values['build-only'] === true };
}

/** The Medplum release the checkout is at: packages/core's version, else the app's. */
export function releaseOf(source: string): string {
  for (const file of [join(source, 'packages/core/package.json'), join(source, APP, 'package.json')]) {
    if (existsSync(file)) {
      const version = (JSON.parse(readFileSync(file, 'utf8')) as { version?: unknown }).version;
      if (typeof version === 'string' && /^\d+\.\d+\.\d+/.test(version)) {
        return version;
      }
    }
  }
  throw new UsageError(`no release in ${source} (packages/core/package.json's version): is it Medplum's source?`);
}

/** The checkout's commit when it is (the top of) a git work tree, else its release. */
export function refOf(source: string, release: string): string {
  const git = spawnSync('git', ['-C', source, 'rev-parse', '--show-toplevel', 'HEAD'], { encoding: 'utf8' });
  const [top, head] = git.status === 0 ? git.stdout.trim().split('\n') : [];
  return top && realpathSync(top) === realpathSync(source) && /^[0-9a-f]{40}$/.test(head ?? '')
    ? head
    : `release ${release}`;
}

function hostForUrl(host: string): string {
  const shown = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
  return shown.includes(':') ? `[${shown}]` : shown;
}

/** Throws a UsageError when something already listens on host:port (checked before a build of minutes). */
export function checkPortFree(host: string, port: number): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => reject(listenError(err, host, port)));
    probe.listen(port, host, () => probe.close(() => resolvePromise()));
  });
}

function listenError(err: NodeJS.ErrnoException, host: string, port: number): Error {
  if (err.code === 'EADDRINUSE') {
    return new UsageError(`port ${port} on ${host} is in use: stop what listens there or pick another with --port`);
  }
  if (err.code === 'EACCES') {
    return new UsageError(`port ${port} on ${host} is not allowed to this user: pick one above 1023 with --port`);
  }
  if (err.code === 'EADDRNOTAVAIL' || err.code === 'ENOTFOUND') {
    return new UsageError(`--host ${host} is not an address of this machine: use e.g. --host 127.0.0.1`);
  }
  return err;
}

/** Everything that is checked before anything is built: the options, the release, the port. */
export async function preflight(argv: string[], cwd = process.cwd()): Promise<Options & { release: string }> {
  const options = parseOptions(argv, cwd);
  const release = releaseOf(options.source);
  if (!options.buildOnly) {
    await checkPortFree(options.host, options.port);
  }
  return { ...options, release };
}

// ---------------------------------------------------------------------------------------------------------
// Building

interface Stamp {
  recipe: number;
  release: string;
  ref: string;
  medplum: string;
}

const log = (message: string) => console.log(`[provider-app] ${message}`);

/** The app asks for Node ^22.18.0 || >=24.2.0 (Vite 8): npm and Vite run with this process's Node. */
function checkNode(): void {
  const [major, minor] = process.versions.node.split('.').map(Number);
  if (!((major === 22 && minor >= 18) || (major === 24 && minor >= 2) || major >= 25)) {
    throw new UsageError(
      `Node ${process.version} cannot build the Provider app (it asks for ^22.18.0 || >=24.2.0): run it as npm run provider-app, which uses this project's Node 24`,
    );
  }
}

/** The environment of npm and Vite: this Node first on the PATH, none of the calling npm's script variables. */
function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    const lower = key.toLowerCase();
    if (lower.startsWith('npm_') && (!lower.startsWith('npm_config_') || lower === 'npm_config_local_prefix')) {
      continue;
    }
    env[key] = value;
  }
  env.PATH = `${dirname(process.execPath)}${process.platform === 'win32' ? ';' : ':'}${process.env.PATH ?? ''}`;
  return env;
}

interface Ran {
  code: number;
  output: string;
}

function run(command: string, args: string[], cwd: string, logFile?: string): Promise<Ran> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { cwd, env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.on('error', (err: NodeJS.ErrnoException) =>
      reject(err.code === 'ENOENT' ? new UsageError(`${command} is not on the PATH: install Node's npm`) : err),
    );
    child.on('close', (code) => {
      const output = Buffer.concat(chunks).toString('utf8');
      if (logFile) {
        writeFileSync(logFile, output);
      }
      resolvePromise({ code: code ?? 1, output });
    });
  });
}

function failed(what: string, ran: Ran, logFile: string): Error {
  const tail = ran.output.trimEnd().split('\n').slice(-30).join('\n');
  console.error(tail);
  return new Error(`${what} failed (exit ${ran.code}; the whole log: ${logFile})`);
}

/** Whether npm's registry has `name@version` (a package or version it does not know: false). */
async function published(name: string, version: string): Promise<boolean> {
  const ran = await run('npm', ['view', `${name}@${version}`, 'version', '--json'], process.cwd());
  if (ran.code === 0) {
    return ran.output.trim() !== '';
  }
  if (/\bE404\b/.test(ran.output)) {
    return false;
  }
  const line = ran.output.split('\n').find((l) => /error/i.test(l)) ?? ran.output.trim().split('\n')[0];
  throw new UsageError(`npm view ${name}@${version} failed (${line?.trim()}): is the npm registry reachable?`);
}

interface PackageJson {
  version?: string;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  [key: string]: unknown;
}

const readJson = (file: string) => JSON.parse(readFileSync(file, 'utf8')) as PackageJson;

/** The app's devDependencies used only by its tests, lint, type check or formatter. */
const TOOLING = /^(@testing-library\/|@types\/|@medplum\/eslint-config$|jsdom$|typescript$|vitest$|prettier)/;
/** Third-party packages Medplum's packages bundle into their published builds (devDependencies, not peers). */
const BUNDLED = ['@fullcalendar/react', 'temporal-polyfill', 'clsx'];
/** What the monorepo around the app gives it: its postcss.config.mjs's plugin, and its own clsx imports. */
const MONOREPO = { 'postcss-simple-vars': '^7.0.1', clsx: '^2.1.1' };

/**
 * The app's `@medplum/*` packages (and react-hooks, which it imports without naming it), and theirs: which
 * come from npm at the release, and which from the checkout's source (not on the registry at the release).
 */
async function medplumPackages(source: string, app: PackageJson, release: string) {
  const fromNpm = new Set<string>();
  const fromSource = new Set<string>();
  let next = [...Object.keys(app.devDependencies ?? {}), ...Object.keys(app.dependencies ?? {}), '@medplum/react-hooks']
    .filter((name) => name.startsWith('@medplum/') && !TOOLING.test(name))
    .filter((name, i, all) => all.indexOf(name) === i);
  while (next.length > 0) {
    const answers = await Promise.all(next.map((name) => published(name, release)));
    const found: string[] = [];
    next.forEach((name, i) => {
      if (answers[i]) {
        fromNpm.add(name);
        return;
      }
      const dir = join(source, 'packages', name.slice('@medplum/'.length));
      if (!existsSync(join(dir, 'package.json')) || !existsSync(join(dir, 'src'))) {
        throw new UsageError(
          `${name}@${release} is neither on the npm registry nor in ${dir}: use a full checkout of Medplum's source`,
        );
      }
      fromSource.add(name);
      const pkg = readJson(join(dir, 'package.json'));
      for (const dep of [...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.peerDependencies ?? {})]) {
        if (dep.startsWith('@medplum/') && !fromNpm.has(dep) && !fromSource.has(dep) && !next.includes(dep)) {
          found.push(dep);
        }
      }
    });
    next = found.filter((name, i) => found.indexOf(name) === i);
  }
  for (const name of ['@medplum/core', '@medplum/fhirtypes']) {
    if (!fromNpm.has(name) && !(await published(name, release))) {
      throw new UsageError(`${name}@${release} is not on the npm registry: is ${release} a released version?`);
    }
    fromSource.delete(name);
    fromNpm.add(name);
  }
  return { fromNpm: [...fromNpm].sort(), fromSource: [...fromSource].sort() };
}

/** `from` replaced in `text`; throws when it is not there (the release changed the file: update this script). */
function replace(text: string, from: RegExp | string, to: string, file: string, what: string): string {
  const changed = text.replace(from, to);
  if (changed === text) {
    throw new Error(`${file}: ${what} not found; this release's app differs from what scripts/provider-app.ts knows`);
  }
  return changed;
}

/** The app's package.json: its runtime packages as dependencies (no tooling), @medplum/* at the release. */
function appPackageJson(app: PackageJson, source: string, release: string, fromNpm: string[], fromSource: string[]) {
  const pinned: Record<string, string> = { ...app.devDependencies, ...app.dependencies };
  const dependencies: Record<string, string> = {};
  for (const [name, version] of Object.entries(pinned)) {
    if (!TOOLING.test(name) && !fromSource.includes(name)) {
      dependencies[name] = name.startsWith('@medplum/') ? release : version;
    }
  }
  for (const name of fromNpm) {
    dependencies[name] = release;
  }
  for (const name of fromSource) {
    const pkg = readJson(join(source, 'packages', name.slice('@medplum/'.length), 'package.json'));
    const wanted: Record<string, string> = { ...pkg.dependencies, ...pkg.peerDependencies };
    for (const bundled of BUNDLED) {
      if (pkg.devDependencies?.[bundled]) {
        wanted[bundled] = pkg.devDependencies[bundled];
      }
    }
    for (const [dep, range] of Object.entries(wanted)) {
      if (!dep.startsWith('@medplum/') && !dependencies[dep]) {
        dependencies[dep] = pkg.devDependencies?.[dep] ?? range;
      }
    }
  }
  for (const [name, range] of Object.entries(MONOREPO)) {
    dependencies[name] ??= range;
  }
  const sorted = Object.fromEntries(Object.entries(dependencies).sort(([a], [b]) => a.localeCompare(b)));
  const out = { name: 'medplum-provider', version: release, private: true, type: 'module', dependencies: sorted };
  return `${JSON.stringify({ ...out, overrides: { '@medplum/core': release } }, null, 2)}\n`;
}

/** vite.config.ts: Vite's defineConfig (no vitest), the aliases to the copied sources, no test block. */
function viteConfig(text: string, aliases: Record<string, string>): string {
  const file = 'vite.config.ts';
  let s = replace(text, /from ['"]vitest\/config['"];/, "from 'vite';", file, 'the vitest/config import');
  s = replace(
    s,
    /\nconst alias[^\n]*= Object\.fromEntries\([\s\S]*?\n\);\n/,
    `\nconst alias: NonNullable<UserConfig['resolve']>['alias'] = ${JSON.stringify(aliases)};\n`,
    file,
    'the alias block',
  );
  s = replace(s, /\n {2}test: \{[\s\S]*?\n {2}\},\n/, '\n', file, 'the test block');
  if (!/envPrefix:/.test(s)) {
    s = replace(
      s,
      'export default defineConfig({\n',
      "export default defineConfig({\n  envPrefix: ['MEDPLUM_', 'GOOGLE_'],\n",
      file,
      'defineConfig',
    );
  }
  return s;
}

/** The checkout's app and the sources it needs, copied fresh into `out` (its node_modules kept). */
function copySources(source: string, out: string, fromSource: string[]): string {
  const appDir = join(out, APP);
  mkdirSync(appDir, { recursive: true });
  for (const entry of readdirSync(appDir)) {
    if (entry !== 'node_modules') {
      rmSync(join(appDir, entry), { recursive: true, force: true });
    }
  }
  const appSource = join(source, APP);
  cpSync(appSource, appDir, {
    recursive: true,
    filter: (path) => !['node_modules', 'dist', '.env'].includes(relative(appSource, path).split(sep)[0]),
  });
  rmSync(join(out, 'packages'), { recursive: true, force: true });
  for (const name of fromSource) {
    const short = name.slice('@medplum/'.length);
    for (const part of ['src', 'package.json', 'tsconfig.json']) {
      if (existsSync(join(source, 'packages', short, part))) {
        cpSync(join(source, 'packages', short, part), join(out, 'packages', short, part), { recursive: true });
      }
    }
  }
  // The copied packages' tsconfig.json extend the monorepo's; their imports resolve in the app's node_modules.
  if (existsSync(join(source, 'tsconfig.json'))) {
    cpSync(join(source, 'tsconfig.json'), join(out, 'tsconfig.json'));
  }
  rmSync(join(out, 'node_modules'), { force: true });
  symlinkSync(join(APP, 'node_modules'), join(out, 'node_modules'), 'dir');
  return appDir;
}

async function build(options: Options, release: string, stamp: Stamp): Promise<string> {
  checkNode();
  const started = Date.now();
  const { source, out, medplum } = options;
  const logs = join(out, 'logs');
  mkdirSync(logs, { recursive: true });
  rmSync(join(out, 'stamp.json'), { force: true });
  log(`building the Provider app of Medplum ${release} (${stamp.ref}) for ${medplum} in ${out}`);

  const appSource = join(source, APP);
  for (const [file, needle] of [
    ['src/main.tsx', 'import.meta.env.MEDPLUM_BASE_URL'],
    ['src/pages/SignInPage.tsx', "searchParams.get('project')"],
  ]) {
    if (!readFileSync(join(appSource, file), 'utf8').includes(needle)) {
      throw new Error(`${APP}/${file} no longer reads ${needle}: this release needs scripts/provider-app.ts updated`);
    }
  }
  const app = readJson(join(appSource, 'package.json'));
  const { fromNpm, fromSource } = await medplumPackages(source, app, release);
  log(`from npm at ${release}: ${fromNpm.join(', ')}`);
  log(`from the checkout's source (not on the registry at ${release}): ${fromSource.join(', ') || 'none'}`);

  const appDir = copySources(source, out, fromSource);
  const aliases = Object.fromEntries(
    fromSource.map((name) => [name, join(out, 'packages', name.slice('@medplum/'.length), 'src')]),
  );
  const packageJson = appPackageJson(app, source, release, fromNpm, fromSource);
  writeFileSync(join(appDir, 'package.json'), packageJson);
  writeFileSync(
    join(appDir, 'vite.config.ts'),
    viteConfig(readFileSync(join(appSource, 'vite.config.ts'), 'utf8'), aliases),
  );
  const indexHtml = readFileSync(join(appSource, 'index.html'), 'utf8');
  writeFileSync(
    join(appDir, 'index.html'),
    indexHtml.replace(/\n *<script src="https:\/\/accounts\.google\.com\/gsi\/client"[^>]*><\/script>/, ''),
  );
  // Read by Vite at build time (envPrefix MEDPLUM_, GOOGLE_, RECAPTCHA_); .env.defaults is then not used.
  writeFileSync(
    join(appDir, '.env'),
    `MEDPLUM_BASE_URL=${medplum}\nMEDPLUM_CLIENT_ID=\nMEDPLUM_REGISTER_ENABLED=\nGOOGLE_CLIENT_ID=\nRECAPTCHA_SITE_KEY=\n`,
  );

  const installed = join(out, 'installed-package.json');
  if (
    !existsSync(join(appDir, 'node_modules/.package-lock.json')) ||
    !existsSync(installed) ||
    readFileSync(installed, 'utf8') !== packageJson
  ) {
    const t = Date.now();
    log('npm install (the app’s packages, from the npm registry)');
    const logFile = join(logs, 'npm-install.log');
    const ran = await run('npm', ['install', '--no-audit', '--no-fund', '--legacy-peer-deps'], appDir, logFile);
    if (ran.code !== 0) {
      throw failed('npm install', ran, logFile);
    }
    writeFileSync(installed, packageJson);
    log(`npm install: ${((Date.now() - t) / 1000).toFixed(0)} s`);
  }

  const t = Date.now();
  log('vite build');
  const logFile = join(logs, 'vite-build.log');
  const ran = await run(process.execPath, ['node_modules/vite/bin/vite.js', 'build'], appDir, logFile);
  if (ran.code !== 0) {
    throw failed('vite build', ran, logFile);
  }
  const dist = join(appDir, 'dist');
  const assets = join(dist, 'assets');
  const baked = existsSync(assets)
    ? readdirSync(assets).some((f) => f.endsWith('.js') && readFileSync(join(assets, f), 'utf8').includes(medplum))
    : false;
  if (!existsSync(join(dist, 'index.html')) || !baked) {
    throw new Error(`vite build made no dist/index.html or no bundle naming ${medplum} (the log: ${logFile})`);
  }
  log(
    `vite build: ${((Date.now() - t) / 1000).toFixed(0)} s; built in ${((Date.now() - started) / 1000).toFixed(0)} s`,
  );
  writeFileSync(join(out, 'stamp.json'), `${JSON.stringify(stamp, null, 2)}\n`);
  return dist;
}

// ---------------------------------------------------------------------------------------------------------
// Serving

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.webp': 'image/webp',
  '.ico': 'image/x-icon',
  '.woff': 'font/woff',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
  '.webmanifest': 'application/manifest+json',
};

function isAFile(path: string): boolean {
  try {
    return statSync(path, { throwIfNoEntry: false })?.isFile() === true;
  } catch {
    return false; // e.g. ENOTDIR: a file's name used as a folder
  }
}

/**
 * `dist/` as a single-page app: a file answers as itself, any other path with index.html (the app routes
 * it), except a missing file under /assets/ (404: a stale page asking for an old bundle).
 */
function serve(dist: string, host: string, port: number): Promise<ReturnType<typeof createServer>> {
  const root = resolve(dist);
  const index = join(root, 'index.html');
  const server = createServer((req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    let pathname = '/';
    try {
      pathname = decodeURIComponent(new URL(req.url ?? '/', 'http://app').pathname);
    } catch {
      // a malformed escape: the app's page
    }
    const file = resolve(root, `.${pathname}`);
    const isFile = file.startsWith(root + sep) && isAFile(file);
    if (!isFile && pathname.startsWith('/assets/')) {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found\n');
      return;
    }
    const target = isFile ? file : index;
    res.writeHead(200, {
      'content-type': TYPES[extname(target)] ?? 'application/octet-stream',
      'cache-control': target.startsWith(join(root, 'assets') + sep)
        ? 'public, max-age=31536000, immutable'
        : 'no-cache',
      'x-content-type-options': 'nosniff',
    });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    createReadStream(target).pipe(res);
  });
  return new Promise((resolvePromise, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => reject(listenError(err, host, port)));
    server.listen(port, host, () => resolvePromise(server));
  });
}

export async function main(argv: string[]): Promise<void> {
  const options = await preflight(argv);
  const { out, medplum, release } = options;
  const stamp: Stamp = { recipe: RECIPE, release, ref: refOf(options.source, release), medplum };
  const stampFile = join(out, 'stamp.json');
  const dist = join(out, APP, 'dist');
  const previous = existsSync(stampFile) ? (JSON.parse(readFileSync(stampFile, 'utf8')) as Stamp) : undefined;
  const current =
    previous !== undefined &&
    existsSync(join(dist, 'index.html')) &&
    (Object.keys(stamp) as (keyof Stamp)[]).every((key) => previous[key] === stamp[key]);
  if (current) {
    log(`built already for Medplum ${release} (${stamp.ref}) and ${medplum}: ${dist}`);
  } else {
    await build(options, release, stamp);
  }
  if (options.buildOnly) {
    log(`built: ${dist} (serve it as a single-page app, or rerun without --build-only)`);
    return;
  }
  const server = await serve(dist, options.host, options.port);
  const url = `http://${hostForUrl(options.host)}:${options.port}`;
  console.log('');
  console.log(`Medplum's Provider app (${release}, talking to ${medplum}) is at ${url}/`);
  console.log(`  Clinicians open ${url}/signin?project=<project id>: a project's own users (the clinicians) sign in`);
  console.log(`  only with their project's id (the id provisioning or npm start printed); without it Medplum`);
  console.log(`  answers "User not found".`);
  console.log(`  ${medplum} must allow the origin ${url} (Medplum's allowedOrigins; npm start: CORS_ORIGINS).`);
  console.log('  Ctrl-C stops it.');
  const stop = () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

if (process.argv[1]?.endsWith('provider-app.ts')) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    if (err instanceof HelpRequested) {
      console.log(`usage: ${err.message}\n(docs/clinicians.md "Opening the Provider app")`);
      return;
    }
    console.error(`provider-app: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = err instanceof UsageError ? 2 : 1;
  });
}
