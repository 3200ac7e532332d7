// v1alpha1 AdminNetworkPolicy / BaselineAdminNetworkPolicy cases written after
// the network-policy-api conformance suite (v0.1.7 generation): the same
// houses, pods, rule-order swaps, priority swaps and Pass chains, decided by
// the default pipeline (CNP:Admin -> ANP -> NP -> BANP -> CNP:Baseline).
import { describe, it, afterEach } from 'vitest';
import type { KubeObject } from '../../host/contract.js';
import { LiveCluster, runCase, swapRules, withPriority } from './harness.js';
import { anp, banp, networkPolicy, portNumber, namedPort, portRange, subjectNamespace, subjectHousePods, toNamespace, toHousePods, house } from './policies.js';
import { ns, student, studentIPs, NODES } from './topology.js';

const harry0 = student('gryffindor', 0);
const harry1 = student('gryffindor', 1);
const draco0 = student('slytherin', 0);
const cedric1 = student('hufflepuff', 1);
const luna0 = student('ravenclaw', 0);
const luna1 = student('ravenclaw', 1);
const centaur1 = `${ns('forbidden-forrest')}/centaur-1`;

const egressTcp = anp('egress-tcp', 6, subjectNamespace('gryffindor'), {
  egress: [
    { name: 'allow-to-ravenclaw-everything', action: 'Allow', to: [toNamespace('ravenclaw')] },
    { name: 'deny-to-ravenclaw-everything', action: 'Deny', to: [toNamespace('ravenclaw')] },
    { name: 'pass-to-ravenclaw-everything', action: 'Pass', to: [toNamespace('ravenclaw')] },
    { name: 'deny-to-slytherin-at-port-80', action: 'Deny', to: [toNamespace('slytherin')], ports: [portNumber(80)] },
    { name: 'pass-to-slytherin-at-port-80', action: 'Pass', to: [toNamespace('slytherin')], ports: [portNumber(80)] },
    { name: 'allow-to-hufflepuff-at-port-8080', action: 'Allow', to: [toNamespace('hufflepuff')], ports: [portNumber(8080)] },
    { name: 'deny-to-hufflepuff-everything-else', action: 'Deny', to: [toNamespace('hufflepuff')] },
  ],
});

let live: LiveCluster | undefined;
afterEach(() => { live?.dispose(); live = undefined; });

