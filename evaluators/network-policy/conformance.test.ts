// NetworkPolicy conformance through the real pipeline (host/eval.ts): the
// sig-network netpol e2e scenarios (namespaces x/y/z, pods a/b/c, ports 80/81
// over TCP/UDP/SCTP) and cyclonus-style corner cases, each with its expected
// reachability grid, written from the upstream API semantics.
import { describe, it, expect } from 'vitest';
import type { KubeObject } from '../../host/contract.js';
import { evaluateFlows } from '../../host/eval.js';
import {
  ALL_PODS, xyzCluster, networkPolicy, podLabel, nsLabel, all, pod, namespace, podIP, podIPv6,
  type ProtocolName, type PolicySpec,
} from '../../test/netpol/cluster.js';
import { Reachability } from '../../test/netpol/truth-table.js';

interface Probe { protocol: ProtocolName; port: number; expect: Reachability }
interface TableCase { name: string; policies: KubeObject[]; probes: Probe[] }

/** Everything allowed, then carve out what the case denies. */
const open = () => new Reachability(ALL_PODS, true);
const np = (ns: string, name: string, spec: PolicySpec) => networkPolicy(ns, name, spec);
const tcp80 = (expect: Reachability): Probe => ({ protocol: 'TCP', port: 80, expect });
const tcp81 = (expect: Reachability): Probe => ({ protocol: 'TCP', port: 81, expect });
const udp80 = (expect: Reachability): Probe => ({ protocol: 'UDP', port: 80, expect });
const udp81 = (expect: Reachability): Probe => ({ protocol: 'UDP', port: 81, expect });
const sctp80 = (expect: Reachability): Probe => ({ protocol: 'SCTP', port: 80, expect });
const sctp81 = (expect: Reachability): Probe => ({ protocol: 'SCTP', port: 81, expect });
/** The same expectation for every protocol on port 80 and 81. */
const everyProtocol = (expect: () => Reachability): Probe[] =>
  (['TCP', 'UDP', 'SCTP'] as const).flatMap((protocol) => [80, 81].map((port) => ({ protocol, port, expect: expect() })));

async function measure(objects: KubeObject[], protocol: ProtocolName, port: number): Promise<Reachability> {
  const actual = new Reachability(ALL_PODS, false);
  const pairs = actual.pairs();
  const results = await evaluateFlows({ objects, flows: pairs.map(([src, dst]) => ({ src, dst, protocol, port })) });
  results.forEach((r, i) => actual.set(pairs[i][0], pairs[i][1], r.verdict === 'allow'));
  return actual;
}

async function check(c: TableCase, cluster: KubeObject[] = xyzCluster()): Promise<void> {
  for (const probe of c.probes) {
    const actual = await measure([...cluster, ...c.policies], probe.protocol, probe.port);
    expect(`${probe.protocol}/${probe.port}\n${actual.render()}`).toBe(`${probe.protocol}/${probe.port}\n${probe.expect.render()}`);
  }
}

const defaultDeny: TableCase[] = [
  {
    name: 'a default-deny-ingress policy isolates every pod of its namespace for ingress',
    policies: [np('x', 'deny-ingress', { podSelector: all, policyTypes: ['Ingress'] })],
    probes: everyProtocol(() => open().expectIngress({ ns: 'x' }, false)),
  },
  {
    name: 'a policy with no ingress rules and no policyTypes denies all ingress',
    policies: [np('x', 'deny-ingress', { podSelector: all })],
    probes: [tcp80(open().expectIngress({ ns: 'x' }, false))],
  },
  {
    name: 'an empty ingress list denies all ingress',
    policies: [np('x', 'deny-ingress', { podSelector: all, ingress: [] })],
    probes: [tcp81(open().expectIngress({ ns: 'x' }, false))],
  },
  {
    name: 'a default-deny-all policy isolates its namespace in both directions',
    policies: [np('x', 'deny-all', { podSelector: all, policyTypes: ['Ingress', 'Egress'] })],
    probes: everyProtocol(() => open().expectIngress({ ns: 'x' }, false).expectEgress({ ns: 'x' }, false)),
  },
  {
    name: 'an ingress rule {} allows everything even next to a default-deny policy',
    policies: [
      np('x', 'deny-ingress', { podSelector: all, policyTypes: ['Ingress'] }),
      np('x', 'allow-all', { podSelector: all, ingress: [{}] }),
    ],
    probes: [tcp80(open()), udp81(open())],
  },
  {
    name: 'a default-deny-egress policy isolates every pod of its namespace for egress',
    policies: [np('x', 'deny-egress', { podSelector: all, policyTypes: ['Egress'] })],
    probes: [tcp80(open().expectEgress({ ns: 'x' }, false)), sctp81(open().expectEgress({ ns: 'x' }, false))],
  },
  {
    name: 'an egress rule {} allows everything even next to a default-deny-egress policy',
    policies: [
      np('x', 'deny-egress', { podSelector: all, policyTypes: ['Egress'] }),
      np('x', 'allow-egress', { podSelector: all, policyTypes: ['Egress'], egress: [{}] }),
    ],
    probes: [tcp80(open())],
  },
  {
    name: 'a policy only isolates pods of its own namespace',
    policies: [np('y', 'deny-a', { podSelector: podLabel('a'), policyTypes: ['Ingress'] })],
    probes: [tcp80(open().expectIngress('y/a', false))],
  },
];

