/**
 * Bench helper process: the crowd of the fairness bench, on an event loop of its own (the victim's calls
 * are timed in the bench's process, not behind thousands of the crowd's). Told over IPC the gateway, the
 * accounts' tokens, the calls each keeps going and for how long; answers with the statuses and how long
 * the answered calls took.
 */
interface Order {
  gateway: string;
  tokens: string[];
  perAccount: number;
  seconds: number;
}

process.once('message', async (message) => {
  const { gateway, tokens, perAccount, seconds } = message as Order;
  const until = Date.now() + seconds * 1000;
  const statuses: number[] = [];
  const okMs: number[] = [];
  await Promise.all(
    tokens.flatMap((token) =>
      Array.from({ length: perAccount }, async () => {
        while (Date.now() < until) {
          const began = performance.now();
          try {
            const r = await fetch(`${gateway}/v1/agreements/requirements`, {
              headers: { authorization: `Bearer ${token}` },
            });
            await r.arrayBuffer();
            statuses.push(r.status);
            if (r.status === 200) {
              okMs.push(performance.now() - began);
            }
          } catch {
            statuses.push(0);
          }
        }
      }),
    ),
  );
  process.send?.({ statuses, okMs }, () => process.exit(0));
});
process.send?.('ready');
