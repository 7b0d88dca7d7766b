import { OpenAPIHono } from '@hono/zod-openapi';
import { describe, expect, it } from 'vitest';
import type { AppEnv } from '../../src/app-env';
import { admission } from '../../src/edge/admission';
import { ApiError } from '../../src/errors';
import { type AdmissionLimits, admissionCounter } from '../../src/shared/admission';

/**
 * Admission's limits at their edges (src/shared/admission.ts, src/edge/admission.ts): N calls in flight
 * admitted and the next refused, for a caller, for the instance, for the places kept for newcomers and for
 * the fair share; who counts as sharing the instance, and for how long. The flood scenarios are
 * test/gateway/admission-fairness.test.ts and test/gateway/admission.test.ts.
 */
const T0 = Date.UTC(2026, 10, 27, 12);

function counter(limits: AdmissionLimits) {
  let now = T0;
  const c = admissionCounter(limits, () => now);
  /** Admits `caller` until the first refusal (or `max` calls): how many got in, and that refusal. */
  const fill = (caller: string, max = 1_000) => {
    let admitted = 0;
    for (; admitted < max; admitted++) {
      const answer = c.admit(caller);
      if (answer !== 'ok') {
        return { admitted, refused: answer };
      }
    }
    return { admitted, refused: undefined };
  };
  const release = (caller: string, n = 1) => {
    for (let i = 0; i < n; i++) {
      c.release(caller);
    }
  };
  /** A caller seen now, with nothing left in flight. */
  const seen = (caller: string) => {
    expect(c.admit(caller)).toBe('ok');
    c.release(caller);
  };
  return { ...c, fill, release, seen, at: (ms: number) => (now = T0 + ms) };
}

describe('admission counter', () => {
  it('a caller alone: perCaller calls in flight, the next refused with her share; a place freed is hers again', () => {
    const c = counter({ perCaller: 3, total: 100 });
    expect(c.fill('Patient/a')).toEqual({ admitted: 3, refused: { share: 3 } });
    c.release('Patient/a');
    expect(c.admit('Patient/a')).toBe('ok');
    expect(c.admit('Patient/a')).toEqual({ share: 3 });
  });

  it('the instance: total calls of callers with nothing else in flight, the next refused as full', () => {
    const c = counter({ perCaller: 1, total: 4 });
    for (const caller of ['a', 'b', 'c', 'd']) {
      expect(c.admit(`Patient/${caller}`)).toBe('ok');
    }
    // Five callers share four places: a share rounds down to nothing, yet she is told it is full.
    expect(c.admit('Patient/e')).toBe('total');
    c.release('Patient/a');
    expect(c.admit('Patient/f')).toBe('ok');
  });

  it('the last eighth (at least one place) is kept for callers with nothing in flight', () => {
    const c = counter({ perCaller: 100, total: 16 });
    expect(c.fill('Patient/a')).toEqual({ admitted: 14, refused: 'total' });
    expect(c.admit('Patient/b')).toBe('ok');
    expect(c.admit('Patient/b')).toBe('total');
    expect(c.admit('Patient/c')).toBe('ok');
    expect(c.admit('Patient/d')).toBe('total');

    const small = counter({ perCaller: 100, total: 4 });
    expect(small.fill('Patient/a')).toEqual({ admitted: 3, refused: 'total' });
    expect(small.admit('Patient/b')).toBe('ok');
  });

  it('a caller refused in the last second is not a newcomer for those places; at one second she is', () => {
    const c = counter({ perCaller: 100, total: 16 });
    expect(c.fill('Patient/b')).toEqual({ admitted: 14, refused: 'total' });
    expect(c.fill('Patient/a')).toEqual({ admitted: 1, refused: 'total' });
    c.release('Patient/a');
    // Each refusal holds her back a second more.
    c.at(999);
    expect(c.admit('Patient/a')).toBe('total');
    c.at(1_998);
    expect(c.admit('Patient/a')).toBe('total');
    c.at(2_998);
    expect(c.admit('Patient/a')).toBe('ok');
  });

  it('a caller refused over her share is held back from those places too', () => {
    const c = counter({ perCaller: 4, total: 16 });
    expect(c.fill('Patient/a')).toEqual({ admitted: 4, refused: { share: 4 } });
    c.release('Patient/a', 4);
    for (const other of ['b', 'c', 'd']) {
      expect(c.fill(`Patient/${other}`, 4).admitted).toBe(4);
    }
    expect(c.fill('Patient/e', 2).admitted).toBe(2);
    // 14 of 16 in flight, she has none, but was refused a moment ago.
    expect(c.admit('Patient/a')).toBe('total');
    expect(c.admit('Patient/f')).toBe('ok');
  });

  it('up to half of the instance is first come; from half on, each of the callers seen holds her share', () => {
    const c = counter({ perCaller: 10, total: 10 });
    c.seen('Patient/b');
    // Half is 5: below it nobody is held to a share; at it, two callers share ten places, five each.
    expect(c.fill('Patient/a')).toEqual({ admitted: 5, refused: { share: 5 } });

    const four = counter({ perCaller: 10, total: 10 });
    for (const other of ['b', 'c', 'd']) {
      four.seen(`Patient/${other}`);
    }
    expect(four.fill('Patient/a')).toEqual({ admitted: 5, refused: { share: 2 } });
    expect(four.admit('Patient/b')).toBe('ok');
    expect(four.admit('Patient/b')).toBe('ok');
    expect(four.admit('Patient/b')).toEqual({ share: 2 });
  });

  it('the share never exceeds perCaller, even for a caller alone on an instance half full', () => {
    const c = counter({ perCaller: 2, total: 4 });
    expect(c.fill('Patient/a')).toEqual({ admitted: 2, refused: { share: 2 } });
  });

  it('a caller counts as sharing for 10 seconds after her last call, and while she has calls in flight', () => {
    const at = (ms: number) => {
      const c = counter({ perCaller: 10, total: 10 });
      c.seen('Patient/b');
      c.at(ms);
      return c.fill('Patient/a').admitted;
    };
    expect(at(10_000)).toBe(5);
    // Alone once b is forgotten: all but the place kept for a newcomer.
    expect(at(10_001)).toBe(9);

    const busy = counter({ perCaller: 10, total: 10 });
    expect(busy.admit('Patient/b')).toBe('ok');
    busy.at(60_000);
    expect(busy.fill('Patient/a')).toEqual({ admitted: 5, refused: { share: 5 } });
    // Once her calls have ended, more than 10 seconds after her last one began: forgotten.
    busy.release('Patient/b');
    busy.release('Patient/a', 5);
    busy.at(70_001);
    expect(busy.fill('Patient/a').admitted).toBe(9);
  });
});

