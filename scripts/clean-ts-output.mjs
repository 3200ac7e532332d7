// Removes what the last TypeScript build wrote, so a file moved or deleted in
// the sources does not live on in dist/ (and in the package: dist/host ships).
// dist/wasm is the AssemblyScript build's and stays.
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

for (const dir of ['host', 'bench', 'test', 'examples']) {
  rmSync(fileURLToPath(new URL(`../dist/${dir}`, import.meta.url)), { recursive: true, force: true });
}
