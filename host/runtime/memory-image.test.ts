// Memory images (instance.ts `image`, image-globals.ts): an instance made
// from another's memory and mutable globals must be that instance, for every
// decision and for every delivery after it.
import { describe, it, expect, vi } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateCluster, generateFlows, clusterObjects, policyChange } from '../../bench/generator.js';
import { Kinds } from '../contract.js';
import { ClusterState } from '../state/cluster-state.js';
import { BuiltinModules, builtinWasmDir } from '../pipeline/modules.js';
import { feedCalls } from '../pipeline/feed-order.js';
import { encodePodInfo } from '../abi/podinfo-codec.js';
import { ObjectOp, encodeObject } from '../abi/objects.js';
import { encodeRecord, OFF_DIRECTION, RECORD_SIZE } from '../abi/record.js';
import { EvaluatorInstance, IMAGE_BLOCK, IMAGE_PIECE_BLOCKS, type MemoryImage } from './instance.js';
import { exportMutableGlobals, IMAGE_GLOBAL_PREFIX } from './image-globals.js';
import { compileEvaluator, type CompiledEvaluator } from './loader.js';
import { readWasmSummary } from './wasm-binary.js';

const SHAPE = { name: 'image', namespaces: 6, pods: 300, networkPolicies: 60, clusterNetworkPolicies: 0 };
const cluster = generateCluster(SHAPE, 5);
const flows = generateFlows(cluster, 1500, 9);

function stateOf(): ClusterState {
  const state = new ClusterState();
  for (const [kind, objects] of clusterObjects(cluster)) state.replace(kind, objects);
  return state;
}

function fed(compiled: CompiledEvaluator, state: ClusterState): EvaluatorInstance {
  const inst = new EvaluatorInstance(compiled, undefined, { memoryPages: 1024 });
  const pods = [...state.pods()].map((p) => encodePodInfo(p).slice());
  const objects = compiled.meta.kinds.map((k) => state.objects(k).map((o) => encodeObject(o).slice()));
  for (const _ of feedCalls(inst, {}, pods, objects));
  return inst;
}

/** Every flow's verdict and reason, both directions, as one string per record. */
function decisions(inst: EvaluatorInstance, state: ClusterState): string[] {
  const rec = new Uint8Array(RECORD_SIZE);
  const out: string[] = [];
  for (const p of flows.packets) {
    encodeRecord(rec, 0, p, state.podByIP(p.src)?.id ?? 0, state.podByIP(p.dst)?.id ?? 0);
    for (const dir of [0, 1]) {
      rec[OFF_DIRECTION] = dir;
      const v = inst.decideOne(rec);
      out.push(`${v}/${inst.lastReason()}/${inst.lastRule()}`);
    }
  }
  return out;
}

/** An image's data as one buffer. */
function joined(image: MemoryImage): Buffer {
  return Buffer.concat(image.data);
}

/** Blocks' bytes cut into an image's pieces. */
function pieced(bytes: Uint8Array): Uint8Array[] {
  const size = IMAGE_PIECE_BLOCKS * IMAGE_BLOCK;
  const out: Uint8Array[] = [];
  for (let at = 0; at < bytes.length; at += size) out.push(bytes.slice(at, at + size));
  return out;
}

