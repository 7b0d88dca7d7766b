import { OpenAPIHono } from '@hono/zod-openapi';
import { describe, expect, it } from 'vitest';
import type { AppEnv } from '../../src/app-env';
import { admission } from '../../src/edge/admission';
import { ApiError } from '../../src/errors';

/**
 * Admission shares the instance among callers (src/edge/admission.ts): once it is half full nobody holds
 * more than total / (callers seen in the last 10 s), so accounts acting together cannot keep everyone
 * else out; a caller with nothing in flight gets the places they leave. Calls are held open by hand.
 */
function harness(limits = { perCaller: 8, total: 24 }) {
  let at = Date.UTC(2026, 10, 27, 12);
  const held: (() => void)[] = [];
  const app = new OpenAPIHono<AppEnv>();
  app.use('*', async (c, next) => {
    c.set('session', { profile: c.req.header('x-caller') } as AppEnv['Variables']['session']);
    await next();
  });
  app.use(
    '*',
    admission(limits, () => at),
  );
  app.get('/work', () => new Promise<Response>((resolve) => held.push(() => resolve(new Response('done')))));
  app.onError((err) => new Response(null, { status: err instanceof ApiError ? err.status : 500 }));
  const call = (caller: string) => Promise.resolve(app.request('/work', { headers: { 'x-caller': caller } }));
  /** Starts calls and waits until each is admitted (held) or answered (refused). */
  const start = async (caller: string, n: number) => {
    const before = held.length;
    const answers: Promise<Response>[] = [];
    const statuses: number[] = [];
    for (let i = 0; i < n; i++) {
      const answer = call(caller);
      answers.push(answer);
      // Refusals answer at once; an admitted call parks in `held`.
      const settled = await Promise.race([
        answer.then((r) => r.status),
        new Promise<number>((r) => setTimeout(() => r(0), 5)),
      ]);
      statuses.push(settled);
    }
    return { admitted: held.length - before, statuses };
  };
  const release = (n = held.length) => {
    for (const done of held.splice(0, n)) {
      done();
    }
  };
  return { start, release, advance: (ms: number) => (at += ms), held };
}

describe('fair admission', () => {
  it('ten accounts flooding at once: once they are known, each holds its share and a newcomer is admitted', async () => {
    const h = harness();
    const flooders = Array.from({ length: 10 }, (_, i) => `Patient/f${i}`);
    const first = [];
    for (const f of flooders) {
      first.push(await h.start(f, 8));
    }
    // First wave, first come, but the last eighth (3) kept for callers with nothing in flight: the first two
    // take 8 each, the third stops at 21, and three latecomers get one place each; then it is full.
    expect(first.map((w) => w.admitted)).toEqual([8, 8, 5, 1, 1, 1, 0, 0, 0, 0]);
    expect(first[3]?.statuses).toEqual([0, ...Array(7).fill(503)]);
    expect(first[9]?.statuses).toEqual(Array(8).fill(503));
    // They keep at it: each retries whenever one of its calls ends (here: the oldest half of the calls
    // in flight end, then every flooder tries 8 more), for a few rounds. Past half of the instance each
    // is held to its share (24 / 10 = 2): those that got more early get no more until they are under it.
    let refusedOverShare = 0;
    for (let round = 0; round < 6; round++) {
      h.release(Math.ceil(h.held.length / 2));
      for (const f of flooders) {
        refusedOverShare += (await h.start(f, 8)).statuses.filter((s) => s === 429).length;
      }
    }
    // Over its share a flooder is told so (429), not that the service is full.
    expect(refusedOverShare).toBeGreaterThan(0);
    expect(h.held.length).toBeLessThan(24);
    // A patient arriving now, nothing in flight: admitted.
    const victim = await h.start('Patient/victim', 1);
    expect(victim.admitted).toBe(1);
    // Without anyone else, a caller is held to perCaller only.
    h.release();
    h.advance(20_000);
    const alone = await h.start('Patient/alone', 10);
    expect(alone.admitted).toBe(8);
    expect(alone.statuses.slice(8)).toEqual([429, 429]);
    h.release();
  });

  it('a hundred accounts: the instance never fills past what leaves a newcomer a place once they are known', async () => {
    const h = harness({ perCaller: 32, total: 256 });
    const flooders = Array.from({ length: 100 }, (_, i) => `Patient/g${i}`);
    for (const f of flooders) {
      await h.start(f, 1);
    }
    h.release();
    for (let round = 0; round < 6; round++) {
      h.release(Math.ceil(h.held.length / 2));
      for (const f of flooders) {
        await h.start(f, 32);
      }
    }
    expect(h.held.length).toBeLessThan(256);
    expect((await h.start('Patient/victim', 1)).admitted).toBe(1);
    h.release();
  });
});
