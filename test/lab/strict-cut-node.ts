// Strict mode at scale, run inside a network namespace of its own: thousands of
// accepted connections in that namespace's conntrack table (inserted with
// `conntrack -R`, the accepted bit in their mark), the real Dataplane in strict
// mode judging with the default WASM pipeline, then one NetworkPolicy that
// denies some of them. It times the change through the cut (apply, refresh,
// sweep) and then reads the table back to report which entries lost the bit.
// Used by test/e2e/strict-cut.e2e.test.ts and the bench (e2e.strictCutMillis).
//
//   ip netns exec NS node strict-cut-node.js '<StrictCutConfig JSON>'
//   stdout: one JSON line, StrictCutReport (or {"error": message})

import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kinds, type KubeObject, type Packet } from '../../host/contract.js';
import { parseIP } from '../../host/net/ip.js';
import { Dataplane } from '../../host/dataplane/dataplane.js';
import { runCommand } from '../../host/dataplane/command-runner.js';
import { parseConntrackListing } from '../../host/dataplane/conntrack.js';
import { DEFAULT_MARKS } from '../../host/dataplane/rules.js';
import { processMarkClearer } from '../../host/dataplane/strict-cut.js';
import { sharedBuiltins, stateFromObjects } from '../../host/eval.js';
import { PolicyEngine } from '../../host/pipeline/engine.js';
import { defaultPipeline } from '../../host/pipeline/spec.js';
import { namespace, pod } from '../../host/testing/objects.js';
import type { HostLogger } from '../../host/logger.js';

export interface StrictCutConfig {
  /** Connections the policy change denies, and connections it leaves allowed; half of each IPv4, half IPv6. */
  affected: number;
  unaffected: number;
  tableName: string;
  queueId: number;
  dnsQueueId: number;
  /** false: the Dataplane runs without strict mode, so nothing may be cut (the suite's control). */
  strict?: boolean;
  /** 'process': force the per-process fallback (the suite checks it too); default: the Dataplane's own choice. */
  clearer?: 'process';
}

export interface StrictCutReport {
  path: string | null;
  /** From the policy change to the sweep's end: every denied entry's bit cleared. */
  cutMillis: number;
  sweepCut: number;
  /** The change's delivery to every stage (ClusterState.apply), and the sweep's phases (Dataplane.lastSweep). */
  applyMillis: number;
  sweepMillis: { list: number; judge: number; clear: number } | null;
  /** Entries with the accepted bit before the change, and after, by pod kind. */
  acceptedBefore: number;
  stillAcceptedAffected: number;
  stillAcceptedUnaffected: number;
  /** Entries that lost the bit although the policy still allows them. */
  wronglyCut: number;
  /** Entries whose other mark bits changed (the cut must clear only the accepted bit). */
  otherBitsChanged: number;
}

const OTHER_BIT = 0x1; // a bit of somebody else's, set on every entry: it must survive the cut
const PODS_PER_KIND = 10;
const SERVER = { v4: '10.251.255.1', v6: 'fd00:251::ffff' };

const podV4 = (kind: number, i: number) => `10.251.${kind}.${i + 1}`;
const podV6 = (kind: number, i: number) => `fd00:251::${kind}:${i + 1}`;

function objects(): KubeObject[] {
  const list: KubeObject[] = [namespace('sc')];
  list.push(pod('sc/server', [SERVER.v4, SERVER.v6], { labels: { app: 'server' } }));
  for (let i = 0; i < PODS_PER_KIND; i++) {
    list.push(pod(`sc/keep-${i}`, [podV4(0, i), podV6(0, i)], { labels: { app: 'keep' } }));
    list.push(pod(`sc/cut-${i}`, [podV4(1, i), podV6(1, i)], { labels: { app: 'cut' } }));
  }
  return list;
}

/** The change: the server takes port 80 from `keep` pods only. */
const onlyKeep: KubeObject = {
  apiVersion: 'networking.k8s.io/v1',
  kind: 'NetworkPolicy',
  metadata: { name: 'server-from-keep', namespace: 'sc' },
  spec: {
    podSelector: { matchLabels: { app: 'server' } },
    policyTypes: ['Ingress'],
    ingress: [{ from: [{ podSelector: { matchLabels: { app: 'keep' } } }], ports: [{ protocol: 'TCP', port: 80 }] }],
  },
};

/** `conntrack -R` lines inserting `count` established connections from the pods of `kind` (0 keep, 1 cut) to the server. */
function insertLines(kind: number, count: number, mark: number): string[] {
  const lines: string[] = [];
  for (let n = 0; n < count; n++) {
    const v6 = n % 2 === 1;
    const i = n % PODS_PER_KIND;
    const sport = 10000 + Math.floor(n / PODS_PER_KIND);
    const src = v6 ? podV6(kind, i) : podV4(kind, i);
    const dst = v6 ? SERVER.v6 : SERVER.v4;
    lines.push(`-I -p tcp -s ${src} -d ${dst} --sport ${sport} --dport 80 --state ESTABLISHED -t 3600 --mark ${mark}`);
  }
  return lines;
}

