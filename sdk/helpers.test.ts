// Drives the SDK's selector, CIDR and port helpers through the sdk-helpers
// fixture module (test/fixtures/wasm/sdk-helpers), built with rtrace so the
// matching paths can be shown to allocate nothing.
import { describe, it, expect, beforeAll } from 'vitest';
import { readFileSync, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { encodePodInfo } from '../host/abi/podinfo-codec.js';
import type { PodInfo } from '../host/contract.js';

const wasmPath = fileURLToPath(new URL('../dist/wasm/fixtures/sdk-helpers.wasm', import.meta.url));

interface Helpers {
  memory: WebAssembly.Memory;
  alloc(n: number): number;
  free(p: number): void;
  errorPtr(): number;
  errorLen(): number;
  setSelector(p: number, n: number): number;
  setLabels(p: number, n: number): void;
  selectorMatches(): number;
  selectorMatchLoop(count: number): number;
  setAddress(p: number, n: number): number;
  addressPtr(): number;
  setCIDR(p: number, n: number): number;
  setIPBlock(p: number, n: number): number;
  cidrContains(): number;
  ipBlockContains(): number;
  containsLoop(count: number): number;
  setPort(p: number, n: number): number;
  setPodPorts(p: number, n: number): void;
  portMatches(protocol: number, port: number): number;
  portLoop(count: number, protocol: number, port: number): number;
  decodePod(p: number, n: number): number;
  describePod(): void;
  podLabelsId(which: number): number;
  podPortsAt(): number;
  jsonRoundTrip(p: number, n: number): number;
  jsonParseOnly(p: number, n: number): number;
}

let h: Helpers;
let allocations = 0;
const logLines: { level: number; text: string }[] = [];

function readText(ptr: number, len: number): string {
  return new TextDecoder().decode(new Uint8Array(h.memory.buffer, ptr, len));
}

/** An AssemblyScript string (UTF-16, byte length in the header) at `ptr`. */
function asString(ptr: number): string {
  if (!ptr || !h) return '(no message)';
  const len = new Uint32Array(h.memory.buffer, ptr - 4, 1)[0];
  return String.fromCharCode(...new Uint16Array(h.memory.buffer, ptr, len >>> 1));
}

/** Copies `text` into module memory and calls `fn(ptr, len)`; the module never keeps the buffer. */
function withText<T>(text: string, fn: (p: number, n: number) => T): T {
  const bytes = new TextEncoder().encode(text);
  const p = h.alloc(bytes.length);
  new Uint8Array(h.memory.buffer, p, bytes.length).set(bytes);
  try { return fn(p, bytes.length); } finally { h.free(p); }
}

const lastError = () => readText(h.errorPtr(), h.errorLen());

beforeAll(async () => {
  if (!existsSync(wasmPath)) throw new Error(`${wasmPath} is missing: run "npm run build:wasm" first`);
  const module = await WebAssembly.compile(readFileSync(wasmPath));
  const imports: Record<string, Record<string, WebAssembly.ImportValue>> = {
    env: { abort: (msg: number, file: number, line: number, col: number) => { throw new Error(`abort in sdk-helpers: ${asString(msg)} at ${asString(file)}:${line}:${col}`); } },
    kwp: { log: (level: number, ptr: number, len: number) => { logLines.push({ level, text: readText(ptr, len) }); } },
    rtrace: {},
  };
  for (const imp of WebAssembly.Module.imports(module)) {
    if (imp.module !== 'rtrace') continue;
    imports.rtrace[imp.name] = imp.name === 'onalloc' || imp.name === 'onresize' || imp.name === 'onmove'
      ? () => { allocations++; }
      // rtrace's memory hooks return the address the store/load then uses.
      : imp.name === 'onstore' || imp.name === 'onload' ? (ptr: number) => ptr
      : imp.name === 'onvisit' ? () => 1 : () => {};
  }
  const instance = await WebAssembly.instantiate(module, imports);
  h = instance.exports as unknown as Helpers;
});

const selector = (sel: unknown) => withText(JSON.stringify(sel), (p, n) => h.setSelector(p, n));
const labels = (l: Record<string, string>) => withText(JSON.stringify(l), (p, n) => h.setLabels(p, n));

describe('LabelSelector', () => {
  const cases: { name: string; sel: unknown; labels: Record<string, string>; match: boolean }[] = [
    { name: 'the empty selector matches a pod with labels', sel: {}, labels: { app: 'web' }, match: true },
    { name: 'the empty selector matches a pod without labels', sel: {}, labels: {}, match: true },
    { name: 'matchLabels matches when every pair is present', sel: { matchLabels: { app: 'web', tier: 'fe' } }, labels: { app: 'web', tier: 'fe', x: 'y' }, match: true },
    { name: 'matchLabels fails when one value differs', sel: { matchLabels: { app: 'web', tier: 'fe' } }, labels: { app: 'web', tier: 'be' }, match: false },
    { name: 'matchLabels fails when a key is missing', sel: { matchLabels: { app: 'web' } }, labels: { tier: 'fe' }, match: false },
    { name: 'In matches one of the listed values', sel: { matchExpressions: [{ key: 'ns', operator: 'In', values: ['x', 'y'] }] }, labels: { ns: 'y' }, match: true },
    { name: 'In fails for an unlisted value', sel: { matchExpressions: [{ key: 'ns', operator: 'In', values: ['x', 'y'] }] }, labels: { ns: 'z' }, match: false },
    { name: 'In fails when the key is absent', sel: { matchExpressions: [{ key: 'ns', operator: 'In', values: ['x'] }] }, labels: {}, match: false },
    { name: 'NotIn fails for a listed value', sel: { matchExpressions: [{ key: 'ns', operator: 'NotIn', values: ['x'] }] }, labels: { ns: 'x' }, match: false },
    { name: 'NotIn matches an unlisted value', sel: { matchExpressions: [{ key: 'ns', operator: 'NotIn', values: ['x'] }] }, labels: { ns: 'y' }, match: true },
    { name: 'NotIn matches an object lacking the key', sel: { matchExpressions: [{ key: 'ns', operator: 'NotIn', values: ['x'] }] }, labels: { other: 'x' }, match: true },
    { name: 'Exists matches any value of the key', sel: { matchExpressions: [{ key: 'app', operator: 'Exists' }] }, labels: { app: '' }, match: true },
    { name: 'Exists fails without the key', sel: { matchExpressions: [{ key: 'app', operator: 'Exists' }] }, labels: { ap: 'x' }, match: false },
    { name: 'DoesNotExist matches an object lacking the key', sel: { matchExpressions: [{ key: 'app', operator: 'DoesNotExist' }] }, labels: {}, match: true },
    { name: 'DoesNotExist fails when the key is present', sel: { matchExpressions: [{ key: 'app', operator: 'DoesNotExist' }] }, labels: { app: 'x' }, match: false },
    { name: 'matchLabels and matchExpressions must both hold', sel: { matchLabels: { app: 'web' }, matchExpressions: [{ key: 'tier', operator: 'In', values: ['fe'] }] }, labels: { app: 'web', tier: 'be' }, match: false },
    { name: 'several expressions are ANDed', sel: { matchExpressions: [{ key: 'a', operator: 'Exists' }, { key: 'b', operator: 'DoesNotExist' }] }, labels: { a: '1' }, match: true },
    { name: 'JSON null compiles to the empty selector', sel: null, labels: { any: 'thing' }, match: true },
  ];
  for (const c of cases) {
    it(c.name, () => {
      expect(selector(c.sel)).toBe(1);
      labels(c.labels);
      expect(h.selectorMatches()).toBe(c.match ? 1 : 0);
    });
  }

  const invalid: { name: string; sel: unknown; error: RegExp }[] = [
    { name: 'an unknown operator is refused and named', sel: { matchExpressions: [{ key: 'a', operator: 'Equals', values: ['1'] }] }, error: /operator "Equals" is not one of In, NotIn, Exists, DoesNotExist/ },
    { name: 'In without values is refused', sel: { matchExpressions: [{ key: 'a', operator: 'In', values: [] }] }, error: /needs at least one value/ },
    { name: 'Exists with values is refused', sel: { matchExpressions: [{ key: 'a', operator: 'Exists', values: ['1'] }] }, error: /takes no values/ },
    { name: 'an expression without a key is refused', sel: { matchExpressions: [{ operator: 'Exists' }] }, error: /key is missing/ },
    { name: 'a non-string matchLabels value is refused', sel: { matchLabels: { a: 1 } }, error: /matchLabels.a must be a string/ },
    { name: 'a selector that is not an object is refused', sel: 'app=web', error: /must be an object/ },
  ];
  for (const c of invalid) {
    it(`${c.name}, logged as a warning, and the selector then matches nothing`, () => {
      const before = logLines.length;
      expect(selector(c.sel)).toBe(0);
      expect(lastError()).toMatch(c.error);
      const logged = logLines.slice(before);
      expect(logged).toHaveLength(1);
      expect(logged[0].level).toBe(2);
      expect(logged[0].text).toMatch(/^test selector: .*matches nothing/);
      labels({ a: '1', app: 'web' });
      expect(h.selectorMatches()).toBe(0);
    });
  }

  it('compiling a selector is seen by the allocation counter the no-allocation tests rely on', () => {
    const before = allocations;
    selector({ matchLabels: { app: 'web' } });
    expect(allocations).toBeGreaterThan(before);
  });

  it('matching a selector allocates nothing', () => {
    selector({ matchLabels: { app: 'web' }, matchExpressions: [{ key: 'ns', operator: 'NotIn', values: ['x', 'y'] }, { key: 'tier', operator: 'Exists' }] });
    labels({ app: 'web', tier: 'fe', ns: 'z' });
    const before = allocations;
    expect(h.selectorMatchLoop(10_000)).toBe(10_000);
    expect(allocations - before).toBe(0);
  });
});

const address = (ip: string) => withText(ip, (p, n) => h.setAddress(p, n));
const cidr = (c: string) => withText(c, (p, n) => h.setCIDR(p, n));
const ipBlock = (b: unknown) => withText(JSON.stringify(b), (p, n) => h.setIPBlock(p, n));

describe('parseIP', () => {
  const cases: { text: string; family: number; bytes: number[] }[] = [
    { text: '10.1.2.3', family: 4, bytes: [10, 1, 2, 3] },
    { text: '0.0.0.0', family: 4, bytes: [0, 0, 0, 0] },
    { text: '255.255.255.255', family: 4, bytes: [255, 255, 255, 255] },
    { text: '::', family: 6, bytes: [] },
    { text: '::1', family: 6, bytes: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1] },
    { text: 'fd00:10::7', family: 6, bytes: [0xfd, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7] },
    { text: '2001:db8:0:0:1:0:0:1', family: 6, bytes: [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1] },
    { text: '::ffff:192.0.2.1', family: 6, bytes: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1] },
    { text: 'FD00::ABCD', family: 6, bytes: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xab, 0xcd] },
  ];
  for (const c of cases) {
    it(`reads ${c.text} as IPv${c.family}`, () => {
      expect(address(c.text)).toBe(c.family);
      const expected = new Uint8Array(16);
      expected.set(c.bytes);
      expect([...new Uint8Array(h.memory.buffer, h.addressPtr(), 16)]).toEqual([...expected]);
    });
  }
  for (const bad of ['', '10.0.0', '10.0.0.256', '10.0.0.01', '1.2.3.4.5', 'a.b.c.d', '1::2::3', ':1', '1:', '12345::', '1:2:3:4:5:6:7:8:9', '::1.2.3']) {
    it(`refuses "${bad}" with a message naming it`, () => {
      expect(address(bad)).toBe(0);
      expect(lastError()).toContain(`"${bad}"`);
    });
  }
});

