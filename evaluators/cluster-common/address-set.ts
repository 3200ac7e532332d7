// A set of IP addresses for the peers whose members change with cluster state
// rather than with the policy (the addresses of selected Nodes, the addresses a
// domain name resolved to). Built off the packet path, sorted once, probed by
// binary search so that a peer naming a thousand nodes costs ~10 compares.

import { PodAddress } from "../../sdk/index";

class Addr6 {
  constructor(public hi: u64, public lo: u64) {}
}

function compareU32(a: u32, b: u32): i32 { return a < b ? -1 : a > b ? 1 : 0; }
function compareAddr6(a: Addr6, b: Addr6): i32 {
  if (a.hi != b.hi) return a.hi < b.hi ? -1 : 1;
  return a.lo < b.lo ? -1 : a.lo > b.lo ? 1 : 0;
}

export class AddressSetBuilder {
  private v4: u32[] = [];
  private v6: Addr6[] = [];

  add(a: PodAddress): void {
    const p = changetype<usize>(a.bytes);
    if (a.family == 4) this.v4.push(load<u32>(p));
    else if (a.family == 6) this.v6.push(new Addr6(load<u64>(p), load<u64>(p + 8)));
  }

  build(): AddressSet {
    const s = new AddressSet();
    const v4 = this.v4.sort(compareU32);
    let n4 = 0;
    const out4 = new StaticArray<u32>(v4.length);
    for (let i = 0; i < v4.length; i++) {
      if (n4 > 0 && out4[n4 - 1] == v4[i]) continue;
      out4[n4++] = v4[i];
    }
    s.v4 = n4 == v4.length ? out4 : StaticArray.slice<u32>(out4, 0, n4);
    const v6 = this.v6.sort(compareAddr6);
    const hi = new Array<u64>(0);
    const lo = new Array<u64>(0);
    for (let i = 0; i < v6.length; i++) {
      const n = hi.length;
      if (n > 0 && hi[n - 1] == v6[i].hi && lo[n - 1] == v6[i].lo) continue;
      hi.push(v6[i].hi);
      lo.push(v6[i].lo);
    }
    s.v6hi = StaticArray.fromArray<u64>(hi);
    s.v6lo = StaticArray.fromArray<u64>(lo);
    return s;
  }
}

export class AddressSet {
  v4: StaticArray<u32> = new StaticArray<u32>(0);
  v6hi: StaticArray<u64> = new StaticArray<u64>(0);
  v6lo: StaticArray<u64> = new StaticArray<u64>(0);

  get size(): i32 { return this.v4.length + this.v6hi.length; }

  /** `addr` points at 16 bytes, IPv4 in the first 4, as in the decision record. No allocation. */
  contains(family: u8, addr: usize): bool {
    if (family == 4) {
      const key = load<u32>(addr);
      const a = this.v4;
      let lo = 0, hi = a.length - 1;
      while (lo <= hi) {
        const mid = (lo + hi) >>> 1;
        const v = unchecked(a[mid]);
        if (v == key) return true;
        if (v < key) lo = mid + 1; else hi = mid - 1;
      }
      return false;
    }
    if (family != 6) return false;
    const kh = load<u64>(addr);
    const kl = load<u64>(addr + 8);
    const H = this.v6hi;
    const L = this.v6lo;
    let lo = 0, hi = H.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const h = unchecked(H[mid]);
      const l = unchecked(L[mid]);
      if (h == kh && l == kl) return true;
      if (h < kh || (h == kh && l < kl)) lo = mid + 1; else hi = mid - 1;
    }
    return false;
  }
}

export const EMPTY_ADDRESS_SET = new AddressSet();