describe('AdminNetworkPolicy egress over TCP', () => {
  it('the first matching rule decides, so allow-to-ravenclaw wins over the deny and pass after it', () => {
    live = new LiveCluster([egressTcp]);
    live.check(
      { src: harry0, dst: luna0, port: 80, expect: 'allow', egress: ['[ANP] Accept (egress-tcp, allow-to-ravenclaw-everything: '] },
      { src: harry1, dst: luna0, port: 8080, expect: 'allow', shows: ['[ANP] Accept (egress-tcp, allow-to-ravenclaw-everything: '] },
      { src: harry1, dst: luna0, protocol: 'UDP', port: 53, expect: 'allow', shows: ['[ANP] Accept (egress-tcp, allow-to-ravenclaw-everything: '] },
    );
  });

  it('a port-scoped allow decides its port and the deny after it decides every other port', () => {
    live = new LiveCluster([egressTcp]);
    live.check(
      { src: harry0, dst: cedric1, port: 8080, expect: 'allow', shows: ['[ANP] Accept (egress-tcp, allow-to-hufflepuff-at-port-8080: '] },
      { src: harry1, dst: cedric1, port: 80, expect: 'deny', shows: ['[ANP] Deny (egress-tcp, deny-to-hufflepuff-everything-else: '] },
      { src: harry1, dst: cedric1, protocol: 'UDP', port: 8080, expect: 'deny', shows: ['[ANP] Deny (egress-tcp, deny-to-hufflepuff-everything-else: '] },
    );
  });

  it('swapping the allow and the deny rule for ravenclaw turns the traffic into a deny', () => {
    live = new LiveCluster([egressTcp]);
    live.apply(swapRules(egressTcp, 'egress', 0, 1));
    live.check(
      { src: harry0, dst: luna1, port: 80, expect: 'deny', shows: ['[ANP] Deny (egress-tcp, deny-to-ravenclaw-everything: '] },
      { src: harry1, dst: luna1, port: 8080, expect: 'deny', shows: ['[ANP] Deny (egress-tcp, deny-to-ravenclaw-everything: '] },
    );
  });

  it('a deny scoped to TCP port 80 leaves other ports to the next tiers, which allow', () => {
    live = new LiveCluster([egressTcp]);
    live.check(
      { src: harry0, dst: draco0, port: 80, expect: 'deny', shows: ['[ANP] Deny (egress-tcp, deny-to-slytherin-at-port-80: '] },
      { src: harry1, dst: draco0, port: 8080, expect: 'allow', hides: ['[ANP]'] },
      { src: harry1, dst: draco0, protocol: 'UDP', port: 80, expect: 'allow', hides: ['[ANP]'] },
    );
  });

  it('moving the pass rule first hands ravenclaw traffic to the next tiers, which allow it', () => {
    live = new LiveCluster([egressTcp]);
    live.apply(swapRules(egressTcp, 'egress', 0, 2));
    live.check(
      { src: harry0, dst: luna0, port: 80, expect: 'allow', egress: ['[ANP] Pass (egress-tcp, pass-to-ravenclaw-everything: '] },
      { src: harry1, dst: luna0, port: 8080, expect: 'allow', shows: ['[ANP] Pass (egress-tcp, pass-to-ravenclaw-everything: '] },
    );
  });

  it('swapping the port-80 deny and pass for slytherin passes port 80 on', () => {
    live = new LiveCluster([egressTcp]);
    live.apply(swapRules(egressTcp, 'egress', 3, 4));
    live.check(
      { src: harry0, dst: draco0, port: 80, expect: 'allow', shows: ['[ANP] Pass (egress-tcp, pass-to-slytherin-at-port-80: '] },
      { src: harry1, dst: draco0, port: 8080, expect: 'allow', hides: ['[ANP]'] },
    );
  });

  it('pods outside the subject are not affected, and deleting the policy lifts its denies', () => {
    live = new LiveCluster([egressTcp]);
    live.check({ src: draco0, dst: cedric1, port: 80, expect: 'allow', hides: ['[ANP]'] });
    live.remove(egressTcp);
    live.check({ src: harry1, dst: cedric1, port: 80, expect: 'allow', hides: ['[ANP]'] });
  });
});

