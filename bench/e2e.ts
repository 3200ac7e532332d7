// The packet path end to end: a netns lab with a client and a server pod, the
// client opening many short TCP connections through the node namespace (to
// the server's IPv4 and IPv6 addresses in turn), with (kernelOnly) no queue,
// (acceptAll) the Dataplane and an allow-all pipeline, (enforced) the
// Dataplane and the default pipeline over the lab plus the default-scale
// synthetic cluster, (fastPath) the same with the kernel fast path. Needs
// root and the nfqueue binding; otherwise it reports why it did not run.
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { KubeObject } from '../host/contract.js';
import { loadNfqueue } from '../host/dataplane/nfqueue.js';
import { Lab, sweepStaleLabs, type LabProcess } from '../test/lab/lab.js';
import { round } from './harness.js';
import type { E2ENodeConfig } from './e2e-node.js';

const here = dirname(fileURLToPath(import.meta.url));
const PORT = 80;
const CONCURRENCY = 8;
const RUNS_PER_MODE = 2;
/** Sequential connections (concurrency 1) whose connect times give the added latency of each mode. */
const LATENCY_CONNECTIONS = 400;
/** Issue 20: enforced connections per second with the fast path, against none queued. */
const FAST_PATH_TARGET = 0.95;
/**
 * The agent's packet thread runs at this nice value (Dataplane packetThreadNice)
 * in the acceptAll and enforced modes; the enforced agent is then also measured
 * at the priority it inherited (0), so both figures come from one run.
 */
const PACKET_THREAD_NICE = -10;
/**
 * Each round also measures the enforced agent (nice as above) with the
 * Dataplane's busy poll (busy-poll.ts): the packet thread polls for this long
 * after each packet instead of sleeping, so the judge runs on warm caches.
 */
const BUSY_POLL_MICROS = 1000;

export type E2EResult =
  | { reason: string }
  | {
      mode: string;
      connPerSec: { enforced: number; acceptAll: number; kernelOnly: number; fastPath: number };
      /**
       * The kernel fast path: enforced connections per second with it, against
       * kernelOnly, and the connect time it adds, for a tuple in its sets
       * (cached) and for one the agent decides (uncached: the enforced mode,
       * where every connection goes to the agent, as a tuple's first does).
       */
      fastPath: {
        connPerSec: number; vsKernelOnly: number; target: number; met: boolean;
        addedConnectMicros: { cachedP50: number; cachedP99: number; uncachedP50: number; uncachedP99: number };
        connectMicros: { kernelOnlyP50: number; kernelOnlyP99: number; cachedP50: number; cachedP99: number; uncachedP50: number; uncachedP99: number };
        queuedPackets: number; entriesAdded: number; batches: number; fillLagP50Micros: number; fillLagP99Micros: number;
        note: string;
      };
      packetProcessP50Micros: number;
      packetProcessP99Micros: number;
      judgeP50Micros: number;
      judgeP99Micros: number;
      verdictCallP50Micros: number;
      verdictCallP99Micros: number;
      acceptAllPacketProcessP50Micros: number;
      acceptAllPacketProcessP99Micros: number;
      packetThreadNice: number;
      /** The enforced agent again, its packet thread at nice 0: the same span, without the priority. */
      inheritedPriority: { connPerSec: number; packetProcessP50Micros: number; packetProcessP99Micros: number; verdictCallP50Micros: number; verdictCallP99Micros: number };
      /**
       * The enforced agent again with the busy poll on: the judge and packet
       * spans, and the agent's CPU time per queued packet with and without it
       * (its whole process, user + system, over the measured runs).
       */
      busyPoll: {
        windowMicros: number; connPerSec: number; judgeP50Micros: number; judgeP99Micros: number; packetProcessP50Micros: number; packetProcessP99Micros: number;
        agentCpuMicrosPerPacket: number; withoutAgentCpuMicrosPerPacket: number;
      };
      queuedPackets: number;
      failedConnections: { enforced: number; acceptAll: number; kernelOnly: number; fastPath: number };
      connectionsPerRun: number;
      concurrency: number;
      runsPerMode: number;
      packetProcessNote: string;
      enforcedObjects: string;
    };

interface ClientResult { ok: number; failed: number; seconds: number; connPerSec: number; connectP50Micros: number; connectP99Micros: number }

function runClient(lab: Lab, count: number, concurrency = CONCURRENCY): Promise<ClientResult> {
  const client = lab.pod('bench/client');
  const server = lab.pod('bench/server');
  // Both families, in turn: IPv6 goes through ip6tables and the IPv6 sets.
  const hosts = `${server.ip},${server.ipv6!}`;
  return new Promise((resolve, reject) => {
    const child = spawn('ip', ['netns', 'exec', client.netns, process.execPath, join(here, 'e2e-client.js'), hosts, String(PORT), String(count), String(concurrency), '2000'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (c) => { out += c; });
    child.stderr.on('data', (c) => { err += c; });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out.trim())) : reject(new Error(`e2e client exited with ${code}: ${err}`))));
  });
}

