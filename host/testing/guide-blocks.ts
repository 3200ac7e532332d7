// Reads the code blocks of docs/plugin-guide.md that carry a marker comment
// (`<!-- file: PATH -->` or `<!-- walkthrough: NAME -->`) on the line before
// the fence, so tests can hold the tutorial to what actually builds and runs.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const GUIDE_PATH = fileURLToPath(new URL('../../docs/plugin-guide.md', import.meta.url));

/** `file:assembly/index.ts` → block text, `walkthrough:audit` → block text. */
export function guideBlocks(text = readFileSync(GUIDE_PATH, 'utf8')): Map<string, string> {
  const blocks = new Map<string, string>();
  const marker = /<!-- (file|walkthrough): (\S+) -->\n```[a-z]*\n([\s\S]*?)```\n/g;
  for (const m of text.matchAll(marker)) {
    const key = `${m[1]}:${m[2]}`;
    if (blocks.has(key)) throw new Error(`${GUIDE_PATH}: the block "${key}" appears twice`);
    blocks.set(key, m[3]);
  }
  return blocks;
}
