// v1alpha2 ClusterNetworkPolicy cases written after the network-policy-api
// conformance suite's admin_tier / baseline_tier generation, plus the
// semantics upstream spells out in the API comments (fail-closed peers,
// domain names, hairpin), run through the default pipeline.
import { describe, it, afterEach } from 'vitest';
import { LiveCluster, runCase, swapRules } from './harness.js';
import {
  cnp, networkPolicy, house, tcp, udp, sctp, tcpRange, udpRange, sctpRange, destinationNamedPort,
  subjectNamespace, subjectHousePods, toNamespace, toHousePods, portNumber,
} from './policies.js';
import { ns, student, studentIPs, NODES } from './topology.js';

const harry0 = student('gryffindor', 0);
const harry1 = student('gryffindor', 1);
const draco0 = student('slytherin', 0);
const draco1 = student('slytherin', 1);
const cedric0 = student('hufflepuff', 0);
const cedric1 = student('hufflepuff', 1);
const luna0 = student('ravenclaw', 0);
const centaur0 = `${ns('forbidden-forrest')}/centaur-0`;
const centaur1 = `${ns('forbidden-forrest')}/centaur-1`;

let live: LiveCluster | undefined;
afterEach(() => { live?.dispose(); live = undefined; });

const adminEgress = cnp('egress-tcp', 'Admin', 6, subjectNamespace('gryffindor'), {
  egress: [
    { name: 'accept-to-ravenclaw-everything', action: 'Accept', to: [toNamespace('ravenclaw')] },
    { name: 'deny-to-ravenclaw-everything', action: 'Deny', to: [toNamespace('ravenclaw')] },
    { name: 'pass-to-ravenclaw-everything', action: 'Pass', to: [toNamespace('ravenclaw')] },
    { name: 'deny-to-slytherin-at-port-80', action: 'Deny', to: [toNamespace('slytherin')], protocols: [tcp(80)] },
    { name: 'pass-to-slytherin-at-port-80', action: 'Pass', to: [toNamespace('slytherin')], protocols: [tcp(80)] },
    { name: 'accept-to-hufflepuff-at-port-8080', action: 'Accept', to: [toNamespace('hufflepuff')], protocols: [tcp(8080)] },
    { name: 'deny-to-hufflepuff-everything-else', action: 'Deny', to: [toNamespace('hufflepuff')] },
  ],
});