describe('AdminNetworkPolicy ingress over UDP', () => {
  const ingressUdp = anp('ingress-udp', 4, subjectNamespace('hufflepuff'), {
    ingress: [
      { name: 'allow-from-ravenclaw-everything', action: 'Allow', from: [toNamespace('ravenclaw')] },
      { name: 'deny-from-ravenclaw-everything', action: 'Deny', from: [toNamespace('ravenclaw')] },
      { name: 'deny-from-slytherin-at-port-5353', action: 'Deny', from: [toNamespace('slytherin')], ports: [portNumber(5353, 'UDP')] },
      { name: 'pass-from-slytherin-at-port-5353', action: 'Pass', from: [toNamespace('slytherin')], ports: [portNumber(5353, 'UDP')] },
      { name: 'allow-from-gryffindor-at-port-53', action: 'Allow', from: [toNamespace('gryffindor')], ports: [portNumber(53, 'UDP')] },
      { name: 'deny-from-gryffindor-everything-else', action: 'Deny', from: [toNamespace('gryffindor')] },
    ],
  });

  it('ingress rules match the source namespace and the protocol as well as the port', async () => {
    await runCase({
      name: 'ingress-udp',
      objects: [ingressUdp],
      probes: [
        { src: luna0, dst: cedric1, protocol: 'UDP', port: 53, expect: 'allow', ingress: ['[ANP] Accept (ingress-udp, allow-from-ravenclaw-everything: '] },
        { src: draco0, dst: cedric1, protocol: 'UDP', port: 5353, expect: 'deny', ingress: ['[ANP] Deny (ingress-udp, deny-from-slytherin-at-port-5353: '] },
        { src: draco0, dst: cedric1, protocol: 'UDP', port: 53, expect: 'allow', hides: ['[ANP]'] },
        { src: draco0, dst: cedric1, protocol: 'TCP', port: 5353, expect: 'allow', hides: ['[ANP]'] },
        { src: harry0, dst: cedric1, protocol: 'UDP', port: 53, expect: 'allow', shows: ['[ANP] Accept (ingress-udp, allow-from-gryffindor-at-port-53: '] },
        { src: harry0, dst: cedric1, protocol: 'TCP', port: 53, expect: 'deny', shows: ['[ANP] Deny (ingress-udp, deny-from-gryffindor-everything-else: '] },
        { src: harry0, dst: cedric1, protocol: 'UDP', port: 5353, expect: 'deny', shows: ['[ANP] Deny (ingress-udp, deny-from-gryffindor-everything-else: '] },
      ],
    });
  });

  it('swapping the slytherin deny and pass passes UDP/5353 on', () => {
    live = new LiveCluster([ingressUdp]);
    live.apply(swapRules(ingressUdp, 'ingress', 2, 3));
    live.check({ src: draco0, dst: cedric1, protocol: 'UDP', port: 5353, expect: 'allow', ingress: ['[ANP] Pass (ingress-udp, pass-from-slytherin-at-port-5353: '] });
  });
});

describe('AdminNetworkPolicy over SCTP', () => {
  it('SCTP port rules match SCTP only', async () => {
    await runCase({
      name: 'egress-sctp',
      objects: [anp('egress-sctp', 8, subjectNamespace('gryffindor'), {
        egress: [
          { name: 'deny-to-slytherin-at-port-9003', action: 'Deny', to: [toNamespace('slytherin')], ports: [portNumber(9003, 'SCTP')] },
          { name: 'allow-to-hufflepuff-at-port-9003', action: 'Allow', to: [toNamespace('hufflepuff')], ports: [portNumber(9003, 'SCTP')] },
          { name: 'deny-to-hufflepuff-everything-else', action: 'Deny', to: [toNamespace('hufflepuff')] },
        ],
      })],
      probes: [
        { src: harry0, dst: draco0, protocol: 'SCTP', port: 9003, expect: 'deny', shows: ['[ANP] Deny (egress-sctp, deny-to-slytherin-at-port-9003: '] },
        { src: harry0, dst: draco0, protocol: 'SCTP', port: 9005, expect: 'allow', hides: ['[ANP]'] },
        { src: harry0, dst: draco0, protocol: 'TCP', port: 9003, expect: 'allow', hides: ['[ANP]'] },
        { src: harry1, dst: cedric1, protocol: 'SCTP', port: 9003, expect: 'allow', shows: ['[ANP] Accept (egress-sctp, allow-to-hufflepuff-at-port-9003: '] },
        { src: harry1, dst: cedric1, protocol: 'SCTP', port: 9005, expect: 'deny', shows: ['[ANP] Deny (egress-sctp, deny-to-hufflepuff-everything-else: '] },
      ],
    });
  });
});