const peers: TableCase[] = [
  {
    name: 'a podSelector {} peer allows the whole namespace of the policy and nothing else',
    policies: [np('x', 'allow-same-ns', { podSelector: all, ingress: [{ from: [{ podSelector: all }] }] })],
    probes: everyProtocol(() => open().expectIngress({ ns: 'x' }, false).expect({ ns: 'x' }, { ns: 'x' }, true)),
  },
  {
    name: 'a namespaceSelector peer allows every pod of the matching namespaces',
    policies: [np('x', 'allow-y', { podSelector: podLabel('a'), ingress: [{ from: [{ namespaceSelector: nsLabel('y') }] }] })],
    probes: [tcp80(open().expectIngress('x/a', false).expect({ ns: 'y' }, 'x/a', true))],
  },
  {
    name: 'a namespaceSelector {} peer allows every pod of every namespace',
    policies: [np('x', 'allow-all-ns', { podSelector: podLabel('a'), ingress: [{ from: [{ namespaceSelector: all }] }] })],
    probes: [tcp80(open())],
  },
  {
    name: 'a namespaceSelector on kubernetes.io/metadata.name selects that namespace',
    policies: [np('x', 'allow-z', { podSelector: podLabel('a'), ingress: [{ from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'z' } } }] }] })],
    probes: [tcp80(open().expectIngress('x/a', false).expect({ ns: 'z' }, 'x/a', true))],
  },
  {
    name: 'a namespaceSelector NotIn expression allows the other namespaces',
    policies: [np('x', 'not-y', {
      podSelector: podLabel('a'),
      ingress: [{ from: [{ namespaceSelector: { matchExpressions: [{ key: 'ns', operator: 'NotIn', values: ['y'] }] } }] }],
    })],
    probes: [tcp81(open().expect({ ns: 'y' }, 'x/a', false))],
  },
  {
    name: 'a podSelector In expression allows only the listed pods of the namespace',
    policies: [np('x', 'from-b', {
      podSelector: podLabel('a'),
      ingress: [{ from: [{ podSelector: { matchExpressions: [{ key: 'pod', operator: 'In', values: ['b'] }] } }] }],
    })],
    probes: [tcp80(open().expectIngress('x/a', false).expect('x/b', 'x/a', true))],
  },
  {
    name: 'a podSelector-only peer means pods of the policy namespace, not of every namespace',
    policies: [np('x', 'from-b', { podSelector: podLabel('a'), ingress: [{ from: [{ podSelector: podLabel('b') }] }] })],
    probes: [tcp80(open().expectIngress('x/a', false).expect('x/b', 'x/a', true))],
  },
  {
    name: 'namespaceSelector {} with a podSelector allows that pod in every namespace',
    policies: [np('x', 'from-any-b', { podSelector: podLabel('a'), ingress: [{ from: [{ namespaceSelector: all, podSelector: podLabel('b') }] }] })],
    probes: [tcp80(open().expectIngress('x/a', false).expect({ pod: 'b' }, 'x/a', true))],
  },
  {
    name: 'namespaceSelector and podSelector in one peer are ANDed',
    policies: [np('x', 'from-y-b', { podSelector: podLabel('a'), ingress: [{ from: [{ namespaceSelector: nsLabel('y'), podSelector: podLabel('b') }] }] })],
    probes: [tcp80(open().expectIngress('x/a', false).expect('y/b', 'x/a', true)), udp80(open().expectIngress('x/a', false).expect('y/b', 'x/a', true))],
  },
  {
    name: 'namespaceSelector and podSelector in separate peers are ORed',
    policies: [np('x', 'from-y-or-b', { podSelector: podLabel('a'), ingress: [{ from: [{ namespaceSelector: nsLabel('y') }, { podSelector: podLabel('b') }] }] })],
    probes: [tcp80(open().expectIngress('x/a', false).expect({ ns: 'y' }, 'x/a', true).expect('x/b', 'x/a', true))],
  },
  {
    name: 'expressions in namespace and pod selectors combine (namespace NotIn x, pod In b or c)',
    policies: [np('x', 'exprs', {
      podSelector: podLabel('a'),
      ingress: [{ from: [{
        namespaceSelector: { matchExpressions: [{ key: 'ns', operator: 'NotIn', values: ['x'] }] },
        podSelector: { matchExpressions: [{ key: 'pod', operator: 'In', values: ['b', 'c'] }] },
      }] }],
    })],
    probes: [tcp80(open().expectIngress('x/a', false).expect({ ns: 'y', pod: 'b' }, 'x/a', true).expect({ ns: 'y', pod: 'c' }, 'x/a', true)
      .expect({ ns: 'z', pod: 'b' }, 'x/a', true).expect({ ns: 'z', pod: 'c' }, 'x/a', true))],
  },
  {
    name: 'a selector with DoesNotExist on a key every namespace has selects nothing',
    policies: [np('x', 'none', { podSelector: podLabel('a'), ingress: [{ from: [{ namespaceSelector: { matchExpressions: [{ key: 'ns', operator: 'DoesNotExist' }] } }] }] })],
    probes: [tcp80(open().expectIngress('x/a', false))],
  },
  {
    name: 'policies selecting the same pod union their allowed peers',
    policies: [
      np('x', 'from-x-b', { podSelector: podLabel('a'), ingress: [{ from: [{ podSelector: podLabel('b') }] }] }),
      np('x', 'from-z-c', { podSelector: podLabel('a'), ingress: [{ from: [{ namespaceSelector: nsLabel('z'), podSelector: podLabel('c') }] }] }),
    ],
    probes: [tcp80(open().expectIngress('x/a', false).expect('x/b', 'x/a', true).expect('z/c', 'x/a', true))],
  },
  {
    name: 'an empty from list matches every source (cyclonus)',
    policies: [np('x', 'empty-from', { podSelector: podLabel('a'), ingress: [{ from: [], ports: [{ port: 80 }] }] })],
    probes: [tcp80(open()), tcp81(open().expectIngress('x/a', false))],
  },
  {
    name: 'a podSelector matching no pod isolates nobody',
    policies: [np('x', 'nobody', { podSelector: podLabel('nope'), policyTypes: ['Ingress', 'Egress'] })],
    probes: [tcp80(open())],
  },
];