describe('ClusterNetworkPolicy in the Admin tier', () => {
  it('rules decide in list order and protocols scope them to a port', () => {
    live = new LiveCluster([adminEgress]);
    live.check(
      { src: harry0, dst: luna0, port: 80, expect: 'allow', egress: ['[CNP:Admin] Accept (egress-tcp, accept-to-ravenclaw-everything: '] },
      { src: harry0, dst: cedric1, port: 8080, expect: 'allow', egress: ['[CNP:Admin] Accept (egress-tcp, accept-to-hufflepuff-at-port-8080: '] },
      { src: harry1, dst: cedric1, port: 80, expect: 'deny', egress: ['[CNP:Admin] Deny (egress-tcp, deny-to-hufflepuff-everything-else: '] },
      { src: harry0, dst: draco0, port: 80, expect: 'deny', egress: ['[CNP:Admin] Deny (egress-tcp, deny-to-slytherin-at-port-80: '] },
      { src: harry0, dst: draco0, port: 8080, expect: 'allow', hides: ['[CNP:Admin]'] },
    );
  });

  it('rule-order swaps take effect on the running pipeline', () => {
    live = new LiveCluster([adminEgress]);
    live.apply(swapRules(adminEgress, 'egress', 0, 1));
    live.check({ src: harry0, dst: luna0, port: 80, expect: 'deny', egress: ['[CNP:Admin] Deny (egress-tcp, deny-to-ravenclaw-everything: '] });
    live.apply(swapRules(adminEgress, 'egress', 0, 2));
    live.check({ src: harry0, dst: luna0, port: 80, expect: 'allow', egress: ['[CNP:Admin] Pass (egress-tcp, pass-to-ravenclaw-everything: '] });
    live.apply(swapRules(adminEgress, 'egress', 3, 4));
    live.check({ src: harry1, dst: draco1, port: 80, expect: 'allow', egress: ['[CNP:Admin] Pass (egress-tcp, pass-to-slytherin-at-port-80: '] });
  });

  it('the lower priority number wins, and moving a policy between tiers moves its verdict', () => {
    const deny = cnp('deny-ravenclaw', 'Admin', 20, subjectNamespace('gryffindor'), {
      egress: [{ name: 'deny-to-ravenclaw', action: 'Deny', to: [toNamespace('ravenclaw')] }],
    });
    const accept = cnp('accept-ravenclaw', 'Admin', 30, subjectNamespace('gryffindor'), {
      egress: [{ name: 'accept-to-ravenclaw', action: 'Accept', to: [toNamespace('ravenclaw')] }],
    });
    live = new LiveCluster([deny, accept]);
    live.check({ src: harry0, dst: luna0, port: 80, expect: 'deny', egress: ['[CNP:Admin] Deny (deny-ravenclaw, deny-to-ravenclaw: '] });
    const earlier = structuredClone(accept);
    earlier.spec.priority = 10;
    live.apply(earlier);
    live.check({ src: harry0, dst: luna0, port: 80, expect: 'allow', egress: ['[CNP:Admin] Accept (accept-ravenclaw, accept-to-ravenclaw: '] });
    const baselineDeny = structuredClone(deny);
    baselineDeny.spec.tier = 'Baseline';
    live.remove(earlier);
    live.apply(baselineDeny);
    live.check({ src: harry0, dst: luna0, port: 80, expect: 'deny', egress: ['[CNP:Baseline] Deny (deny-ravenclaw, deny-to-ravenclaw: '], hides: ['[CNP:Admin]'] });
  });

  it('the older ports form of early v1alpha2 objects is read like the v1alpha1 one', async () => {
    await runCase({
      name: 'legacy-ports',
      objects: [cnp('legacy', 'Admin', 5, subjectNamespace('gryffindor'), {
        egress: [{ name: 'deny-80', action: 'Deny', to: [toNamespace('slytherin')], ports: [portNumber(80)] }],
      } as never)],
      probes: [
        { src: harry0, dst: draco0, port: 80, expect: 'deny', egress: ['[CNP:Admin] Deny (legacy, deny-80: '] },
        { src: harry0, dst: draco0, port: 81, expect: 'allow', hides: ['[CNP:Admin]'] },
      ],
    });
  });
});