describe('AdminNetworkPolicy priority', () => {
  const denyAt50 = anp('deny-ravenclaw', 50, subjectNamespace('gryffindor'), {
    egress: [{ name: 'deny-to-ravenclaw', action: 'Deny', to: [toNamespace('ravenclaw')] }],
  });
  const allowAt60 = anp('allow-ravenclaw', 60, subjectNamespace('gryffindor'), {
    egress: [{ name: 'allow-to-ravenclaw', action: 'Allow', to: [toNamespace('ravenclaw')] }],
  });

  it('the lower priority number is evaluated first, and changing priorities reorders live', () => {
    live = new LiveCluster([denyAt50, allowAt60]);
    live.check({ src: harry0, dst: luna0, port: 80, expect: 'deny', shows: ['[ANP] Deny (deny-ravenclaw, deny-to-ravenclaw: '] });
    live.apply(withPriority(allowAt60, 40));
    live.check({ src: harry0, dst: luna0, port: 80, expect: 'allow', shows: ['[ANP] Accept (allow-ravenclaw, allow-to-ravenclaw: '] });
  });

  it('equal priorities are broken by name, and the reason text says a tie decided', async () => {
    await runCase({
      name: 'tie',
      objects: [withPriority(denyAt50, 30), withPriority(allowAt60, 30)],
      probes: [{
        src: harry0, dst: luna0, port: 80, expect: 'allow',
        // "allow-ravenclaw" sorts before "deny-ravenclaw".
        shows: ['[ANP] Accept (allow-ravenclaw, allow-to-ravenclaw: namespaces kubernetes.io/metadata.name=network-policy-conformance-ravenclaw, any port; note: policy "allow-ravenclaw" shares priority 30'],
      }],
    });
  });
});

describe('AdminNetworkPolicy with ingress and egress rules together', () => {
  it('each direction is decided by the policies selecting that end', async () => {
    await runCase({
      name: 'gress-combined',
      objects: [anp('gress-rules', 15, subjectNamespace('gryffindor'), {
        ingress: [{ name: 'deny-from-slytherin', action: 'Deny', from: [toNamespace('slytherin')] }],
        egress: [{ name: 'allow-to-slytherin', action: 'Allow', to: [toNamespace('slytherin')] }],
      })],
      probes: [
        { src: harry0, dst: draco0, port: 80, expect: 'allow', egress: ['[ANP] Accept (gress-rules, allow-to-slytherin: '] },
        { src: draco0, dst: harry0, port: 80, expect: 'deny', ingress: ['[ANP] Deny (gress-rules, deny-from-slytherin: '] },
      ],
    });
  });
});

