// Waiting for something to hold instead of sleeping for a guessed time, and the few sleeps that
// are the point (a load's measured interval, a pause between two runs).

/** How long a wait lasts by default before it fails. */
export const DEFAULT_WAIT_MS = 15_000;

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Waits up to `withinMs` for `probe` to hold, polling every `everyMs`; throws naming `what`
 * (computed when it fails, so it can show the last state seen).
 */
export async function until(what: string | (() => string), probe: () => boolean | Promise<boolean>, withinMs = DEFAULT_WAIT_MS, everyMs = 20): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`not within ${withinMs} ms: ${typeof what === 'string' ? what : what()}`);
    await sleep(everyMs);
  }
}
