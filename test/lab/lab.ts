// A network-namespace lab: one "node" namespace and N "pod" namespaces, each
// pod with a veth into the node and a routed /32, as a CNI would wire them.
// Every pod runs a resident agent (pod-agent.ts) serving TCP/UDP echo and
// probing on command, so tests, the demo and benchmarks can measure real
// reachability and compare it with what policies predict.
//
// All addresses live inside the lab's own namespaces, so two labs (each with a
// unique prefix) can use the same pod IPs side by side. Cleanup is guaranteed:
// destroy() on success, an exit/signal hook otherwise, and sweepStaleLabs()
// for namespaces left by a process that was killed outright.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { KubeObject } from '../../host/contract.js';
import { destroyNetnsSync, inNetnsChecked, ip, listNetns } from './netns.js';
import { nodeScriptArgs } from './node-script.js';
import type { PodAgentCommand, PodAgentConfig, PodAgentReply } from './pod-protocol.js';
import { labManifests } from './lab-objects.js';
import { labService, natHooks, natRules, type LabService, type LabServiceSpec, type ServiceEndpointPod } from './services.js';

export interface LabPodSpec {
  name: string;
  /** Kubernetes namespace. */
  namespace: string;
  labels?: Record<string, string>;
  /** Default: 10.244.1.(index + 2). */
  ip?: string;
  /** Default: the lab's tcpPorts. */
  tcpPorts?: number[];
  udpPorts?: number[];
  /** IPv6 address when the lab has IPv6; default fd00:10:244::1:(index + 2) in hex. */
  ipv6?: string;
  /** Make this pod a DNS server on UDP 53 answering these names with these IPv4 addresses. */
  dnsRecords?: Record<string, string[]>;
}

export interface LabOptions {
  pods: LabPodSpec[];
  /** Labels of each Kubernetes namespace, besides kubernetes.io/metadata.name. */
  namespaceLabels?: Record<string, Record<string, string>>;
  /** Default lab-node. */
  nodeName?: string;
  /** Ports every pod serves unless its spec says otherwise. Default TCP 80, UDP 5353. */
  tcpPorts?: number[];
  udpPorts?: number[];
  /** Give every pod an IPv6 address too (dual stack). Default false. */
  ipv6?: boolean;
  /** Namespace-name prefix; default `kwplab-<pid>-<n>`. */
  prefix?: string;
  /** kube-proxy-style Services (IPv4): ClusterIP DNAT over their endpoints, the hairpin SNAT, NodePorts. */
  services?: LabServiceSpec[];
  /** Add an "outside" namespace, a host off the node (192.168.77.2) that reaches it at 192.168.77.1: for NodePorts. */
  outside?: boolean;
}

export interface LabPod {
  name: string;
  namespace: string;
  /** `namespace/name`, the form flows files use. */
  key: string;
  labels: Record<string, string>;
  ip: string;
  /** Set when the lab is dual-stack. */
  ipv6?: string;
  /** The pod's network namespace. */
  netns: string;
  /** The veth end inside the node namespace. */
  hostInterface: string;
  tcpPorts: number[];
  udpPorts: number[];
  dnsRecords?: Record<string, string[]>;
}

export interface ProbeResult {
  ok: boolean;
  ms: number;
  error?: string;
}

export type LabProtocol = 'TCP' | 'UDP';

/** A flow between two lab pods, in the shape of a flows-file entry. */
export interface LabFlow {
  /** `namespace/name`. */
  src: string;
  dst: string;
  protocol: LabProtocol;
  port: number;
}

/** One measured flow. */
export interface ReachabilityResult extends LabFlow {
  reachable: boolean;
  ms: number;
  error?: string;
}

export interface MatrixOptions {
  /** Probe the pods' IPv6 addresses instead of their IPv4 ones (dual-stack labs). */
  family?: 4 | 6;
  /** Which pairs to probe; default every ordered pair of distinct pods. */
  pairs?: Array<[string, string]>;
  /** Default: each destination pod's own ports. */
  tcpPorts?: number[];
  udpPorts?: number[];
  timeoutMs?: number;
  concurrency?: number;
}

