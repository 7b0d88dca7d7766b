/** Her messages' bounds (contracts/messages.ts): zod-free, so the send-message bot carries no zod. */

/** Her messages in an hour that the send-message bot writes at most (a flood of one account, not a count). */
export const MESSAGES_PER_HOUR = 60;

/** Threads she may open in 24 hours (her care team reads each one). */
export const THREADS_PER_DAY = 5;
