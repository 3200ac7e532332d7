// One structured logger (pino, JSON to stderr, or text for people). A pino
// logger is a HostLogger (logger.ts), the interface every part of the host
// takes, so no part but this one depends on pino.
import { pino, type Logger, type DestinationStream } from 'pino';
import { textDestination } from './log-text.js';

export type { Logger } from 'pino';

export type LogFormat = 'json' | 'text';

/** -v 0 info, 1 debug, 2 trace; JSON lines (for log collectors) or text (for people, see log-text.ts). */
export function createLogger(verbosity = 0, destination: NodeJS.WritableStream = process.stderr, format: LogFormat = 'json'): Logger {
  const level = verbosity >= 2 ? 'trace' : verbosity === 1 ? 'debug' : 'info';
  const out = format === 'text' ? textDestination(destination) : destination;
  return pino({ level, base: { component: 'kwp' } }, out as DestinationStream);
}
