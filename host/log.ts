// One structured logger (pino, JSON to stderr) and the small adapters each
// part of the host takes, so no part depends on pino directly.
import { pino, type Logger, type DestinationStream } from 'pino';
import type { InstanceLogger } from './runtime/instance.js';

export type { Logger } from 'pino';

/** -v 0 info, 1 debug, 2 trace. */
export function createLogger(verbosity = 0, destination: NodeJS.WritableStream = process.stderr): Logger {
  const level = verbosity >= 2 ? 'trace' : verbosity === 1 ? 'debug' : 'info';
  return pino({ level, base: { component: 'kwp' } }, destination as DestinationStream);
}

export function instanceLogger(log: Logger): InstanceLogger {
  return {
    log(level, message, fields) {
      log[level](fields ?? {}, message);
    },
  };
}