const cyclonus: TableCase[] = [
  {
    name: 'a podSelector {} peer in a policy of y means the pods of y, wherever the policy applies',
    policies: [np('y', 'from-own-ns', { podSelector: all, ingress: [{ from: [{ podSelector: all }] }] })],
    probes: [tcp80(open().expectIngress({ ns: 'y' }, false).expect({ ns: 'y' }, { ns: 'y' }, true))],
  },
  {
    name: 'policies of the same name in two namespaces are independent',
    policies: [
      np('x', 'same', { podSelector: podLabel('a'), policyTypes: ['Ingress'] }),
      np('y', 'same', { podSelector: podLabel('b'), ingress: [{ from: [{ namespaceSelector: nsLabel('x') }] }] }),
    ],
    probes: [tcp80(open().expectIngress('x/a', false).expectIngress('y/b', false).expect({ ns: 'x' }, 'y/b', true))],
  },
  {
    name: 'a namespaceSelector with Exists on a key only some namespaces carry',
    policies: [np('x', 'labelled-ns', { podSelector: all, ingress: [{ from: [{ namespaceSelector: { matchExpressions: [{ key: 'ns', operator: 'Exists' }, { key: 'ns', operator: 'NotIn', values: ['z'] }] } }] }] })],
    probes: [udp80(open().expect({ ns: 'z' }, { ns: 'x' }, false))],
  },
  {
    name: 'allow-all egress and deny-all ingress in one namespace isolate only ingress',
    policies: [
      np('x', 'allow-egress', { podSelector: all, policyTypes: ['Egress'], egress: [{}] }),
      np('x', 'deny-ingress', { podSelector: all, policyTypes: ['Ingress'] }),
    ],
    probes: [tcp80(open().expectIngress({ ns: 'x' }, false))],
  },
  {
    name: 'an egress rule to pods of z on a named port denies the other port and other namespaces',
    policies: [np('y', 'to-z-named', { podSelector: podLabel('c'), policyTypes: ['Egress'], egress: [{ to: [{ namespaceSelector: nsLabel('z') }], ports: [{ port: 'serve-80-tcp' }] }] })],
    probes: [tcp80(open().expectEgress('y/c', false).expect('y/c', { ns: 'z' }, true)), tcp81(open().expectEgress('y/c', false))],
  },
  {
    name: 'an ingress and an egress policy on the same pod each judge only their direction',
    policies: [np('z', 'both', {
      podSelector: podLabel('b'), policyTypes: ['Ingress', 'Egress'],
      ingress: [{ from: [{ namespaceSelector: nsLabel('x') }] }],
      egress: [{ to: [{ namespaceSelector: nsLabel('y') }] }],
    })],
    probes: [tcp80(open().expectIngress('z/b', false).expect({ ns: 'x' }, 'z/b', true).expectEgress('z/b', false).expect('z/b', { ns: 'y' }, true))],
  },
  {
    name: 'a policy that selects every pod with a rule for one port leaves the other port closed in both protocols',
    policies: [np('x', 'only-81-udp', { podSelector: all, ingress: [{ ports: [{ protocol: 'UDP', port: 81 }] }] })],
    probes: [udp81(open()), udp80(open().expectIngress({ ns: 'x' }, false)), tcp81(open().expectIngress({ ns: 'x' }, false))],
  },
];

