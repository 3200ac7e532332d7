// Where aggregated flow records go as JSON lines: a file that is rotated by
// size (FILE, FILE.1, ... FILE.N, oldest dropped), or stdout (`-`). Writes are
// synchronous appends of whole lines, made once per aggregation interval,
// never on the packet path.
import { appendFileSync, existsSync, renameSync, rmSync, statSync } from 'node:fs';
import { KwpError } from '../errors.js';
import type { FlowRecord } from './flow-record.js';

export interface FlowLogOptions {
  /** A file path, or `-` for stdout. */
  target: string;
  /** Rotate when the file would grow past this many bytes (default 10 MiB). */
  maxBytes?: number;
  /** Rotated files kept beside the live one (default 3). */
  keep?: number;
  /** For tests: where `-` writes. */
  stdout?: (text: string) => void;
}

export class FlowLogWriter {
  private readonly maxBytes: number;
  private readonly keep: number;
  private size = 0;
  /** Lines written since start. */
  written = 0;

  constructor(private readonly options: FlowLogOptions) {
    this.maxBytes = options.maxBytes ?? 10 * 1024 * 1024;
    this.keep = options.keep ?? 3;
    if (!(this.maxBytes >= 1024)) throw new KwpError('KWP_ERR_USAGE', `flow log: the rotation size must be at least 1024 bytes, got ${options.maxBytes}`);
    if (!(Number.isInteger(this.keep) && this.keep >= 1)) throw new KwpError('KWP_ERR_USAGE', `flow log: the number of rotated files kept must be a positive integer, got ${options.keep}`);
    if (options.target !== '-') {
      try {
        appendFileSync(options.target, '');
        this.size = statSync(options.target).size;
      } catch (err) {
        throw new KwpError('KWP_ERR_FLOW_LOG', `--flow-log ${options.target}: cannot write the file: ${(err as Error).message}; give a writable path, or - for stdout`, { cause: err });
      }
    }
  }

  write(records: readonly FlowRecord[]): void {
    if (records.length === 0) return;
    const text = records.map((r) => `${JSON.stringify(r)}\n`).join('');
    this.written += records.length;
    if (this.options.target === '-') {
      (this.options.stdout ?? ((t: string) => process.stdout.write(t)))(text);
      return;
    }
    const bytes = Buffer.byteLength(text);
    if (this.size > 0 && this.size + bytes > this.maxBytes) this.rotate();
    appendFileSync(this.options.target, text);
    this.size += bytes;
  }

  /** FILE.(keep-1) → FILE.keep (the oldest, FILE.keep, is dropped), ..., FILE → FILE.1. */
  private rotate(): void {
    const file = this.options.target;
    if (existsSync(`${file}.${this.keep}`)) rmSync(`${file}.${this.keep}`);
    for (let i = this.keep - 1; i >= 1; i--) if (existsSync(`${file}.${i}`)) renameSync(`${file}.${i}`, `${file}.${i + 1}`);
    renameSync(file, `${file}.1`);
    this.size = 0;
  }
}
