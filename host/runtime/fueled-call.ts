// A module's decide export with its fuel tank filled in the same call: a
// tiny WebAssembly module of the host's own imports the module's `kwp_fuel`
// global and its `kwp_decide` (or `kwp_decide_pair`) and exports
// `run(fuel, count)`, which sets the global and calls the export. Setting
// the tank from JavaScript goes through the WebAssembly.Global value setter,
// a call into the engine's C++ side: warm it is cheap, but a queued packet
// is usually decided after the agent slept, and then that setter's code and
// data are cold. Measured with the e2e agent's pipeline after a 400 µs sleep
// (docs/performance.md, "The judge inside the agent"): the setter alone
// cost about 1.6 µs of a cold decision, the call through `run` is one
// JS-to-WebAssembly call like the decide itself. Same semantics: the same
// global gets the same value right before the same function runs, and a
// trap or an exhausted tank propagates out of `run` as out of the export.

/**
 * (module
 *   (import "m" "fuel" (global (mut i32)))
 *   (import "m" "decide" (func (param i32) (result i32)))
 *   (func (export "run") (param i32 i32) (result i32)
 *     local.get 0  global.set 0  local.get 1  call 0))
 */
const FUELED_CALL_WASM = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
  // types: 0 = (i32) -> i32, 1 = (i32, i32) -> i32
  0x01, 0x0c, 0x02, 0x60, 0x01, 0x7f, 0x01, 0x7f, 0x60, 0x02, 0x7f, 0x7f, 0x01, 0x7f,
  // imports: m.fuel global (mut i32), m.decide func type 0
  0x02, 0x16, 0x02,
  0x01, 0x6d, 0x04, 0x66, 0x75, 0x65, 0x6c, 0x03, 0x7f, 0x01,
  0x01, 0x6d, 0x06, 0x64, 0x65, 0x63, 0x69, 0x64, 0x65, 0x00, 0x00,
  // one function of type 1
  0x03, 0x02, 0x01, 0x01,
  // export "run" = function 1
  0x07, 0x07, 0x01, 0x03, 0x72, 0x75, 0x6e, 0x00, 0x01,
  // its body
  0x0a, 0x0c, 0x01, 0x0a, 0x00, 0x20, 0x00, 0x24, 0x00, 0x20, 0x01, 0x10, 0x00, 0x0b,
]);

let compiled: WebAssembly.Module | undefined;

/** `decide(count)` after `fuel.value = tank`, in one call; undefined when the export or the global does not fit (the caller sets the global itself then). */
export function fueledCall(fuel: WebAssembly.Global, decide: (count: number) => number): ((tank: number, count: number) => number) | undefined {
  try {
    compiled ??= new WebAssembly.Module(FUELED_CALL_WASM);
    const instance = new WebAssembly.Instance(compiled, { m: { fuel, decide } });
    return instance.exports.run as (tank: number, count: number) => number;
  } catch {
    // A LinkError: the global is not a mutable i32, or the export's type is not (i32) -> i32.
    return undefined;
  }
}