const ports: TableCase[] = [
  {
    name: 'a numeric port allows TCP to that port only',
    policies: [np('x', 'port-80', { podSelector: podLabel('a'), ingress: [{ ports: [{ port: 80 }] }] })],
    probes: [tcp80(open()), tcp81(open().expectIngress('x/a', false)), udp80(open().expectIngress('x/a', false)), sctp80(open().expectIngress('x/a', false))],
  },
  {
    name: 'a port entry {} means every TCP port and no other protocol',
    policies: [np('x', 'any-tcp', { podSelector: podLabel('a'), ingress: [{ ports: [{}] }] })],
    probes: [tcp80(open()), tcp81(open()), udp81(open().expectIngress('x/a', false)), sctp80(open().expectIngress('x/a', false))],
  },
  {
    name: 'a protocol without a port allows every port of that protocol',
    policies: [np('x', 'any-udp', { podSelector: podLabel('a'), ingress: [{ ports: [{ protocol: 'UDP' }] }] })],
    probes: [udp80(open()), udp81(open()), tcp80(open().expectIngress('x/a', false))],
  },
  {
    name: 'a UDP port allows UDP to it and not TCP',
    policies: [np('x', 'udp-81', { podSelector: podLabel('a'), ingress: [{ ports: [{ protocol: 'UDP', port: 81 }] }] })],
    probes: [udp81(open()), udp80(open().expectIngress('x/a', false)), tcp81(open().expectIngress('x/a', false))],
  },
  {
    name: 'an SCTP port allows SCTP to it and nothing else',
    policies: [np('x', 'sctp-80', { podSelector: podLabel('a'), ingress: [{ ports: [{ protocol: 'SCTP', port: 80 }] }] })],
    probes: [sctp80(open()), sctp81(open().expectIngress('x/a', false)), tcp80(open().expectIngress('x/a', false)), udp80(open().expectIngress('x/a', false))],
  },
  {
    name: 'a named port resolves to the destination container port of that name',
    policies: [np('x', 'named-81', { podSelector: podLabel('a'), ingress: [{ ports: [{ port: 'serve-81-tcp' }] }] })],
    probes: [tcp81(open()), tcp80(open().expectIngress('x/a', false)), udp81(open().expectIngress('x/a', false))],
  },
  {
    name: 'a named UDP port resolves with protocol UDP',
    policies: [np('x', 'named-udp-80', { podSelector: podLabel('a'), ingress: [{ ports: [{ protocol: 'UDP', port: 'serve-80-udp' }] }] })],
    probes: [udp80(open()), udp81(open().expectIngress('x/a', false)), tcp80(open().expectIngress('x/a', false))],
  },
  {
    name: 'a named port whose container port has another protocol matches nothing',
    policies: [np('x', 'named-mismatch', { podSelector: podLabel('a'), ingress: [{ ports: [{ protocol: 'UDP', port: 'serve-80-tcp' }] }] })],
    probes: [tcp80(open().expectIngress('x/a', false)), udp80(open().expectIngress('x/a', false))],
  },
  {
    name: 'a named port the destination does not expose matches nothing',
    policies: [np('x', 'named-missing', { podSelector: podLabel('a'), ingress: [{ ports: [{ port: 'serve-82-tcp' }] }] })],
    probes: [tcp80(open().expectIngress('x/a', false))],
  },
  {
    name: 'endPort makes an inclusive range (80-81)',
    policies: [np('x', 'range', { podSelector: podLabel('a'), ingress: [{ ports: [{ port: 80, endPort: 81 }] }] })],
    probes: [tcp80(open()), tcp81(open()), udp80(open().expectIngress('x/a', false))],
  },
  {
    name: 'a range starting above a port excludes it (81-82)',
    policies: [np('x', 'range', { podSelector: podLabel('a'), ingress: [{ ports: [{ port: 81, endPort: 82 }] }] })],
    probes: [tcp80(open().expectIngress('x/a', false)), tcp81(open())],
  },
  {
    name: 'peers and ports of one rule are ANDed',
    policies: [np('x', 'y-on-80', { podSelector: podLabel('a'), ingress: [{ from: [{ namespaceSelector: nsLabel('y') }], ports: [{ port: 80 }] }] })],
    probes: [tcp80(open().expectIngress('x/a', false).expect({ ns: 'y' }, 'x/a', true)), tcp81(open().expectIngress('x/a', false))],
  },
  {
    name: 'separate rules of one policy are ORed',
    policies: [np('x', 'two-rules', { podSelector: podLabel('a'), ingress: [{ from: [{ namespaceSelector: nsLabel('y') }] }, { ports: [{ port: 81 }] }] })],
    probes: [tcp80(open().expectIngress('x/a', false).expect({ ns: 'y' }, 'x/a', true)), tcp81(open())],
  },
  {
    name: 'several port entries of one rule are ORed',
    policies: [np('x', 'two-ports', { podSelector: podLabel('a'), ingress: [{ ports: [{ protocol: 'UDP', port: 80 }, { protocol: 'SCTP', port: 81 }] }] })],
    probes: [udp80(open()), sctp81(open()), tcp80(open().expectIngress('x/a', false)), udp81(open().expectIngress('x/a', false))],
  },
];

