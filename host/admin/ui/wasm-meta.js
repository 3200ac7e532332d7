// Reads a module's kwp.meta custom section in the browser, to fill in the
// upload's name and version. Only the section headers are walked (no
// compilation); anything unreadable yields undefined and the server's own
// validation has the last word.

/** @param {Uint8Array} bytes @returns {{name?: string, version?: string, description?: string} | undefined} */
export function readKwpMeta(bytes) {
  if (bytes.length < 8 || bytes[0] !== 0 || bytes[1] !== 0x61 || bytes[2] !== 0x73 || bytes[3] !== 0x6d) return undefined;
  let pos = 8;
  const leb = () => {
    let result = 0;
    let shift = 0;
    for (;;) {
      if (pos >= bytes.length || shift > 28) throw new RangeError('truncated');
      const b = bytes[pos++];
      result |= (b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result >>> 0;
      shift += 7;
    }
  };
  try {
    while (pos < bytes.length) {
      const id = bytes[pos++];
      const size = leb();
      const end = pos + size;
      if (end > bytes.length) return undefined;
      if (id === 0) {
        const nameLength = leb();
        const name = new TextDecoder().decode(bytes.subarray(pos, pos + nameLength));
        if (name === 'kwp.meta') {
          const meta = JSON.parse(new TextDecoder().decode(bytes.subarray(pos + nameLength, end)));
          return typeof meta === 'object' && meta !== null ? meta : undefined;
        }
      }
      pos = end;
    }
  } catch {
    return undefined;
  }
  return undefined;
}
