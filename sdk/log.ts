// Logging through the one host import for it. The host rate-limits, so a
// module cannot flood the agent's log, but callers should still keep logging
// off the decision path.

// @ts-ignore: decorator
@external("kwp", "log")
declare function hostLog(level: i32, ptr: usize, len: i32): void;

function emit(level: i32, msg: string): void {
  const buf = String.UTF8.encode(msg);
  hostLog(level, changetype<usize>(buf), buf.byteLength);
}

export namespace log {
  export function debug(msg: string): void { emit(0, msg); }
  export function info(msg: string): void { emit(1, msg); }
  export function warn(msg: string): void { emit(2, msg); }
  export function error(msg: string): void { emit(3, msg); }
}
