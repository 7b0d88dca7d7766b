import { fail } from '../../../bots/lib/result';
import { BOT_INPUTS, type BotInput, type BotName } from '../../../contracts/bot-inputs';

/** bots/lib/input.ts `readInput` with the contract's own zod schema: the bench's zod variant of every bot. */
export function readInput<N extends BotName>(
  name: N,
  input: unknown,
): { ok: true; value: BotInput<N> } | ReturnType<typeof fail> {
  const parsed = BOT_INPUTS[name].safeParse(input);
  if (!parsed.success) {
    const issues = parsed.error.issues
      .slice(0, 20)
      .map((i) => ({ path: i.path.map(String).join('.'), message: i.message }));
    return fail(400, 'invalid_request', 'The input is not valid', { issues });
  }
  return { ok: true, value: parsed.data as BotInput<N> };
}
