import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

it('the Node access log writes every entry as one JSON line, in order, including those logged just before exit', async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [
    '--import',
    'tsx',
    'test/gateway/fixtures/access-log-writer.ts',
  ]);
  const lines = stdout.trimEnd().split('\n');
  expect(lines.map((line) => (JSON.parse(line) as { requestId: string }).requestId)).toEqual([
    'request-1',
    'request-2',
    'request-3',
    'request-4',
    'request-5',
    'request-6',
  ]);
});