export interface HeldConnection {
  /** Send a line on the open connection and wait for its echo. */
  send(timeoutMs?: number): Promise<ProbeResult>;
  /** Ask the server to speak on its own 1.5 s from now (after echoing this request). */
  requestLateReply(timeoutMs?: number): Promise<ProbeResult>;
  /** Whether that late line from the server arrived (waits for it up to 4 s after the request). */
  lateReplyArrived(): Promise<boolean>;
  close(): Promise<void>;
}

export type OutputStream = 'stdout' | 'stderr' | 'both';

export interface LabProcess {
  child: ChildProcess;
  /** Lines the process printed on stdout. */
  lines: string[];
  /** Lines the process printed on stderr (where the agent logs). */
  errorLines: string[];
  /** Resolves with the first line matching (on stdout by default), rejects on exit or timeout. */
  waitForLine(match: (line: string) => boolean, timeoutMs?: number, stream?: OutputStream): Promise<string>;
  /** Call `listener` with every later stdout line. */
  onLine(listener: (line: string) => void): void;
  /** Write one line to its stdin. */
  send(line: string): void;
  /** SIGKILL, and wait for it to be gone. */
  kill(signal?: NodeJS.Signals): Promise<void>;
}

const NODE_IP = '10.244.0.1';
const NODE_IPV6 = 'fd00:10:244::1';
/** The pods' IPv6 gateway: a link-local address on every node-side veth. */
const GATEWAY_V6 = 'fe80::1';
const GATEWAY = '169.254.1.1';
const LAB_PREFIX = 'kwplab-';
/** The outside host and the node's address on the link to it. */
const OUTSIDE_IP = '192.168.77.2';
const NODE_OUTSIDE_IP = '192.168.77.1';
/** The key the outside host's agent is known by (`lab.tcp(OUTSIDE, …)`). */
export const OUTSIDE = 'outside';

const liveLabs = new Set<Lab>();
let hooksInstalled = false;
let labCounter = 0;

function installExitHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on('exit', () => {
    for (const lab of liveLabs) lab.destroySync();
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      for (const lab of liveLabs) lab.destroySync();
      process.kill(process.pid, signal);
    });
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Delete namespaces of labs whose creating process no longer exists (it was SIGKILLed). Returns their names. */
export function sweepStaleLabs(): string[] {
  const removed: string[] = [];
  for (const netns of listNetns()) {
    const match = /^kwplab-(\d+)-/.exec(netns);
    if (match && !isAlive(Number(match[1]))) {
      destroyNetnsSync(netns);
      removed.push(netns);
    }
  }
  return removed;
}

type WithoutId<T> = T extends unknown ? Omit<T, 'id'> : never;

class PodAgent {
  private nextId = 1;
  private readonly pending = new Map<number, (reply: PodAgentReply) => void>();
  readonly process: LabProcess;

  constructor(proc: LabProcess) {
    this.process = proc;
    proc.onLine((line) => this.onLine(line));
  }

  onLine(line: string): void {
    if (!line.startsWith('{"id"')) return;
    const reply = JSON.parse(line) as PodAgentReply;
    this.pending.get(reply.id)?.(reply);
    this.pending.delete(reply.id);
  }

  request(command: WithoutId<PodAgentCommand>, id = this.nextId++): Promise<PodAgentReply> {
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      this.process.send(JSON.stringify({ ...command, id }));
    });
  }

  reserveId(): number {
    return this.nextId++;
  }
}

export class Lab {
  readonly prefix: string;
  readonly nodeNetns: string;
  readonly nodeName: string;
  /** The node's own address, on its loopback; pods reach it through their default route. */
  readonly nodeIp = NODE_IP;
  /** Set when the lab is dual-stack. */
  readonly nodeIpv6: string | undefined;
  readonly pods: LabPod[];
  readonly namespaceLabels: Record<string, Record<string, string>>;
  /** The lab's Services with their current endpoints. */
  readonly services: LabService[];
  /** Set when the lab has an outside host: its address, and the node's address it reaches NodePorts on. */
  readonly outsideIp: string | undefined;
  readonly nodeOutsideIp: string | undefined;
  private readonly outsideNetns: string | undefined;
  private readonly agents = new Map<string, PodAgent>();
  private readonly processes = new Set<LabProcess>();
  private destroyed = false;

