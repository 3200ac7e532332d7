// Worker-thread entry for instrument-helper.ts: the one place a process that
// never prepared the instrumenter loads binaryen, so its memory goes away with
// the thread. Answers arrive on a dedicated port and are announced through a
// shared word, because the caller is blocked in Atomics.wait and its event loop
// cannot deliver messages.
import { parentPort, type MessagePort } from 'node:worker_threads';
import { rewriteForFuel, type Binaryen } from './fuel-rewrite.js';

export interface HelperSetup { port: MessagePort; signal: Int32Array }
export interface HelperRequest { bytes: Uint8Array; startFuel: number }
export type HelperAnswer = { ok: true; bytes: Uint8Array } | { ok: false; message: string };

let binaryen: Promise<Binaryen> | undefined;

parentPort?.once('message', ({ port, signal }: HelperSetup) => {
  port.on('message', async (req: HelperRequest) => {
    let answer: HelperAnswer;
    try {
      const b = await (binaryen ??= import('binaryen').then((m) => m.default));
      answer = { ok: true, bytes: rewriteForFuel(b, req.bytes, req.startFuel) };
    } catch (err) {
      answer = { ok: false, message: (err as Error).message };
    }
    // Queue the answer before waking the caller, which reads it synchronously.
    port.postMessage(answer);
    Atomics.store(signal, 0, 1);
    Atomics.notify(signal, 0);
  });
});