describe('CIDR', () => {
  const cases: { cidr: string; ip: string; inside: boolean }[] = [
    { cidr: '10.0.0.0/8', ip: '10.255.1.2', inside: true },
    { cidr: '10.0.0.0/8', ip: '11.0.0.1', inside: false },
    { cidr: '192.168.1.0/24', ip: '192.168.1.255', inside: true },
    { cidr: '192.168.1.0/24', ip: '192.168.2.0', inside: false },
    { cidr: '192.168.1.128/25', ip: '192.168.1.127', inside: false },
    { cidr: '192.168.1.128/25', ip: '192.168.1.128', inside: true },
    { cidr: '10.1.2.3', ip: '10.1.2.3', inside: true },
    { cidr: '10.1.2.3', ip: '10.1.2.4', inside: false },
    { cidr: '10.1.2.3/8', ip: '10.200.0.1', inside: true },
    { cidr: '0.0.0.0/0', ip: '203.0.113.9', inside: true },
    { cidr: '0.0.0.0/0', ip: '::1', inside: false },
    { cidr: '::/0', ip: '10.0.0.1', inside: false },
    { cidr: '::/0', ip: 'fd00::1', inside: true },
    { cidr: 'fd00::/8', ip: 'fdff:ffff::1', inside: true },
    { cidr: 'fd00::/8', ip: 'fe00::1', inside: false },
    { cidr: '2001:db8::/64', ip: '2001:db8::ffff:ffff:ffff:ffff', inside: true },
    { cidr: '2001:db8::/64', ip: '2001:db8:0:1::', inside: false },
    { cidr: '2001:db8::/127', ip: '2001:db8::1', inside: true },
    { cidr: '2001:db8::/127', ip: '2001:db8::2', inside: false },
    { cidr: '2001:db8::1', ip: '2001:db8::1', inside: true },
    { cidr: '2001:db8::/65', ip: '2001:db8::8000:0:0:0', inside: false },
    { cidr: '2001:db8::/65', ip: '2001:db8::7fff:0:0:0', inside: true },
  ];
  for (const c of cases) {
    it(`${c.cidr} ${c.inside ? 'contains' : 'does not contain'} ${c.ip}`, () => {
      expect(cidr(c.cidr)).toBeGreaterThan(0);
      expect(address(c.ip)).toBeGreaterThan(0);
      expect(h.cidrContains()).toBe(c.inside ? 1 : 0);
    });
  }
  it('a bare address is a /32 for IPv4 and a /128 for IPv6', () => {
    expect(cidr('10.0.0.1') - 1).toBe(32);
    expect(cidr('fd00::1') - 1).toBe(128);
  });
  for (const bad of ['10.0.0.0/33', '10.0.0.0/', '10.0.0.0/08', 'fd00::/129', '10.0.0/8', 'fd00::/x', 'example.com/8']) {
    it(`refuses the CIDR "${bad}" with a message naming it`, () => {
      expect(cidr(bad)).toBe(0);
      expect(lastError()).toContain(`"${bad}"`);
    });
  }
});