describe('ClusterNetworkPolicy protocols', () => {
  it('UDP and SCTP numbers and ranges match their protocol only, ranges inclusive at both ends', async () => {
    await runCase({
      name: 'ranges',
      objects: [cnp('ranges', 'Admin', 7, subjectNamespace('hufflepuff'), {
        ingress: [
          { name: 'deny-udp-5353', action: 'Deny', from: [toNamespace('gryffindor')], protocols: [udp(5353)] },
          { name: 'deny-sctp-9003', action: 'Deny', from: [toNamespace('gryffindor')], protocols: [sctp(9003)] },
          { name: 'accept-ranges', action: 'Accept', from: [toNamespace('gryffindor')], protocols: [tcpRange(8080, 8090), udpRange(50, 60), sctpRange(9004, 9006)] },
          { name: 'deny-rest', action: 'Deny', from: [toNamespace('gryffindor')] },
        ],
      })],
      probes: [
        { src: harry0, dst: cedric0, protocol: 'UDP', port: 5353, expect: 'deny', ingress: ['[CNP:Admin] Deny (ranges, deny-udp-5353: '] },
        { src: harry0, dst: cedric0, protocol: 'SCTP', port: 9003, expect: 'deny', ingress: ['[CNP:Admin] Deny (ranges, deny-sctp-9003: '] },
        { src: harry0, dst: cedric0, protocol: 'TCP', port: 8080, expect: 'allow', ingress: ['[CNP:Admin] Accept (ranges, accept-ranges: '] },
        { src: harry0, dst: cedric0, protocol: 'TCP', port: 8090, expect: 'allow', ingress: ['[CNP:Admin] Accept (ranges, accept-ranges: '] },
        { src: harry0, dst: cedric0, protocol: 'TCP', port: 8091, expect: 'deny', ingress: ['[CNP:Admin] Deny (ranges, deny-rest: '] },
        { src: harry0, dst: cedric0, protocol: 'TCP', port: 8079, expect: 'deny' },
        { src: harry0, dst: cedric0, protocol: 'UDP', port: 53, expect: 'allow', ingress: ['[CNP:Admin] Accept (ranges, accept-ranges: '] },
        { src: harry0, dst: cedric0, protocol: 'TCP', port: 53, expect: 'deny' },
        { src: harry0, dst: cedric0, protocol: 'SCTP', port: 9005, expect: 'allow' },
        { src: harry0, dst: cedric0, protocol: 'UDP', port: 9005, expect: 'deny' },
        { src: draco0, dst: cedric0, protocol: 'UDP', port: 5353, expect: 'allow', hides: ['[CNP:Admin]'] },
      ],
    });
  });

  it('destinationNamedPort resolves on the destination pod, which supplies the protocol', async () => {
    await runCase({
      name: 'named-ports',
      objects: [cnp('named', 'Admin', 9, subjectNamespace('gryffindor'), {
        egress: [
          { name: 'accept-web', action: 'Accept', to: [toNamespace('hufflepuff'), { networks: ['192.0.2.0/24'] }], protocols: [destinationNamedPort('web')] },
          { name: 'accept-dns', action: 'Accept', to: [toNamespace('hufflepuff')], protocols: [destinationNamedPort('dns')] },
          { name: 'deny-rest', action: 'Deny', to: [toNamespace('hufflepuff'), { networks: ['192.0.2.0/24'] }] },
        ],
        ingress: [
          { name: 'accept-web-from-slytherin', action: 'Accept', from: [toNamespace('slytherin')], protocols: [destinationNamedPort('web-8080')] },
          { name: 'deny-slytherin', action: 'Deny', from: [toNamespace('slytherin')] },
        ],
      })],
      probes: [
        { src: harry0, dst: cedric0, port: 80, expect: 'allow', egress: ['[CNP:Admin] Accept (named, accept-web: '] },
        { src: harry0, dst: cedric0, protocol: 'UDP', port: 80, expect: 'deny', egress: ['[CNP:Admin] Deny (named, deny-rest: '] },
        { src: harry0, dst: cedric0, protocol: 'UDP', port: 53, expect: 'allow', egress: ['[CNP:Admin] Accept (named, accept-dns: '] },
        { src: harry0, dst: cedric0, protocol: 'TCP', port: 53, expect: 'deny' },
        // An address that is no pod has no named ports.
        { src: studentIPs('gryffindor', 0)[0], dst: '192.0.2.7', port: 80, expect: 'deny', egress: ['[CNP:Admin] Deny (named, deny-rest: '] },
        // Ingress: the subject is the destination, so its own port names apply.
        { src: draco0, dst: harry1, port: 8080, expect: 'allow', ingress: ['[CNP:Admin] Accept (named, accept-web-from-slytherin: '] },
        { src: draco0, dst: harry1, port: 80, expect: 'deny', ingress: ['[CNP:Admin] Deny (named, deny-slytherin: '] },
      ],
    });
  });
});