async function bestOf(lab: Lab, count: number): Promise<ClientResult> {
  let best: ClientResult | undefined;
  for (let i = 0; i < RUNS_PER_MODE; i++) {
    const r = await runClient(lab, count);
    if (!best || r.connPerSec > best.connPerSec) best = r;
  }
  return best!;
}

async function startNode(lab: Lab, config: E2ENodeConfig): Promise<LabProcess> {
  const proc = lab.spawnInNode(process.execPath, [...(process.env.KWP_E2E_NODE_FLAGS ?? '').split(' ').filter(Boolean), join(here, 'e2e-node.js'), JSON.stringify(config)]);
  const line = await proc.waitForLine((l) => l.includes('"event":"started"') || l.includes('"event":"error"'), 120_000);
  const event = JSON.parse(line);
  if (event.event !== 'started') throw new Error(`the e2e dataplane did not start: ${event.message}`);
  return proc;
}

async function stats(proc: LabProcess): Promise<Record<string, number>> {
  const waiting = proc.waitForLine((l) => l.includes('"event":"stats"') && !seen.has(l), 10_000);
  proc.send(JSON.stringify({ op: 'stats' }));
  const line = await waiting;
  seen.add(line);
  return JSON.parse(line);
}
const seen = new Set<string>();

async function stopNode(proc: LabProcess): Promise<void> {
  proc.send(JSON.stringify({ op: 'stop' }));
  await Promise.race([proc.waitForLine((l) => l.includes('"event":"stopped"'), 10_000).catch(() => undefined), new Promise((r) => setTimeout(r, 10_000))]);
  // It exits by itself after "stopped"; waiting lets a --cpu-prof agent (KWP_E2E_NODE_FLAGS) write its profile.
  await Promise.race([new Promise((r) => (proc.child.exitCode !== null ? r(undefined) : proc.child.once('exit', r))), new Promise((r) => setTimeout(r, 10_000))]);
  await proc.kill();
}

/** The e2e lab: a client and a server pod, dual-stack, the server listening on PORT (bench/tools/fast-path-cost.mjs uses it too). */
export function createBenchLab(): Promise<Lab> {
  return Lab.create({
    pods: [{ name: 'client', namespace: 'bench', labels: { app: 'client' } }, { name: 'server', namespace: 'bench', labels: { app: 'server' } }],
    namespaceLabels: { bench: { team: 'bench-lab' } },
    tcpPorts: [PORT],
    ipv6: true,
  });
}