const ipBlocks: TableCase[] = [
  {
    name: 'an ingress ipBlock matches pods by their address',
    policies: [np('x', 'from-y-cidr', { podSelector: podLabel('a'), ingress: [{ from: [{ ipBlock: { cidr: '10.0.2.0/24' } }] }] })],
    probes: [tcp80(open().expectIngress('x/a', false).expect({ ns: 'y' }, 'x/a', true))],
  },
  {
    name: 'an ingress ipBlock except carves addresses out of the cidr',
    policies: [np('x', 'cidr-except', { podSelector: podLabel('a'), ingress: [{ from: [{ ipBlock: { cidr: '10.0.0.0/16', except: ['10.0.2.0/24', `${podIP('z/c')}/32`] } }] }] })],
    probes: [tcp80(open().expect({ ns: 'y' }, 'x/a', false).expect('z/c', 'x/a', false))],
  },
  {
    name: 'an egress ipBlock with except allows only the remaining addresses',
    policies: [np('x', 'to-z-but-c', { podSelector: podLabel('a'), policyTypes: ['Egress'], egress: [{ to: [{ ipBlock: { cidr: '10.0.3.0/24', except: ['10.0.3.3/32'] } }] }] })],
    probes: [tcp80(open().expectEgress('x/a', false).expect('x/a', 'z/a', true).expect('x/a', 'z/b', true))],
  },
  {
    name: 'an ipBlock and a pod selector in separate peers are ORed',
    policies: [np('x', 'cidr-or-pod', { podSelector: podLabel('a'), ingress: [{ from: [{ ipBlock: { cidr: `${podIP('z/c')}/32` } }, { podSelector: podLabel('b') }] }] })],
    probes: [tcp80(open().expectIngress('x/a', false).expect('z/c', 'x/a', true).expect('x/b', 'x/a', true))],
  },
];