/**
 * A running agent has decided packets before any policy change; this one has
 * not. Deciding the lab's traffic shape for a while first lets the JIT tier up
 * the decision path (as bench/e2e-node.ts does), so the figure is the cut's,
 * not the first calls' of a cold process.
 */
function warm(engine: PolicyEngine): void {
  const packets: Packet[] = [];
  for (let n = 0; n < 1024; n++) {
    const v6 = n % 2 === 1;
    const i = n % PODS_PER_KIND;
    const kind = (n >> 1) % 2;
    packets.push({
      family: v6 ? 6 : 4, protocol: 6, srcPort: 10000 + n, dstPort: 80, icmpType: 0, icmpCode: 0,
      src: parseIP(v6 ? podV6(kind, i) : podV4(kind, i))!.bytes, dst: parseIP(v6 ? SERVER.v6 : SERVER.v4)!.bytes,
    });
  }
  const out = new Uint8Array(packets.length);
  for (let round = 0; round < 40; round++) {
    engine.allowsBatch(packets, out);
    for (const p of packets) engine.allows(p);
  }
}

const quiet: HostLogger = { debug: () => undefined, info: () => undefined, warn: (o, m) => process.stderr.write(`${m} ${JSON.stringify(o)}\n`), error: (o, m) => process.stderr.write(`${m} ${JSON.stringify(o)}\n`) };

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '') as StrictCutConfig;
  const accepted = DEFAULT_MARKS.accepted;
  const mark = (accepted | OTHER_BIT) >>> 0;
  const dir = mkdtempSync(join(tmpdir(), 'kwp-strict-cut-'));
  try {
    const file = join(dir, 'insert.txt');
    writeFileSync(file, [...insertLines(0, config.unaffected, mark), ...insertLines(1, config.affected, mark)].join('\n') + '\n');
    const inserted = await runCommand('conntrack', ['-R', file]);
    if (inserted.code !== 0) throw new Error(`conntrack -R could not insert the connections: ${inserted.stderr.trim()}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const list = async () => {
    const [v4, v6] = await Promise.all(['ipv4', 'ipv6'].map((f) => runCommand('conntrack', ['-L', '-f', f, '-p', 'tcp', '--dport', '80'])));
    return parseConntrackListing(v4.stdout + '\n' + v6.stdout);
  };
  const before = (await list()).filter((e) => (e.mark & accepted) !== 0);
  if (before.length !== config.affected + config.unaffected) throw new Error(`expected ${config.affected + config.unaffected} accepted connections in the table, found ${before.length}`);

  const state = stateFromObjects(objects());
  const engine = new PolicyEngine({ state, modules: sharedBuiltins() });
  engine.activate(engine.build(defaultPipeline()));
  warm(engine);
  const dataplane = new Dataplane({ tableName: config.tableName, queueId: config.queueId, dnsQueueId: config.dnsQueueId, failOpen: true, strict: config.strict ?? true, logger: quiet,
    ...(config.clearer === 'process' ? { markClearer: processMarkClearer(runCommand) } : {}),
  });
  await dataplane.start(engine);
  let report: StrictCutReport;
  try {
    const started = performance.now();
    state.apply(Kinds.NetworkPolicy, { type: 'upsert', object: onlyKeep });
    const applyMillis = performance.now() - started;
    await dataplane.refresh();
    const cutMillis = performance.now() - started;
    const after = await list();
    const isAffected = (src: string) => src.startsWith('10.251.1.') || src.startsWith('fd00:251::1:');
    const hasBit = (m: number) => (m & accepted) !== 0;
    report = {
      path: dataplane.strictCutPath ?? null,
      cutMillis,
      applyMillis,
      sweepMillis: dataplane.lastSweep?.millis ?? null,
      sweepCut: dataplane.counters.strictCut,
      acceptedBefore: before.length,
      stillAcceptedAffected: after.filter((e) => isAffected(e.src) && hasBit(e.mark)).length,
      stillAcceptedUnaffected: after.filter((e) => !isAffected(e.src) && hasBit(e.mark)).length,
      wronglyCut: after.filter((e) => !isAffected(e.src) && !hasBit(e.mark)).length,
      otherBitsChanged: after.filter((e) => (e.mark & OTHER_BIT) === 0).length,
    };
  } finally {
    await dataplane.stop();
  }
  process.stdout.write(`${JSON.stringify(report)}\n`);
  // The nfqueue binding keeps its socket (and the event loop) alive: exit explicitly.
  process.exit(0);
}

main().catch((err) => {
  process.stdout.write(`${JSON.stringify({ error: err instanceof Error ? err.message : String(err) })}\n`);
  process.exit(1);
});
