// Pod-to-pod reachability: every ordered pair of pods, for each chosen port,
// decided by a pipeline. `kwp matrix` runs it over manifests; the admin API's
// POST /v1/matrix over the live cluster state and the active pipeline, in
// slices so the packet path keeps deciding while a large matrix is computed.
import { setImmediate as nextTurn } from 'node:timers/promises';
import { KwpError } from './errors.js';
import { DEFAULT_SOURCE_PORT, type FlowProtocol, type FlowSpec } from './flows.js';

export interface MatrixPort {
  protocol: FlowProtocol;
  port: number;
}

/** One port's matrix: `rows[i][j]` is `.` when pods[i] may reach pods[j] on it, `X` when denied (as `kwp matrix` prints). */
export interface PortMatrix extends MatrixPort {
  rows: string[];
}

/** Decides flows; `current()` turns false once the pipeline behind it is no longer the active one. */
export interface MatrixDecider {
  revision: number;
  allows(flow: FlowSpec): boolean;
  current(): boolean;
}

export interface ReachabilityMatrix {
  /** The pipeline revision that decided every cell. */
  revision: number;
  pods: string[];
  matrices: PortMatrix[];
}

const PROTOCOLS: readonly FlowProtocol[] = ['TCP', 'UDP', 'SCTP'];

/** `80`, `80/TCP`, `53/udp`: a destination port with its protocol (TCP by default). `where` names the field for errors. */
export function parseMatrixPort(text: string, where: string): MatrixPort {
  const m = /^\s*(\d{1,5})\s*(?:\/\s*([A-Za-z]+))?\s*$/.exec(text);
  const port = m ? Number(m[1]) : NaN;
  const protocol = (m?.[2] ?? 'TCP').toUpperCase() as FlowProtocol;
  if (!m || port < 1 || port > 65535 || !PROTOCOLS.includes(protocol)) {
    throw new KwpError('KWP_ERR_REQUEST_INVALID', `${where}: "${text}" is not a port; write PORT or PORT/PROTOCOL with a port 1-65535 and TCP, UDP or SCTP (e.g. "80", "53/UDP")`);
  }
  return { protocol, port };
}

/** A flow between two pods of a matrix, as the flows file would write it. */
export function matrixFlow(src: string, dst: string, p: MatrixPort, where: string): FlowSpec {
  return { src, dst, protocol: p.protocol, port: p.port, srcPort: DEFAULT_SOURCE_PORT, file: where, index: 1 };
}

/** One port's rows, decided synchronously (the offline calculator's way). */
export function matrixRows(pods: string[], port: MatrixPort, allows: (flow: FlowSpec) => boolean, where = 'matrix'): string[] {
  return pods.map((src) => pods.map((dst) => (allows(matrixFlow(src, dst, port, where)) ? '.' : 'X')).join(''));
}

/**
 * Every cell, `sliceCells` decisions per turn of the event loop. A decider
 * is one pipeline; when a swap makes it stale between two slices, the
 * computation starts over on the new one, so every cell of the answer comes
 * from the revision it names.
 */
export async function reachabilityMatrix(
  decider: () => MatrixDecider, pods: string[], ports: MatrixPort[], options: { sliceCells?: number; where?: string } = {},
): Promise<ReachabilityMatrix> {
  const slice = Math.max(1, options.sliceCells ?? 256);
  const where = options.where ?? 'matrix';
  restart: for (;;) {
    const d = decider();
    const matrices: PortMatrix[] = [];
    let budget = slice;
    for (const port of ports) {
      const rows: string[] = [];
      for (const src of pods) {
        let row = '';
        for (const dst of pods) {
          if (budget-- === 0) {
            await nextTurn();
            if (!d.current()) continue restart;
            budget = slice - 1;
          }
          row += d.allows(matrixFlow(src, dst, port, where)) ? '.' : 'X';
        }
        rows.push(row);
      }
      matrices.push({ ...port, rows });
    }
    return { revision: d.revision, pods, matrices };
  }
}