describe('AdminNetworkPolicy, NetworkPolicy and BaselineAdminNetworkPolicy together', () => {
  const passSlytherin = anp('pass-example', 10, subjectNamespace('gryffindor'), {
    ingress: [{ name: 'pass-all-ingress-from-slytherin', action: 'Pass', from: [toNamespace('slytherin')] }],
    egress: [{ name: 'pass-all-egress-to-slytherin', action: 'Pass', to: [toNamespace('slytherin')] }],
  });
  const allowSlytherinNP = networkPolicy(ns('gryffindor'), 'allow-gress-from-to-slytherin-to-gryffindor', {
    podSelector: {},
    policyTypes: ['Ingress', 'Egress'],
    ingress: [{ from: [{ namespaceSelector: house('slytherin') }] }],
    egress: [{ to: [{ namespaceSelector: house('slytherin') }] }],
  });
  const denySlytherinBANP = banp(subjectNamespace('gryffindor'), {
    ingress: [{ name: 'deny-all-ingress-from-slytherin', action: 'Deny', from: [toNamespace('slytherin')] }],
    egress: [{ name: 'deny-all-egress-to-slytherin', action: 'Deny', to: [toNamespace('slytherin')] }],
  });

  it('an ANP Pass goes to the NetworkPolicy, whose verdict is final, so the BANP is not consulted', () => {
    live = new LiveCluster([passSlytherin, allowSlytherinNP, denySlytherinBANP]);
    live.check(
      { src: harry0, dst: draco0, port: 80, expect: 'allow', egress: ['[ANP] Pass (pass-example, pass-all-egress-to-slytherin: ', '[NP] Accept'], hides: ['[BANP]'] },
      { src: draco0, dst: harry0, port: 80, expect: 'allow', ingress: ['[ANP] Pass (pass-example, pass-all-ingress-from-slytherin: ', '[NP] Accept'], hides: ['[BANP]'] },
    );
  });

  it('without the NetworkPolicy the Pass reaches the BANP, which denies', () => {
    live = new LiveCluster([passSlytherin, allowSlytherinNP, denySlytherinBANP]);
    live.remove(allowSlytherinNP);
    live.check(
      { src: harry0, dst: draco0, port: 80, expect: 'deny', egress: ['[ANP] Pass (pass-example, pass-all-egress-to-slytherin: ', '[BANP] Deny (default, deny-all-egress-to-slytherin: '], hides: ['[NP] Accept'] },
      { src: draco0, dst: harry0, port: 80, expect: 'deny', ingress: ['[ANP] Pass (pass-example, pass-all-ingress-from-slytherin: ', '[BANP] Deny (default, deny-all-ingress-from-slytherin: '], hides: ['[NP] Accept'] },
    );
  });

  it('an ANP Deny is final whatever the NetworkPolicy allows', () => {
    const denyInstead = structuredClone(passSlytherin);
    denyInstead.spec.egress[0].action = 'Deny';
    live = new LiveCluster([denyInstead, allowSlytherinNP, denySlytherinBANP]);
    live.check({ src: harry0, dst: draco0, port: 80, expect: 'deny', egress: ['[ANP] Deny (pass-example, pass-all-egress-to-slytherin: '], hides: ['[NP] Accept', '[BANP]'] });
  });
});