describe('admission counter: calls waiting for a place', () => {
  /** What a waiting call was answered, or 'waiting' while it still waits. */
  const track = (answer: Promise<unknown>) => {
    let state: unknown = 'waiting';
    void answer.then((a) => {
      state = a;
    });
    return () => state;
  };
  const tick = () => new Promise((r) => setTimeout(r, 0));

  it('the instance full: a call waits, and the place freed is hers; a caller under the total is admitted at once', async () => {
    const c = admissionCounter({ perCaller: 4, total: 2, waiting: 10 });
    expect(await c.enter('Patient/a')).toBe('ok');
    expect(await c.enter('Patient/b')).toBe('ok');
    const waiting = track(c.enter('Patient/c'));
    await tick();
    expect(waiting()).toBe('waiting');
    c.release('Patient/a');
    await tick();
    expect(waiting()).toBe('ok');
    // Two in flight again (b and c): the next waits too.
    const next = track(c.enter('Patient/a'));
    await tick();
    expect(next()).toBe('waiting');
  });

  it('a place freed goes to the waiting caller with the fewest calls in flight, a crowd’s waiting calls after her', async () => {
    const c = admissionCounter({ perCaller: 8, total: 4, waiting: 100 });
    for (let i = 0; i < 4; i++) {
      expect(await c.enter('Patient/crowd')).toBe('ok');
    }
    const crowd = [track(c.enter('Patient/crowd')), track(c.enter('Patient/crowd'))];
    await tick();
    const her = track(c.enter('Patient/her'));
    await tick();
    c.release('Patient/crowd');
    await tick();
    // She came last and is first: she has nothing in flight, the crowd three.
    expect(her()).toBe('ok');
    expect(crowd.map((w) => w())).toEqual(['waiting', 'waiting']);
    c.release('Patient/crowd');
    await tick();
    // Now she has one in flight, the crowd two: the crowd's oldest waiting call.
    expect(crowd.map((w) => w())).toEqual(['ok', 'waiting']);
  });

  it('more callers than places: her one call goes before the crowd’s, though they have as few in flight and waited longer', async () => {
    let now = T0;
    const c = admissionCounter({ perCaller: 8, total: 2, waiting: 100 }, () => now);
    expect(await c.enter('Patient/x')).toBe('ok');
    expect(await c.enter('Patient/x')).toBe('ok');
    // Ten accounts, none of them in flight, each with three calls waiting since before she came.
    const crowd = Array.from({ length: 10 }, (_, i) =>
      Array.from({ length: 3 }, () => track(c.enter(`Patient/crowd-${i}`))),
    ).flat();
    now += 100;
    const her = track(c.enter('Patient/her'));
    await tick();
    c.release('Patient/x');
    await tick();
    expect(her()).toBe('ok');
    expect(crowd.filter((w) => w() === 'ok')).toHaveLength(0);
    // The next place: the crowd's oldest call.
    c.release('Patient/x');
    await tick();
    expect(crowd[0]?.()).toBe('ok');
  });

  it('between callers with as many in flight, the one waiting longest', async () => {
    let now = T0;
    const c = admissionCounter({ perCaller: 8, total: 1, waiting: 100 }, () => now);
    expect(await c.enter('Patient/x')).toBe('ok');
    const b = track(c.enter('Patient/b'));
    now += 10;
    const a = track(c.enter('Patient/a'));
    await tick();
    c.release('Patient/x');
    await tick();
    expect([a(), b()]).toEqual(['waiting', 'ok']);
  });

  it('between callers with as many, the longest waiting even when the other came to wait first', async () => {
    let now = T0;
    const c = admissionCounter({ perCaller: 8, total: 3, waiting: 100 }, () => now);
    expect(await c.enter('Patient/b')).toBe('ok');
    expect(await c.enter('Patient/x')).toBe('ok');
    expect(await c.enter('Patient/y')).toBe('ok');
    const a1 = track(c.enter('Patient/a'));
    now += 3;
    const b2 = track(c.enter('Patient/b'));
    now += 2;
    const a2 = track(c.enter('Patient/a'));
    await tick();
    // a (two waiting) and b (one in flight, one waiting) have two each: a's call, waiting since 0, first.
    c.release('Patient/x');
    await tick();
    expect([a1(), b2(), a2()]).toEqual(['ok', 'waiting', 'waiting']);
    // Two each again: b's call (since 3) before a's second (since 5), though a came to wait first.
    c.release('Patient/y');
    await tick();
    expect([b2(), a2()]).toEqual(['ok', 'waiting']);
    c.release('Patient/a');
    await tick();
    expect(a2()).toBe('ok');
  });

  it('a caller’s calls keep waiting after her first is let in, and each is let in in turn', async () => {
    const c = admissionCounter({ perCaller: 8, total: 1, waiting: 100 });
    expect(await c.enter('Patient/x')).toBe('ok');
    const calls = [track(c.enter('Patient/a')), track(c.enter('Patient/a')), track(c.enter('Patient/a'))];
    await tick();
    for (let i = 0; i < 3; i++) {
      c.release(i === 0 ? 'Patient/x' : 'Patient/a');
      await tick();
      expect(calls.map((w) => w())).toEqual(calls.map((_, j) => (j <= i ? 'ok' : 'waiting')));
    }
  });

  it('waiting calls count among hers: past perCaller she is refused at once with her limit', async () => {
    const c = admissionCounter({ perCaller: 3, total: 2, waiting: 100 });
    expect(await c.enter('Patient/a')).toBe('ok');
    expect(await c.enter('Patient/a')).toBe('ok');
    const third = track(c.enter('Patient/a'));
    expect(await c.enter('Patient/a')).toEqual({ share: 3 });
    await tick();
    expect(third()).toBe('waiting');
  });

  it('the waiting places taken: a newcomer takes the place of the newest call of whoever has most calls in flight and waiting, if more than one; anyone else is refused as full', async () => {
    const c = admissionCounter({ perCaller: 10, total: 1, waiting: 3 });
    expect(await c.enter('Patient/x')).toBe('ok');
    const crowd = [track(c.enter('Patient/crowd')), track(c.enter('Patient/crowd'))];
    const other = track(c.enter('Patient/other'));
    await tick();
    // x holds a place: not a newcomer; the crowd waits already: not one either.
    expect(await c.enter('Patient/x')).toBe('total');
    expect(await c.enter('Patient/crowd')).toBe('total');
    const her = track(c.enter('Patient/her'));
    await tick();
    expect([...crowd.map((w) => w()), other(), her()]).toEqual(['waiting', 'total', 'waiting', 'waiting']);
    // A caller waiting alone is never turned away for another: with one call each, the newcomer is refused.
    const small = admissionCounter({ perCaller: 10, total: 1, waiting: 2 });
    expect(await small.enter('Patient/x')).toBe('ok');
    const one = track(small.enter('Patient/one'));
    const two = track(small.enter('Patient/two'));
    expect(await small.enter('Patient/three')).toBe('total');
    await tick();
    expect([one(), two()]).toEqual(['waiting', 'waiting']);
    // One call waiting but two in flight is more than hers: that call makes way.
    const busy = admissionCounter({ perCaller: 10, total: 2, waiting: 2 });
    expect(await busy.enter('Patient/busy')).toBe('ok');
    expect(await busy.enter('Patient/busy')).toBe('ok');
    const busyWaits = track(busy.enter('Patient/busy'));
    const calm = track(busy.enter('Patient/calm'));
    const newcomer = track(busy.enter('Patient/new'));
    await tick();
    expect([busyWaits(), calm(), newcomer()]).toEqual(['total', 'waiting', 'waiting']);
    // The call turned away holds no place and waits no more: two places freed go to the two waiting, and
    // a third freed is free (a call let in at once).
    busy.release('Patient/busy');
    busy.release('Patient/busy');
    await tick();
    expect([calm(), newcomer()]).toEqual(['ok', 'ok']);
    busy.release('Patient/calm');
    await tick();
    expect(await busy.enter('Patient/late')).toBe('ok');
  });

  it('a wait ends as full after maxWaitMs, or when its call is abandoned; neither is given a place after', async () => {
    const c = admissionCounter({ perCaller: 10, total: 1, waiting: 10, maxWaitMs: 20 });
    expect(await c.enter('Patient/x')).toBe('ok');
    const began = Date.now();
    expect(await c.enter('Patient/slow')).toBe('total');
    expect(Date.now() - began).toBeGreaterThanOrEqual(15);
    const abandoned = new AbortController();
    const gone = track(c.enter('Patient/gone', abandoned.signal));
    const stays = track(c.enter('Patient/stays'));
    await tick();
    abandoned.abort();
    await tick();
    expect(gone()).toBe('total');
    c.release('Patient/x');
    await tick();
    expect(stays()).toBe('ok');
    // One place, one call in flight (stays): nothing else was let in.
    expect(await Promise.race([c.enter('Patient/y'), new Promise((r) => setTimeout(() => r('waiting'), 5))])).toBe(
      'waiting',
    );
    expect(await c.enter('Patient/z', AbortSignal.abort())).toBe('total');
    // An abandoned call is answered at once, not when its wait would have ended.
    const slow = admissionCounter({ perCaller: 10, total: 1, waiting: 10, maxWaitMs: 60_000 });
    expect(await slow.enter('Patient/x')).toBe('ok');
    const at = Date.now();
    expect(await slow.enter('Patient/z', AbortSignal.abort())).toBe('total');
    const leaving = new AbortController();
    const left = slow.enter('Patient/w', leaving.signal);
    leaving.abort();
    expect(await left).toBe('total');
    expect(Date.now() - at).toBeLessThan(1_000);
    // Neither waits any more: the place freed is free.
    slow.release('Patient/x');
    expect(await slow.enter('Patient/v')).toBe('ok');
  });

  it('without waiting places, enter is admit: the share and the eighth kept for newcomers still apply', async () => {
    const c = admissionCounter({ perCaller: 10, total: 4, waiting: 0 });
    expect(await c.enter('Patient/a')).toBe('ok');
    expect(await c.enter('Patient/a')).toBe('ok');
    expect(await c.enter('Patient/a')).toBe('ok');
    // The last place is kept for a caller with nothing in flight.
    expect(await c.enter('Patient/a')).toBe('total');
    expect(await c.enter('Patient/b')).toBe('ok');
  });

  it('without waiting places (the default) the full instance refuses at once, as before', async () => {
    const c = admissionCounter({ perCaller: 10, total: 1 });
    expect(await c.enter('Patient/x')).toBe('ok');
    expect(await c.enter('Patient/y')).toBe('total');
  });
});

