import { describe, it, expect } from 'vitest';
import { Writable } from 'node:stream';
import { createLogger } from './log.js';
import { formatLogLine, useColour } from './log-text.js';

function capture(isTTY: boolean): { stream: NodeJS.WritableStream; text: () => string } {
  const chunks: string[] = [];
  const stream = new Writable({ write(chunk, _enc, done) { chunks.push(String(chunk)); done(); } }) as Writable & { isTTY?: boolean };
  stream.isTTY = isTTY;
  return { stream, text: () => chunks.join('') };
}

describe('--log-format text', () => {
  it('writes a time, the level, the message and the fields as key=value', () => {
    const out = capture(false);
    createLogger(0, out.stream, 'text').info({ revision: 1, url: 'http://127.0.0.1:9443' }, 'agent started');
    expect(out.text()).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO  agent started revision=1 url=http:\/\/127\.0\.0\.1:9443\n$/);
  });

  it('colours the level only on a TTY and never with NO_COLOR', () => {
    expect(useColour({ isTTY: true } as unknown as NodeJS.WritableStream, {})).toBe(true);
    expect(useColour({ isTTY: true } as unknown as NodeJS.WritableStream, { NO_COLOR: '1' })).toBe(false);
    expect(useColour({ isTTY: false } as unknown as NodeJS.WritableStream, {})).toBe(false);
    const line = JSON.stringify({ level: 40, time: 0, msg: 'careful' });
    expect(formatLogLine(line, true)).toBe('00:00:00.000 \x1b[33mWARN \x1b[0m careful\n');
    expect(formatLogLine(line, false)).toBe('00:00:00.000 WARN  careful\n');
  });

  it('keeps JSON lines by default, for log collectors', () => {
    const out = capture(true);
    createLogger(0, out.stream).info('agent started');
    expect(JSON.parse(out.text())).toMatchObject({ level: 30, msg: 'agent started' });
  });
});