describe('AdminNetworkPolicy named ports, node peers and network peers (extended)', () => {
  it('a named port resolves on the destination pod and brings its protocol', () => {
    const named = structuredClone(egressTcp);
    named.spec.egress[5].ports = [namedPort('web')];
    named.spec.egress.splice(6, 0, { name: 'allow-to-hufflepuff-dns', action: 'Allow', to: [toNamespace('hufflepuff')], ports: [namedPort('dns')] });
    live = new LiveCluster([named]);
    live.check(
      { src: harry0, dst: cedric1, port: 80, expect: 'allow', shows: ['[ANP] Accept (egress-tcp, allow-to-hufflepuff-at-port-8080: '] },
      { src: harry1, dst: cedric1, port: 8080, expect: 'deny', shows: ['[ANP] Deny (egress-tcp, deny-to-hufflepuff-everything-else: '] },
      // "dns" is UDP/53 in the pod spec: TCP/53 does not match it.
      { src: harry1, dst: cedric1, protocol: 'UDP', port: 53, expect: 'allow', shows: ['[ANP] Accept (egress-tcp, allow-to-hufflepuff-dns: '] },
      { src: harry1, dst: cedric1, protocol: 'TCP', port: 53, expect: 'deny', shows: ['[ANP] Deny (egress-tcp, deny-to-hufflepuff-everything-else: '] },
    );
  });

  const nodesLinux = { nodes: { matchLabels: { 'kubernetes.io/os': 'linux' } } };
  const nodePeers = anp('node-selector-as-peer-example', 75, subjectHousePods('gryffindor'), {
    egress: [
      { name: 'allow-egress-to-36363-on-nodes', action: 'Allow', to: [nodesLinux], ports: [portNumber(36363)] },
      { name: 'pass-egress-to-5353-on-nodes', action: 'Pass', to: [nodesLinux], ports: [portNumber(5353, 'UDP')] },
      { name: 'deny-egress-to-slytherin-and-nodes', action: 'Deny', to: [toHousePods('slytherin'), nodesLinux] },
    ],
  });

  it('nodes peers match the addresses of the selected Nodes, host-networked pods on them included', async () => {
    const [harryV4, harryV6] = studentIPs('gryffindor', 1);
    await runCase({
      name: 'node-peers',
      objects: [nodePeers],
      probes: [
        { src: harry0, dst: centaur1, port: 36363, expect: 'allow', shows: ['[ANP] Accept (node-selector-as-peer-example, allow-egress-to-36363-on-nodes: '] },
        { src: harry1, dst: centaur1, protocol: 'UDP', port: 5353, expect: 'allow', shows: ['[ANP] Pass (node-selector-as-peer-example, pass-egress-to-5353-on-nodes: '] },
        { src: harry1, dst: centaur1, port: 36364, expect: 'deny', shows: ['[ANP] Deny (node-selector-as-peer-example, deny-egress-to-slytherin-and-nodes: '] },
        { src: harry1, dst: centaur1, protocol: 'UDP', port: 53, expect: 'deny' },
        { src: harry1, dst: centaur1, protocol: 'SCTP', port: 9003, expect: 'deny' },
        // The control-plane node runs no pod of ours: its address alone matches.
        { src: harry0, dst: NODES[0].ip, port: 36363, expect: 'allow', shows: ['[ANP] Accept (node-selector-as-peer-example, allow-egress-to-36363-on-nodes: '] },
        { src: harryV4, dst: NODES[0].ip, port: 22, expect: 'deny' },
        { src: harryV6, dst: NODES[2].ip6, port: 22, expect: 'deny', shows: ['[ANP] Deny (node-selector-as-peer-example, deny-egress-to-slytherin-and-nodes: '] },
        { src: harry0, dst: draco0, port: 80, expect: 'deny', shows: ['[ANP] Deny (node-selector-as-peer-example, deny-egress-to-slytherin-and-nodes: '] },
        { src: harry0, dst: luna0, port: 80, expect: 'allow', hides: ['[ANP]'] },
      ],
    });
  });

  it('a node that stops matching the selector stops being a peer', () => {
    live = new LiveCluster([nodePeers]);
    live.check({ src: harry0, dst: NODES[0].ip, port: 22, expect: 'deny' });
    live.apply({
      apiVersion: 'v1', kind: 'Node', metadata: { name: NODES[0].name, labels: { 'kubernetes.io/os': 'windows' } },
      status: { addresses: [{ type: 'InternalIP', address: NODES[0].ip }] },
    });
    live.check({ src: harry0, dst: NODES[0].ip, port: 22, expect: 'allow', hides: ['[ANP]'] });
  });

  it('networks peers match any address in the CIDRs, pod addresses included, in both families', async () => {
    const [luna0V4] = studentIPs('ravenclaw', 0);
    const [harryV4, harryV6] = studentIPs('gryffindor', 0);
    const [, dracoV6] = studentIPs('slytherin', 0);
    await runCase({
      name: 'networks',
      objects: [anp('inline-cidr-as-peers-example', 85, subjectNamespace('gryffindor'), {
        egress: [
          { name: 'allow-egress-to-luna-0', action: 'Allow', to: [{ networks: [`${luna0V4}/32`] }] },
          { name: 'deny-egress-to-pod-networks', action: 'Deny', to: [{ networks: ['10.244.0.0/16', 'fd00:10:244::/48'] }], ports: [portRange(1, 9000)] },
        ],
      })],
      probes: [
        { src: harry0, dst: luna0, port: 80, expect: 'allow', shows: ['[ANP] Accept (inline-cidr-as-peers-example, allow-egress-to-luna-0: '] },
        { src: harry0, dst: luna1, port: 80, expect: 'deny', shows: ['[ANP] Deny (inline-cidr-as-peers-example, deny-egress-to-pod-networks: '] },
        { src: harry0, dst: luna1, port: 9000, expect: 'deny' },
        { src: harry0, dst: luna1, port: 9001, expect: 'allow', hides: ['[ANP]'] },
        { src: harryV4, dst: '192.0.2.10', port: 443, expect: 'allow', hides: ['[ANP]'] },
        { src: harryV6, dst: dracoV6, port: 80, expect: 'deny', shows: ['[ANP] Deny (inline-cidr-as-peers-example, deny-egress-to-pod-networks: '] },
      ],
    });
  });
});