describe('IPBlock', () => {
  const block = { cidr: '10.0.0.0/16', except: ['10.0.1.0/24', '10.0.2.7/32'] };
  const cases: { ip: string; inside: boolean }[] = [
    { ip: '10.0.0.1', inside: true },
    { ip: '10.0.1.1', inside: false },
    { ip: '10.0.2.7', inside: false },
    { ip: '10.0.2.8', inside: true },
    { ip: '10.1.0.1', inside: false },
    { ip: 'fd00::1', inside: false },
  ];
  for (const c of cases) {
    it(`10.0.0.0/16 except 10.0.1.0/24 and 10.0.2.7 ${c.inside ? 'contains' : 'does not contain'} ${c.ip}`, () => {
      expect(ipBlock(block)).toBe(1);
      address(c.ip);
      expect(h.ipBlockContains()).toBe(c.inside ? 1 : 0);
    });
  }
  it('an ipBlock whose except has another family is refused', () => {
    expect(ipBlock({ cidr: '10.0.0.0/8', except: ['fd00::/8'] })).toBe(0);
    expect(lastError()).toMatch(/except\[0\].*not the same IP family/);
  });
  it('an ipBlock with a bad cidr is refused naming the field', () => {
    expect(ipBlock({ cidr: '10.0.0.0/40' })).toBe(0);
    expect(lastError()).toMatch(/^ipBlock\.cidr: "10\.0\.0\.0\/40"/);
  });
  it('testing membership allocates nothing', () => {
    cidr('fd00::/8');
    ipBlock({ cidr: 'fd00::/8', except: ['fd00:1::/32'] });
    address('fd00:2::5');
    const before = allocations;
    expect(h.containsLoop(10_000)).toBe(20_000);
    expect(allocations - before).toBe(0);
  });
});

