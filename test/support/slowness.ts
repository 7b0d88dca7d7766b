/**
 * How much slower than the reference machine this run is (vitest.config.ts measures it as the suite starts;
 * at least 1): a time limit a test sets itself goes through `scaled`, so a slow or busy machine is given
 * more time rather than a red run, and a fast one keeps the limit it was written with.
 */
export const SLOWNESS = Math.max(1, Number(process.env.TEST_SLOWNESS) || 1);

/** A time limit in milliseconds, grown with this machine's slowness. */
export const scaled = (ms: number): number => Math.round(ms * SLOWNESS);
