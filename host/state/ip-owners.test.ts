import { describe, expect, it } from 'vitest';
import type { PodInfo } from '../contract.js';
import { parseIP } from '../net/ip.js';
import { IpOwners, type IpClaimant } from './ip-owners.js';

function claimant(id: number, ips: string[], opts: { running?: boolean; remote?: boolean; hostNetwork?: boolean } = {}): IpClaimant & { info: PodInfo } {
  const info: PodInfo = {
    id, name: `p${id}`, namespace: 'x', podLabels: {}, namespaceLabels: {}, nodeName: '', nodeLabels: {}, clusterId: '',
    containerPorts: [], hostNetwork: opts.hostNetwork ?? false, ips,
  };
  return { id, running: opts.running ?? true, remote: opts.remote ?? false, info };
}

const owner = (owners: IpOwners, ip: string) => owners.ownerOf(parseIP(ip)!.bytes)?.id;

describe('electing the owner of an address', () => {
  it('a lone claimant owns its addresses, IPv4 and IPv6, until it lets go', () => {
    const owners = new IpOwners();
    const a = claimant(1, ['10.0.0.1', 'fd00::1']);
    owners.update(a, undefined, a.info);
    expect([owner(owners, '10.0.0.1'), owner(owners, 'fd00::1'), owner(owners, '10.0.0.2')]).toEqual([1, 1, undefined]);
    owners.update(a, a.info, undefined);
    expect([owner(owners, '10.0.0.1'), owner(owners, 'fd00::1')]).toEqual([undefined, undefined]);
  });

  it('a local pod beats a remote one, whichever is newer', () => {
    const owners = new IpOwners();
    const local = claimant(1, ['10.0.0.1'], { running: false });
    const remote = claimant(2, ['10.0.0.1'], { remote: true });
    // The remote pod claims first and is Running: the local one still wins.
    owners.update(remote, undefined, remote.info);
    expect(owner(owners, '10.0.0.1')).toBe(2);
    owners.update(local, undefined, local.info);
    expect(owner(owners, '10.0.0.1')).toBe(1);
    owners.update(local, local.info, undefined);
    expect(owner(owners, '10.0.0.1')).toBe(2);
  });

  it('a Running pod beats one that is not; among equals the newest wins', () => {
    const owners = new IpOwners();
    const old = claimant(1, ['10.0.0.1']);
    const pending = claimant(2, ['10.0.0.1'], { running: false });
    owners.update(old, undefined, old.info);
    owners.update(pending, undefined, pending.info);
    expect(owner(owners, '10.0.0.1')).toBe(1);
    pending.running = true;
    owners.update(pending, pending.info, pending.info);
    expect(owner(owners, '10.0.0.1')).toBe(2);
  });

  it('moving to another address gives the old one back to the other claimant', () => {
    const owners = new IpOwners();
    const a = claimant(1, ['10.0.0.1']);
    const b = claimant(2, ['10.0.0.1']);
    owners.update(a, undefined, a.info);
    owners.update(b, undefined, b.info);
    expect(owner(owners, '10.0.0.1')).toBe(2);
    const moved = { ...b.info, ips: ['10.0.0.2'] };
    owners.update(b, b.info, moved);
    b.info = moved;
    expect([owner(owners, '10.0.0.1'), owner(owners, '10.0.0.2')]).toEqual([1, 2]);
  });

  it('a host-networked pod claims nothing: its address is its node\'s', () => {
    const owners = new IpOwners();
    const h = claimant(1, ['192.168.0.1'], { hostNetwork: true });
    owners.update(h, undefined, h.info);
    expect(owner(owners, '192.168.0.1')).toBeUndefined();
  });
});
