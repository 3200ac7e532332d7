// Starts resolution-hook.ts in this process and gives what it reported so far
// (each report is posted before the resolution it describes returns, so a
// drain after an import sees all of that import's resolutions). With
// KWP_TEST_RESOLUTIONS set (`node --import` of this module before a command),
// the process writes every report there as JSON lines when it exits.
import { appendFileSync } from 'node:fs';
import { register } from 'node:module';
import { MessageChannel, receiveMessageOnPort } from 'node:worker_threads';

export interface Resolution { specifier: string; parentURL?: string; url: string }

const { port1, port2 } = new MessageChannel();
port1.unref();
register(new URL('./resolution-hook.js', import.meta.url), { data: { report: port2 }, transferList: [port2] });

/** The resolutions reported since the last drain. */
export function drainResolutions(): Resolution[] {
  const out: Resolution[] = [];
  for (let m = receiveMessageOnPort(port1); m; m = receiveMessageOnPort(port1)) out.push(m.message as Resolution);
  return out;
}

const file = process.env.KWP_TEST_RESOLUTIONS;
if (file) process.on('exit', () => appendFileSync(file, drainResolutions().map((r) => JSON.stringify(r) + '\n').join('')));