describe('BaselineAdminNetworkPolicy', () => {
  const baseline = banp(subjectNamespace('gryffindor'), {
    egress: [
      { name: 'allow-to-ravenclaw-everything', action: 'Allow', to: [toNamespace('ravenclaw')] },
      { name: 'deny-to-ravenclaw-everything', action: 'Deny', to: [toNamespace('ravenclaw')] },
      { name: 'deny-to-slytherin-at-port-80', action: 'Deny', to: [toNamespace('slytherin')], ports: [portNumber(80)] },
      { name: 'allow-to-hufflepuff-at-port-8080', action: 'Allow', to: [toNamespace('hufflepuff')], ports: [portNumber(8080)] },
      { name: 'deny-to-hufflepuff-everything-else', action: 'Deny', to: [toNamespace('hufflepuff')] },
    ],
  });

  it('rules apply in order in the baseline tier', () => {
    live = new LiveCluster([baseline]);
    live.check(
      { src: harry0, dst: luna0, port: 80, expect: 'allow', egress: ['[BANP] Accept (default, allow-to-ravenclaw-everything: '] },
      { src: harry0, dst: draco0, port: 80, expect: 'deny', shows: ['[BANP] Deny (default, deny-to-slytherin-at-port-80: '] },
      { src: harry0, dst: draco0, port: 8080, expect: 'allow', hides: ['[BANP]'] },
      { src: harry1, dst: cedric1, port: 8080, expect: 'allow', shows: ['[BANP] Accept (default, allow-to-hufflepuff-at-port-8080: '] },
      { src: harry1, dst: cedric1, port: 80, expect: 'deny', shows: ['[BANP] Deny (default, deny-to-hufflepuff-everything-else: '] },
    );
    live.apply(swapRules(baseline, 'egress', 0, 1));
    live.check({ src: harry0, dst: luna0, port: 80, expect: 'deny', shows: ['[BANP] Deny (default, deny-to-ravenclaw-everything: '] });
  });

  it('a NetworkPolicy selecting the pod overrides the baseline', () => {
    live = new LiveCluster([baseline, networkPolicy(ns('gryffindor'), 'allow-all-egress', { podSelector: {}, policyTypes: ['Egress'], egress: [{}] })]);
    live.check({ src: harry0, dst: draco0, port: 80, expect: 'allow', shows: ['[NP] Accept'], hides: ['[BANP]'] });
  });

  it('only the BaselineAdminNetworkPolicy named default is evaluated', async () => {
    const other = structuredClone(baseline);
    other.metadata.name = 'not-default';
    await runCase({
      name: 'banp-name',
      objects: [other],
      probes: [{ src: harry0, dst: draco0, port: 80, expect: 'allow', hides: ['[BANP]'] }],
    });
  });

  it('Pass is not a BANP action: such a rule fails closed and denies what reaches it', async () => {
    const withPass = structuredClone(baseline) as KubeObject;
    withPass.spec.egress.unshift({ name: 'pass-to-slytherin', action: 'Pass', to: [toNamespace('slytherin')] });
    await runCase({
      name: 'banp-pass',
      objects: [withPass],
      probes: [
        { src: harry0, dst: draco0, port: 8080, expect: 'deny', shows: ['[BANP] Deny (default, pass-to-slytherin (fails closed: spec.egress[0].action'] },
        { src: harry0, dst: luna0, port: 80, expect: 'deny', shows: ['[BANP] Deny (default, pass-to-slytherin'] },
        { src: draco0, dst: luna0, port: 80, expect: 'allow', hides: ['[BANP]'] },
      ],
    });
  });
});
