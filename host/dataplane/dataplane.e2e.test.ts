import { afterAll, afterEach, beforeAll, describe, it, expect } from 'vitest';
import { Lab, formatMatrix, sweepStaleLabs, type LabProcess, type ReachabilityResult } from '../../test/lab/lab.js';
import { nftTableRemoval, xtablesCommands, DEFAULT_MARKS, type RuleOptions } from './rules.js';
import type { RunnerConfig } from './standalone-runner.js';
import type { StaticDenyRule } from './static-judge.js';

// The real kernel path: a lab of four pods, the dataplane running as its own
// process in the lab's node namespace, and real TCP/UDP/DNS traffic.

const TABLE = 'kwpe2e';
const QUEUE = 4100;
const DNS_QUEUE = 4101;
const ruleOptions = (failOpen: boolean): RuleOptions => ({ tableName: TABLE, queueId: QUEUE, dnsQueueId: DNS_QUEUE, failOpen, marks: DEFAULT_MARKS });

let lab: Lab;
let runner: LabProcess | undefined;
let secondRunner: LabProcess | undefined;
const modesSeen = new Set<string>();

interface RunnerChoice {
  failOpen?: boolean;
  strict?: boolean;
  deny?: StaticDenyRule[];
  /** A second dataplane beside the first: its own table, queues and mark bits. */
  second?: boolean;
  queueReader?: RunnerConfig['queueReader'];
}

async function startRunner(options: RunnerChoice = {}): Promise<LabProcess> {
  const config: RunnerConfig = {
    tableName: options.second ? `${TABLE}2` : TABLE,
    queueId: options.second ? QUEUE + 10 : QUEUE,
    dnsQueueId: options.second ? DNS_QUEUE + 10 : DNS_QUEUE,
    markBase: options.second ? 24 : 20,
    failOpen: options.failOpen ?? true,
    strict: options.strict ?? true,
    queueReader: options.queueReader,
    judge: { deny: options.deny ?? [], interest: { all: false, ips: allIps() } },
  };
  const proc = lab.spawnInNode(process.execPath, [...Lab.nodeScript(import.meta.url, './standalone-runner.js'), JSON.stringify(config)]);
  if (options.second) secondRunner = proc;
  else runner = proc;
  const started = JSON.parse(await proc.waitForLine((l) => l.includes('"started"') || l.includes('"error"'), 60_000));
  if (started.event !== 'started') throw new Error(`the dataplane did not start: ${started.message}`);
  if (!modesSeen.has(started.mode)) console.log(`dataplane queue mode: ${started.mode}`);
  modesSeen.add(started.mode);
  return proc;
}

async function stopRunner(proc: LabProcess): Promise<void> {
  proc.send(JSON.stringify({ op: 'stop' }));
  await Promise.race([proc.kill('SIGTERM'), new Promise((r) => setTimeout(r, 5000))]);
  await proc.kill();
}

/** Leave the node namespace as if no dataplane had ever run (after a SIGKILL left rules behind). */
async function removeLeftoverRules(): Promise<void> {
  await lab.execInNode('nft', ['-f', '-'], nftTableRemoval(ruleOptions(true))).catch(() => undefined);
  for (const tool of ['iptables', 'ip6tables']) {
    for (const args of xtablesCommands(ruleOptions(true)).remove) await lab.execInNode(tool, args).catch(() => undefined);
  }
}

function allIps(): string[] {
  return lab.pods.flatMap((p) => [p.ip, p.ipv6!]);
}

function find(results: ReachabilityResult[], src: string, dst: string, protocol: 'TCP' | 'UDP') {
  return results.filter((r) => r.src === src && r.dst === dst && r.protocol === protocol).map((r) => r.reachable);
}

beforeAll(async () => {
  sweepStaleLabs();
  lab = await Lab.create({
    pods: [
      { name: 'a', namespace: 'x' },
      { name: 'b', namespace: 'x' },
      { name: 'c', namespace: 'y' },
      { name: 'resolver', namespace: 'infra', dnsRecords: { 'db.x.lab': ['10.244.1.3'], 'cdn.lab': ['192.0.2.10', '192.0.2.11'] } },
    ],
    ipv6: true,
  });
});

afterEach(async () => {
  for (const proc of [runner, secondRunner]) if (proc) await stopRunner(proc);
  runner = undefined;
  secondRunner = undefined;
  await removeLeftoverRules();
});

