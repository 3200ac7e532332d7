// The drain's aggregation key, kept numeric: a slot of the flow buffer is
// looked up by its own words (the connection's pods or addresses, port,
// protocol, verdict, revision and each direction's stage, reason and rule
// codes; never the source port) in an open-addressing table, so aggregating
// a connection builds no string and allocates nothing. Each key stands for
// one aggregated record, which the recorder resolves (names, workloads,
// attribution) once, the first time the key is seen in an interval.
import { AUDIT_WORDS, CODE_WORDS, namesPolicy, SLOT_WORDS, V6_WORDS, W_DIRECTIONS, type FlowBuffer } from './flow-buffer.js';
import { OFF_SRC_PORT } from '../abi/record.js';

/**
 * Words of a key: the slot's words, each direction's reason and rule codes
 * (0 where the direction keeps none), the revision, then its IPv6
 * addresses, its audit words and its ICMP type and code (each only when the
 * slot has them).
 */
export const KEY_WORDS = SLOT_WORDS + CODE_WORDS + 1 + V6_WORDS + AUDIT_WORDS + 1;

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
/** The word holding the source port, and the mask that clears the port from it. */
const SRC_PORT_WORD = OFF_SRC_PORT >> 2;
const NO_SRC_PORT = LITTLE_ENDIAN ? 0xffff0000 : 0x0000ffff;
const CODES_AT = SLOT_WORDS;
const REVISION_AT = CODES_AT + CODE_WORDS;
const V6_AT = REVISION_AT + 1;
const AUDITS_AT = V6_AT + V6_WORDS;
const ICMP_AT = AUDITS_AT + AUDIT_WORDS;

export class SlotKeys {
  /** KEY_WORDS per entry. */
  private keys: Uint32Array;
  private hashes: Uint32Array;
  /** Entry + 1 per table position, 0 where empty; twice the entries, a power of two. */
  private table: Int32Array;
  private readonly scratch = new Uint32Array(KEY_WORDS);
  size = 0;

  /** At most `maxEntries` keys; past that the table starts over (it is only an index into the records). */
  constructor(readonly maxEntries = 16384, initial = 256) {
    this.keys = new Uint32Array(initial * KEY_WORDS);
    this.hashes = new Uint32Array(initial);
    this.table = new Int32Array(initial * 2);
  }

  private get entries(): number { return this.hashes.length; }

  /**
   * The entry of `slot`'s key: its number when the key is known, else the
   * key is added and the result is `~entry` (negative): the caller resolves
   * the new entry's record.
   */
  entryOf(buffer: FlowBuffer, slot: number): number {
    const k = this.scratch;
    const w = buffer.words;
    const o = slot * SLOT_WORDS;
    let h = 0x811c9dc5;
    // A direction's codes count only where its outcome keeps them (an Accept, a Deny) and the walk wrote
    // them: elsewhere they are whatever the slot held before. Codes left to the drain are not asked
    // for known keys: they follow from the rest of the key and the stage's state (Pipeline.attributeDeferred).
    const deferred = buffer.codesDeferred(slot);
    const egressCoded = !deferred && namesPolicy(w[o + W_DIRECTIONS] & 0xff);
    const ingressCoded = !deferred && namesPolicy(w[o + W_DIRECTIONS + 1] & 0xff);
    // A slot whose walk is the drain's holds stale outcome words: its outcomes, like its codes, follow from the rest of the key.
    const words = buffer.walkDeferred(slot) ? W_DIRECTIONS : SLOT_WORDS;
    for (let i = 0; i < SLOT_WORDS; i++) {
      const v = i >= words ? 0 : i === SRC_PORT_WORD ? w[o + i] & NO_SRC_PORT : w[o + i];
      k[i] = v;
      h = Math.imul(h ^ v, 0x01000193);
    }
    const codes = buffer.codes;
    const c = slot * CODE_WORDS;
    for (let i = 0; i < CODE_WORDS; i++) {
      const v = (i < 2 ? egressCoded : ingressCoded) ? codes[c + i] : 0;
      k[CODES_AT + i] = v;
      h = Math.imul(h ^ v, 0x01000193);
    }
    const revision = buffer.revision(slot);
    k[REVISION_AT] = revision;
    h = Math.imul(h ^ revision, 0x01000193);
    // Word 0 holds the family and the audited flag: keys equal there have
    // the same optional parts, so only those present are filled and compared.
    const v6 = buffer.family(slot) === 6;
    const audited = buffer.audited(slot);
    if (v6) h = this.take(h, buffer.v6, slot * V6_WORDS, V6_WORDS, V6_AT);
    if (audited) h = this.take(h, buffer.audits, slot * AUDIT_WORDS, AUDIT_WORDS, AUDITS_AT);
    // The protocol is in word 0 too. The type matters to the codes left to the drain and to an egress it walks on.
    const icmp = buffer.isIcmp(slot);
    if (icmp) h = this.take(h, buffer.icmp, slot, 1, ICMP_AT);
    h = (h ^ (h >>> 15)) >>> 0;
    const table = this.table;
    const mask = table.length - 1;
    for (let p = h & mask; ; p = (p + 1) & mask) {
      const e = table[p] - 1;
      if (e < 0) break;
      if (this.hashes[e] === h && this.same(e, 0, V6_AT) && (!v6 || this.same(e, V6_AT, AUDITS_AT)) && (!audited || this.same(e, AUDITS_AT, ICMP_AT)) && (!icmp || this.same(e, ICMP_AT, KEY_WORDS))) return e;
    }
    if (this.size === this.entries) {
      if (this.size >= this.maxEntries) this.clear();
      else this.grow();
    }
    const e = this.size++;
    this.keys.set(k, e * KEY_WORDS);
    this.hashes[e] = h;
    this.place(e, h);
    return ~e;
  }

  /** Copies `n` words of `from` (at `at`) into the scratch key at `to`, mixing them into the hash `h`. */
  private take(h: number, from: Uint32Array, at: number, n: number, to: number): number {
    const k = this.scratch;
    for (let i = 0; i < n; i++) {
      const v = from[at + i];
      k[to + i] = v;
      h = Math.imul(h ^ v, 0x01000193);
    }
    return h;
  }

  /** Forgets every key (a new interval). */
  clear(): void {
    this.table.fill(0);
    this.size = 0;
  }

  /** Entry `e`'s key equals the scratch key in words `from..to`. */
  private same(e: number, from: number, to: number): boolean {
    const keys = this.keys;
    const k = this.scratch;
    const o = e * KEY_WORDS;
    for (let i = from; i < to; i++) if (keys[o + i] !== k[i]) return false;
    return true;
  }

  private place(e: number, h: number): void {
    const table = this.table;
    const mask = table.length - 1;
    let p = h & mask;
    while (table[p] !== 0) p = (p + 1) & mask;
    table[p] = e + 1;
  }

  private grow(): void {
    const n = Math.min(this.entries * 2, this.maxEntries);
    const keys = new Uint32Array(n * KEY_WORDS);
    keys.set(this.keys);
    const hashes = new Uint32Array(n);
    hashes.set(this.hashes);
    this.keys = keys;
    this.hashes = hashes;
    this.table = new Int32Array(n * 2);
    for (let e = 0; e < this.size; e++) this.place(e, hashes[e]);
  }
}
