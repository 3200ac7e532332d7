// `--log-format text`: pino's JSON lines as a person reads them on a terminal,
// `10:41:07.123 INFO  agent started revision=1 ready=true`. Colour only when
// the stream is a TTY and NO_COLOR is unset (https://no-color.org).

const LEVELS: Record<number, [string, string]> = {
  10: ['TRACE', '90'], 20: ['DEBUG', '36'], 30: ['INFO ', '32'], 40: ['WARN ', '33'], 50: ['ERROR', '31'], 60: ['FATAL', '35'],
};

/** Whether to colour what goes to `stream`. */
export function useColour(stream: NodeJS.WritableStream, env: NodeJS.ProcessEnv = process.env): boolean {
  return (stream as { isTTY?: boolean }).isTTY === true && env.NO_COLOR === undefined;
}

function value(v: unknown): string {
  if (typeof v === 'string') return /\s|=|"/.test(v) ? JSON.stringify(v) : v;
  return JSON.stringify(v);
}

/** One pino JSON line as text; a line that is not JSON passes unchanged. */
export function formatLogLine(line: string, colour: boolean): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line);
  } catch {
    return line;
  }
  const { level, time, msg, component: _component, err, ...fields } = entry;
  const [name, code] = LEVELS[level as number] ?? [String(level), '0'];
  const at = typeof time === 'number' ? new Date(time).toISOString().slice(11, 23) : '';
  const shownLevel = colour ? `\x1b[${code}m${name}\x1b[0m` : name;
  const rest = Object.entries(fields).map(([k, v]) => `${k}=${value(v)}`);
  const error = err && typeof err === 'object' ? `\n${String((err as { stack?: string }).stack ?? (err as { message?: string }).message)}` : err !== undefined ? ` err=${value(err)}` : '';
  return `${at} ${shownLevel} ${String(msg ?? '')}${rest.length ? ` ${rest.join(' ')}` : ''}${error}\n`;
}

/** A destination for pino that writes text to `stream`. */
export function textDestination(stream: NodeJS.WritableStream = process.stderr): { write(line: string): boolean } {
  const colour = useColour(stream);
  return { write: (line: string) => stream.write(formatLogLine(line, colour)) };
}