describe('admission middleware', () => {
  function gateway(limits: AdmissionLimits) {
    const app = new OpenAPIHono<AppEnv>();
    const held: (() => void)[] = [];
    app.use('*', async (c, next) => {
      const caller = c.req.header('x-caller');
      if (caller) {
        c.set('session', { profile: caller } as AppEnv['Variables']['session']);
      }
      await next();
    });
    app.use(
      '*',
      admission(limits, () => T0),
    );
    app.get('/hold', () => new Promise<Response>((resolve) => held.push(() => resolve(new Response('done')))));
    const waits: ((value: string) => void)[] = [];
    // A feed's wait: out of admission until the test ends it, then her answer says whether she got back in.
    app.get('/step', async (c) => {
      const stepOut = c.get('stepOut');
      if (!stepOut) {
        throw new Error('admission gave no stepOut');
      }
      return c.json(await stepOut(() => new Promise<string>((resolve) => waits.push(resolve))));
    });
    // A stream's wait, begun by the handler and outliving it.
    app.get('/detach', (c) => {
      void c.get('stepOut')?.(() => new Promise<string>((resolve) => waits.push(resolve)));
      return c.json({ streaming: true });
    });
    // Work after the answer began asks for a place again, as a stream's looks do.
    app.get('/again', (c) => {
      const admitted = c.get('admitted');
      const first = admitted?.();
      const second = admitted?.();
      first?.();
      const third = admitted?.();
      third?.();
      return c.json([first, second, third].map(Boolean));
    });
    app.get('/fail', () => {
      throw new Error('the route failed');
    });
    app.onError((err) =>
      err instanceof ApiError
        ? Response.json(
            { code: err.code, message: err.message, details: err.details },
            { status: err.status, headers: err.headers },
          )
        : new Response(null, { status: 500 }),
    );
    const call = async (path: string, caller?: string) => {
      const answer = Promise.resolve(app.request(path, { headers: caller ? { 'x-caller': caller } : {} }));
      const settled = await Promise.race([answer, new Promise<undefined>((r) => setTimeout(r, 5))]);
      const text = await settled?.text();
      return settled && { status: settled.status, headers: settled.headers, body: text ? JSON.parse(text) : undefined };
    };
    /** Starts a call that steps out; its answer once the wait ends. */
    const step = async (caller: string) => {
      const answer = Promise.resolve(app.request('/step', { headers: { 'x-caller': caller } }));
      await new Promise((r) => setTimeout(r, 5));
      return async (value: string) => {
        waits.shift()?.(value);
        const res = await answer;
        return { status: res.status, body: await res.json() };
      };
    };
    const releaseHeld = async () => {
      for (const done of held.splice(0)) {
        done();
      }
      await new Promise((r) => setTimeout(r, 5));
    };
    /** A call's answer, whenever it comes. */
    const answer = (path: string, caller: string) =>
      Promise.resolve(app.request(path, { headers: { 'x-caller': caller } }));
    return { call, answer, held, step, releaseHeld };
  }

  it('past her share: 429 rate_limited with the share, Retry-After and RateLimit', async () => {
    const gw = gateway({ perCaller: 2, total: 10 });
    expect(await gw.call('/hold', 'Patient/a')).toBeUndefined();
    expect(await gw.call('/hold', 'Patient/a')).toBeUndefined();
    const refused = await gw.call('/hold', 'Patient/a');
    expect(refused?.status).toBe(429);
    expect(refused?.body).toEqual({
      code: 'rate_limited',
      message: 'Too many calls at once from this account; wait for the ones in flight',
      details: { retryAfter: 1, inFlightLimit: 2 },
    });
    expect(refused?.headers.get('retry-after')).toBe('1');
    expect(refused?.headers.get('ratelimit')).toBe('"inflight-caller";r=0;t=1');
  });

  it('the instance full: 503 upstream_unavailable with the total, Retry-After and RateLimit', async () => {
    const gw = gateway({ perCaller: 1, total: 2 });
    expect(await gw.call('/hold', 'Patient/a')).toBeUndefined();
    expect(await gw.call('/hold', 'Patient/b')).toBeUndefined();
    const refused = await gw.call('/hold', 'Patient/c');
    expect(refused?.status).toBe(503);
    expect(refused?.body).toEqual({
      code: 'upstream_unavailable',
      message: 'The service is at capacity; try again shortly',
      details: { retryAfter: 1, inFlightLimit: 2 },
    });
    expect(refused?.headers.get('retry-after')).toBe('1');
    expect(refused?.headers.get('ratelimit')).toBe('"inflight-total";r=0;t=1');
  });

  it('with waiting places: a call past the total waits and is served when a place frees; one that waits past maxWaitMs is 503', async () => {
    const gw = gateway({ perCaller: 2, total: 1, waiting: 4, maxWaitMs: 50 });
    expect(await gw.call('/hold', 'Patient/a')).toBeUndefined();
    // b waits for a's place (no answer yet), and gets it when a's call ends.
    const served = gw.answer('/again', 'Patient/b');
    expect(await Promise.race([served, new Promise((r) => setTimeout(() => r('waiting'), 10))])).toBe('waiting');
    await gw.releaseHeld();
    expect((await served).status).toBe(200);
    // c finds the place taken again and nothing freed for 50 ms: 503, as a full instance.
    expect(await gw.call('/hold', 'Patient/a')).toBeUndefined();
    const began = Date.now();
    const refused = await gw.answer('/hold', 'Patient/c');
    expect(Date.now() - began).toBeGreaterThanOrEqual(45);
    expect(refused.status).toBe(503);
    expect(await refused.json()).toMatchObject({
      code: 'upstream_unavailable',
      details: { retryAfter: 1, inFlightLimit: 1 },
    });
    expect(refused.headers.get('retry-after')).toBe('1');
  });

  it('a place is freed when the answer is made, a failure included; calls without a caller are not counted', async () => {
    const gw = gateway({ perCaller: 1, total: 10 });
    expect((await gw.call('/fail', 'Patient/a'))?.status).toBe(500);
    expect(await gw.call('/hold', 'Patient/a')).toBeUndefined();
    expect((await gw.call('/hold', 'Patient/a'))?.status).toBe(429);
    for (const done of gw.held.splice(0)) {
      done();
    }
    await new Promise((r) => setTimeout(r, 5));
    expect(await gw.call('/hold', 'Patient/a')).toBeUndefined();
    const anonymous = gateway({ perCaller: 1, total: 1 });
    expect(await anonymous.call('/hold')).toBeUndefined();
    expect(await anonymous.call('/hold')).toBeUndefined();
    expect(await anonymous.call('/hold', 'Patient/a')).toBeUndefined();
  });

  it('a call that steps out frees her place for its wait and takes it again after; released once at the end', async () => {
    const gw = gateway({ perCaller: 1, total: 10 });
    const end = await gw.step('Patient/a');
    // During the wait her one place is free: another call of hers is admitted.
    expect(await gw.call('/hold', 'Patient/a')).toBeUndefined();
    await gw.releaseHeld();
    expect(await end('news')).toEqual({ status: 200, body: { value: 'news', readmitted: true } });
    // Her place was given back when the call ended: one call admitted, the next refused.
    expect(await gw.call('/hold', 'Patient/a')).toBeUndefined();
    expect((await gw.call('/hold', 'Patient/a'))?.status).toBe(429);
  });

  it('a call not readmitted after its wait says so, and gives back no place it does not hold', async () => {
    const gw = gateway({ perCaller: 5, total: 2 });
    const end = await gw.step('Patient/a');
    expect(await gw.call('/hold', 'Patient/b')).toBeUndefined();
    expect(await gw.call('/hold', 'Patient/c')).toBeUndefined();
    expect(await end('news')).toEqual({ status: 200, body: { value: 'news', readmitted: false } });
    // Still two calls in flight of two: a call that released twice would have let this one in.
    expect((await gw.call('/hold', 'Patient/d'))?.status).toBe(503);
  });

  it('a wait that outlives its handler gives her place back once, not again when the call ends', async () => {
    const gw = gateway({ perCaller: 5, total: 1 });
    expect((await gw.call('/detach', 'Patient/a'))?.status).toBe(200);
    expect(await gw.call('/hold', 'Patient/b')).toBeUndefined();
    expect((await gw.call('/hold', 'Patient/c'))?.status).toBe(503);
  });

  it('work after the answer began gets a place while she is under her limit, and gives it back', async () => {
    const gw = gateway({ perCaller: 2, total: 10 });
    // The call itself holds one of her two places.
    expect(await gw.call('/again', 'Patient/a')).toMatchObject({ status: 200, body: [true, false, true] });
    expect(await gw.call('/hold', 'Patient/a')).toBeUndefined();
    expect(await gw.call('/hold', 'Patient/a')).toBeUndefined();
    expect((await gw.call('/hold', 'Patient/a'))?.status).toBe(429);
  });
});