const TCP = 6, UDP = 17, SCTP = 132, ICMP = 1;
const port = (p: unknown) => withText(JSON.stringify(p), (ptr, n) => h.setPort(ptr, n));
const podPorts = (ports: unknown) => withText(JSON.stringify(ports), (p, n) => h.setPodPorts(p, n));

describe('PortMatcher', () => {
  const serving = [
    { name: 'serve-80-tcp', port: 80, protocol: 'TCP' },
    { name: 'serve-80-udp', port: 80, protocol: 'UDP' },
    { name: 'serve-81-tcp', port: 81, protocol: 'TCP' },
    { name: 'dns', port: 53, protocol: 'UDP' },
    { name: 'dns', port: 5353, protocol: 'TCP' },
  ];
  const cases: { name: string; port: unknown; proto: number; dport: number; pod?: unknown; match: boolean }[] = [
    { name: 'a numeric port matches that TCP port', port: { port: 80 }, proto: TCP, dport: 80, match: true },
    { name: 'the protocol defaults to TCP, so UDP to the same port does not match', port: { port: 80 }, proto: UDP, dport: 80, match: false },
    { name: 'a numeric port does not match a neighbour', port: { port: 80 }, proto: TCP, dport: 81, match: false },
    { name: 'an empty entry means every TCP port', port: {}, proto: TCP, dport: 65535, match: true },
    { name: 'an empty entry does not match UDP', port: {}, proto: UDP, dport: 80, match: false },
    { name: 'a protocol without a port matches every port of it', port: { protocol: 'SCTP' }, proto: SCTP, dport: 9, match: true },
    { name: 'a UDP port matches UDP', port: { protocol: 'UDP', port: 53 }, proto: UDP, dport: 53, match: true },
    { name: 'a TCP port never matches ICMP', port: { protocol: 'TCP', port: 80 }, proto: ICMP, dport: 0, match: false },
    { name: 'a range includes its first port', port: { port: 80, endPort: 90 }, proto: TCP, dport: 80, match: true },
    { name: 'a range includes its last port', port: { port: 80, endPort: 90 }, proto: TCP, dport: 90, match: true },
    { name: 'a range excludes the port after it', port: { port: 80, endPort: 90 }, proto: TCP, dport: 91, match: false },
    { name: 'a range excludes the port before it', port: { port: 80, endPort: 90 }, proto: TCP, dport: 79, match: false },
    { name: 'a named port matches the container port of that name', port: { port: 'serve-81-tcp' }, proto: TCP, dport: 81, match: true },
    { name: 'a named port does not match another port of the pod', port: { port: 'serve-81-tcp' }, proto: TCP, dport: 80, match: false },
    { name: 'a named port needs the container port protocol to equal the rule protocol', port: { port: 'serve-80-udp' }, proto: TCP, dport: 80, match: false },
    { name: 'a named UDP port matches with protocol UDP', port: { protocol: 'UDP', port: 'serve-80-udp' }, proto: UDP, dport: 80, match: true },
    { name: 'a name shared by TCP and UDP container ports resolves per protocol (TCP)', port: { port: 'dns' }, proto: TCP, dport: 5353, match: true },
    { name: 'a name shared by TCP and UDP container ports resolves per protocol (UDP)', port: { protocol: 'UDP', port: 'dns' }, proto: UDP, dport: 53, match: true },
    { name: 'a name shared by two TCP container ports matches either port (first)', port: { port: 'web' }, proto: TCP, dport: 8080, pod: [{ name: 'web', port: 8080, protocol: 'TCP' }, { name: 'web', port: 8443, protocol: 'TCP' }], match: true },
    { name: 'a name shared by two TCP container ports matches either port (second)', port: { port: 'web' }, proto: TCP, dport: 8443, pod: [{ name: 'web', port: 8080, protocol: 'TCP' }, { name: 'web', port: 8443, protocol: 'TCP' }], match: true },
    { name: 'a name the pod does not expose matches nothing', port: { port: 'metrics' }, proto: TCP, dport: 80, match: false },
    { name: 'a named port never matches when the destination is not a known pod', port: { port: 'serve-80-tcp' }, proto: TCP, dport: 80, pod: null, match: false },
  ];
  for (const c of cases) {
    it(c.name, () => {
      expect(port(c.port)).toBe(1);
      podPorts(c.pod === undefined ? serving : c.pod);
      expect(h.portMatches(c.proto, c.dport)).toBe(c.match ? 1 : 0);
    });
  }
  const invalid: { name: string; port: unknown; error: RegExp }[] = [
    { name: 'an unknown protocol', port: { protocol: 'ICMP', port: 1 }, error: /protocol must be TCP, UDP or SCTP/ },
    { name: 'endPort with a named port', port: { port: 'http', endPort: 90 }, error: /endPort cannot be used with the named port "http"/ },
    { name: 'endPort without a port', port: { endPort: 90 }, error: /endPort needs a numeric port/ },
    { name: 'endPort below port', port: { port: 90, endPort: 80 }, error: /endPort must be a number from port \(90\)/ },
    { name: 'port 0', port: { port: 0 }, error: /port must be a number 1-65535/ },
    { name: 'port 65536', port: { port: 65536 }, error: /port must be a number 1-65535/ },
  ];
  for (const c of invalid) {
    it(`refuses ${c.name} with a message saying what is wrong`, () => {
      expect(port(c.port)).toBe(0);
      expect(lastError()).toMatch(c.error);
    });
  }
  it('matching numeric and named ports allocates nothing', () => {
    podPorts(serving);
    port({ port: 'serve-81-tcp' });
    let before = allocations;
    expect(h.portLoop(10_000, TCP, 81)).toBe(10_000);
    expect(allocations - before).toBe(0);
    port({ port: 80, endPort: 90 });
    before = allocations;
    expect(h.portLoop(10_000, TCP, 85)).toBe(10_000);
    expect(allocations - before).toBe(0);
  });
});

