import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { scaled } from '../support/slowness';

describe('Cloudflare Worker build', () => {
  it('wrangler builds src/worker.ts offline, and nothing Node-only is in its import graph', () => {
    const copy = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/build-docs-assets.ts'], { encoding: 'utf8' });
    expect(copy.status, copy.stderr).toBe(0);
    const outdir = mkdtempSync(join(tmpdir(), 'pc-worker-'));
    const run = spawnSync(join('node_modules', '.bin', 'wrangler'), ['deploy', '--dry-run', '--outdir', outdir], {
      encoding: 'utf8',
      env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: 'true' },
      timeout: scaled(120_000),
    });
    expect(run.status, `${run.stdout}${run.stderr}`).toBe(0);
    const bundle = readFileSync(join(outdir, 'worker.js'), 'utf8');
    // wrangler leaves `node:` imports external instead of failing: a Node-only module (node:sqlite,
    // node:vm, fs) that crept into the gateway's graph shows up here as an import.
    const nodeImports =
      bundle.match(/(?:from\s*|require\(|import\()["'](?:node:)?(?:fs|path|sqlite|vm|child_process|os|module)["']/g) ??
      [];
    expect(nodeImports).toEqual([]);
    // The embedded Medplum's WebSocket server (`ws`, src/embedded/websocket-server.ts) is Node's alone.
    expect(bundle).not.toMatch(/class WebSocketServer|(?:require\(|from\s*|import\()["']ws["']/);
    expect(bundle).toContain('/v1/patient/profile');
  });
});
