import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { platformDefinition } from '../../src/provision/definition';

/** STYLE.md "Walls": who may import whom, read off the imports themselves. */
function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : path.endsWith('.ts') ? [path] : [];
  });
}

/** Every import of a file: package names as written, relative ones resolved to a repository path. */
function importsOf(file: string): string[] {
  const source = readFileSync(file, 'utf8');
  const specifiers = [...source.matchAll(/^\s*(?:import|export)\s[^'"]*?from\s+'([^']+)'/gm)].map((m) => m[1]);
  return specifiers.map((s) => (s.startsWith('.') ? normalize(relative('.', join(dirname(file), s))) : s));
}

const within = (path: string, ...dirs: string[]) => dirs.some((d) => path === d || path.startsWith(`${d}/`));

describe('walls between the layers', () => {
  it('contracts import nothing of src/ or bots/', () => {
    for (const file of files('contracts')) {
      for (const target of importsOf(file)) {
        expect(within(target, 'src', 'bots'), `${file} imports ${target}`).toBe(false);
      }
    }
  });

  it('bots import only contracts/, bots/lib/, @medplum/* and Node built-ins', () => {
    for (const file of files('bots')) {
      for (const target of importsOf(file)) {
        const allowed =
          within(target, 'contracts', 'bots/lib') || target.startsWith('@medplum/') || target.startsWith('node:');
        expect(allowed, `${file} imports ${target}`).toBe(true);
      }
    }
  });

  it('every bot validates its input against its contract; every patient-facing bot verifies its caller', () => {
    for (const bot of platformDefinition.bots) {
      const source = readFileSync(join('bots', `${bot.key}.ts`), 'utf8');
      const prologue = bot.patient
        ? new RegExp(`patientWorkflow\\(medplum, event, '${bot.key}'\\)`)
        : // readInput itself, or the clinician-work prologue that calls it (bots/lib/queues.ts completedByOwner)
          new RegExp(`readInput\\('${bot.key}'|completedByOwner\\(medplum, event, '${bot.key}'`);
      expect(source, bot.key).toMatch(prologue);
    }
  });

  it('bot bundles carry no zod: a contract module a bot imports at run time is zod-free (contracts/systems.ts)', () => {
    // zod costs 12-19 ms to compile in every vmcontext run (docs/benchmarks.md); bots check input as JSON Schema.
    for (const bot of platformDefinition.bots) {
      const bundle = readFileSync(join('dist', 'bots', `${bot.key}.js`), 'utf8');
      expect(bundle.includes('ZodError'), `${bot.key} bundles zod (${bundle.length} bytes)`).toBe(false);
      expect(bundle.length, bot.key).toBeLessThan(200_000);
    }
  });

  it('route modules never import app.ts, the embedded Medplum, or each other', () => {
    for (const file of files('src/routes')) {
      for (const target of importsOf(file)) {
        expect(target, file).not.toBe('src/app');
        expect(within(target, 'src/embedded'), `${file} imports ${target}`).toBe(false);
        expect(within(target, 'src/routes') && target !== 'src/routes/respond', `${file} imports ${target}`).toBe(
          false,
        );
      }
    }
  });

  it('the clinician helper speaks only to Medplum: no embedded Medplum, gateway or bots (JOURNEY J)', () => {
    for (const file of files('src/clinician')) {
      for (const target of importsOf(file)) {
        const ours = target.startsWith('src/') || within(target, 'bots');
        expect(ours && !within(target, 'src/clinician'), `${file} imports ${target}`).toBe(false);
      }
    }
  });

  it('the embedded Medplum never imports the gateway', () => {
    for (const file of files('src/embedded')) {
      for (const target of importsOf(file)) {
        const gateway = within(target, 'src/routes', 'src/auth', 'src/edge') || target === 'src/app';
        expect(gateway, `${file} imports ${target}`).toBe(false);
      }
    }
  });
});
