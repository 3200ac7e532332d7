import { describe, expect, it } from 'vitest';
import { ResolvedNames, compareAddresses, normalizeDnsName } from './resolved-names.js';

describe('the DNS answer cache', () => {
  it('says when a name\'s address set changed, not when an answer only extends an expiry', () => {
    const names = new ResolvedNames();
    expect(names.record('WWW.Example.com.', '192.0.2.10', 30, 0)).toBe('www.example.com');
    expect(names.record('www.example.com', '192.0.2.10', 60, 1000)).toBeUndefined();
    expect(names.record('www.example.com', '2001:db8::0:1', 30, 1000)).toBe('www.example.com');
    expect(names.addresses('www.example.com.')).toEqual(['192.0.2.10', '2001:db8::1']);
    expect(names.nextExpiry()).toBe(31_000);
  });

  it('expires each address at its own TTL, the longest answer counting, and forgets a name with none left', () => {
    const names = new ResolvedNames();
    names.record('a.example', '192.0.2.1', 10, 0);
    names.record('a.example', '192.0.2.1', 5, 0);
    names.record('a.example', '192.0.2.2', 20, 0);
    const changed: string[] = [];
    names.expire(9_999, (n) => changed.push(n));
    expect(changed).toEqual([]);
    names.expire(10_000, (n) => changed.push(n));
    expect([changed, names.addresses('a.example')]).toEqual([['a.example'], ['192.0.2.2']]);
    names.expire(20_000, (n) => changed.push(n));
    expect([changed, names.addresses('a.example'), names.nextExpiry()]).toEqual([['a.example', 'a.example'], [], undefined]);
  });

  it('refuses an empty name or an address that is not one, saying what to give', () => {
    const names = new ResolvedNames();
    expect(() => names.record(' . ', '192.0.2.1', 1, 0)).toThrow(/must not be empty .*give a DNS name/);
    expect(() => names.record('a.example', 'nope', 1, 0)).toThrow(/"nope" recorded for a\.example is not an IPv4 or IPv6 address/);
  });

  it('orders IPv4 before IPv6 and each by its bytes', () => {
    expect(['fd00::1', '10.0.0.2', '9.0.0.1', '10.0.0.10'].sort(compareAddresses)).toEqual(['9.0.0.1', '10.0.0.2', '10.0.0.10', 'fd00::1']);
    expect(normalizeDnsName(' Db.Internal. ')).toBe('db.internal');
  });
});
