// The dataplane as a process of its own, driven over stdin/stdout with a
// StaticJudge. The end-to-end tests need the dataplane in a separate process
// (to SIGKILL it and see fail-open/fail-closed), and benchmarks and the demo
// can drive the kernel path with it before or without the WASM pipeline.
//
//   node standalone-runner.js '<RunnerConfig JSON>'
//   stdout, one JSON object a line: {"event":"started","mode":"xtables"},
//     {"event":"dns",...}, {"event":"refreshed",...}, {"event":"stats",...},
//     {"event":"error","code":...,"message":...}, {"event":"stopped"}
//   stdin, one JSON object a line: {"op":"judge","config":StaticJudgeConfig},
//     {"op":"stats"}, {"op":"stop"}
//
// It stops (removing its rules) on {"op":"stop"}, SIGTERM, SIGINT or when
// stdin closes; SIGKILL leaves the rules behind, which is what the crash
// tests are about.

import { createInterface } from 'node:readline';
import { isKwpError } from '../errors.js';
import { Dataplane } from './dataplane.js';
import type { ModeChoice } from './kernel-rules.js';
import type { QueueReader } from './nfqueue-batch.js';
import { marksAt } from './rules.js';
import { DEFAULT_FAST_PATH } from './fast-path-rules.js';
import { StaticJudge, type StaticJudgeConfig } from './static-judge.js';
import type { HostLogger } from '../logger.js';

export interface RunnerConfig {
  tableName: string;
  queueId: number;
  dnsQueueId: number;
  failOpen: boolean;
  strict: boolean;
  mode?: ModeChoice;
  /** First of the four mark bits (see marksAt); default 20. */
  markBase?: number;
  /** The kernel fast path; every `judge` op invalidates it before the refresh. Default off. */
  fastPath?: boolean;
  /** Which reader opens the queues (the Dataplane's queueReader); default auto. */
  queueReader?: QueueReader;
  judge: StaticJudgeConfig;
}

export type RunnerCommand = { op: 'judge'; config: StaticJudgeConfig } | { op: 'stats' } | { op: 'stop' };

function emit(event: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

const logger: HostLogger = {
  debug: () => undefined,
  info: (obj, msg) => process.stderr.write(`${JSON.stringify({ level: 'info', msg, ...obj })}\n`),
  warn: (obj, msg) => process.stderr.write(`${JSON.stringify({ level: 'warn', msg, ...obj })}\n`),
  error: (obj, msg) => process.stderr.write(`${JSON.stringify({ level: 'error', msg, ...obj })}\n`),
};

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '') as RunnerConfig;
  const judge = new StaticJudge(config.judge);
  const dataplane = new Dataplane({
    tableName: config.tableName,
    queueId: config.queueId,
    dnsQueueId: config.dnsQueueId,
    failOpen: config.failOpen,
    strict: config.strict,
    mode: config.mode,
    queueReader: config.queueReader,
    marks: marksAt(config.markBase ?? 20),
    ...(config.fastPath ? { fastPath: { ...DEFAULT_FAST_PATH, fillDelayMs: 1 } } : {}),
    logger,
    onDnsAnswer: (name, address, ttl) => emit({ event: 'dns', name, address, ttl }),
  });

  let stopping = false;
  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    await dataplane.stop().catch((err) => logger.error({ err: String(err) }, 'stop failed'));
    emit({ event: 'stopped', ...dataplane.counters });
    // The nfqueue binding cannot close its socket, so the event loop never drains by itself.
    process.exit(code);
  };
  process.on('SIGTERM', () => void stop(0));
  process.on('SIGINT', () => void stop(0));

  // The static judge changes only by the `judge` op below, which invalidates first.
  dataplane.fastPath?.block(undefined, 'pipeline');
  await dataplane.start(judge);
  emit({ event: 'started', mode: dataplane.queueMode, queueReader: dataplane.queueReader, fastPath: dataplane.fastPath ? (dataplane.fastPath.blocker ?? 'on') : 'off' });

  const lines = createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    if (line.trim() === '') return;
    const command = JSON.parse(line) as RunnerCommand;
    if (command.op === 'judge') {
      judge.update(command.config);
      dataplane.fastPath?.invalidate('object');
      const cutBefore = dataplane.counters.strictCut;
      dataplane.refresh().then(
        () => emit({ event: 'refreshed', strictCut: dataplane.counters.strictCut - cutBefore }),
        (err) => emit({ event: 'error', message: String(err) }),
      );
    } else if (command.op === 'stats') {
      emit({ event: 'stats', ...dataplane.counters, reads: dataplane.queueReadStats, fastPath: dataplane.fastPath?.counters, p50Micros: dataplane.decisionMicros.p50(), p99Micros: dataplane.decisionMicros.p99(), summary: dataplane.describe() });
    } else if (command.op === 'stop') {
      void stop(0);
    }
  });
  lines.on('close', () => void stop(0));
}

main().catch((err) => {
  emit(isKwpError(err) ? { event: 'error', code: err.code, message: err.message } : { event: 'error', message: String(err) });
  process.exit(1);
});