describe('ClusterNetworkPolicy tiers around NetworkPolicy', () => {
  const adminPass = cnp('pass-example', 'Admin', 10, subjectNamespace('gryffindor'), {
    ingress: [{ name: 'pass-81', action: 'Pass', from: [toNamespace('slytherin')], protocols: [tcp(81)] }],
    egress: [{ name: 'pass-all-egress-to-slytherin', action: 'Pass', to: [toNamespace('slytherin')] }],
  });
  const allowSlytherinNP = networkPolicy(ns('gryffindor'), 'allow-gress-from-to-slytherin', {
    podSelector: {},
    policyTypes: ['Ingress', 'Egress'],
    ingress: [{ from: [{ namespaceSelector: house('slytherin') }] }],
    egress: [{ to: [{ namespaceSelector: house('slytherin') }] }],
  });
  const baselineDeny = cnp('default', 'Baseline', 10, subjectNamespace('gryffindor'), {
    ingress: [{ name: 'deny-all-ingress-from-slytherin', action: 'Deny', from: [toNamespace('slytherin')] }],
    egress: [{ name: 'deny-all-egress-to-slytherin', action: 'Deny', to: [toNamespace('slytherin')] }],
  });

  it('the NetworkPolicy stage makes an NP-selected pod\'s verdict final, so Baseline is not consulted even after an Admin Pass', () => {
    live = new LiveCluster([adminPass, allowSlytherinNP, baselineDeny]);
    live.check(
      { src: draco0, dst: harry0, port: 81, expect: 'allow', ingress: ['[CNP:Admin] Pass (pass-example, pass-81: ', '[NP] Accept'], hides: ['[CNP:Baseline]'] },
      { src: harry0, dst: draco0, port: 80, expect: 'allow', egress: ['[CNP:Admin] Pass (pass-example, pass-all-egress-to-slytherin: ', '[NP] Accept'], hides: ['[CNP:Baseline]'] },
    );
  });

  it('a pod no NetworkPolicy selects falls through an Admin Pass to the Baseline tier', () => {
    live = new LiveCluster([adminPass, allowSlytherinNP, baselineDeny]);
    live.remove(allowSlytherinNP);
    live.check(
      { src: draco0, dst: harry0, port: 81, expect: 'deny', ingress: ['[CNP:Admin] Pass (pass-example, pass-81: ', '[CNP:Baseline] Deny (default, deny-all-ingress-from-slytherin: '] },
      // Port 82 does not match the Pass rule: no Admin verdict at all, Baseline still denies.
      { src: draco0, dst: harry0, port: 82, expect: 'deny', ingress: ['[CNP:Baseline] Deny (default, deny-all-ingress-from-slytherin: '], hides: ['[CNP:Admin]'] },
    );
  });

  it('the Admin tier overrides a NetworkPolicy, and the Baseline instance ignores Admin policies', () => {
    const adminDeny = structuredClone(adminPass);
    adminDeny.spec.egress[0].action = 'Deny';
    live = new LiveCluster([adminDeny, allowSlytherinNP]);
    live.check({ src: harry0, dst: draco0, port: 80, expect: 'deny', egress: ['[CNP:Admin] Deny (pass-example, pass-all-egress-to-slytherin: '], hides: ['[NP] Accept', '[CNP:Baseline]'] });
  });
});

describe('ClusterNetworkPolicy priority ties', () => {
  const acceptRavenclaw = cnp('same-priority-1', 'Admin', 15, subjectNamespace('gryffindor'), {
    ingress: [
      { name: 'accept-from-ravenclaw', action: 'Accept', from: [toNamespace('ravenclaw')] },
      { name: 'deny-all-else', action: 'Deny', from: [{ namespaces: {} }] },
    ],
  });
  const acceptSlytherin = cnp('same-priority-2', 'Admin', 15, subjectNamespace('hufflepuff'), {
    ingress: [
      { name: 'accept-from-slytherin', action: 'Accept', from: [toNamespace('slytherin')] },
      { name: 'deny-all-else', action: 'Deny', from: [{ namespaces: {} }] },
    ],
  });

  it('two same-priority policies with disjoint subjects both apply, with no tie note', async () => {
    await runCase({
      name: 'same-priority-disjoint',
      objects: [acceptRavenclaw, acceptSlytherin],
      probes: [
        { src: luna0, dst: harry0, port: 80, expect: 'allow', ingress: ['[CNP:Admin] Accept (same-priority-1, accept-from-ravenclaw: '], hides: ['shares priority'] },
        { src: draco0, dst: cedric0, port: 80, expect: 'allow', ingress: ['[CNP:Admin] Accept (same-priority-2, accept-from-slytherin: '] },
        { src: draco0, dst: harry0, port: 80, expect: 'deny', ingress: ['[CNP:Admin] Deny (same-priority-1, deny-all-else: '], hides: ['shares priority'] },
        { src: luna0, dst: cedric0, port: 80, expect: 'deny', ingress: ['[CNP:Admin] Deny (same-priority-2, deny-all-else: '] },
      ],
    });
  });

  it('two same-priority policies selecting one pod apply in name order and the reason says so', async () => {
    const overlapping = structuredClone(acceptSlytherin);
    overlapping.spec.subject = { namespaces: {} };
    await runCase({
      name: 'same-priority-overlap',
      objects: [acceptRavenclaw, overlapping],
      probes: [
        // same-priority-1 sorts first: its deny-all-else beats same-priority-2's accept.
        { src: draco0, dst: harry0, port: 80, expect: 'deny', ingress: ['[CNP:Admin] Deny (same-priority-1, deny-all-else: namespaces all, any port; note: policy "same-priority-1" shares priority 15'] },
        { src: draco0, dst: cedric0, port: 80, expect: 'allow', ingress: ['[CNP:Admin] Accept (same-priority-2, accept-from-slytherin: '], hides: ['shares priority'] },
      ],
    });
  });
});