/** Copies `bytes` into module memory and calls `fn(ptr, len)`. */
function withBytes<T>(bytes: Uint8Array, fn: (p: number, n: number) => T): T {
  const p = h.alloc(bytes.length);
  new Uint8Array(h.memory.buffer, p, bytes.length).set(bytes);
  try { return fn(p, bytes.length); } finally { h.free(p); }
}

describe('decodePodInfo', () => {
  const podOf = (id: number, over: Partial<PodInfo> = {}): PodInfo => ({
    id, name: `pod-${id}`, namespace: 'shop', podLabels: { app: 'cart', tier: 'api' }, namespaceLabels: { team: 'red', 'kubernetes.io/metadata.name': 'shop' },
    nodeName: 'node-1', nodeLabels: { zone: 'a' }, clusterId: '', containerPorts: [{ name: 'http', port: 8080, protocol: 6 }, { name: 'dns', port: 53, protocol: 17 }],
    hostNetwork: false, ips: [`10.0.0.${id}`], ...over,
  });
  const decode = (pod: PodInfo) => withBytes(encodePodInfo(pod).slice(), (p, n) => h.decodePod(p, n));
  const described = () => { h.describePod(); return lastError(); };
  const ids = () => [h.podLabelsId(0), h.podLabelsId(1), h.podLabelsId(2), h.podPortsAt()];

  it('decodes every field of a record', () => {
    expect(decode(podOf(1))).toBe(1);
    expect(described()).toBe('pod-1|shop|node-1||app=cart,tier=api|team=red,kubernetes.io/metadata.name=shop|zone=a|http:8080/6,dns:53/17|4:10.0.0.1');
  });

  it('keeps every address of a pod in the order sent, one, none or several of either family', () => {
    const v6 = '2001:db8::7';
    const v6Bytes = '32.1.13.184.0.0.0.0.0.0.0.0.0.0.0.7';
    decode(podOf(11, { ips: [] }));
    expect(described()).toMatch(/\|$/);
    decode(podOf(12, { ips: [v6] }));
    expect(described().split('|').pop()).toBe(`6:${v6Bytes}`);
    decode(podOf(13, { ips: ['10.0.0.13', v6] }));
    expect(described().split('|').pop()).toBe(`4:10.0.0.13,6:${v6Bytes}`);
    decode(podOf(14, { ips: [v6, '10.0.0.14', '10.0.1.14'] }));
    expect(described().split('|').pop()).toBe(`6:${v6Bytes},4:10.0.0.14,4:10.0.1.14`);
  });

  it('gives a pod whose label sets and ports another pod sent in the same bytes that pod\'s copies, without decoding them again', () => {
    decode(podOf(2));
    const first = ids();
    const before = allocations;
    decode(podOf(3));
    // The record's buffer (the host's alloc call) and the pod's own parts only: its PodInfo and its name; its one
    // address is kept in the PodInfo. Decoding the sections again was 64 allocations (their strings, the keys built
    // to share them); a reader per record, the defaults PodInfo started with and an address list made it 10.
    expect(allocations - before).toBe(3);
    expect(ids()).toEqual(first);
    expect(described()).toBe('pod-3|shop|node-1||app=cart,tier=api|team=red,kubernetes.io/metadata.name=shop|zone=a|http:8080/6,dns:53/17|4:10.0.0.3');
  });

  it('shares equal namespace labels between namespaces, and decodes a section whose bytes differ anew', () => {
    decode(podOf(4));
    const [labels, nsLabels, nodeLabels, ports] = ids();
    decode(podOf(5, { namespace: 'shop2' }));
    expect(ids()).toEqual([labels, nsLabels, nodeLabels, ports]);
    decode(podOf(6, { namespaceLabels: { team: 'blue' }, podLabels: { app: 'cart', tier: 'db' }, containerPorts: [{ name: 'http', port: 8081, protocol: 6 }] }));
    const changed = ids();
    expect(changed[0]).not.toBe(labels);
    expect(changed[1]).not.toBe(nsLabels);
    expect(changed[2]).toBe(nodeLabels);
    expect(changed[3]).not.toBe(ports);
    expect(described()).toBe('pod-6|shop|node-1||app=cart,tier=db|team=blue|zone=a|http:8081/6|4:10.0.0.6');
  });

  it('refuses a truncated record, also when the sections it has were seen before', () => {
    const record = encodePodInfo(podOf(7)).slice();
    for (const cut of [3, 20, record.length - 17, record.length - 1]) expect(withBytes(record.subarray(0, cut), (p, n) => h.decodePod(p, n)), `cut at ${cut}`).toBe(0);
    expect(withBytes(record, (p, n) => h.decodePod(p, n))).toBe(1);
  });
});

