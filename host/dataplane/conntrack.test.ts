import { describe, it, expect } from 'vitest';
import { clearMarkArgs, entryPacket, listArgs, parseConntrackLine, parseConntrackListing } from './conntrack.js';
import { formatIP } from '../net/ip.js';

describe('parseConntrackLine', () => {
  it('takes the original tuple of a TCP entry, not the reply tuple', () => {
    const entry = parseConntrackLine(
      'tcp      6 431999 ESTABLISHED src=10.244.0.2 dst=10.244.0.3 sport=41000 dport=80 src=10.244.0.3 dst=10.244.0.2 sport=80 dport=41000 [ASSURED] mark=1048576 use=1',
    );
    expect(entry).toMatchObject({ family: 4, protocol: 6, src: '10.244.0.2', dst: '10.244.0.3', srcPort: 41000, dstPort: 80, mark: 1048576 });
  });

  it('reads the extended format with its address-family prefix', () => {
    const entry = parseConntrackLine('ipv6     10 udp      17 29 src=fd00::2 dst=fd00::3 sport=5000 dport=53 [UNREPLIED] src=fd00::3 dst=fd00::2 sport=53 dport=5000 mark=0 use=1');
    expect(entry).toMatchObject({ family: 6, protocol: 17, src: 'fd00::2', dstPort: 53, mark: 0 });
  });

  it('reads ICMP type, code and id', () => {
    const entry = parseConntrackLine('icmp     1 29 src=10.0.0.1 dst=10.0.0.2 type=8 code=0 id=77 src=10.0.0.2 dst=10.0.0.1 type=0 code=0 id=77 mark=1048576 use=1')!;
    expect([entry.icmpType, entry.icmpCode, entry.icmpId]).toEqual([8, 0, 77]);
    expect(clearMarkArgs(entry, 0x100000)).toEqual(['-U', '-f', 'ipv4', '-s', '10.0.0.1', '-d', '10.0.0.2', '-p', 'icmp', '--icmp-type', '8', '--icmp-code', '0', '--icmp-id', '77', '--mark', '0/0x100000']);
  });

  it('skips the summary line conntrack prints and blank lines', () => {
    const text = 'conntrack v1.4.7 (conntrack-tools): 0 flow entries have been shown.\n\n';
    expect(parseConntrackListing(text)).toEqual([]);
  });

  it('rebuilds the opening packet for the judge', () => {
    const packet = entryPacket(parseConntrackLine('sctp     132 3 ESTABLISHED src=10.0.0.1 dst=10.0.0.2 sport=3868 dport=3868 src=10.0.0.2 dst=10.0.0.1 sport=3868 dport=3868 mark=0 use=1')!);
    expect([formatIP(packet.src), formatIP(packet.dst), packet.protocol, packet.dstPort]).toEqual(['10.0.0.1', '10.0.0.2', 132, 3868]);
  });

  it('filters the listing by the accepted bit with a mask', () => {
    expect(listArgs(6, 0x100000)).toEqual(['-L', '-f', 'ipv6', '--mark', '0x100000/0x100000']);
  });

  it('judges a Service connection by the endpoint the reply direction names, not the Service IP dialled', () => {
    // kube-proxy's DNAT of 10.96.0.10:8000 to the pod 10.244.1.3:80.
    const entry = parseConntrackLine(
      'tcp      6 431999 ESTABLISHED src=10.244.1.2 dst=10.96.0.10 sport=41000 dport=8000 src=10.244.1.3 dst=10.244.1.2 sport=80 dport=41000 [ASSURED] mark=1048576 use=1',
    )!;
    expect([entry.dst, entry.dstPort, entry.replySrc, entry.replySrcPort]).toEqual(['10.96.0.10', 8000, '10.244.1.3', 80]);
    const packet = entryPacket(entry);
    expect([formatIP(packet.src), packet.srcPort, formatIP(packet.dst), packet.dstPort, packet.serviceHairpin]).toEqual(['10.244.1.2', 41000, '10.244.1.3', 80, undefined]);
    // The entry is still updated by its original tuple, the one conntrack knows it by.
    expect(clearMarkArgs(entry, 0x100000).slice(0, 7)).toEqual(['-U', '-f', 'ipv4', '-s', '10.244.1.2', '-d', '10.96.0.10']);
  });

  it('flags a Service hairpin: the endpoint is the client, the reply addressed to the hairpin SNAT address', () => {
    const entry = parseConntrackLine(
      'tcp      6 117 TIME_WAIT src=10.244.1.2 dst=10.96.0.10 sport=41000 dport=8000 src=10.244.1.2 dst=169.254.1.1 sport=80 dport=41000 [ASSURED] mark=1048576 use=1',
    )!;
    const packet = entryPacket(entry);
    expect([formatIP(packet.src), formatIP(packet.dst), packet.dstPort, packet.serviceHairpin]).toEqual(['10.244.1.2', '10.244.1.2', 80, true]);
  });

  it('leaves an entry without NAT as it was opened', () => {
    const packet = entryPacket(parseConntrackLine('udp      17 29 src=10.244.1.2 dst=10.244.1.3 sport=5000 dport=53 src=10.244.1.3 dst=10.244.1.2 sport=53 dport=5000 mark=1048576 use=1')!);
    expect([formatIP(packet.dst), packet.dstPort, packet.serviceHairpin]).toEqual(['10.244.1.3', 53, undefined]);
  });
});