describe('ClusterNetworkPolicy node and network peers (experimental egress selectors)', () => {
  const nodesLinux = { nodes: { matchLabels: { 'kubernetes.io/os': 'linux' } } };
  const nodeAndCidr = cnp('node-and-cidr-as-peers-example', 'Admin', 75, subjectHousePods('gryffindor'), {
    egress: [
      { name: 'allow-egress-to-36363-on-nodes', action: 'Accept', to: [nodesLinux], protocols: [tcp(36363)] },
      { name: 'pass-egress-to-5353-on-nodes', action: 'Pass', to: [nodesLinux], protocols: [udp(5353)] },
      { name: 'deny-egress-to-slytherin-and-nodes-and-internet', action: 'Deny', to: [toHousePods('slytherin'), nodesLinux, { networks: ['0.0.0.0/0', '::/0'] }] },
    ],
  });

  it('nodes, pods and the whole-internet networks peer act in rule order', async () => {
    const [harryV4, harryV6] = studentIPs('gryffindor', 0);
    await runCase({
      name: 'node-and-cidr',
      objects: [nodeAndCidr],
      probes: [
        { src: harry0, dst: centaur1, port: 36363, expect: 'allow', egress: ['[CNP:Admin] Accept (node-and-cidr-as-peers-example, allow-egress-to-36363-on-nodes: '] },
        { src: harry1, dst: centaur0, protocol: 'UDP', port: 5353, expect: 'allow', egress: ['[CNP:Admin] Pass (node-and-cidr-as-peers-example, pass-egress-to-5353-on-nodes: '] },
        { src: harry1, dst: centaur1, port: 36364, expect: 'deny', egress: ['[CNP:Admin] Deny (node-and-cidr-as-peers-example, deny-egress-to-slytherin-and-nodes-and-internet: '] },
        { src: harry1, dst: centaur1, protocol: 'SCTP', port: 9003, expect: 'deny' },
        { src: harryV4, dst: '198.51.100.1', port: 443, expect: 'deny', egress: ['[CNP:Admin] Deny (node-and-cidr-as-peers-example, deny-egress-to-slytherin-and-nodes-and-internet: '] },
        { src: harryV6, dst: '2001:db8::1', port: 443, expect: 'deny' },
        { src: harryV6, dst: NODES[1].ip6, port: 36363, expect: 'allow', egress: ['[CNP:Admin] Accept (node-and-cidr-as-peers-example, allow-egress-to-36363-on-nodes: '] },
        // networks match pod addresses too: 0.0.0.0/0 denies traffic to every pod.
        { src: harry0, dst: luna0, port: 80, expect: 'deny', egress: ['[CNP:Admin] Deny (node-and-cidr-as-peers-example, deny-egress-to-slytherin-and-nodes-and-internet: '] },
        // Other houses are not subjects.
        { src: draco0, dst: '198.51.100.1', port: 443, expect: 'allow', hides: ['[CNP:Admin]'] },
      ],
    });
  });
});