  private constructor(options: LabOptions) {
    this.prefix = options.prefix ?? `${LAB_PREFIX}${process.pid}-${labCounter++}`;
    this.nodeNetns = `${this.prefix}-node`;
    this.nodeName = options.nodeName ?? 'lab-node';
    this.namespaceLabels = options.namespaceLabels ?? {};
    this.nodeIpv6 = options.ipv6 ? NODE_IPV6 : undefined;
    const seen = new Set<string>();
    this.pods = options.pods.map((spec, index) => {
      const key = `${spec.namespace}/${spec.name}`;
      if (seen.has(key)) throw new Error(`lab: pod ${key} is listed twice`);
      seen.add(key);
      return {
        name: spec.name,
        namespace: spec.namespace,
        key,
        labels: spec.labels ?? {},
        ip: spec.ip ?? `10.244.${1 + Math.floor(index / 250)}.${2 + (index % 250)}`,
        ...(options.ipv6 ? { ipv6: spec.ipv6 ?? `fd00:10:244::1:${(index + 2).toString(16)}` } : {}),
        netns: `${this.prefix}-p${index}`,
        hostInterface: `pod${index}`,
        tcpPorts: spec.tcpPorts ?? options.tcpPorts ?? [80],
        udpPorts: spec.udpPorts ?? options.udpPorts ?? [5353],
        dnsRecords: spec.dnsRecords,
      };
    });
    this.services = (options.services ?? []).map((spec, index) => labService(spec, index, this.pods));
    const serviceKeys = new Set<string>();
    for (const service of this.services) {
      if (serviceKeys.has(service.key)) throw new Error(`lab: Service ${service.key} is listed twice`);
      serviceKeys.add(service.key);
    }
    this.outsideNetns = options.outside ? `${this.prefix}-out` : undefined;
    this.outsideIp = options.outside ? OUTSIDE_IP : undefined;
    this.nodeOutsideIp = options.outside ? NODE_OUTSIDE_IP : undefined;
  }

  /** Build the namespaces, wire the pods and start their agents. Cleans up after itself if any step fails. */
  static async create(options: LabOptions): Promise<Lab> {
    const lab = new Lab(options);
    installExitHooks();
    liveLabs.add(lab);
    try {
      await lab.build();
    } catch (err) {
      await lab.destroy();
      throw err;
    }
    return lab;
  }

