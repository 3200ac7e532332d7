import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { IpsetSession } from './ipset-session.js';

// A stand-in for `ipset -exist -` (the real one needs root): prompts as ipset
// does, answers `version` on stdout, writes an error for a line containing
// "bad", exits on "die", hangs on "hang", and logs each start and each line
// it executes to a file.
const FAKE = `
const fs = require('node:fs');
const log = process.argv[1];
fs.appendFileSync(log, 'start\\n');
let buf = '';
process.stdout.write('ipset> ');
process.stdin.setEncoding('utf8').on('data', (chunk) => {
  buf += chunk;
  let i;
  while ((i = buf.indexOf('\\n')) >= 0) {
    const line = buf.slice(0, i);
    buf = buf.slice(i + 1);
    if (line === 'die') process.exit(3);
    if (line === 'hang') { buf = ''; return; }
    fs.appendFileSync(log, line + '\\n');
    if (line === 'version') process.stdout.write('ipset v7.17, protocol version: 7\\n');
    else if (line.includes('bad')) process.stderr.write('ipset v7.17: Hash is full, cannot add more elements\\n');
    process.stdout.write('ipset> ');
  }
});
`;

let dir: string;
const sessions: IpsetSession[] = [];

function session(timeoutMs?: number): { s: IpsetSession; log: () => string[] } {
  dir = mkdtempSync(join(tmpdir(), 'kwp-ipset-session-'));
  const file = join(dir, 'log');
  // Merged into one stream as the session runs the real ipset (sh -c '… 2>&1'): two pipes would not keep the order.
  const s = new IpsetSession({ timeoutMs, command: ['sh', ['-c', 'exec "$0" -e "$1" "$2" 2>&1', process.execPath, FAKE, file]] });
  sessions.push(s);
  return { s, log: () => readFileSync(file, 'utf8').trim().split('\n') };
}

afterEach(() => {
  for (const s of sessions.splice(0)) s.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the long-lived ipset session', () => {
  it('runs scripts in order through one process, each finished when its end marker is answered', async () => {
    const { s, log } = session();
    await Promise.all([s.run('add a 1\nadd a 2\n'), s.run('swap a b\nflush b'), s.run('add a 3\n')]);
    expect(log()).toEqual(['start', 'add a 1', 'add a 2', 'version', 'swap a b', 'flush b', 'version', 'add a 3', 'version']);
  });

  it('fails a script with the error lines it caused, and not the scripts around it', async () => {
    const { s } = session();
    const results = await Promise.allSettled([s.run('add a 1\n'), s.run('add a bad1\nadd a 2\nadd a bad2\n'), s.run('add a 3\n')]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(String((results[1] as PromiseRejectedResult).reason)).toMatch(/ipset: ipset v7.17: Hash is full.* \| ipset v7.17: Hash is full/);
  });

  it('fails the script whose process died and starts a new process for the next one', async () => {
    const { s, log } = session();
    await expect(s.run('add a 1\ndie\n')).rejects.toThrow(/exited \(3\) before answering/);
    await s.run('add a 2\n');
    expect(log().filter((l) => l === 'start')).toHaveLength(2);
    expect(s.available).toBe(true);
  });

  it('kills a process that does not answer within the timeout, and recovers', { timeout: 30_000 }, async () => {
    // Long enough for a new stand-in (a node process) to start on a loaded machine.
    const { s, log } = session(5000);
    await s.run('add a 1\n');
    await expect(s.run('hang\n')).rejects.toThrow(/no answer within 5000 ms/);
    await s.run('add a 2\n');
    expect(log().filter((l) => l === 'start')).toHaveLength(2);
  });

  it('says it is not available when the process cannot be started', async () => {
    const s = new IpsetSession({ command: ['/nonexistent/kwp-ipset', []] });
    await expect(s.run('add a 1\n')).rejects.toThrow(/ENOENT/);
    expect(s.available).toBe(false);
  });
});