describe('ClusterNetworkPolicy subjects and peers exclude host-networked pods', () => {
  it('a host-networked pod is never a subject and never matches a namespaces or pods peer', async () => {
    await runCase({
      name: 'host-network',
      objects: [
        cnp('forest-lockdown', 'Admin', 1, subjectNamespace('forbidden-forrest'), {
          egress: [{ name: 'deny-all-egress', action: 'Deny', to: [{ namespaces: {} }, { networks: ['0.0.0.0/0'] }] }],
        }),
        cnp('gryffindor-isolation', 'Admin', 2, subjectNamespace('gryffindor'), {
          ingress: [{ name: 'deny-from-pods', action: 'Deny', from: [{ namespaces: {} }] }],
          egress: [{ name: 'deny-to-pods', action: 'Deny', to: [{ pods: { namespaceSelector: {}, podSelector: {} } }] }],
        }),
      ],
      probes: [
        { src: centaur0, dst: harry0, port: 80, expect: 'allow', hides: ['[CNP:Admin]'] },
        { src: harry0, dst: centaur1, port: 36363, expect: 'allow', hides: ['[CNP:Admin]'] },
        { src: luna0, dst: harry0, port: 80, expect: 'deny', ingress: ['[CNP:Admin] Deny (gryffindor-isolation, deny-from-pods: '] },
        { src: harry0, dst: luna0, port: 80, expect: 'deny', egress: ['[CNP:Admin] Deny (gryffindor-isolation, deny-to-pods: '] },
      ],
    });
  });
});

describe('ClusterNetworkPolicy and a pod\'s traffic to itself', () => {
  it('hairpin traffic to the pod\'s own address is exempt, while its neighbour is denied', async () => {
    await runCase({
      name: 'hairpin',
      objects: [cnp('hairpin-ingress-deny', 'Admin', 15, subjectNamespace('gryffindor'), {
        ingress: [{ name: 'deny-gryffindor-ingress', action: 'Deny', from: [toNamespace('gryffindor')] }],
        egress: [{ name: 'deny-gryffindor-egress', action: 'Deny', to: [toNamespace('gryffindor')] }],
      })],
      probes: [
        { src: harry0, dst: harry0, port: 80, expect: 'allow', hides: ['[CNP:Admin]'] },
        { src: harry0, dst: harry1, port: 80, expect: 'deny', egress: ['[CNP:Admin] Deny (hairpin-ingress-deny, deny-gryffindor-egress: '] },
      ],
    });
  });
});

describe('ClusterNetworkPolicy domainNames', () => {
  const dns = {
    'www.example.com': ['192.0.2.10'],
    'example.com': ['192.0.2.20'],
    'deep.sub.example.com': ['2001:db8::5'],
    'api.partner.org': ['192.0.2.30'],
    'api.partner.org.evil.net': ['192.0.2.40'],
  };
  const allowlist = cnp('egress-allowlist', 'Admin', 50, subjectNamespace('gryffindor'), {
    egress: [
      { name: 'accept-example-subdomains', action: 'Accept', to: [{ domainNames: ['*.example.com'] }], protocols: [tcp(443)] },
      { name: 'accept-partner-api', action: 'Accept', to: [{ domainNames: ['API.Partner.org.'] }] },
      { name: 'deny-internet', action: 'Deny', to: [{ networks: ['0.0.0.0/0', '::/0'] }] },
    ],
  });

  it('a wildcard matches one or more whole labels but not the bare domain; exact names ignore case and a trailing dot', async () => {
    const [harryV4, harryV6] = studentIPs('gryffindor', 0);
    await runCase({
      name: 'domains',
      objects: [allowlist],
      dns,
      probes: [
        { src: harryV4, dst: '192.0.2.10', port: 443, expect: 'allow', egress: ['[CNP:Admin] Accept (egress-allowlist, accept-example-subdomains: '] },
        { src: harryV4, dst: '192.0.2.10', port: 80, expect: 'deny', egress: ['[CNP:Admin] Deny (egress-allowlist, deny-internet: '] },
        { src: harryV4, dst: '192.0.2.20', port: 443, expect: 'deny', egress: ['[CNP:Admin] Deny (egress-allowlist, deny-internet: '] },
        { src: harryV6, dst: '2001:db8::5', port: 443, expect: 'allow', egress: ['[CNP:Admin] Accept (egress-allowlist, accept-example-subdomains: '] },
        { src: harryV4, dst: '192.0.2.30', port: 8443, expect: 'allow', egress: ['[CNP:Admin] Accept (egress-allowlist, accept-partner-api: '] },
        { src: harryV4, dst: '192.0.2.40', port: 443, expect: 'deny' },
      ],
    });
  });

  it('a name resolved while the pipeline runs becomes a peer at once', () => {
    const [harryV4] = studentIPs('gryffindor', 0);
    live = new LiveCluster([allowlist], { dns });
    live.check({ src: harryV4, dst: '203.0.113.9', port: 443, expect: 'deny' });
    live.ev.state.recordResolvedName('cdn.example.com', '203.0.113.9', 300);
    live.check({ src: harryV4, dst: '203.0.113.9', port: 443, expect: 'allow', egress: ['[CNP:Admin] Accept (egress-allowlist, accept-example-subdomains: '] });
  });
});

