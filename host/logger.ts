// The host's one logger interface: pino's four levels, fields first, then the
// message. Every part of the host takes a HostLogger (the agent hands each a
// child of its pino logger), so no part depends on pino, and a test passes a
// plain object that records lines.

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

export interface HostLogger {
  debug(fields: object, message: string): void;
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/** Says nothing: the default of parts whose logger is optional. */
export const silentLogger: HostLogger = { debug() {}, info() {}, warn() {}, error() {} };

/** A logger that hands every line to `write` (tests, and adapters to other logging libraries). */
export function loggerOf(write: (level: LogLevel, message: string, fields: object) => void): HostLogger {
  return {
    debug: (fields, message) => write('debug', message, fields),
    info: (fields, message) => write('info', message, fields),
    warn: (fields, message) => write('warn', message, fields),
    error: (fields, message) => write('error', message, fields),
  };
}
