import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

const MiB = 2 ** 20;
/** Garbage allowed above what was live after the last collection before the pacer collects. */
const HEADROOM_BYTES = 128 * MiB;
/** How often the heap is looked at. */
const INTERVAL_MS = 100;

/**
 * Keeps the embedded Medplum thread's heap near what it holds live. Each bot run leaves a
 * whole vm context behind as garbage, and V8 lets that pile up long before a major collection (and keeps
 * the pages it grew to). A low heap limit made V8 collect early, but a limit is also where the thread
 * dies: GraphQL's schema alone is about 500 MB live. So the limit is set well above what admission lets
 * live (thread.ts), and this pacer collects when the heap has grown HEADROOM_BYTES past the last live
 * size. Measured in `npm run bench` (section overload).
 *
 * Runs on the thread it paces: `gc` is taken from a context made while `--expose-gc` is set for that
 * moment only, before any bot context exists, so no bot ever sees it.
 */
export function startGcPacer(): () => void {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  setFlagsFromString('--no-expose-gc');
  let live = getHeapStatistics().used_heap_size;
  const timer = setInterval(() => {
    if (getHeapStatistics().used_heap_size > live + HEADROOM_BYTES) {
      gc();
      live = getHeapStatistics().used_heap_size;
    }
  }, INTERVAL_MS);
  timer.unref();
  return () => clearInterval(timer);
}