const egress: TableCase[] = [
  {
    name: 'an egress policy with no rules denies all egress of the selected pod',
    policies: [np('x', 'deny-a-egress', { podSelector: podLabel('a'), policyTypes: ['Egress'] })],
    probes: everyProtocol(() => open().expectEgress('x/a', false)),
  },
  {
    name: 'egress to a namespace by label allows only that namespace',
    policies: [np('x', 'to-y', { podSelector: podLabel('a'), policyTypes: ['Egress'], egress: [{ to: [{ namespaceSelector: nsLabel('y') }] }] })],
    probes: [tcp80(open().expectEgress('x/a', false).expect('x/a', { ns: 'y' }, true)), sctp81(open().expectEgress('x/a', false).expect('x/a', { ns: 'y' }, true))],
  },
  {
    name: 'egress on one port allows only that port',
    policies: [np('x', 'to-80', { podSelector: podLabel('a'), policyTypes: ['Egress'], egress: [{ ports: [{ port: 80 }] }] })],
    probes: [tcp80(open()), tcp81(open().expectEgress('x/a', false)), udp80(open().expectEgress('x/a', false))],
  },
  {
    name: 'an egress named port resolves on the destination pod',
    policies: [np('x', 'to-named', { podSelector: podLabel('a'), policyTypes: ['Egress'], egress: [{ ports: [{ protocol: 'UDP', port: 'serve-81-udp' }] }] })],
    probes: [udp81(open()), udp80(open().expectEgress('x/a', false)), tcp81(open().expectEgress('x/a', false))],
  },
  {
    name: 'egress and ingress policies combine: both ends must allow',
    policies: [
      np('x', 'a-from-b', { podSelector: podLabel('a'), ingress: [{ from: [{ podSelector: podLabel('b') }] }] }),
      np('x', 'b-to-y', { podSelector: podLabel('b'), policyTypes: ['Egress'], egress: [{ to: [{ namespaceSelector: nsLabel('y') }] }] }),
    ],
    // x/b may only talk to y, so its traffic to x/a is denied at egress although x/a's ingress allows it.
    probes: [tcp80(open().expectIngress('x/a', false).expectEgress('x/b', false).expect('x/b', { ns: 'y' }, true))],
  },
];

const policyTypes: TableCase[] = [
  {
    name: 'policyTypes [Egress] ignores ingress rules, even an empty list',
    policies: [np('x', 'egress-only', { podSelector: all, policyTypes: ['Egress'], ingress: [], egress: [{}] })],
    probes: [tcp80(open())],
  },
  {
    name: 'policyTypes [Ingress] ignores egress rules',
    policies: [np('x', 'ingress-only', { podSelector: podLabel('a'), policyTypes: ['Ingress'], ingress: [{}], egress: [] })],
    probes: [tcp80(open())],
  },
  {
    name: 'without policyTypes, egress rules make the policy isolate egress as well as ingress',
    policies: [np('x', 'defaulted', { podSelector: podLabel('a'), egress: [{ to: [{ namespaceSelector: nsLabel('z') }] }] })],
    probes: [tcp80(open().expectIngress('x/a', false).expectEgress('x/a', false).expect('x/a', { ns: 'z' }, true))],
  },
  {
    name: 'without policyTypes, an empty egress list leaves egress open',
    policies: [np('x', 'defaulted', { podSelector: podLabel('a'), egress: [] })],
    probes: [tcp80(open().expectIngress('x/a', false))],
  },
];

describe('NetworkPolicy conformance (netpol e2e truth tables through the pipeline)', () => {
  for (const [group, cases] of [['default deny', defaultDeny], ['peers', peers], ['ports', ports], ['ipBlock', ipBlocks], ['egress', egress], ['policyTypes', policyTypes], ['cyclonus corner cases', cyclonus]] as const) {
    describe(group, () => {
      for (const c of cases) it(c.name, () => check(c));
    });
  }
});