  private async build(): Promise<void> {
    const node = this.nodeNetns;
    await ip(['netns', 'add', node]);
    await ip(['-n', node, 'link', 'set', 'lo', 'up']);
    await ip(['-n', node, 'addr', 'add', `${GATEWAY}/32`, 'dev', 'lo']);
    await ip(['-n', node, 'addr', 'add', `${NODE_IP}/32`, 'dev', 'lo']);
    await inNetnsChecked(node, 'sysctl', ['-qw', 'net.ipv4.ip_forward=1']);
    // A Service hairpin leaves by the veth it came in on; no ICMP redirects for that.
    await inNetnsChecked(node, 'sysctl', ['-qw', 'net.ipv4.conf.all.send_redirects=0']);
    if (this.nodeIpv6) {
      await inNetnsChecked(node, 'sysctl', ['-qw', 'net.ipv6.conf.all.forwarding=1']);
      await ip(['-n', node, '-6', 'addr', 'add', `${this.nodeIpv6}/128`, 'dev', 'lo']);
    }
    for (const pod of this.pods) {
      await ip(['netns', 'add', pod.netns]);
      await ip(['-n', node, 'link', 'add', pod.hostInterface, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', pod.netns]);
      await inNetnsChecked(node, 'sysctl', ['-qw', `net.ipv4.conf.${pod.hostInterface}.proxy_arp=1`]);
      // Proxy ARP answers at once instead of after up to 0.8 s: no first-connection delay.
      await inNetnsChecked(node, 'sysctl', ['-qw', `net.ipv4.neigh.${pod.hostInterface}.proxy_delay=0`]);
      await inNetnsChecked(node, 'sysctl', ['-qw', `net.ipv4.conf.${pod.hostInterface}.send_redirects=0`]);
      if (pod.ipv6) {
        // Without duplicate address detection the addresses work at once instead of after ~2 s.
        await inNetnsChecked(node, 'sysctl', ['-qw', `net.ipv6.conf.${pod.hostInterface}.accept_dad=0`]);
        await inNetnsChecked(pod.netns, 'sysctl', ['-qw', 'net.ipv6.conf.eth0.accept_dad=0']);
        await ip(['-n', node, '-6', 'addr', 'add', `${GATEWAY_V6}/64`, 'dev', pod.hostInterface, 'nodad']);
      }
      await ip(['-n', node, 'link', 'set', pod.hostInterface, 'up']);
      await ip(['-n', node, 'route', 'add', `${pod.ip}/32`, 'dev', pod.hostInterface]);
      await ip(['-n', pod.netns, 'link', 'set', 'lo', 'up']);
      await allowTimeWaitReuse(pod.netns);
      await ip(['-n', pod.netns, 'addr', 'add', `${pod.ip}/32`, 'dev', 'eth0']);
      await ip(['-n', pod.netns, 'link', 'set', 'eth0', 'up']);
      await ip(['-n', pod.netns, 'route', 'add', GATEWAY, 'dev', 'eth0', 'scope', 'link']);
      await ip(['-n', pod.netns, 'route', 'add', 'default', 'via', GATEWAY, 'dev', 'eth0']);
      if (pod.ipv6) {
        await ip(['-n', node, '-6', 'route', 'add', `${pod.ipv6}/128`, 'dev', pod.hostInterface]);
        await ip(['-n', pod.netns, '-6', 'addr', 'add', `${pod.ipv6}/128`, 'dev', 'eth0', 'nodad']);
        await ip(['-n', pod.netns, '-6', 'route', 'add', 'default', 'via', GATEWAY_V6, 'dev', 'eth0']);
      }
    }
    if (this.outsideNetns) await this.buildOutside(this.outsideNetns);
    if (this.services.length > 0) {
      await this.programServices();
      for (const args of natHooks()) await this.execInNode('iptables', args);
    }
    const started = this.pods.map((pod) => this.startAgent(pod.key, pod.netns, { tcpPorts: pod.tcpPorts, udpPorts: pod.udpPorts, dnsRecords: pod.dnsRecords }));
    if (this.outsideNetns) started.push(this.startAgent(OUTSIDE, this.outsideNetns, { tcpPorts: [], udpPorts: [] }));
    await Promise.all(started);
  }

  /** A host off the node on its own link, routed through the node: where NodePort traffic comes from. */
  private async buildOutside(netns: string): Promise<void> {
    const node = this.nodeNetns;
    await ip(['netns', 'add', netns]);
    await ip(['-n', node, 'link', 'add', 'out0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', netns]);
    await ip(['-n', node, 'addr', 'add', `${NODE_OUTSIDE_IP}/24`, 'dev', 'out0']);
    await ip(['-n', node, 'link', 'set', 'out0', 'up']);
    await ip(['-n', netns, 'link', 'set', 'lo', 'up']);
    await allowTimeWaitReuse(netns);
    await ip(['-n', netns, 'addr', 'add', `${OUTSIDE_IP}/24`, 'dev', 'eth0']);
    await ip(['-n', netns, 'link', 'set', 'eth0', 'up']);
    await ip(['-n', netns, 'route', 'add', 'default', 'via', NODE_OUTSIDE_IP]);
  }

  /** Load the Services' nat rules into the node namespace in one iptables-restore (the lab's chains only). */
  private async programServices(): Promise<void> {
    await this.execInNode('iptables-restore', ['--noflush'], natRules(this.services, this.endpointPods()));
  }

  private endpointPods(): Map<string, ServiceEndpointPod> {
    return new Map(this.pods.map((p) => [p.key, p]));
  }

  /** A Service by `namespace/name`. */
  service(ref: string): LabService {
    const found = this.services.find((s) => s.key === ref);
    if (!found) throw new Error(`lab: no Service ${ref}; the lab has ${this.services.map((s) => s.key).join(', ') || 'none'}`);
    return found;
  }

  /** The ClusterIP of a Service. */
  serviceIP(ref: string): string {
    return this.service(ref).clusterIP;
  }

  /**
   * Make `podRefs` the Service's endpoints (in this order), as an endpoint
   * change would: the nat rules are reloaded at once, and manifests() and
   * writeManifests() describe the new EndpointSlice from now on.
   */
  async setServiceEndpoints(ref: string, podRefs: string[]): Promise<void> {
    const service = this.service(ref);
    service.endpoints = podRefs.map((p) => this.pod(p).key);
    await this.programServices();
  }

  private async startAgent(key: string, netns: string, config: PodAgentConfig): Promise<void> {
    const args = [...nodeScriptArgs(import.meta.url, './pod-agent.js'), JSON.stringify(config)];
    const proc = this.spawnInNetns(netns, process.execPath, args);
    const agent = new PodAgent(proc);
    await proc.waitForLine((line) => line.includes('"ready"') || line.includes('"fatal"'), 30_000).then((line) => {
      if (line.includes('"fatal"')) throw new Error(`lab: the agent of ${key} failed: ${line}`);
    });
    this.agents.set(key, agent);
  }

  /** A pod by `namespace/name`, or by name when that is unique. */
  pod(ref: string): LabPod {
    const found = ref.includes('/') ? this.pods.filter((p) => p.key === ref) : this.pods.filter((p) => p.name === ref);
    if (found.length !== 1) throw new Error(`lab: ${found.length === 0 ? 'no' : 'more than one'} pod matches "${ref}"`);
    return found[0];
  }

  private agent(ref: string): PodAgent {
    if (ref === OUTSIDE) {
      const outside = this.agents.get(OUTSIDE);
      if (!outside) throw new Error('lab: this lab has no outside host; create it with outside: true');
      return outside;
    }
    return this.agents.get(this.pod(ref).key)!;
  }

  /** A pod reference or an IP address to an IP address; `family` 6 picks a pod's IPv6 address. */
  address(target: string, family: 4 | 6 = 4): string {
    if (/^[0-9.]+$|:/.test(target) && !target.includes('/')) return target;
    const pod = this.pod(target);
    if (family === 4) return pod.ip;
    if (!pod.ipv6) throw new Error(`lab: pod ${pod.key} has no IPv6 address; create the lab with ipv6: true`);
    return pod.ipv6;
  }

  /** Open a TCP connection from `from` to `to`, exchange one line, close. */
  async tcp(from: string, to: string, port: number, timeoutMs = 1000): Promise<ProbeResult> {
    return strip(await this.agent(from).request({ op: 'tcp', host: this.address(to), port, timeoutMs }));
  }

  /** One UDP request/echo. */
  async udp(from: string, to: string, port: number, timeoutMs = 1000): Promise<ProbeResult> {
    return strip(await this.agent(from).request({ op: 'udp', host: this.address(to), port, timeoutMs }));
  }

  /** Ask `server` (a pod with dnsRecords) for the A records of `name`. */
  async dns(from: string, server: string, name: string, timeoutMs = 1000): Promise<ProbeResult> {
    return strip(await this.agent(from).request({ op: 'dns', server: this.address(server), name, timeoutMs }));
  }

  /** Open a TCP connection and keep it, to test what happens to established connections. */
  async hold(from: string, to: string, port: number, timeoutMs = 1000): Promise<HeldConnection> {
    const agent = this.agent(from);
    const conn = agent.reserveId();
    const opened = await agent.request({ op: 'hold', host: this.address(to), port, timeoutMs }, conn);
    if (!opened.ok) throw new Error(`lab: could not open a connection ${from} → ${to}:${port}: ${opened.error}`);
    return {
      send: async (sendTimeoutMs = 1000) => strip(await agent.request({ op: 'send', conn, timeoutMs: sendTimeoutMs })),
      requestLateReply: async (sendTimeoutMs = 1000) => strip(await agent.request({ op: 'later', conn, timeoutMs: sendTimeoutMs })),
      lateReplyArrived: async () => (await agent.request({ op: 'late', conn })).ok,
      close: async () => {
        await agent.request({ op: 'close', conn });
      },
    };
  }

  /** The flows matrix() would probe, without probing: feed them to `kwp eval` for predictions. */
  flows(options: Pick<MatrixOptions, 'pairs' | 'tcpPorts' | 'udpPorts'> = {}): LabFlow[] {
    const pairs = options.pairs ?? this.pods.flatMap((a) => this.pods.filter((b) => b !== a).map((b) => [a.key, b.key] as [string, string]));
    const flows: LabFlow[] = [];
    for (const [src, dst] of pairs) {
      const target = this.pod(dst);
      for (const port of options.tcpPorts ?? target.tcpPorts) flows.push({ src: this.pod(src).key, dst: target.key, protocol: 'TCP', port });
      for (const port of options.udpPorts ?? target.udpPorts) flows.push({ src: this.pod(src).key, dst: target.key, protocol: 'UDP', port });
    }
    return flows;
  }

  /** Probe flows between pods, a bounded number at once; denied flows cost their timeout. */
  async matrix(options: MatrixOptions = {}): Promise<ReachabilityResult[]> {
    const timeoutMs = options.timeoutMs ?? 800;
    const family = options.family ?? 4;
    const flows = this.flows(options);
    const results: ReachabilityResult[] = new Array(flows.length);
    let next = 0;
    const worker = async () => {
      while (next < flows.length) {
        const index = next++;
        const flow = flows[index];
        const dst = this.address(flow.dst, family);
        const probe = flow.protocol === 'TCP' ? await this.tcp(flow.src, dst, flow.port, timeoutMs) : await this.udp(flow.src, dst, flow.port, timeoutMs);
        results[index] = { ...flow, reachable: probe.ok, ms: probe.ms, ...(probe.error ? { error: probe.error } : {}) };
      }
    };
    await Promise.all(Array.from({ length: Math.min(options.concurrency ?? 16, flows.length) }, worker));
    return results;
  }

  /** Namespace, Node and Pod objects describing the lab, as a source would deliver them. */
  manifests(): KubeObject[] {
    return labManifests(this);
  }

  /** Write the manifests as one multi-document YAML file `lab.yaml` in `dir`; returns its path. */
  async writeManifests(dir: string): Promise<string> {
    const { stringify } = await import('yaml');
    await mkdir(dir, { recursive: true });
    const path = join(dir, 'lab.yaml');
    await writeFile(path, this.manifests().map((obj) => stringify(obj)).join('---\n'));
    return path;
  }

  /** Run a command in the node namespace and wait for it. */
  execInNode(command: string, args: string[], stdin?: string) {
    return inNetnsChecked(this.nodeNetns, command, args, stdin);
  }

  /** Start a long-running process in the node namespace (e.g. the dataplane). The lab kills it on destroy. */
  spawnInNode(command: string, args: string[], env?: NodeJS.ProcessEnv): LabProcess {
    return this.spawnInNetns(this.nodeNetns, command, args, env);
  }

  /** `node` arguments that run a repository script (see node-script.ts). */
  static nodeScript(base: string, relative: string): string[] {
    return nodeScriptArgs(base, relative);
  }

  private spawnInNetns(netns: string, command: string, args: string[], env?: NodeJS.ProcessEnv): LabProcess {
    const child = spawn('ip', ['netns', 'exec', netns, command, ...args], { stdio: ['pipe', 'pipe', 'pipe'], env: env ?? process.env });
    const lines: string[] = [];
    const errorLines: string[] = [];
    const listeners: Array<(line: string) => void> = [];
    type Waiter = { stream: OutputStream; match: (line: string) => boolean; resolve: (line: string) => void };
    const waiters = new Set<Waiter>();
    const deliver = (stream: 'stdout' | 'stderr', line: string) => {
      (stream === 'stdout' ? lines : errorLines).push(line);
      if (stream === 'stdout') for (const listener of listeners) listener(line);
      for (const waiter of waiters) if ((waiter.stream === stream || waiter.stream === 'both') && waiter.match(line)) waiter.resolve(line);
    };
    createInterface({ input: child.stdout! }).on('line', (line) => deliver('stdout', line));
    createInterface({ input: child.stderr! }).on('line', (line) => deliver('stderr', line));
    child.stdin!.on('error', () => undefined);
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const describe = () => `${command} ${args.filter((a) => !a.startsWith('{')).join(' ')} in ${netns}`;
    const proc: LabProcess = {
      child,
      lines,
      errorLines,
      waitForLine: (match, timeoutMs = 30_000, stream = 'stdout') =>
        new Promise((resolve, reject) => {
          const seen = stream === 'stdout' ? lines : stream === 'stderr' ? errorLines : [...lines, ...errorLines];
          const already = seen.find(match);
          if (already !== undefined) return resolve(already);
          const waiter: Waiter = {
            stream,
            match,
            resolve: (line: string) => {
              cleanup();
              resolve(line);
            },
          };
          const fail = (why: string) => {
            cleanup();
            reject(new Error(`lab: ${describe()}: ${why}; stderr: ${errorLines.slice(-20).join('\n')}`));
          };
          const timer = setTimeout(() => fail(`no expected line within ${timeoutMs} ms`), timeoutMs);
          const onExit = (code: number | null, signal: NodeJS.Signals | null) => fail(`exited with ${code ?? signal}`);
          const cleanup = () => {
            clearTimeout(timer);
            waiters.delete(waiter);
            child.off('exit', onExit);
          };
          waiters.add(waiter);
          if (child.exitCode !== null || child.signalCode !== null) return fail(`had already exited with ${child.exitCode ?? child.signalCode}`);
          child.once('exit', onExit);
        }),
      onLine: (listener) => {
        listeners.push(listener);
      },
      send: (line) => {
        child.stdin!.write(`${line}\n`);
      },
      kill: async (signal = 'SIGKILL') => {
        if (child.exitCode === null && child.signalCode === null) child.kill(signal);
        await exited;
      },
    };
    this.processes.add(proc);
    return proc;
  }

  /** Stop every process and delete every namespace of the lab. */
  async destroy(): Promise<void> {
    if (this.destroyed) return;
    await Promise.all([...this.processes].map((p) => p.kill().catch(() => undefined)));
    this.destroySync();
  }

  /** The synchronous part of destroy, safe to run from an exit handler. */
  destroySync(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    liveLabs.delete(this);
    for (const proc of this.processes) {
      if (proc.child.exitCode === null) proc.child.kill('SIGKILL');
    }
    for (const pod of this.pods) destroyNetnsSync(pod.netns);
    if (this.outsideNetns) destroyNetnsSync(this.outsideNetns);
    destroyNetnsSync(this.nodeNetns);
  }
}

/**
 * Lets a connect() in the namespace `netns` take a local port whose last
 * connection to the same address and port is in TIME_WAIT (older than
 * tcp_tw_reuse_delay, 1 s), as net.ipv4.tcp_tw_reuse=1 does; the kernel's
 * default (2) allows it on loopback only. The lab's clients close first, so
 * their TIME_WAITs pile up at the client, 60 s each: once the bench's client
 * has one on every even port of the ephemeral range (14,116 of 32768-60999)
 * for a destination, each connect() walks that whole half of the range
 * before it finds a port (__inet_hash_connect, ~20 ms a connect): the e2e
 * bench's "slow spells" of 200-270 conn/s in every mode alike, 60 s after
 * they began (docs/performance.md, "What is measured, and how").
 */
async function allowTimeWaitReuse(netns: string): Promise<void> {
  await inNetnsChecked(netns, 'sysctl', ['-qw', 'net.ipv4.tcp_tw_reuse=1']);
}

function strip(reply: PodAgentReply): ProbeResult {
  return { ok: reply.ok, ms: reply.ms, ...(reply.error ? { error: reply.error } : {}) };
}

/** Results as a grid, one line per source, `✓`/`✗` per destination and port. */
export function formatMatrix(results: ReachabilityResult[]): string {
  const columns = [...new Set(results.map((r) => `${r.dst} ${r.protocol}/${r.port}`))];
  const rows = [...new Set(results.map((r) => r.src))];
  const width = Math.max(...rows.map((r) => r.length), 4);
  const lines = [`${'from'.padEnd(width)} | ${columns.join(' | ')}`];
  for (const row of rows) {
    const cells = columns.map((column) => {
      const found = results.find((r) => r.src === row && `${r.dst} ${r.protocol}/${r.port}` === column);
      return (found ? (found.reachable ? '✓' : '✗') : '·').padEnd(column.length);
    });
    lines.push(`${row.padEnd(width)} | ${cells.join(' | ')}`);
  }
  return lines.join('\n');
}
