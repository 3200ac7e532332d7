// NFQUEUE counters the kernel publishes in /proc/net/netfilter/nfnetlink_queue,
// one line per bound queue: queue number, peer port id, packets waiting, copy
// mode, copy range, dropped by the kernel (queue full), dropped on the way to
// user space (socket buffer full), the last packet id, and a constant 1.
import { readFileSync } from 'node:fs';

export const NFQUEUE_PROC_FILE = '/proc/net/netfilter/nfnetlink_queue';

export interface NfqueueStats {
  queue: number;
  portId: number;
  waiting: number;
  queueDropped: number;
  userDropped: number;
  idSequence: number;
}

export function parseNfqueueStats(text: string): NfqueueStats[] {
  const out: NfqueueStats[] = [];
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/).map(Number);
    if (f.length < 8 || f.slice(0, 8).some((n) => !Number.isFinite(n))) continue;
    out.push({ queue: f[0], portId: f[1], waiting: f[2], queueDropped: f[5], userDropped: f[6], idSequence: f[7] });
  }
  return out;
}

/** The stats, or an empty list when the file is absent (module not loaded, not Linux). */
export function readNfqueueStats(file = NFQUEUE_PROC_FILE): NfqueueStats[] {
  try {
    return parseNfqueueStats(readFileSync(file, 'utf8'));
  } catch {
    return [];
  }
}