describe('NetworkPolicy conformance beyond the pod grid', () => {
  it('the truth table notation reads back what it renders', () => {
    const r = open().expectIngress('x/a', false).expect('y/b', 'x/a', true);
    expect(Reachability.fromGrid(r.render()).render()).toBe(r.render());
    const grid = Reachability.fromGrid(`
         x/a x/b
      x/a  -   X
      x/b  .   -`);
    expect(grid.get('x/a', 'x/b')).toBe(false);
    expect(grid.get('x/b', 'x/a')).toBe(true);
  });

  it('a written-out grid matches the pipeline: allow from namespace y to every pod of x', async () => {
    const policies = [np('x', 'from-y', { podSelector: all, ingress: [{ from: [{ namespaceSelector: nsLabel('y') }] }] })];
    const expected = Reachability.fromGrid(`
          x/a x/b x/c y/a y/b y/c z/a z/b z/c
      x/a  -   X   X   .   .   .   .   .   .
      x/b  X   -   X   .   .   .   .   .   .
      x/c  X   X   -   .   .   .   .   .   .
      y/a  .   .   .   -   .   .   .   .   .
      y/b  .   .   .   .   -   .   .   .   .
      y/c  .   .   .   .   .   -   .   .   .
      z/a  X   X   X   .   .   .   -   .   .
      z/b  X   X   X   .   .   .   .   -   .
      z/c  X   X   X   .   .   .   .   .   -`);
    await check({ name: 'grid', policies, probes: [tcp80(expected)] });
  });

  it('an ingress ipBlock admits clients outside the cluster by address and refuses the rest', async () => {
    const objects = [...xyzCluster(), np('x', 'from-docs', { podSelector: podLabel('a'), ingress: [{ from: [{ ipBlock: { cidr: '192.0.2.0/24', except: ['192.0.2.128/25'] } }] }] })];
    const results = await evaluateFlows({
      objects,
      flows: [
        { src: '192.0.2.7', dst: 'x/a', protocol: 'TCP', port: 80 },
        { src: '192.0.2.200', dst: 'x/a', protocol: 'TCP', port: 80 },
        { src: '198.51.100.1', dst: 'x/a', protocol: 'TCP', port: 80 },
        { src: '198.51.100.1', dst: 'x/b', protocol: 'TCP', port: 80 },
      ],
    });
    expect(results.map((r) => r.verdict)).toEqual(['allow', 'deny', 'deny', 'allow']);
  });

  it('an egress ipBlock allows a destination outside the cluster by address', async () => {
    const objects = [...xyzCluster(), np('x', 'to-dns', { podSelector: podLabel('a'), policyTypes: ['Egress'], egress: [{ to: [{ ipBlock: { cidr: '8.8.8.8/32' } }], ports: [{ protocol: 'UDP', port: 53 }] }] })];
    const results = await evaluateFlows({
      objects,
      flows: [
        { src: 'x/a', dst: '8.8.8.8', protocol: 'UDP', port: 53 },
        { src: 'x/a', dst: '8.8.8.8', protocol: 'TCP', port: 53 },
        { src: 'x/a', dst: '8.8.4.4', protocol: 'UDP', port: 53 },
        { src: 'x/b', dst: '8.8.4.4', protocol: 'UDP', port: 53 },
      ],
    });
    expect(results.map((r) => r.verdict)).toEqual(['allow', 'deny', 'deny', 'allow']);
  });

  it('in a dual-stack cluster IPv6 traffic meets IPv6 ipBlocks and pod selectors alike', async () => {
    const objects = [
      ...xyzCluster({ dualStack: true }),
      np('x', 'v6', { podSelector: podLabel('a'), ingress: [{ from: [{ ipBlock: { cidr: 'fd00:2::/64', except: [`${podIPv6('y/c')}/128`] } }, { podSelector: podLabel('b') }] }] }),
    ];
    const results = await evaluateFlows({
      objects,
      flows: [
        { src: podIPv6('y/a'), dst: 'x/a', protocol: 'TCP', port: 80 },
        { src: podIPv6('y/c'), dst: 'x/a', protocol: 'TCP', port: 80 },
        { src: podIPv6('x/b'), dst: 'x/a', protocol: 'TCP', port: 80 },
        { src: podIPv6('z/b'), dst: 'x/a', protocol: 'TCP', port: 80 },
        { src: podIP('y/a'), dst: 'x/a', protocol: 'TCP', port: 80 },
      ],
    });
    // y/a's IPv4 address is outside the IPv6 block: an ipBlock never matches across families.
    expect(results.map((r) => r.verdict)).toEqual(['allow', 'deny', 'allow', 'deny', 'deny']);
  });

  it('egress to 0.0.0.0/0 except the pod network reaches the internet but no pod', async () => {
    const objects = [...xyzCluster(), np('x', 'internet-only', { podSelector: podLabel('a'), policyTypes: ['Egress'], egress: [{ to: [{ ipBlock: { cidr: '0.0.0.0/0', except: ['10.0.0.0/16'] } }] }] })];
    const results = await evaluateFlows({
      objects,
      flows: [
        { src: 'x/a', dst: '203.0.113.10', protocol: 'TCP', port: 443 },
        { src: 'x/a', dst: 'y/a', protocol: 'TCP', port: 80 },
        { src: 'x/a', dst: 'x/b', protocol: 'UDP', port: 80 },
        { src: 'x/b', dst: 'y/a', protocol: 'TCP', port: 80 },
      ],
    });
    expect(results.map((r) => r.verdict)).toEqual(['allow', 'deny', 'deny', 'allow']);
  });

  it('a host-networked pod is never isolated and matches pod selectors of no policy', async () => {
    const objects = [
      ...xyzCluster(),
      pod('x', 'h', { labels: { pod: 'h' }, ip: '192.168.0.10', hostNetwork: true }),
      np('x', 'deny-all', { podSelector: all, policyTypes: ['Ingress', 'Egress'] }),
      np('y', 'from-x', { podSelector: all, ingress: [{ from: [{ namespaceSelector: nsLabel('x') }] }] }),
      np('z', 'from-node', { podSelector: all, ingress: [{ from: [{ ipBlock: { cidr: '192.168.0.0/24' } }] }] }),
    ];
    const results = await evaluateFlows({
      objects,
      flows: [
        { src: 'y/a', dst: 'x/h', protocol: 'TCP', port: 80 },
        { src: 'x/h', dst: 'y/a', protocol: 'TCP', port: 80 },
        { src: 'x/h', dst: 'z/a', protocol: 'TCP', port: 80 },
      ],
    });
    // x/h is not isolated by deny-all; y's policy does not count it as a pod of x; z admits it by the node address.
    expect(results.map((r) => r.verdict)).toEqual(['allow', 'deny', 'allow']);
  });

  it('namespace labels added later change which peers a policy admits', async () => {
    const cluster = xyzCluster().map((o) => (o.kind === 'Namespace' && o.metadata.name === 'z' ? namespace('z', { ns: 'z', team: 'blue' }) : o));
    const policies = [np('x', 'from-blue', { podSelector: all, ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'blue' } } }] }] })];
    await check({ name: 'team blue', policies, probes: [tcp80(open().expectIngress({ ns: 'x' }, false).expect({ ns: 'z' }, { ns: 'x' }, true))] }, cluster);
  });

  it('the walkthrough names the allowing policy and the isolating policies of a denial', async () => {
    const objects = [
      ...xyzCluster(),
      np('x', 'from-b', { podSelector: podLabel('a'), ingress: [{ from: [{ podSelector: podLabel('b') }] }] }),
      np('x', 'port-81', { podSelector: podLabel('a'), ingress: [{ ports: [{ port: 81 }] }] }),
    ];
    const [allowed, denied] = await evaluateFlows({
      objects,
      flows: [{ src: 'x/b', dst: 'x/a', protocol: 'TCP', port: 80 }, { src: 'y/c', dst: 'x/a', protocol: 'TCP', port: 80 }],
    });
    const npStep = (r: typeof allowed) => r.ingress.find((t) => t.label === 'NP');
    expect(npStep(allowed)).toMatchObject({ verdict: 'Accept', reason: 'x/from-b' });
    expect(npStep(denied)).toMatchObject({ verdict: 'Deny', reason: 'no ingress rule of x/from-b, x/port-81 matched' });
    expect(denied.walkthrough).toContain('no ingress rule of x/from-b, x/port-81 matched');
  });
});
