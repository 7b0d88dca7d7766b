import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import ts from 'typescript';

/**
 * `npm run build:sdk`: the package @patient-care/sdk from src/sdk/index.ts, into packages/sdk/dist.
 *
 * - dist/index.js: one ES module. The contracts and what they use of @hono/zod-openapi are bundled
 *   (a few KB: a patient app gets no server framework); the package's `dependencies` stay imports,
 *   so the app and the SDK share one zod.
 * - dist/index.d.ts: tsc's declarations of src/sdk/index.ts. The SDK's methods have inferred types,
 *   which tsc spells out; checked below to import nothing but the declared dependencies.
 */
const here = dirname(fileURLToPath(import.meta.url));
const entry = resolve(here, '../../src/sdk/index.ts');
const dist = join(here, 'dist');
const manifest = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
};
const dependencies = Object.keys(manifest.dependencies);

rmSync(dist, { recursive: true, force: true });

await build({
  entryPoints: [entry],
  outfile: join(dist, 'index.js'),
  bundle: true,
  format: 'esm',
  // Browsers and Node alike: no Node built-in may be reached (the build fails if one is).
  platform: 'neutral',
  mainFields: ['module', 'main'],
  target: 'es2022',
  external: dependencies,
  logLevel: 'warning',
});

const config = ts.getParsedCommandLineOfConfigFile(join(here, 'tsconfig.json'), undefined, {
  ...ts.sys,
  onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
    throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
  },
});
if (!config) {
  throw new Error('packages/sdk/tsconfig.json could not be read');
}
const program = ts.createProgram(config.fileNames, config.options);
// tsc would write the contracts' declarations too; only the entry's is published.
const wanted = join(config.options.outDir as string, relative(config.options.rootDir as string, entry)).replace(
  /\.ts$/,
  '.d.ts',
);
let declarations: string | undefined;
const emitted = program.emit(
  undefined,
  (name, text) => {
    if (resolve(name) === wanted) {
      declarations = text;
    }
  },
  undefined,
  true,
);
const problems = [...ts.getPreEmitDiagnostics(program), ...emitted.diagnostics];
if (problems.length > 0) {
  throw new Error(
    ts.formatDiagnostics(problems, { ...ts.sys, getCanonicalFileName: (f) => f, getNewLine: () => '\n' }),
  );
}
if (declarations === undefined) {
  throw new Error(`tsc did not emit ${wanted}`);
}
const imported = [...declarations.matchAll(/(?:from\s+|import\()['"]([^'"]+)['"]/g)].map((match) => match[1]);
const undeclared = imported.filter((specifier) => !dependencies.includes(specifier));
if (undeclared.length > 0) {
  throw new Error(`dist/index.d.ts would import ${undeclared.join(', ')}: not dependencies of @patient-care/sdk`);
}
mkdirSync(dist, { recursive: true });
writeFileSync(join(dist, 'index.d.ts'), declarations);
console.log('built @patient-care/sdk into packages/sdk/dist');
