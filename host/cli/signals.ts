// Long-running commands (`kwp agent`, `kwp ip-tracker`) run until SIGTERM or
// SIGINT. SIGTERM always stops: the handlers are installed before anything
// starts (a signal during start stops the command as soon as start is done),
// a stop that hangs (an unreachable etcd, a stuck socket) is cut off after a
// grace period with a non-zero status, and a second signal exits at once.
import type { Logger } from '../log.js';

/**
 * Runs `start`, then waits for a signal and runs `stop`. Resolves with the
 * exit status: 0 after a clean stop, 1 when stopping failed or outlived the
 * grace period, 128+N on a second signal. A failing `start` rejects.
 */
export function runUntilSignal(log: Logger, start: () => Promise<void>, stop: () => Promise<void>, graceMs = 10_000): Promise<number> {
  let firstSignal: (signal: NodeJS.Signals) => void = () => undefined;
  const signalled = new Promise<NodeJS.Signals>((resolve) => { firstSignal = resolve; });
  let exitNow: (code: number) => void = () => undefined;
  const forced = new Promise<number>((resolve) => { exitNow = resolve; });
  let count = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    count++;
    if (count > 1) {
      log.warn({ signal }, 'second signal while stopping; exiting now');
      exitNow(128 + (signal === 'SIGINT' ? 2 : 15));
      return;
    }
    log.info({ signal }, 'stopping');
    setTimeout(() => {
      log.error({ signal, graceMs }, `did not stop within ${graceMs / 1000} s; exiting anyway`);
      exitNow(1);
    }, graceMs).unref();
    firstSignal(signal);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  const work = (async () => {
    await start();
    await signalled;
    try {
      await stop();
      return 0;
    } catch (err) {
      log.error({ err }, 'stop failed');
      return 1;
    }
  })();
  return Promise.race([work, forced]);
}