describe('ClusterNetworkPolicy rules that cannot be understood fail closed', () => {
  it('an empty peer makes an Accept rule match nothing and a Deny or Pass rule deny everything', async () => {
    await runCase({
      name: 'fail-closed',
      objects: [
        cnp('accept-empty-peer', 'Admin', 1, subjectNamespace('gryffindor'), {
          egress: [{ name: 'accept-unknown', action: 'Accept', to: [{}, toNamespace('ravenclaw')] }],
        }),
        cnp('pass-unknown-peer', 'Admin', 2, subjectNamespace('hufflepuff'), {
          egress: [
            { name: 'accept-ravenclaw', action: 'Accept', to: [toNamespace('ravenclaw')] },
            { name: 'pass-future', action: 'Pass', to: [{ serviceAccounts: { name: 'x' } }], protocols: [tcp(80)] },
          ],
        }),
        cnp('deny-bad-protocol', 'Admin', 3, subjectNamespace('slytherin'), {
          egress: [{ name: 'deny-icmp', action: 'Deny', to: [toNamespace('ravenclaw')], protocols: [{ icmp: {} }] }],
        }),
      ],
      probes: [
        // The Accept rule is dropped whole, even its good ravenclaw peer.
        { src: harry0, dst: luna0, port: 80, expect: 'allow', hides: ['[CNP:Admin]'] },
        { src: cedric0, dst: luna0, port: 80, expect: 'allow', egress: ['[CNP:Admin] Accept (pass-unknown-peer, accept-ravenclaw: '] },
        // Everything after it is denied, whatever port the rule named.
        { src: cedric0, dst: harry0, port: 8080, expect: 'deny', egress: ['[CNP:Admin] Deny (pass-unknown-peer, pass-future (fails closed: spec.egress[1].to[0]: unknown field "serviceAccounts"'] },
        { src: cedric0, dst: '192.0.2.1', port: 53, protocol: 'UDP', expect: 'deny' },
        { src: draco0, dst: cedric0, port: 80, expect: 'deny', egress: ['[CNP:Admin] Deny (deny-bad-protocol, deny-icmp (fails closed: spec.egress[0].protocols[0]: unknown field "icmp"'] },
      ],
    });
  });

  it('an unnamed rule is named by its policy and position', async () => {
    await runCase({
      name: 'unnamed',
      objects: [cnp('anonymous', 'Baseline', 1, subjectNamespace('gryffindor'), {
        egress: [{ action: 'Deny', to: [toNamespace('slytherin')] }],
      })],
      probes: [{ src: harry0, dst: draco0, port: 80, expect: 'deny', egress: ['[CNP:Baseline] Deny (anonymous, egress rule 0: namespaces kubernetes.io/metadata.name=network-policy-conformance-slytherin, any port)'] }],
    });
  });
});