export async function runE2E(options: { connections: number; rounds: number; log: (m: string) => void }): Promise<E2EResult> {
  if (typeof process.getuid === 'function' && process.getuid() !== 0) return { reason: 'not root: the netns lab and NFQUEUE need root' };
  try {
    loadNfqueue();
  } catch (err) {
    return { reason: (err as Error).message };
  }
  sweepStaleLabs();
  const lab = await createBenchLab();
  try {
    const allowClient: KubeObject = {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'server-from-client', namespace: 'bench' },
      spec: {
        podSelector: { matchLabels: { app: 'server' } },
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }], ports: [{ protocol: 'TCP', port: PORT }] }],
      },
    };
    const objects = [...lab.manifests(), allowClient];
    const base = { objects, tableName: 'kwpbench', queueId: 4200, dnsQueueId: 4201, packetThreadNice: PACKET_THREAD_NICE };
    await runClient(lab, 200); // warm the pods' stacks and the client's JIT
    // The modes take turns, `rounds` times, and each keeps its best run: load
    // from other processes on the machine then hits every mode alike.
    const best: Record<'kernelOnly' | 'acceptAll' | 'enforced' | 'inherited' | 'busyPoll' | 'fastPath', ClientResult | undefined> = { kernelOnly: undefined, acceptAll: undefined, enforced: undefined, inherited: undefined, busyPoll: undefined, fastPath: undefined };
    // Connect times, sequential: the lowest p50 (and p99) of the rounds, per mode.
    const latency: Record<'kernelOnly' | 'uncached' | 'cached', { p50: number; p99: number } | undefined> = { kernelOnly: undefined, uncached: undefined, cached: undefined };
    const keepLatency = (mode: keyof typeof latency, r: ClientResult) => {
      const was = latency[mode];
      latency[mode] = { p50: Math.min(was?.p50 ?? Infinity, r.connectP50Micros), p99: Math.min(was?.p99 ?? Infinity, r.connectP99Micros) };
    };
    let fastPathStats: Record<string, number> = {};
    const keep = (mode: keyof typeof best, r: ClientResult) => { if (!best[mode] || r.connPerSec > best[mode]!.connPerSec) best[mode] = r; };
    let acceptAllStats: Record<string, number> = {};
    let enforcedStats: Record<string, number> = {};
    let inheritedStats: Record<string, number> = {};
    let busyPollStats: Record<string, number> = {};
    let queueMode = '';
    for (let round = 0; round < options.rounds; round++) {
      options.log(`e2e round ${round + 1}/${options.rounds}: kernelOnly`);
      keep('kernelOnly', await bestOf(lab, options.connections));
      keepLatency('kernelOnly', await runClient(lab, LATENCY_CONNECTIONS, 1));

      options.log(`e2e round ${round + 1}/${options.rounds}: acceptAll`);
      const acceptAllNode = await startNode(lab, { ...base, pipeline: 'allow-all', synthetic: false });
      await runClient(lab, 200);
      keep('acceptAll', await bestOf(lab, options.connections));
      acceptAllStats = await stats(acceptAllNode);
      await stopNode(acceptAllNode);

      options.log(`e2e round ${round + 1}/${options.rounds}: enforced (default pipeline, default-scale objects)`);
      const enforcedNode = await startNode(lab, { ...base, pipeline: 'default', synthetic: true });
      queueMode = String(JSON.parse(enforcedNode.lines.find((l) => l.includes('"started"'))!).mode);
      await runClient(lab, 200);
      enforcedNode.send(JSON.stringify({ op: 'mark' }));
      keep('enforced', await bestOf(lab, options.connections));
      enforcedStats = await stats(enforcedNode);
      keepLatency('uncached', await runClient(lab, LATENCY_CONNECTIONS, 1));
      if (Number(JSON.parse(enforcedNode.lines.find((l) => l.includes('"started"'))!).packetThreadNice) !== PACKET_THREAD_NICE) {
        throw new Error(`the e2e agent could not set its packet thread to nice ${PACKET_THREAD_NICE}`);
      }

      options.log(`e2e round ${round + 1}/${options.rounds}: enforced, packet thread at nice 0`);
      enforcedNode.send(JSON.stringify({ op: 'nice', value: 0 }));
      await runClient(lab, 200);
      enforcedNode.send(JSON.stringify({ op: 'reset' }));
      keep('inherited', await bestOf(lab, options.connections));
      inheritedStats = await stats(enforcedNode);

      options.log(`e2e round ${round + 1}/${options.rounds}: enforced, busy poll ${BUSY_POLL_MICROS} µs`);
      enforcedNode.send(JSON.stringify({ op: 'nice', value: PACKET_THREAD_NICE }));
      enforcedNode.send(JSON.stringify({ op: 'busyPoll', value: BUSY_POLL_MICROS }));
      await runClient(lab, 200);
      enforcedNode.send(JSON.stringify({ op: 'reset' }));
      enforcedNode.send(JSON.stringify({ op: 'mark' }));
      keep('busyPoll', await bestOf(lab, options.connections));
      busyPollStats = await stats(enforcedNode);
      await stopNode(enforcedNode);

      options.log(`e2e round ${round + 1}/${options.rounds}: enforced with the kernel fast path`);
      const fastPathNode = await startNode(lab, { ...base, pipeline: 'default', synthetic: true, fastPath: true });
      // The first connections put the tuple (one per family) into the sets.
      await runClient(lab, 200);
      keep('fastPath', await bestOf(lab, options.connections));
      keepLatency('cached', await runClient(lab, LATENCY_CONNECTIONS, 1));
      fastPathStats = await stats(fastPathNode);
      await stopNode(fastPathNode);
    }
    const kernelOnly = best.kernelOnly!;
    const acceptAll = best.acceptAll!;
    const enforced = best.enforced!;
    const inherited = best.inherited!;
    const busyPoll = best.busyPoll!;
    const cpuPerPacket = (st: Record<string, number>) => (st.packetsSinceMark > 0 ? round(st.cpuMicrosSinceMark / st.packetsSinceMark, 1) : 0);
    const fastPath = best.fastPath!;
    const lat = { kernelOnly: latency.kernelOnly!, uncached: latency.uncached!, cached: latency.cached! };
    const vsKernelOnly = round(fastPath.connPerSec / kernelOnly.connPerSec, 3);

    return {
      mode: queueMode,
      connPerSec: { enforced: Math.round(enforced.connPerSec), acceptAll: Math.round(acceptAll.connPerSec), kernelOnly: Math.round(kernelOnly.connPerSec), fastPath: Math.round(fastPath.connPerSec) },
      fastPath: {
        connPerSec: Math.round(fastPath.connPerSec), vsKernelOnly, target: FAST_PATH_TARGET, met: vsKernelOnly >= FAST_PATH_TARGET,
        addedConnectMicros: {
          cachedP50: round(lat.cached.p50 - lat.kernelOnly.p50, 1), cachedP99: round(lat.cached.p99 - lat.kernelOnly.p99, 1),
          uncachedP50: round(lat.uncached.p50 - lat.kernelOnly.p50, 1), uncachedP99: round(lat.uncached.p99 - lat.kernelOnly.p99, 1),
        },
        connectMicros: {
          kernelOnlyP50: round(lat.kernelOnly.p50, 1), kernelOnlyP99: round(lat.kernelOnly.p99, 1),
          cachedP50: round(lat.cached.p50, 1), cachedP99: round(lat.cached.p99, 1), uncachedP50: round(lat.uncached.p50, 1), uncachedP99: round(lat.uncached.p99, 1),
        },
        queuedPackets: fastPathStats.count, entriesAdded: fastPathStats.fastPathAdded, batches: fastPathStats.fastPathBatches,
        fillLagP50Micros: round(fastPathStats.fastPathFillLagP50Micros, 1), fillLagP99Micros: round(fastPathStats.fastPathFillLagP99Micros, 1),
        note:
          `the same client as kernelOnly (${CONCURRENCY} at a time, IPv4 and IPv6 in turn to one server port: two tuples, decided by the agent once each, then by the kernel). ` +
          `Added connect time = a mode's connect-time percentile minus kernelOnly's (${LATENCY_CONNECTIONS} sequential connections per round, the lowest percentile of the rounds): ` +
          `cached = with the fast path, the tuple in its sets; uncached = the enforced mode, every connection decided by the agent, as a tuple's first connection is with the fast path`,
      },
      packetProcessP50Micros: round(enforcedStats.p50Micros, 2),
      packetProcessP99Micros: round(enforcedStats.p99Micros, 2),
      judgeP50Micros: round(enforcedStats.judgeP50Micros, 2),
      judgeP99Micros: round(enforcedStats.judgeP99Micros, 2),
      verdictCallP50Micros: round(enforcedStats.verdictP50Micros, 2),
      verdictCallP99Micros: round(enforcedStats.verdictP99Micros, 2),
      acceptAllPacketProcessP50Micros: round(acceptAllStats.p50Micros, 2),
      acceptAllPacketProcessP99Micros: round(acceptAllStats.p99Micros, 2),
      packetThreadNice: PACKET_THREAD_NICE,
      inheritedPriority: {
        connPerSec: Math.round(inherited.connPerSec),
        packetProcessP50Micros: round(inheritedStats.p50Micros, 2),
        packetProcessP99Micros: round(inheritedStats.p99Micros, 2),
        verdictCallP50Micros: round(inheritedStats.verdictP50Micros, 2),
        verdictCallP99Micros: round(inheritedStats.verdictP99Micros, 2),
      },
      busyPoll: {
        windowMicros: BUSY_POLL_MICROS,
        connPerSec: Math.round(busyPoll.connPerSec),
        judgeP50Micros: round(busyPollStats.judgeP50Micros, 2),
        judgeP99Micros: round(busyPollStats.judgeP99Micros, 2),
        packetProcessP50Micros: round(busyPollStats.p50Micros, 2),
        packetProcessP99Micros: round(busyPollStats.p99Micros, 2),
        agentCpuMicrosPerPacket: cpuPerPacket(busyPollStats),
        withoutAgentCpuMicrosPerPacket: cpuPerPacket(enforcedStats),
      },
      queuedPackets: enforcedStats.count,
      failedConnections: { enforced: enforced.failed, acceptAll: acceptAll.failed, kernelOnly: kernelOnly.failed, fastPath: fastPath.failed },
      connectionsPerRun: options.connections,
      concurrency: CONCURRENCY,
      runsPerMode: RUNS_PER_MODE * options.rounds,
      packetProcessNote:
        `packet process = the Dataplane decisionMicros histogram of the last enforced round: parse + judge + the nfqueue verdict call, the span of kube-network-policies' packet_process_time (parse to SetVerdict returned). ` +
        `Inside the verdict call the kernel reinjects the packet and, in the softirq it raises, delivers it to the peer pod's TCP stack (the handshake runs there); ` +
        `the agent's packet thread runs at nice ${PACKET_THREAD_NICE} (inheritedPriority: same agent at nice 0, where the woken endpoints preempt it inside that call)`,
      enforcedObjects: 'lab (2 pods, 1 NetworkPolicy) + default scale (10,000 pods, 1,000 NetworkPolicies, 100 ClusterNetworkPolicies)',
    };
  } finally {
    await lab.destroy();
  }
}
