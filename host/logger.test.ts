import { describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { createLogger } from './log.js';
import { loggerOf, silentLogger, type HostLogger, type LogLevel } from './logger.js';

describe('the host logger interface', () => {
  it('loggerOf hands each level its own line, with the fields and the message', () => {
    const lines: Array<[LogLevel, string, object]> = [];
    const log = loggerOf((level, message, fields) => lines.push([level, message, fields]));
    log.debug({ a: 1 }, 'd');
    log.info({}, 'i');
    log.warn({ stage: 'np' }, 'w');
    log.error({ code: 'KWP_ERR_TRAP' }, 'e');
    expect(lines).toEqual([['debug', 'd', { a: 1 }], ['info', 'i', {}], ['warn', 'w', { stage: 'np' }], ['error', 'e', { code: 'KWP_ERR_TRAP' }]]);
  });

  it('the agent\'s pino logger is a HostLogger: fields become JSON keys beside the message', () => {
    let out = '';
    const sink = new Writable({ write(chunk, _enc, cb) { out += chunk; cb(); } });
    const log: HostLogger = createLogger(0, sink);
    log.warn({ stage: 'np' }, 'stage np trapped');
    log.debug({}, 'not at verbosity 0');
    const lines = out.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, stage: 'np', msg: 'stage np trapped' });
  });

  it('silentLogger says nothing and takes every level', () => {
    for (const level of ['debug', 'info', 'warn', 'error'] as const) expect(() => silentLogger[level]({}, 'x')).not.toThrow();
  });
});
