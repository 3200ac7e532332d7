// Live refresh without flooding the agent: a loop runs its task, waits
// `intervalMs` after the task finished, and runs it again, so one loop never has
// two requests in flight. Each view chooses intervals that keep the page under
// one request per second. Hidden tabs pause.

/**
 * @param {number} intervalMs
 * @param {() => Promise<void>} task errors are the task's to show; the loop goes on
 * @returns {{stop(): void, now(): Promise<void>}} `now()` runs the task at once (and restarts the wait)
 */
export function every(intervalMs, task) {
  let timer;
  let stopped = false;
  let running;
  let again = false;
  const run = async () => {
    clearTimeout(timer);
    if (stopped) return;
    // Asked while a run is in flight: its answer may predate the change, so run once more right after.
    if (running) { again = true; return running; }
    running = (async () => {
      try {
        if (!document.hidden) await task();
      } catch (err) {
        console.error(err);
      } finally {
        running = undefined;
        if (!stopped) timer = setTimeout(run, again ? 0 : intervalMs);
        again = false;
      }
    })();
    return running;
  };
  const onVisible = () => { if (!document.hidden) run(); };
  document.addEventListener('visibilitychange', onVisible);
  run();
  return {
    stop() { stopped = true; clearTimeout(timer); document.removeEventListener('visibilitychange', onVisible); },
    now: run,
  };
}
