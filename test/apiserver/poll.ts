// Waiting on asynchronous conditions in tests, always with a bound.

/** Resolves once `condition()` is truthy; rejects with `what` after `timeoutMs`. */
export async function pollUntil<T>(condition: () => T | Promise<T>, what: string, timeoutMs = 5000, intervalMs = 10): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
