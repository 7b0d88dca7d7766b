import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { startGcPacer } from '../../src/embedded/gc-pacer';

describe('the GC pacer (src/embedded/gc-pacer.ts)', () => {
  it('keeps gc to itself: contexts made after it starts (bot runs) have none', () => {
    const stop = startGcPacer();
    try {
      expect(runInNewContext('typeof gc')).toBe('undefined');
    } finally {
      stop();
    }
  });
});