afterAll(async () => {
  await lab?.destroy();
});

describe('the dataplane on real traffic', () => {
  it('drops TCP and UDP for the one denied pod pair and lets every other pair through', async () => {
    const a = lab.pod('x/a');
    const b = lab.pod('x/b');
    await startRunner({ deny: [{ src: a.ip, dst: b.ip }] });
    const results = await lab.matrix({ timeoutMs: 700 });
    console.log(formatMatrix(results));
    expect(find(results, 'x/a', 'x/b', 'TCP')).toEqual([false]);
    expect(find(results, 'x/a', 'x/b', 'UDP')).toEqual([false]);
    // The reverse direction is another connection, and allowed.
    expect(find(results, 'x/b', 'x/a', 'TCP')).toEqual([true]);
    const others = results.filter((r) => !(r.src === 'x/a' && r.dst === 'x/b'));
    expect(others.filter((r) => !r.reachable)).toEqual([]);

    runner!.send(JSON.stringify({ op: 'stats' }));
    const stats = JSON.parse(await runner!.waitForLine((l) => l.includes('"stats"')));
    console.log(`dataplane counters: ${stats.summary}`);
    expect(stats.dropped).toBeGreaterThan(0);
    expect(stats.accepted).toBeGreaterThan(0);
    expect(stats.parseErrors).toBe(0);
    // Only first packets are queued: each probe exchanges several packets (handshake,
    // echo, close), but once accepted its conntrack mark keeps the rest in the kernel.
    expect(stats.packets).toBeGreaterThanOrEqual(results.length);
    expect(stats.packets).toBeLessThan(results.length * 2);
  });

  it('drops IPv6 TCP and UDP for a denied pair through the IPv6 set and ip6tables', async () => {
    const a = lab.pod('x/a');
    const c = lab.pod('y/c');
    await startRunner({ deny: [{ src: a.ipv6, dst: c.ipv6 }] });
    const results = await lab.matrix({ family: 6, pairs: [['x/a', 'y/c'], ['x/a', 'x/b'], ['y/c', 'x/a']], timeoutMs: 700 });
    expect(find(results, 'x/a', 'y/c', 'TCP')).toEqual([false]);
    expect(find(results, 'x/a', 'y/c', 'UDP')).toEqual([false]);
    expect(find(results, 'x/a', 'x/b', 'TCP')).toEqual([true]);
    expect(find(results, 'y/c', 'x/a', 'UDP')).toEqual([true]);
    // The IPv4 addresses of the same pods are another matter for this judge.
    expect((await lab.tcp('x/a', 'y/c', 80, 700)).ok).toBe(true);
  });

  it('gives every queued packet exactly one verdict with either reader, through bursts of connections', async () => {
    const a = lab.pod('x/a');
    const b = lab.pod('x/b');
    for (const queueReader of ['batch', 'binding'] as const) {
      const proc = await startRunner({ deny: [{ src: a.ip, dst: b.ip }], queueReader });
      expect(JSON.parse(proc.lines.find((l) => l.includes('"started"'))!).queueReader).toBe(queueReader);
      // Many SYNs at once from one pod: several wait in the queue while the first is judged.
      for (let burst = 0; burst < 3; burst++) {
        const allowed = await Promise.all(Array.from({ length: 48 }, () => lab.tcp('y/c', 'x/a', 80, 3000)));
        expect(allowed.filter((r) => !r.ok)).toEqual([]);
      }
      const denied = await Promise.all(Array.from({ length: 8 }, () => lab.tcp('x/a', 'x/b', 80, 600)));
      expect(denied.filter((r) => r.ok)).toEqual([]);
      proc.send(JSON.stringify({ op: 'stats' }));
      const stats = JSON.parse(await proc.waitForLine((l) => l.includes('"stats"')));
      // queue_number peer_portid queue_total copy_mode copy_range queue_dropped user_dropped id_sequence 1
      const row = (await lab.execInNode('cat', ['/proc/net/netfilter/nfnetlink_queue'])).stdout.split('\n').map((l) => l.trim().split(/\s+/).map(Number)).find((f) => f[0] === QUEUE)!;
      const [, , waiting, , , queueDropped, userDropped, queued] = row;
      console.log(`${queueReader}: ${queued} packets queued, ${stats.packets} judged (${stats.accepted} accepted, ${stats.dropped} dropped)${stats.reads ? ` in ${stats.reads.wakeups} wakeups` : ''}`);
      // None left waiting, none dropped for want of room, and every one the kernel queued reached the judge and was answered once.
      expect({ waiting, queueDropped, userDropped }).toEqual({ waiting: 0, queueDropped: 0, userDropped: 0 });
      expect(stats.packets).toBe(queued);
      expect(stats.accepted + stats.dropped).toBe(stats.packets);
      expect(stats.dropped).toBeGreaterThanOrEqual(8);
      if (queueReader === 'batch') {
        expect(stats.reads).toMatchObject({ packets: stats.packets, verdictFailures: 0 });
        // The bursts left several SYNs waiting at some wakeups, and each such wakeup read them all.
        expect(stats.reads.wakeups).toBeLessThan(stats.packets);
      }
      else expect(stats.reads).toBeUndefined();
      await stopRunner(proc);
      runner = undefined;
      await removeLeftoverRules();
    }
  });

  it('reports the addresses of DNS answers through the DNS queue', async () => {
    await startRunner();
    expect((await lab.dns('x/a', 'infra/resolver', 'cdn.lab')).ok).toBe(true);
    const line = await runner!.waitForLine((l) => l.includes('"dns"') && l.includes('192.0.2.11'), 5000);
    expect(JSON.parse(line)).toEqual({ event: 'dns', name: 'cdn.lab', address: '192.0.2.11', ttl: 30 });
    expect(runner!.lines.some((l) => l.includes('"dns"') && l.includes('192.0.2.10'))).toBe(true);
  });

  it('cuts an established connection in strict mode once the judge denies it', async () => {
    const a = lab.pod('x/a');
    const c = lab.pod('y/c');
    await startRunner({ strict: true });
    const conn = await lab.hold('x/a', 'y/c', 80);
    expect((await conn.send()).ok).toBe(true);
    runner!.send(JSON.stringify({ op: 'judge', config: { deny: [{ src: a.ip, dst: c.ip }], interest: { all: false, ips: allIps() } } }));
    const refreshed = JSON.parse(await runner!.waitForLine((l) => l.includes('"refreshed"')));
    expect(refreshed.strictCut).toBeGreaterThanOrEqual(1);
    expect((await conn.send(1500)).ok).toBe(false);
    // A new connection is refused the same way, while the other direction still works.
    expect((await lab.tcp('x/a', 'y/c', 80, 700)).ok).toBe(false);
    expect((await lab.tcp('y/c', 'x/a', 80, 700)).ok).toBe(true);
    await conn.close();
  });

  it('cuts an accepted connection in strict mode even when its responder speaks first', async () => {
    const b = lab.pod('x/b');
    const c = lab.pod('y/c');
    await startRunner({ strict: true });
    const conn = await lab.hold('x/b', 'y/c', 80);
    // The server will write on its own 1.5 s from now; by then the policy has changed.
    expect((await conn.requestLateReply()).ok).toBe(true);
    runner!.send(JSON.stringify({ op: 'judge', config: { deny: [{ src: b.ip, dst: c.ip }], interest: { all: false, ips: allIps() } } }));
    expect(JSON.parse(await runner!.waitForLine((l) => l.includes('"refreshed"'))).strictCut).toBeGreaterThanOrEqual(1);
    // Its packet travels the reply direction: judged as b -> c, denied.
    expect(await conn.lateReplyArrived()).toBe(false);
    await conn.close();
  });

  it('leaves an established connection alone without strict mode', async () => {
    const a = lab.pod('x/a');
    const c = lab.pod('y/c');
    await startRunner({ strict: false });
    const conn = await lab.hold('x/a', 'y/c', 80);
    expect((await conn.requestLateReply()).ok).toBe(true);
    runner!.send(JSON.stringify({ op: 'judge', config: { deny: [{ src: a.ip, dst: c.ip }], interest: { all: false, ips: allIps() } } }));
    await runner!.waitForLine((l) => l.includes('"refreshed"'));
    expect(await conn.lateReplyArrived()).toBe(true);
    expect((await conn.send()).ok).toBe(true);
    expect((await lab.tcp('x/a', 'y/c', 80, 700)).ok).toBe(false);
    await conn.close();
  });

  it('runs beside a second dataplane with its own table, queues and mark bits, each enforcing its own judge', async () => {
    const [a, b, c] = ['x/a', 'x/b', 'y/c'].map((ref) => lab.pod(ref));
    await startRunner({ deny: [{ src: a.ip, dst: b.ip }] });
    await startRunner({ second: true, deny: [{ src: b.ip, dst: c.ip }] });
    expect((await lab.tcp('x/a', 'x/b', 80, 700)).ok).toBe(false);
    expect((await lab.tcp('x/b', 'y/c', 80, 700)).ok).toBe(false);
    expect((await lab.tcp('x/a', 'y/c', 80, 1000)).ok).toBe(true);
    // Each saw the opening packets itself: had the second skipped the first's rules
    // (xtables mode shares iptables' mangle table), the first would only have met
    // the replies, judged in reverse.
    for (const proc of [runner!, secondRunner!]) {
      proc.send(JSON.stringify({ op: 'stats' }));
      const stats = JSON.parse(await proc.waitForLine((l) => l.includes('"stats"')));
      expect(stats.replyDirection).toBe(0);
      expect(stats.packets).toBeGreaterThanOrEqual(2);
    }
    await stopRunner(secondRunner!);
    secondRunner = undefined;
    // The first one's rules are untouched by the second one's removal.
    expect((await lab.tcp('x/a', 'x/b', 80, 700)).ok).toBe(false);
    expect((await lab.tcp('x/b', 'y/c', 80, 1000)).ok).toBe(true);
  });

  it('removes every rule it added on a clean stop', async () => {
    await startRunner();
    const before = await lab.execInNode('nft', ['list', 'ruleset']);
    expect(before.stdout).toContain(`table inet ${TABLE}`);
    runner!.send(JSON.stringify({ op: 'stop' }));
    await runner!.waitForLine((l) => l.includes('"stopped"'));
    const after = await lab.execInNode('nft', ['list', 'ruleset']);
    expect(after.stdout).not.toContain(TABLE);
    expect(after.stdout.toUpperCase()).not.toContain(`${TABLE.toUpperCase()}-POST`);
  });

  it('lets new connections through after a SIGKILL when failing open, even the denied ones', async () => {
    const a = lab.pod('x/a');
    const b = lab.pod('x/b');
    await startRunner({ failOpen: true, deny: [{ src: a.ip, dst: b.ip }] });
    expect((await lab.tcp('x/a', 'x/b', 80, 700)).ok).toBe(false);
    await runner!.kill('SIGKILL');
    runner = undefined;
    // The rules are still there and still queue, but nobody listens: the kernel bypasses the queue.
    expect((await lab.execInNode('nft', ['list', 'table', 'inet', TABLE])).stdout).toContain('classify_postrouting');
    expect((await lab.tcp('x/a', 'x/b', 80, 1000)).ok).toBe(true);
    expect((await lab.udp('x/b', 'y/c', 5353, 1000)).ok).toBe(true);
  });

  it('stops new connections after a SIGKILL when failing closed, while accepted ones carry on', async () => {
    await startRunner({ failOpen: false });
    const conn = await lab.hold('x/a', 'y/c', 80);
    expect((await lab.tcp('x/b', 'y/c', 80, 1000)).ok).toBe(true);
    await runner!.kill('SIGKILL');
    runner = undefined;
    expect((await lab.tcp('x/b', 'y/c', 80, 1000)).ok).toBe(false);
    expect((await lab.udp('x/a', 'x/b', 5353, 1000)).ok).toBe(false);
    // Marked accepted in conntrack before the crash: its packets never reach the queue.
    expect((await conn.send()).ok).toBe(true);
    await conn.close();
  });

  it('replaces the rules a killed dataplane left behind when it starts again', async () => {
    await startRunner({ failOpen: false });
    await runner!.kill('SIGKILL');
    runner = undefined;
    expect((await lab.tcp('x/a', 'x/b', 80, 700)).ok).toBe(false);
    await startRunner({ failOpen: false });
    expect((await lab.tcp('x/a', 'x/b', 80, 1000)).ok).toBe(true);
    const rules = await lab.execInNode('iptables', ['-t', 'mangle', '-S', 'POSTROUTING']);
    // One jump, not one per start.
    expect(rules.stdout.split('\n').filter((l) => l.includes(`${TABLE.toUpperCase()}-POST`))).toHaveLength(1);
  });
});