describe('ClusterNetworkPolicy directions and selectors (standard isolation cases)', () => {
  it('a policy with only ingress rules leaves the subject\'s egress alone, and the other way round', async () => {
    await runCase({
      name: 'isolation',
      objects: [
        cnp('admin-ingress-isolation', 'Admin', 20, subjectNamespace('gryffindor'), {
          ingress: [{ name: 'deny-from-slytherin', action: 'Deny', from: [toNamespace('slytherin')] }],
        }),
        cnp('admin-egress-isolation', 'Admin', 21, subjectNamespace('hufflepuff'), {
          egress: [{ name: 'deny-to-slytherin', action: 'Deny', to: [toNamespace('slytherin')] }],
        }),
      ],
      probes: [
        { src: draco0, dst: harry0, port: 80, expect: 'deny', ingress: ['[CNP:Admin] Deny (admin-ingress-isolation, deny-from-slytherin: '] },
        { src: harry0, dst: luna0, port: 80, expect: 'allow', hides: ['[CNP:Admin]'] },
        { src: harry0, dst: draco0, port: 80, expect: 'allow', hides: ['[CNP:Admin]'] },
        { src: cedric0, dst: draco0, port: 80, expect: 'deny', egress: ['[CNP:Admin] Deny (admin-egress-isolation, deny-to-slytherin: '] },
        { src: draco0, dst: cedric0, port: 80, expect: 'allow', hides: ['[CNP:Admin]'] },
      ],
    });
  });

  it('a pods peer without namespaceSelector selects matching pods in every namespace', async () => {
    await runCase({
      name: 'omitted-namespace-selector',
      objects: [cnp('gress-omitted-namespaceselector', 'Admin', 3, subjectNamespace('ravenclaw'), {
        ingress: [{
          name: 'deny-from-all-conformance-pods', action: 'Deny',
          from: [{ pods: { podSelector: { matchExpressions: [{ key: 'conformance-house', operator: 'In', values: ['gryffindor', 'hufflepuff'] }] } } }],
        }],
      })],
      probes: [
        { src: harry1, dst: luna0, port: 80, expect: 'deny', ingress: ['[CNP:Admin] Deny (gress-omitted-namespaceselector, deny-from-all-conformance-pods: '] },
        { src: cedric1, dst: luna0, protocol: 'UDP', port: 53, expect: 'deny' },
        { src: draco1, dst: luna0, port: 80, expect: 'allow', hides: ['[CNP:Admin]'] },
      ],
    });
  });
});

describe('ClusterNetworkPolicy in the Baseline tier', () => {
  const baselineIngress = cnp('baseline-ingress-tcp', 'Baseline', 4, subjectNamespace('gryffindor'), {
    ingress: [
      { name: 'accept-from-ravenclaw-everything', action: 'Accept', from: [toNamespace('ravenclaw')] },
      { name: 'deny-from-ravenclaw-everything', action: 'Deny', from: [toNamespace('ravenclaw')] },
      { name: 'deny-from-slytherin-at-port-80', action: 'Deny', from: [toNamespace('slytherin')], protocols: [tcp(80)] },
      { name: 'accept-from-hufflepuff-at-port-80', action: 'Accept', from: [toNamespace('hufflepuff')], protocols: [tcp(80)] },
      { name: 'deny-from-hufflepuff-everything-else', action: 'Deny', from: [toNamespace('hufflepuff')] },
    ],
  });

  it('decides ingress in rule order after the NetworkPolicy tier, and swaps apply live', () => {
    live = new LiveCluster([baselineIngress]);
    live.check(
      { src: luna0, dst: harry0, port: 80, expect: 'allow', ingress: ['[CNP:Baseline] Accept (baseline-ingress-tcp, accept-from-ravenclaw-everything: '], hides: ['[CNP:Admin]'] },
      { src: draco0, dst: harry1, port: 80, expect: 'deny', ingress: ['[CNP:Baseline] Deny (baseline-ingress-tcp, deny-from-slytherin-at-port-80: '] },
      { src: draco0, dst: harry1, port: 8080, expect: 'allow', hides: ['[CNP:Baseline]'] },
      { src: cedric0, dst: harry0, port: 80, expect: 'allow', ingress: ['[CNP:Baseline] Accept (baseline-ingress-tcp, accept-from-hufflepuff-at-port-80: '] },
      { src: cedric0, dst: harry0, port: 8080, expect: 'deny', ingress: ['[CNP:Baseline] Deny (baseline-ingress-tcp, deny-from-hufflepuff-everything-else: '] },
    );
    live.apply(swapRules(baselineIngress, 'ingress', 0, 1));
    live.check({ src: luna0, dst: harry0, port: 80, expect: 'deny', ingress: ['[CNP:Baseline] Deny (baseline-ingress-tcp, deny-from-ravenclaw-everything: '] });
  });

  it('a NetworkPolicy that selects the pod decides before the baseline gets a say', () => {
    live = new LiveCluster([baselineIngress, networkPolicy(ns('gryffindor'), 'allow-all-ingress', { podSelector: {}, policyTypes: ['Ingress'], ingress: [{}] })]);
    live.check({ src: cedric0, dst: harry0, port: 8080, expect: 'allow', ingress: ['[NP] Accept'], hides: ['[CNP:Baseline]'] });
  });
});