describe('an instance made from a memory image', () => {
  const compiled = new BuiltinModules().resolve('network-policy')!;
  const npIndex = compiled.meta.kinds.indexOf(Kinds.NetworkPolicy);

  it('decides every flow as the fed instance it was taken from, and goes on doing so after both take the same changes', () => {
    const state = stateOf();
    const original = fed(compiled, state);
    const copy = new EvaluatorInstance(compiled, undefined, { memoryPages: 1024, image: original.image() });
    const before = decisions(original, state);
    // Not a trivial answer: the flows meet allowed and denied traffic.
    expect(new Set(before.map((d) => d.split('/')[0])).size).toBeGreaterThan(1);
    expect(decisions(copy, state)).toEqual(before);
    // Deliveries after the image: the copy's heap (the runtime's allocator and collector state in
    // its globals) must go on as the original's, through many allocations and collections.
    for (let round = 0; round < 40; round++) {
      const json = encodeObject(policyChange(cluster, round)).slice();
      original.object(npIndex, ObjectOp.Upsert, json);
      copy.object(npIndex, ObjectOp.Upsert, json);
      const pod = [...state.pods()][round];
      original.upsertPod(encodePodInfo(pod).slice());
      copy.upsertPod(encodePodInfo(pod).slice());
    }
    const after = decisions(original, state);
    expect(after).not.toEqual(before);
    expect(decisions(copy, state)).toEqual(after);
    expect(copy.memoryBytes).toBe(original.memoryBytes);
    // The module's globals came along: its config turned the decision cache on (a global the
    // start function leaves off), and both counted the same hits and misses.
    expect(original.decisionCacheStats()?.misses).toBeGreaterThan(0);
    expect(copy.decisionCacheStats()).toEqual(original.decisionCacheStats());
  });

  it('restored in slices, with turns of the event loop between them, decides as one restored at once', async () => {
    const state = stateOf();
    const original = fed(compiled, state);
    const image = original.image();
    const sliced = await EvaluatorInstance.fromImageInSlices(compiled, undefined, { memoryPages: 1024, image }, 0);
    expect(decisions(sliced, state)).toEqual(decisions(original, state));
    expect(sliced.decisionCacheStats()).toEqual(original.decisionCacheStats());
    expect(sliced.batchPtr).toBe(original.batchPtr);
  });

  it('restored in slices, grows the memory to the image\'s size in one grow, not a few pages a slice', async () => {
    const original = fed(compiled, stateOf());
    const image = original.image();
    // The image of a memory 100 pages bigger than the fed one: more than any few-MiB step.
    const padded: MemoryImage = { ...image, pages: image.pages + 100 };
    const startPages = new EvaluatorInstance(compiled, undefined, { memoryPages: 1024 }).memoryBytes / 65536;
    const grows: number[] = [];
    const grow = WebAssembly.Memory.prototype.grow;
    const spy = vi.spyOn(WebAssembly.Memory.prototype, 'grow').mockImplementation(function (this: WebAssembly.Memory, delta: number) {
      grows.push(delta);
      return grow.call(this, delta);
    });
    let sliced: EvaluatorInstance;
    try {
      sliced = await EvaluatorInstance.fromImageInSlices(compiled, undefined, { memoryPages: 1024, image: padded }, 0);
    } finally {
      spy.mockRestore();
    }
    expect(grows).toEqual([padded.pages - startPages]);
    expect(sliced.memoryBytes).toBe(padded.pages * 65536);
    expect(decisions(sliced, stateOf())).toEqual(decisions(original, stateOf()));
  });

  it('restored in slices from pieces taken one at a time (as a feed thread\'s image arrives), decides as the fed instance; a piece missing or cut fails the restore', async () => {
    const original = fed(compiled, stateOf());
    const image = original.image();
    expect(image.data.length).toBeGreaterThan(1);
    const arriving = (pieces: Uint8Array[]): MemoryImage => ({ ...image, data: [], nextPiece: () => pieces.shift() ?? new Uint8Array(0) });
    const taken = [...image.data];
    const sliced = await EvaluatorInstance.fromImageInSlices(compiled, undefined, { memoryPages: 1024, image: arriving(taken) }, 0);
    expect(taken).toEqual([]);
    expect(decisions(sliced, stateOf())).toEqual(decisions(original, stateOf()));
    await expect(EvaluatorInstance.fromImageInSlices(compiled, undefined, { memoryPages: 1024, image: arriving(image.data.slice(1)) }, 0)).rejects.toThrow(/piece \d+ of the memory image has/);
    const cut = image.data.map((d, k) => (k === 1 ? d.subarray(IMAGE_BLOCK) : d));
    await expect(EvaluatorInstance.fromImageInSlices(compiled, undefined, { memoryPages: 1024, image: arriving(cut) }, 0)).rejects.toThrow(/piece 1 of the memory image has/);
  });

  it('restored in slices, takes the memory of the last closed instance of its module and cap, and leaves nothing of what that one held', async () => {
    // The closed instance held a bigger state; the image is a smaller one's, as big as that memory.
    const bigger = new ClusterState();
    for (const [kind, objects] of clusterObjects(generateCluster({ ...SHAPE, pods: 600, networkPolicies: 100 }, 6))) bigger.replace(kind, objects);
    const retired = await EvaluatorInstance.fromImageInSlices(compiled, undefined, { memoryPages: 1024, image: fed(compiled, bigger).image() }, 0);
    const original = fed(compiled, stateOf());
    const retiredPages = retired.memoryBytes / 65536;
    const expected: MemoryImage = { ...original.image(), pages: retiredPages };
    expect(retiredPages).toBeGreaterThanOrEqual(original.image().pages);
    retired.close();
    expect(() => retired.decideOne(new Uint8Array(RECORD_SIZE))).toThrow(/after its instance was closed/);
    const Real = WebAssembly.Memory;
    let made = 0;
    (WebAssembly as { Memory: typeof WebAssembly.Memory }).Memory = class extends Real { constructor(d: WebAssembly.MemoryDescriptor) { super(d); made++; } };
    try {
      const restored = await EvaluatorInstance.fromImageInSlices(compiled, undefined, { memoryPages: 1024, image: { ...expected, data: [...expected.data] } }, 0);
      expect(made).toBe(0);
      // Its whole state is the image's: the same non-zero blocks with the same bytes, the same globals and size.
      const now = restored.image();
      expect(now.pages).toBe(expected.pages);
      expect([...now.blocks]).toEqual([...expected.blocks]);
      expect(joined(now).equals(joined(expected))).toBe(true);
      expect(now.globals).toEqual(expected.globals);
      expect(decisions(restored, stateOf())).toEqual(decisions(original, stateOf()));
      // Taken once, and only for the same cap.
      await EvaluatorInstance.fromImageInSlices(compiled, undefined, { memoryPages: 1024, image: original.image() }, 0);
      expect(made).toBe(1);
      restored.close();
      await EvaluatorInstance.fromImageInSlices(compiled, undefined, { memoryPages: 2048, image: original.image() }, 0);
      expect(made).toBe(2);
    } finally {
      (WebAssembly as { Memory: typeof WebAssembly.Memory }).Memory = Real;
    }
  });

  it('keeps only the blocks that are not zero, and clears what the start function wrote where the image is zero', () => {
    const state = stateOf();
    const original = fed(compiled, state);
    const image = original.image();
    expect(joined(image).byteLength).toBeLessThan(image.pages * 65536);
    expect(image.blocks.length).toBeGreaterThan(0);
    // An image that is the fed one with one block of the start function's heap zeroed: the copy has zero there too.
    const cleared = { ...image, blocks: image.blocks.slice(1), data: pieced(joined(image).slice(IMAGE_BLOCK)) };
    const copy = new EvaluatorInstance(compiled, undefined, { memoryPages: 1024, image: cleared });
    const again = copy.image();
    expect([...again.blocks]).toEqual([...cleared.blocks]);
    expect(joined(again).equals(joined(cleared))).toBe(true);
  });

  it('is a fresh instance when made from a fresh instance\'s image (nothing fed: every flow Next)', () => {
    const state = stateOf();
    const fresh = new EvaluatorInstance(compiled, undefined, { memoryPages: 1024 });
    fresh.configure({});
    const copy = new EvaluatorInstance(compiled, undefined, { memoryPages: 1024, image: fresh.image() });
    expect(decisions(copy, state)).toEqual(decisions(fresh, state));
  });

  it('refuses an image bigger than its memory cap, and one of another module', () => {
    const state = stateOf();
    const image = fed(compiled, state).image();
    expect(() => new EvaluatorInstance(compiled, undefined, { memoryPages: image.pages - 1, image })).toThrow(/over this instance's cap/);
    const other = new BuiltinModules().resolve('admin-network-policy')!;
    const wrong: MemoryImage = { ...image, globals: image.globals.slice(1) };
    expect(() => new EvaluatorInstance(other, undefined, { memoryPages: 1024, image: wrong })).toThrow(/does not fit this module|over this instance's cap/);
  });
});

describe('the exports the loader adds for images', () => {
  it('name every mutable global but the fuel counter, and leave the module valid with its own exports first', () => {
    const compiled = new BuiltinModules().resolve('network-policy')!;
    expect(compiled.imageGlobals?.length).toBeGreaterThan(0);
    expect(compiled.imageGlobals!.every((n) => n.startsWith(IMAGE_GLOBAL_PREFIX))).toBe(true);
    const names = WebAssembly.Module.exports(compiled.module).map((e) => e.name);
    expect(names).toContain('kwp_decide');
    for (const n of compiled.imageGlobals!) expect(names).toContain(n);
  });

  it('are refused in an uploaded module, whose exports may not use the prefix', () => {
    const bytes = new Uint8Array(readFileSync(join(builtinWasmDir(), 'network-policy.wasm')));
    // The same module with its globals exported under the prefix, as an upload could have them.
    const prefixed = exportMutableGlobals(bytes);
    expect(prefixed.names!.length).toBeGreaterThan(0);
    expect(readWasmSummary(prefixed.bytes).exports.map((e) => e.name)).toContain(prefixed.names![0]);
    expect(() => compileEvaluator(prefixed.bytes, { source: 'upload' })).toThrow(new RegExp(`upload: the export name ${IMAGE_GLOBAL_PREFIX}\\d+ is in the prefix ${IMAGE_GLOBAL_PREFIX}, which the host reserves`));
  });
});
