// One long-lived `ipset` process for the kernel fast path's fills and
// invalidations (xtables mode), instead of one `ipset restore` process per
// script: a process costs ~2.5 ms of CPU on a 2-core VM (fork, exec, the
// libraries, the netlink handshake), the fills of a burst of new tuples run
// several a second, and on a saturated machine a new process can wait tens
// of milliseconds for a CPU before it writes anything, which is also how
// long an invalidation's swap waits to reach the kernel.
//
// The process runs ipset's interactive mode (`ipset -exist -`: commands on
// stdin, executed one line at a time; -exist as `ipset restore -exist`
// has it). After each script the session writes `version`, whose answer
// marks the script's end: every other line printed before it is an error of
// that script. Errors go to stderr, unbuffered, and the answer to stdout,
// block-buffered on a pipe; so the process runs as `sh -c 'exec stdbuf -oL
// ipset -exist - 2>&1'`: one stream, line-buffered, in the order ipset
// wrote it. Unlike `ipset restore`, a failing line does not stop the lines
// after it (a full set refuses its entries, the rest of the batch still goes
// in); the script is reported failed all the same.
//
// Scripts run one at a time, in the order given; a script that gets no
// answer within the timeout kills the process (the next script starts a
// new one). If the process cannot be started at all (no `sh` or `stdbuf`),
// `available` turns false and the caller falls back to `ipset restore`.

import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';

const SENTINEL = 'version';
const SENTINEL_ANSWER = /protocol version/;
const PROMPT = /^(?:ipset> )+/;

export interface IpsetSessionOptions {
  /** Milliseconds a script may take before the process is killed (default 30,000). */
  timeoutMs?: number;
  /** The command line (tests): default sh -c 'exec stdbuf -oL ipset -exist - 2>&1'. */
  command?: [string, string[]];
}

interface Running {
  child: ChildProcessWithoutNullStreams;
  errors: string[];
  resolve: () => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

export class IpsetSession {
  private child: ChildProcessWithoutNullStreams | undefined;
  private running: Running | undefined;
  private tail: Promise<unknown> = Promise.resolve();
  private startFailed = false;
  private readonly timeoutMs: number;
  private readonly command: [string, string[]];

  constructor(options: IpsetSessionOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.command = options.command ?? ['sh', ['-c', 'exec stdbuf -oL ipset -exist - 2>&1']];
  }

  /** False once the process could not be started: use `ipset restore` instead. */
  get available(): boolean {
    return !this.startFailed;
  }

  /** Runs `script` (ipset commands, one a line); rejects with ipset's error lines when any line failed. */
  run(script: string): Promise<void> {
    const result = this.tail.then(() => this.runNow(script));
    this.tail = result.catch(() => undefined);
    return result;
  }

  /** Ends the process (it quits at the end of its input). */
  close(): void {
    const child = this.child;
    this.child = undefined;
    if (child) child.stdin.end();
  }

  private runNow(script: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let child: ChildProcessWithoutNullStreams;
      try {
        child = this.process();
      } catch (err) {
        reject(err instanceof Error ? err : new Error(String(err)));
        return;
      }
      const timer = setTimeout(() => {
        if (this.child === child) this.child = undefined;
        child.kill('SIGKILL');
        this.fail(child, new Error(`ipset session: no answer within ${this.timeoutMs} ms; the process was killed`));
      }, this.timeoutMs);
      this.running = { child, errors: [], resolve, reject, timer };
      this.refAll(child, true);
      const text = script.endsWith('\n') || script === '' ? script : `${script}\n`;
      child.stdin.write(`${text}${SENTINEL}\n`);
    });
  }

  private process(): ChildProcessWithoutNullStreams {
    if (this.child) return this.child;
    if (this.startFailed) throw new Error('ipset session: the process could not be started');
    const [command, args] = this.command;
    const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child = child;
    let partial = '';
    const output = (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) this.line(child, line.replace(PROMPT, '').trim());
    };
    child.stdout.setEncoding('utf8').on('data', output);
    child.stderr.setEncoding('utf8').on('data', output);
    child.stdin.on('error', () => undefined);
    child.on('error', (err) => {
      // ENOENT and the like: spawning failed, nothing ran.
      if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'EACCES') this.startFailed = true;
      this.gone(child, `ipset session: ${err.message}`);
    });
    child.on('exit', (code, signal) => this.gone(child, `ipset session: the process exited (${code ?? signal}) before answering`));
    return child;
  }

  /** One line the process printed: the end of the running script, or one of its errors. */
  private line(child: ChildProcessWithoutNullStreams, line: string): void {
    const running = this.running;
    if (line === '' || !running || running.child !== child) return;
    if (!SENTINEL_ANSWER.test(line)) {
      running.errors.push(line);
      return;
    }
    this.running = undefined;
    clearTimeout(running.timer);
    this.idle();
    if (running.errors.length > 0) running.reject(new Error(`ipset: ${running.errors.slice(0, 3).join(' | ')}`));
    else running.resolve();
  }

  /** Between scripts the process keeps nothing alive: an embedder's process may exit. */
  private idle(): void {
    if (this.child) this.refAll(this.child, false);
  }

  /** The process and its output pipes (sockets: they have ref/unref though Readable's type does not say so). */
  private refAll(child: ChildProcessWithoutNullStreams, on: boolean): void {
    if (on) child.ref();
    else child.unref();
    for (const stream of [child.stdout, child.stderr] as unknown as Array<{ ref?(): void; unref?(): void }>) {
      if (on) stream.ref?.();
      else stream.unref?.();
    }
  }

  private gone(child: ChildProcessWithoutNullStreams, why: string): void {
    if (this.child === child) this.child = undefined;
    this.fail(child, new Error(why));
  }

  private fail(child: ChildProcessWithoutNullStreams, err: Error): void {
    const running = this.running;
    if (!running || running.child !== child) return;
    this.running = undefined;
    clearTimeout(running.timer);
    running.reject(err);
  }
}