describe('the JSON reader', () => {
  const roundTrip = (text: string) => withText(text, (p, n) => (h.jsonRoundTrip(p, n) ? readText(h.errorPtr(), h.errorLen()) : undefined));

  it('reads every string as written, whether it is short and repeated, long, escaped or not ASCII, and whatever its neighbours in the string table', () => {
    // More distinct short strings than the table has slots, so slots are taken over by others, then read again.
    const many = Array.from({ length: 3000 }, (_, i) => `k${i}`);
    const doc = {
      apiVersion: 'networking.k8s.io/v1',
      items: [...many, ...many].map((k, i) => ({ [k]: `v${i % 97}`, name: k, long: 'x'.repeat(40 + (i % 20)), e: i % 3 ? 'a"b\\c\n' : 'tab\there', u: i % 5 ? 'naïve' : 'ü', empty: '' })),
      // The same bytes as a short key, with one byte changed, and as a prefix.
      near: { k1: 'k1', k2: 'k1x', K1: 'k' },
    };
    const text = JSON.stringify(doc);
    // Compared as values (the module writes its own escapes), without printing the whole document on a failure.
    const same = (back: string | undefined) => back !== undefined && JSON.stringify(JSON.parse(back)) === text;
    expect(same(roundTrip(text))).toBe(true);
    // Twice: the second parse reads strings the table holds.
    expect(same(roundTrip(text))).toBe(true);
    expect(JSON.parse(roundTrip('{"a":"\\u00e9\\"","b":["a","\\u0061"]}')!)).toEqual({ a: 'é"', b: ['a', 'a'] });
  });

  it('does not allocate a short ASCII string it has read before', () => {
    // Keys and values no other test uses, so the first parse is the first time the module reads them.
    const policy = JSON.stringify({ 'zq-metadata': { 'zq-name': 'zq-p', 'zq-labels': { 'zq-app': 'zq-web' } }, 'zq-spec': { 'zq-types': ['zq-In', 'zq-Eg'], 'zq-ports': [{ 'zq-protocol': 'zq-TCP', 'zq-port': 80 }] }, 'zq-long': 'zq-'.repeat(20) });
    const parse = () => withText(policy, (p, n) => {
      const before = allocations;
      expect(h.jsonParseOnly(p, n)).toBe(1);
      return allocations - before;
    });
    const first = parse();
    const again = parse();
    // 16 strings: 15 short ASCII ones (10 keys, 5 values), each allocated the first time only, and one of
    // 60 bytes, longer than the table keeps, allocated both times.
    const strings = (policy.match(/"(?:[^"\\]|\\.)*"/g) ?? []).length;
    expect(strings).toBe(16);
    expect(first - again).toBe(15);
  });
});
